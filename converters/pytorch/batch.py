"""PyTorch ETs (+ Kineto) on Dask: one task per rank (`batch_tasks`, see chakra.converters.batch)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

from chakra.converters.batch import BatchTask, RunOnWorkers, task_error, task_result
from chakra.errors import ChakraError
from chakra.io import rank_path


def rank_task(rank: int, files: list[str], kineto: list[str], out: str, options: dict) -> dict[str, Any]:
    from chakra.converters.pytorch.driver import Options, convert_rank_files

    t0 = time.perf_counter()
    try:
        paths, kineto_paths = [Path(p) for p in files], [Path(p) for p in kineto]
        stats = convert_rank_files(rank, paths, kineto_paths, Path(out), Options(**options))
        if "error" in stats:
            return task_error(t0, stats["error"])
        return task_result(t0, [(rank, out, stats)])
    except ChakraError as exc:
        return task_error(t0, str(exc))


def batch_tasks(
    inputs: Sequence[Path], companions: Sequence[Path], prefix: Path, options: dict[str, Any], run: RunOnWorkers
) -> list[BatchTask]:
    """One task per rank: the ETs and Kineto traces of that rank. A Kineto trace's rank is the one
    its `distributedInfo` records (read from its head), else its name's, as on the plain path
    (`driver.gather_inputs`): a profiler's default names (`host_pid.timestamp.pt.trace.json`) pair
    on Dask too."""
    from chakra.ranks import by_rank

    tasks = []
    for rank, (plain, kin) in by_rank(inputs, companions, _recorded_rank).items():
        out = str(rank_path(prefix, rank))
        args = (rank, [str(Path(p).absolute()) for p in plain], [str(Path(p).absolute()) for p in kin], out, options)
        tasks.append(BatchTask(rank_task, args, [str(p) for p in (*plain, *kin)], rank, out))
    return tasks


def _recorded_rank(path: Path) -> Optional[int]:
    """distributedInfo.rank of a Kineto trace (its first 200 KB), else the rank its name gives."""
    from chakra.converters import read_prefix
    from chakra.converters.kineto.trace import sniff_kineto_head
    from chakra.ranks import KINETO_HEAD, kineto_rank, rank_of

    head = read_prefix(path, KINETO_HEAD)
    recorded = kineto_rank(head) if sniff_kineto_head(head[:65536]) else None
    return recorded if recorded is not None else rank_of(path)


def kineto_batch_tasks(
    inputs: Sequence[Path], companions: Sequence[Path], prefix: Path, options: dict[str, Any], run: RunOnWorkers
) -> list[BatchTask]:
    """Kineto traces alone: one task per rank, converted as PyTorch ranks without an ET."""
    return batch_tasks((), inputs, prefix, options, run)

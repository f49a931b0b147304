"""PyTorch ETs (+ Kineto) on Dask: one task per rank (`batch_tasks`, see chakra.converters.batch)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
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
    """One task per rank: the ETs and Kineto traces of that rank (`_rank_rule`)."""
    from chakra.ranks import by_rank

    tasks = []
    for rank, (plain, kin) in by_rank(inputs, companions, _rank_rule([*inputs, *companions])).items():
        out = str(rank_path(prefix, rank))
        args = (rank, [str(Path(p).absolute()) for p in plain], [str(Path(p).absolute()) for p in kin], out, options)
        tasks.append(BatchTask(rank_task, args, [str(p) for p in (*plain, *kin)], rank, out))
    return tasks


def _rank_rule(paths: Sequence[Path]) -> Callable[[Path], Optional[int]]:
    """The rank of each file, as the plain path pairs them (`driver.gather_inputs`), from names
    and the heads of the files (their first 200 KB; the workers read them whole).

    An ET's rank is its name's. A Kineto trace goes with the ET its name pairs with; where the
    names do not pair (torch.profiler's default `host_pid.timestamp.pt.trace.json`), or there is
    no ET, it takes the rank it records (`distributedInfo.rank`) when every Kineto trace records
    a different one. Otherwise names stand, and each worker refuses a Kineto trace that records
    another rank than its task's."""
    from chakra.converters import read_prefix
    from chakra.converters.kineto.trace import sniff_kineto_head
    from chakra.ranks import KINETO_HEAD, kineto_rank, rank_of

    named = {p: rank_of(p) for p in paths}
    recorded: dict[Path, Optional[int]] = {}  # Kineto traces only
    for p in paths:
        head = read_prefix(p, KINETO_HEAD)
        if sniff_kineto_head(head[:65536]):
            recorded[p] = kineto_rank(head)
    ets = {named[p] for p in paths if p not in recorded}
    kineto_named = {named[p] for p in recorded}
    stated = set(recorded.values())
    if (
        recorded
        and None not in stated
        and len(stated) == len(recorded)
        and ((not ets and stated != kineto_named) or (ets and kineto_named != ets and stated == ets))
    ):
        named.update(recorded)
    return named.get


def kineto_batch_tasks(
    inputs: Sequence[Path], companions: Sequence[Path], prefix: Path, options: dict[str, Any], run: RunOnWorkers
) -> list[BatchTask]:
    """Kineto traces alone: one task per rank, converted as PyTorch ranks without an ET."""
    return batch_tasks((), inputs, prefix, options, run)

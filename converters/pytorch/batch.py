"""PyTorch ETs (+ Kineto) on Dask: one task per rank (`batch_tasks`, see chakra.converters.batch)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Optional

from chakra.converters.batch import BatchTask, RunOnWorkers, task_error, task_result
from chakra.errors import ChakraError
from chakra.io import rank_path


def rank_task(
    rank: int, files: list[str], kineto: list[str], out: str, options: dict, placement: Optional[dict] = None
) -> dict[str, Any]:
    """Convert one rank; `placement` (from `_gloo_placement`) carries the job-wide gloo answer for
    a rank that cannot place its gloo collectives alone."""
    from chakra.converters.pytorch.driver import GlooJob, Options, convert_rank_files

    t0 = time.perf_counter()
    try:
        paths, kineto_paths = [Path(p) for p in files], [Path(p) for p in kineto]
        job = None
        if placement is not None:
            job = GlooJob(placed={rank: placement["placed"]}, p2p={rank: placement["p2p"]})
        stats = convert_rank_files(rank, paths, kineto_paths, Path(out), Options(**options), job)
        if "error" in stats:
            return task_error(t0, stats["error"])
        stats.pop("gloo_survey", None)
        if placement is not None:
            stats["warnings"].extend(placement["warnings"])
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
    if len(tasks) > 1:
        placements = _gloo_placement(tasks, run)
        for t in tasks:
            if t.rank in placements:
                t.args = (*t.args, placements[t.rank])
    return tasks


def finish_batch(written: list[tuple[str, dict[str, Any]]], inputs: Sequence[Path], options: dict[str, Any]) -> None:
    """After every rank is written: the whole job's profiler-cost fit (`driver.job_overhead`), as
    the plain path does, so `--workers` and a plain conversion write the same bytes."""
    from chakra.converters.pytorch.driver import Options, job_overhead

    job_overhead([p for p, _ in written], [s for _, s in written], inputs, Options(**options))


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


def survey_task(rank: int, files: list[str], kineto: list[str], out: str, options: dict) -> Optional[tuple]:
    """A rank's gloo survey (`gloogroups.Survey.as_tuple()`, None without gloo threads), written nowhere."""
    from chakra.converters.pytorch.driver import GlooJob, Options, convert_rank_files

    paths, kineto_paths = [Path(p) for p in files], [Path(p) for p in kineto]
    stats = convert_rank_files(rank, paths, kineto_paths, Path(out), Options(**options), GlooJob(survey_only=True))
    return stats.get("gloo_survey")


def _gloo_placement(tasks: list[BatchTask], run: RunOnWorkers) -> dict[int, dict]:
    """The plain path's job-wide gloo placement (driver.convert_files), planned on the workers: each
    rank's survey first, then `solve` over them all for the ranks whose gloo collectives their own
    trace cannot place (rank -> placed, p2p, warnings); the others convert alone, as there."""
    from chakra.converters.pytorch.gloogroups import Survey, needs_solving, solve, solve_p2p

    found = run(survey_task, [t.args for t in tasks])
    surveys = [Survey.from_tuple(f) for f in found if isinstance(f, tuple)]
    deferred = [s.rank for s in surveys if needs_solving(s)]
    if not deferred:
        return {}
    placed, warnings = solve(surveys)
    p2p = solve_p2p(surveys)
    return {r: {"placed": placed.get(r), "p2p": p2p.get(r), "warnings": warnings} for r in deferred}


def kineto_batch_tasks(
    inputs: Sequence[Path], companions: Sequence[Path], prefix: Path, options: dict[str, Any], run: RunOnWorkers
) -> list[BatchTask]:
    """Kineto traces alone: one task per rank, converted as PyTorch ranks without an ET."""
    return batch_tasks((), inputs, prefix, options, run)

"""Batch conversion on Dask: one task per rank (per report for nsys), summaries back, cross-rank check.

The client only sends file names: each worker reads its rank's inputs, converts, writes
`PREFIX.<rank>.et` itself (atomically: a failed rank leaves nothing) and returns a small summary
(the converter's figures and the rank's communication records), so no process ever holds more
than one rank's trace. The cross-rank rules of `chakra.validate` run on those summaries.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from chakra import converters
from chakra.commgroups import write_comm_groups
from chakra.converters.batch import BatchTask
from chakra.errors import InputError
from chakra.files import remove_stale_temps
from chakra.io import Progress
from chakra.validate import Report, check_cross_rank_summaries

from .inputs import expand


@dataclass
class RankOutcome:
    rank: int
    inputs: list[str]
    output: Optional[str] = None
    error: Optional[str] = None
    stats: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class BatchResult:
    ranks: list[RankOutcome]
    #: the cross-rank check of the converted set (validate's findings)
    cross_rank: Report
    wall_s: float = 0.0
    workers: int = 0

    @property
    def failed(self) -> list[RankOutcome]:
        return [r for r in self.ranks if r.error is not None]

    def to_json(self) -> dict[str, Any]:
        return {
            "ranks": [r.to_json() for r in self.ranks],
            "failed": len(self.failed),
            "cross_rank": self.cross_rank.to_json(),
            "wall_s": round(self.wall_s, 3),
            "workers": self.workers,
        }


# ---------------------------------------------------------------------------------------------
# Client side


def _remove_leftovers(out: Path) -> None:
    """Temporary files of an output whose worker died mid-write (a clean failure removes its own);
    only those chakra.files can prove are stale (this host, process gone)."""
    remove_stale_temps(out)


def _gather(client: Any, futures: dict[Any, Any], progress: Optional[Progress]) -> dict[Any, dict[str, Any]]:
    """key -> task result; a task that raised (or whose worker died) gives {"error": ...}."""
    from distributed import as_completed

    out: dict[Any, dict[str, Any]] = {}
    for done, fut in enumerate(as_completed(list(futures), loop=client.loop), 1):
        key = futures[fut]
        try:
            out[key] = fut.result()
        except Exception as exc:  # a bug or a killed worker: report it for this task, the others go on
            out[key] = {"error": f"{type(exc).__name__}: {exc}"}
        if progress is not None:
            progress(done, len(futures))
    return out


def _workers(client: Any) -> int:
    return len(client.scheduler_info().get("workers", {}))


def _run_on_workers(client: Any) -> Callable[[Callable[..., Any], list[tuple]], list[Any]]:
    """`run(fn, args_list)` for the plugins' planning passes: results (or exceptions) in order."""

    def run(fn: Callable[..., Any], calls: list[tuple]) -> list[Any]:
        out: list[Any] = []
        for fut in [client.submit(fn, *args, pure=False) for args in calls]:
            try:
                out.append(fut.result())
            except Exception as exc:  # reported by the plugin as that input's failure
                out.append(exc)
        return out

    return run


def batch_formats() -> list[str]:
    """The formats whose plugins declare `batch_tasks`."""
    return [name for name, mod in converters.plugins().items() if hasattr(mod, "batch_tasks")]


def convert_batch(
    fmt: str,
    files: Sequence[Path],
    prefix: Path,
    *,
    client: Any,
    kineto: Sequence[Path] = (),
    options: Optional[dict[str, Any]] = None,
    progress: Optional[Progress] = None,
) -> BatchResult:
    """Convert every rank of `files` (+ `kineto`, the companions) to PREFIX.<rank>.et on the
    client's workers, as the format plugin's `batch_tasks` plans it.

    `files` may name files, folders (searched for the format's files) or glob patterns.
    """
    plugin = converters.load(fmt) if fmt in converters.PLUGINS else None
    if plugin is None or not hasattr(plugin, "batch_tasks"):
        raise InputError(f"batch conversion supports {', '.join(batch_formats())}, not {fmt}")
    files, _ = expand(files, fmt)
    companions = [p for c in getattr(plugin, "COMPANIONS", ()) for p in expand(kineto, c)[0]]
    t0 = time.perf_counter()
    prefix = Path(prefix).absolute()
    try:
        prefix.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{prefix}: cannot create the output folder ({exc.strerror or exc})") from None
    tasks = plugin.batch_tasks(files, companions, prefix, dict(options or {}), _run_on_workers(client))
    outcomes = _run_tasks(client, fmt, tasks, progress)
    # A plugin's whole-job pass over the written ranks (PyTorch: the profiler-cost fit to a measured
    # step time), as its plain path does before renaming its outputs
    finish = getattr(plugin, "finish_batch", None)
    if finish is not None and outcomes and all(o.error is None and o.output for o in outcomes):
        finish([(o.output, o.stats) for o in outcomes], [*files, *companions], dict(options or {}))
    cross_rank = Report(ranks=[o.rank for o in outcomes if o.error is None])
    summaries = [o.stats.pop("_comm") for o in outcomes if o.error is None]
    cross_rank.nodes = sum(int(o.stats.get("nodes", 0)) for o in outcomes if o.error is None)
    # Process groups go beside the traces (ASTRA-sim's comm-group file), as the plain converter does.
    groups: dict[str, list[int]] = {}
    for o in outcomes:
        if o.error is None:
            groups.update(o.stats.get("process_groups") or {})
    write_comm_groups(prefix, groups)
    check_cross_rank_summaries(summaries, cross_rank, groups)
    return BatchResult(outcomes, cross_rank, time.perf_counter() - t0, _workers(client))


def _run_tasks(client: Any, fmt: str, tasks: list[BatchTask], progress: Optional[Progress]) -> list[RankOutcome]:
    """Submit every planned task, then one outcome per rank written (or per failed task), in plan order."""
    futures = {}
    for i, task in enumerate(tasks):
        if task.error is None:
            key = f"chakra-convert-{fmt}-{i}-{time.time_ns()}"
            futures[client.submit(task.fn, *task.args, key=key, pure=False)] = i
    results = _gather(client, futures, progress)
    outcomes: list[RankOutcome] = []
    for i, task in enumerate(tasks):
        if task.error is not None:
            outcomes.append(RankOutcome(task.rank, task.inputs, error=task.error))
            continue
        res = results[i]
        seconds = round(float(res.get("seconds", 0.0)), 3)
        if "error" in res:
            outcomes.append(RankOutcome(task.rank, task.inputs, error=res["error"], seconds=seconds))
            if task.output is not None:
                _remove_leftovers(Path(task.output))
            continue
        for r in res["ranks"]:
            stats = dict(r["stats"], _comm=r["comm"])
            outcomes.append(RankOutcome(r["rank"], task.inputs, r["output"], stats=stats, seconds=seconds))
    return outcomes

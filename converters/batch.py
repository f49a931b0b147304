"""The batch side of the plugin contract: how `chakra.distributed.batch` runs a format on Dask.

A plugin that converts in parallel over many machines declares

  batch_tasks(inputs, companions, prefix, options, run) -> list[BatchTask]

`inputs` are its own files and `companions` the files of its `COMPANIONS` formats (PyTorch's
Kineto traces), both already expanded from folders and globs; `run(fn, argument_tuples)` runs
`fn` on the workers (for a planning pass that must open the inputs, like counting the ranks of
each nsys report) and returns each call's result or the exception it raised. Each `BatchTask`
names a top-level function the workers call; it returns `task_result(...)` or `task_error(...)`.

The planner names files and reads at most their heads (the workers read them whole), so no
process holds more than one task's traces; every task writes its rank files itself, all or nothing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

#: `run(fn, [args, ...]) -> [result or exception, ...]`: calls on the workers, in order.
RunOnWorkers = Callable[[Callable[..., Any], list[tuple]], list[Any]]


@dataclass
class BatchTask:
    """One unit of work for a worker, or a planning failure (`error` set: nothing to submit)."""

    fn: Optional[Callable[..., dict[str, Any]]]
    args: tuple
    inputs: list[str]
    rank: int = -1  # the rank an outcome reports when the task fails (-1: unknown)
    output: Optional[str] = None  # the one file it writes, if known (leftovers are removed on failure)
    error: Optional[str] = None


def summarise_output(path: str, rank: int) -> Any:
    """The communication records of a written rank file, streamed (never held whole): what the
    cross-rank check of the batch runs on."""
    from chakra.io import TraceReader
    from chakra.validate import comm_summary

    with TraceReader(path) as reader:
        return comm_summary(reader, rank)


def task_result(t0: float, ranks: list[tuple[int, str, dict[str, Any]]], warnings: Any = None) -> dict[str, Any]:
    """A task's result: every (rank, output path, stats) it wrote, with their comm summaries."""
    out = [{"rank": r, "output": p, "stats": s, "comm": summarise_output(p, r)} for r, p, s in ranks]
    return {"ranks": out, "warnings": warnings or {}, "seconds": time.perf_counter() - t0}


def task_error(t0: float, message: str) -> dict[str, Any]:
    return {"error": message, "seconds": time.perf_counter() - t0}

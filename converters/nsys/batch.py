"""Nsight Systems reports on Dask: one task per report (`batch_tasks`, see chakra.converters.batch).

Ranks are numbered across reports in order, as `convert_reports` does: by the `rank<N>` in their
names when every report has one, else as given; a first pass on the workers counts each report's
ranks so that every task knows its first rank number.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from chakra.converters.batch import BatchTask, RunOnWorkers, task_error, task_result
from chakra.errors import ChakraError
from chakra.ranks import rank_word


def count_task(path: str, per: str) -> int:
    """How many ranks a report holds (a GROUP BY pass; numbering needs it before converting)."""
    from chakra.converters.daydream.ranks import plan_ranks
    from chakra.converters.daydream.schema import open_report

    report = open_report(Path(path))
    try:
        return len(plan_ranks(report, per).keys)
    finally:
        report.close()


def report_task(path: str, prefix: str, offset: int, options: dict) -> dict[str, Any]:
    from chakra.converters.daydream.driver import convert_reports

    t0 = time.perf_counter()
    try:
        result = convert_reports([Path(path)], Path(prefix), rank_offset=offset, **options)
        return task_result(t0, [(r.rank, str(r.path), r.as_dict()) for r in result.ranks], result.warnings)
    except ChakraError as exc:
        return task_error(t0, str(exc))


def batch_tasks(
    inputs: Sequence[Path], companions: Sequence[Path], prefix: Path, options: dict[str, Any], run: RunOnWorkers
) -> list[BatchTask]:
    files = [Path(f).absolute() for f in inputs]
    named = [rank_word(p) for p in files]
    if all(r is not None for r in named) and len(set(named)) == len(named):
        files = [p for _, p in sorted(zip(named, files))]
    counts = run(count_task, [(str(p), options.get("per", "device")) for p in files])
    tasks = []
    offset = 0
    for p, n in zip(files, counts):
        if isinstance(n, Exception):  # a report that cannot be opened: the others still convert
            error = str(n) if isinstance(n, ChakraError) else repr(n)
            tasks.append(BatchTask(None, (), [str(p)], offset, error=error))
            continue
        tasks.append(BatchTask(report_task, (str(p), str(prefix), offset, options), [str(p)]))
        offset += n
    return tasks

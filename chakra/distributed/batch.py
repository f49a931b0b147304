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

from chakra.commgroups import write_comm_groups
from chakra.errors import ChakraError, InputError
from chakra.files import remove_stale_temps
from chakra.io import TraceReader, rank_path
from chakra.validate import CommSummary, Report, check_cross_rank_summaries, comm_summary

from .inputs import by_rank, expand, rank_word

FORMATS = ("pytorch", "kineto", "nsys")
Progress = Callable[[int, int], None]


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
    report: Report
    wall_s: float = 0.0
    workers: int = 0

    @property
    def failed(self) -> list[RankOutcome]:
        return [r for r in self.ranks if r.error is not None]

    def to_json(self) -> dict[str, Any]:
        return {
            "ranks": [r.to_json() for r in self.ranks],
            "failed": len(self.failed),
            "cross_rank": self.report.to_json(),
            "wall_s": round(self.wall_s, 3),
            "workers": self.workers,
        }


# ---------------------------------------------------------------------------------------------
# Worker side: these run in the Dask workers and read/write files there.


def summarise_output(path: str, rank: int) -> CommSummary:
    """The communication records of a written rank file, streamed (never held whole)."""
    with TraceReader(path) as reader:
        return comm_summary(reader, rank)


def pytorch_rank_task(rank: int, files: list[str], kineto: list[str], out: str, options: dict) -> dict[str, Any]:
    from chakra.converters.pytorch.driver import Options, convert_rank_files

    t0 = time.perf_counter()
    try:
        paths, kineto_paths = [Path(p) for p in files], [Path(p) for p in kineto]
        stats = convert_rank_files(rank, paths, kineto_paths, Path(out), Options(**options))
        if "error" in stats:
            return {"error": stats["error"], "seconds": time.perf_counter() - t0}
        comm = summarise_output(out, rank)
    except ChakraError as exc:
        return {"error": str(exc), "seconds": time.perf_counter() - t0}
    return {"stats": stats, "comm": comm, "output": out, "seconds": time.perf_counter() - t0}


def nsys_count_task(path: str, per: str) -> int:
    """How many ranks a report holds (a GROUP BY pass; numbering needs it before converting)."""
    from chakra.converters.nsys.ranks import plan_ranks
    from chakra.converters.nsys.schema import open_report

    report = open_report(Path(path))
    try:
        return len(plan_ranks(report, per).keys)
    finally:
        report.close()


def nsys_report_task(path: str, prefix: str, offset: int, options: dict) -> dict[str, Any]:
    from chakra.converters.nsys.driver import convert_reports

    t0 = time.perf_counter()
    try:
        result = convert_reports([Path(path)], Path(prefix), rank_offset=offset, **options)
        ranks = []
        for r in result.ranks:
            ranks.append({"rank": r.rank, "output": str(r.path), "stats": r.as_dict(),
                          "comm": summarise_output(str(r.path), r.rank)})  # fmt: skip
    except ChakraError as exc:
        return {"error": str(exc), "seconds": time.perf_counter() - t0}
    return {"ranks": ranks, "warnings": result.warnings, "seconds": time.perf_counter() - t0}


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
    """Convert every rank of `files` (+ `kineto`) to PREFIX.<rank>.et on the client's workers.

    `files` may name files, folders (searched for the format's files) or glob patterns.
    """
    if fmt not in FORMATS:
        raise InputError(f"batch conversion supports {', '.join(FORMATS)}, not {fmt}")
    files, _ = expand(files, fmt)
    kineto, _ = expand(kineto, "kineto")
    t0 = time.perf_counter()
    prefix = Path(prefix).absolute()
    try:
        prefix.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{prefix}: cannot create the output folder ({exc.strerror or exc})") from None
    options = dict(options or {})
    if fmt == "nsys":
        outcomes = _nsys(client, [Path(f).absolute() for f in files], prefix, options, progress)
    else:
        outcomes = _per_rank(client, fmt, files, kineto, prefix, options, progress)
    report = Report(ranks=[o.rank for o in outcomes if o.error is None])
    summaries = [o.stats.pop("_comm") for o in outcomes if o.error is None]
    report.nodes = sum(int(o.stats.get("nodes", 0)) for o in outcomes if o.error is None)
    # Process groups go beside the traces (ASTRA-sim's comm-group file), as the plain converter does.
    groups: dict[str, list[int]] = {}
    for o in outcomes:
        if o.error is None:
            groups.update(o.stats.get("process_groups") or {})
    write_comm_groups(prefix, groups)
    check_cross_rank_summaries(summaries, report, groups)
    return BatchResult(outcomes, report, time.perf_counter() - t0, _workers(client))


def _per_rank(client: Any, fmt: str, files: Sequence[Path], kineto: Sequence[Path], prefix: Path,
              options: dict[str, Any], progress: Optional[Progress]) -> list[RankOutcome]:  # fmt: skip
    groups = by_rank(files, kineto) if fmt == "pytorch" else by_rank((), files)
    futures = {}
    outcomes: dict[int, RankOutcome] = {}
    for rank, (plain, kin) in groups.items():
        out = rank_path(prefix, rank)
        outcomes[rank] = RankOutcome(rank, [str(p) for p in (*plain, *kin)], str(out))
        fut = client.submit(
            pytorch_rank_task,
            rank,
            [str(Path(p).absolute()) for p in plain],
            [str(Path(p).absolute()) for p in kin],
            str(out),
            options,
            key=f"chakra-convert-{fmt}-{rank}-{time.time_ns()}",
            pure=False,
        )
        futures[fut] = rank
    for rank, res in _gather(client, futures, progress).items():
        o = outcomes[rank]
        o.seconds = round(float(res.get("seconds", 0.0)), 3)
        if "error" in res:
            o.error, o.output = res["error"], None
            _remove_leftovers(rank_path(prefix, rank))
        else:
            o.stats = dict(res["stats"], _comm=res["comm"])
    return list(outcomes.values())


def _nsys(client: Any, files: list[Path], prefix: Path, options: dict[str, Any],
          progress: Optional[Progress]) -> list[RankOutcome]:  # fmt: skip
    # Ranks are numbered across reports in order (as `convert_reports` does): by the `rank<N>` in
    # their names when every report has one, else as given. A first pass counts each report's ranks.
    named = [rank_word(p) for p in files]
    if all(r is not None for r in named) and len(set(named)) == len(named):
        files = [p for _, p in sorted(zip(named, files))]
    per = options.get("per", "device")
    counts: list[Any] = []
    for fut in [client.submit(nsys_count_task, str(p), per, pure=False) for p in files]:
        try:
            counts.append(fut.result())
        except Exception as exc:  # a report that cannot be opened: the others still convert
            counts.append(exc)
    futures = {}
    offset = 0
    outcomes: list[RankOutcome] = []
    failed: dict[int, RankOutcome] = {}
    for i, (p, n) in enumerate(zip(files, counts)):
        if isinstance(n, Exception):
            failed[i] = RankOutcome(offset, [str(p)], error=str(n) if isinstance(n, ChakraError) else repr(n))
            continue
        futures[client.submit(nsys_report_task, str(p), str(prefix), offset, options, pure=False)] = i
        offset += n
    results = _gather(client, futures, progress)
    for i, p in enumerate(files):
        if i in failed:
            outcomes.append(failed[i])
            continue
        res = results[i]
        if "error" in res:
            outcomes.append(RankOutcome(-1, [str(p)], error=res["error"], seconds=round(res.get("seconds", 0.0), 3)))
            continue
        for r in res["ranks"]:
            stats = dict(r["stats"], _comm=r["comm"])
            seconds = round(res["seconds"], 3)
            outcomes.append(RankOutcome(r["rank"], [str(p)], r["output"], stats=stats, seconds=seconds))
    return outcomes

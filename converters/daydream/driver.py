"""Convert Nsight Systems SQLite reports to per-rank Chakra traces (streaming, bounded memory)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from chakra.converters.daydream import source
from chakra.converters.daydream.build import DEP_KINDS, Builder, Options
from chakra.converters.daydream.ranks import copy_engines, plan_ranks, stream_flags
from chakra.converters.daydream.schema import Report, open_report
from chakra.converters.result import ConversionResult
from chakra.errors import TraceFormatError
from chakra.io import Progress, TraceWriter, output_set, rank_path
from chakra.trace import make_metadata


@dataclass
class RankSummary:
    rank: int
    path: Path
    source: Path
    key: str  # "device 0" / "pid 1234"
    nodes: int
    counts: dict[str, int]
    first_ns: Optional[int]
    last_ns: int

    @property
    def span_us(self) -> float:
        """Measured span of the rank's traced work (first task start to last task end)."""
        return 0.0 if self.first_ns is None else (self.last_ns - self.first_ns) / 1000.0

    def as_dict(self) -> dict[str, Any]:
        edges = {k: self.counts.get(k, 0) for k in DEP_KINDS}
        tasks = {k: self.counts.get(k, 0) for k in ("runtime", "driver", "kernel", "memcpy", "memset", "gap_nodes")}
        return {
            "rank": self.rank,
            "path": str(self.path),
            "source": str(self.source),
            "key": self.key,
            "nodes": self.nodes,
            "tasks": tasks,
            "collectives": self.counts.get("collectives", 0),
            "edges": edges,
            "span_us": self.span_us,
        }


@dataclass
class ConvertResult:
    ranks: list[RankSummary] = field(default_factory=list)
    warnings: dict[str, int] = field(default_factory=dict)
    rows: int = 0

    @property
    def paths(self) -> list[Path]:
        return [r.path for r in self.ranks]

    def as_dict(self) -> dict[str, Any]:
        return {"ranks": [r.as_dict() for r in self.ranks], "warnings": self.warnings, "rows": self.rows}


def convert_reports(
    inputs: Sequence[Path],
    prefix: Path,
    *,
    per: str = "device",
    gaps: bool = True,
    copy_engine_order: bool = True,
    progress: Optional[Progress] = None,
    display: Optional[Sequence[Path]] = None,
    rank_offset: int = 0,
) -> ConvertResult:
    """Convert each report in turn; ranks are numbered across reports in the order given.

    `rank_offset` numbers the first rank (a batch converts each report on its own, at the
    offset the reports before it take).

    Every report is opened (and checked) before anything is written, and all outputs are renamed into
    place only when every report converted, so a failure never leaves half a job behind.
    """
    names = list(display) if display is not None else [Path(p) for p in inputs]
    reports = []
    try:
        for p, name in zip(inputs, names):
            reports.append(open_report(Path(p), display=name))
    except BaseException:
        for r in reports:
            r.close()
        raise
    result = ConvertResult()
    writers: list[TraceWriter] = []
    ok = False
    try:
        with output_set():  # every rank file appears, or none
            try:
                offset = rank_offset
                for report in reports:
                    offset += _convert_one(
                        report, Path(prefix), offset, per, Options(gaps, copy_engine_order), result, writers, progress
                    )
                ok = True
            finally:
                for w in writers:
                    if ok:
                        w.close()
                    else:
                        w.abort()
    finally:
        for report in reports:
            report.close()
    return result


def _convert_one(
    report: Report,
    prefix: Path,
    offset: int,
    per: str,
    options: Options,
    result: ConvertResult,
    writers: list[TraceWriter],
    progress: Optional[Progress],
) -> int:
    try:
        plan = plan_ranks(report, per)
        local = []
        for i, key in enumerate(plan.keys):
            writer = TraceWriter(rank_path(prefix, offset + i))
            writers.append(writer)
            writer.write_metadata(_metadata(report, plan, i, key))
            local.append(writer)
        builder = Builder(
            plan,
            [w.write_node for w in local],
            strings=report.string,
            stream_flags=stream_flags(report),
            engines=copy_engines(report),
            options=options,
            rank_offset=offset,
        )
        builder.run(source.events(report), progress)
    except sqlite3.DatabaseError as exc:
        raise TraceFormatError(report.display, f"unreadable SQLite data: {exc}") from None
    for i, (key, state) in enumerate(zip(plan.keys, builder.ranks)):
        result.ranks.append(
            RankSummary(
                rank=offset + i,
                path=local[i].path,
                source=Path(report.display or report.path),
                key=f"{plan.per} {key}",
                nodes=state.nodes,
                counts=dict(state.counts),
                first_ns=state.first_ns,
                last_ns=state.last_ns,
            )
        )
    for msg, n in builder.warnings.items():
        result.warnings[msg] = result.warnings.get(msg, 0) + n
    result.rows += builder.rows
    return len(plan.keys)


def _metadata(report: Report, plan, index: int, key: int):
    attrs: dict[str, Any] = {
        "source_format": report.meta.get("CHAKRA_SOURCE_FORMAT", "nsys"),
        "source_file": Path(report.display or report.path).name,
        "per": plan.per,
    }
    if report.product_version:
        attrs["nsys_version"] = report.product_version
    if report.schema_version:
        attrs["nsys_schema_version"] = report.schema_version
    if plan.per == "device":
        attrs["device"] = int(key)
        if key in plan.device_names:
            attrs["device_name"] = plan.device_names[key]
    else:
        attrs["pid"] = int(key)
    pids = sorted(plan.pids.get(index, ()))
    if pids:
        attrs["pids"] = ",".join(str(p) for p in pids)
    return make_metadata(**attrs)


def plugin_result(result: ConvertResult) -> ConversionResult:
    """A `ConvertResult` as the plugin contract's result (the nsys and cupti plugins return it)."""
    warnings = [f"{n} {msg}" for msg, n in result.warnings.items()]
    return ConversionResult(list(result.paths), result.as_dict(), warnings)

"""BigSim (Charm++) logs -> Chakra: `chakra convert bigsim DIR -o PREFIX`.

Reads binary `bgTrace` logs of every version 0-6 (sizes and byte order from each file's
machineInfo header) and the ASCII detail dumps, and writes one trace per simulated processor
(`proc = node*numWth + thread`). `read_timing_samples` reads `TRACEBIGSIM:` timing lines for
interpolation models. See docs/bigsim.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Optional

from chakra.converters.bigsim.binary import read_binary_logs, read_pe_file, read_summary
from chakra.converters.bigsim.convert import ConversionSummary, convert_log, iter_traces
from chakra.converters.bigsim.detail import read_detail_file, read_detail_logs
from chakra.converters.bigsim.inputs import load_logs, sniff
from chakra.converters.bigsim.model import BigSimLog, MachineInfo, MsgEntry, Seb, Summary
from chakra.converters.bigsim.timing import TimingSample, parse_timing_line, read_param_files, read_timing_samples
from chakra.io import TraceWriter, output_set, rank_path

NAME = "bigsim"
DESCRIPTION = "BigSim (Charm++) bgTrace logs, v0-6, or their ASCII detail dumps: one trace per simulated processor."


def write_traces(
    log: BigSimLog,
    prefix: Path,
    *,
    serialize: bool = False,
    on_progress: Optional[Callable[[int, int], None]] = None,
) -> ConversionSummary:
    """Convert `log` and write PREFIX.<proc>.et for every proc, one at a time (bounded memory),
    all or nothing. `on_progress(done, total)` is called after each file."""
    summary: Optional[ConversionSummary] = None
    done = 0
    with output_set():
        for trace, summary in iter_traces(log, serialize=serialize):
            assert trace.rank is not None
            path = rank_path(prefix, trace.rank)
            with TraceWriter(path) as w:
                w.write_metadata(trace.metadata)
                w.write_nodes(trace.nodes)
            summary.outputs.append(str(path))
            done += 1
            if on_progress is not None:
                on_progress(done, log.total_procs)
    if summary is None:  # a machine without procs
        _, summary = convert_log(log)
    return summary


def convert(
    inputs: Sequence[Path],
    prefix: Path,
    *,
    prefer_detail: bool = False,
    workers_per_node: Optional[int] = None,
    serialize: bool = False,
    on_progress: Optional[Callable[[int, int], None]] = None,
) -> ConversionSummary:
    """Library entry point: read the logs the inputs name, write PREFIX.<proc>.et, return a summary."""
    log = load_logs([Path(p) for p in inputs], prefer_detail=prefer_detail, workers_per_node=workers_per_node)
    return write_traces(log, Path(prefix), serialize=serialize, on_progress=on_progress)


def convert_paths(inputs: list[Path], prefix: Path, *, quiet: bool = False) -> list[Path]:
    """Registry hook (`chakra convert auto`): default options."""
    summary = convert(inputs, prefix)
    return [Path(p) for p in summary.outputs]


def add_cli(app) -> None:
    from chakra.converters.bigsim.cli import register

    register(app)


__all__ = [
    "NAME",
    "DESCRIPTION",
    "sniff",
    "convert",
    "convert_paths",
    "add_cli",
    "write_traces",
    "load_logs",
    "convert_log",
    "iter_traces",
    "read_binary_logs",
    "read_summary",
    "read_pe_file",
    "read_detail_logs",
    "read_detail_file",
    "read_timing_samples",
    "read_param_files",
    "parse_timing_line",
    "TimingSample",
    "ConversionSummary",
    "BigSimLog",
    "MachineInfo",
    "MsgEntry",
    "Seb",
    "Summary",
]

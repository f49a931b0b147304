"""BigSim (Charm++) logs -> Chakra: `chakra convert bigsim DIR -o PREFIX`.

Reads binary `bgTrace` logs of every version 0-6 (sizes and byte order from each file's
machineInfo header) and the ASCII detail dumps, and writes one trace per simulated processor
(`proc = node*numWth + thread`). `read_timing_samples` reads `TRACEBIGSIM:` timing lines for
interpolation models. See docs/bigsim.md. This module is the converter plugin; the library names
below are imported on first use so that listing the formats stays cheap.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from chakra.converters import lazy_exports
from chakra.converters.result import ConversionResult

if TYPE_CHECKING:
    from chakra.io import Progress

NAME = "bigsim"
DESCRIPTION = "BigSim (Charm++) bgTrace logs, v0-6, or their ASCII detail dumps: one trace per simulated processor."
EXTENSIONS = ("bgTrace*", "*.log", "a folder of them")

#: Library name -> submodule that defines it.
_LAZY = {
    "read_binary_logs": "binary",
    "read_pe_file": "binary",
    "read_summary": "binary",
    "ConversionSummary": "translate",
    "convert_log": "translate",
    "iter_traces": "translate",
    "read_detail_file": "detail",
    "read_detail_logs": "detail",
    "load_logs": "inputs",
    "BigSimLog": "model",
    "MachineInfo": "model",
    "MsgEntry": "model",
    "Seb": "model",
    "Summary": "model",
    "TimingSample": "timing",
    "parse_timing_line": "timing",
    "read_param_files": "timing",
    "read_timing_samples": "timing",
}


def accept(prefix: bytes) -> bool:
    """A binary bgTrace log (PUP magic at byte 0) or a detail dump (its first line is an SEB header)."""
    from chakra.converters.bigsim.detail import HEAD_RE
    from chakra.converters.bigsim.layout import MAGIC

    if prefix[:4] == MAGIC:
        return True
    first = next((line for line in prefix[:4096].decode("latin-1").splitlines() if line.strip()), "")
    return bool(HEAD_RE.match(first))


def accept_dir(path: Path) -> bool:
    """A folder holding a bgTrace summary or detail dumps."""
    from chakra.converters.bigsim.inputs import sniff

    return sniff(path)


def write_traces(
    log: Any,
    prefix: Path,
    *,
    serialize: bool = False,
    progress: Optional[Progress] = None,
) -> Any:
    """Convert `log` and write PREFIX.<proc>.et for every proc, one at a time (bounded memory),
    all or nothing. `progress(done, total)` is called after each file."""
    from chakra.converters.bigsim.translate import convert_log, iter_traces
    from chakra.io import TraceWriter, output_set, rank_path

    summary = None
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
            if progress is not None:
                progress(done, log.total_procs)
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
    progress: Optional[Progress] = None,
) -> ConversionResult:
    """Read the logs the inputs name, write PREFIX.<proc>.et; the summary is `ConversionSummary.to_json()`.

    Progress goes to `progress(done, total)` (the CLI draws the bar)."""
    from chakra.converters.bigsim.inputs import load_logs

    log = load_logs([Path(p) for p in inputs], prefer_detail=prefer_detail, workers_per_node=workers_per_node)
    summary = write_traces(log, Path(prefix), serialize=serialize, progress=progress)
    return ConversionResult([Path(p) for p in summary.outputs], summary.to_json(), list(summary.notes))


def add_cli(app) -> None:
    from chakra.converters.bigsim.cli import register

    register(app, convert)


__getattr__ = lazy_exports("chakra.converters.bigsim", _LAZY)


__all__ = ["NAME", "DESCRIPTION", "EXTENSIONS", "accept", "accept_dir", "convert", "add_cli", "write_traces",
           *_LAZY]  # fmt: skip

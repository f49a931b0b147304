"""ASTRA-sim 1.0 text workloads (DATA, MODEL, HYBRID_*, MICRO, ...) -> Chakra.

`parse` reads the text format into a `Workload`; `build` turns it into one trace per NPU
following ASTRA-sim 1.0's training loops; this module is the `chakra convert text` plugin.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Optional

from chakra.converters import lazy_exports
from chakra.converters.result import ConversionResult
from chakra.errors import InputError, TraceFormatError

NAME = "text"
DESCRIPTION = "ASTRA-sim 1.0 text workload (DATA, MODEL, HYBRID_*, MICRO, ...)"
EXTENSIONS = (".txt",)

#: Library names, imported on first use (build pulls in the protobuf schema).
_LAZY = {
    "TextConversion": "build",
    "convert_text": "build",
    "DEFAULT_MAX_NPUS": "build",
    "Workload": "parse",
    "parse_text": "parse",
}

__all__ = ["NAME", "DESCRIPTION", "EXTENSIONS", "accept", "convert", "add_cli", *_LAZY]


def accept(prefix: bytes) -> bool:
    """A text workload starts with a parallelism keyword, then a bare layer count."""
    from chakra.converters.astrasim_text.parse import KEYWORDS, _content_lines

    try:
        text = prefix[:4096].decode("utf-8")
    except UnicodeDecodeError:
        return False
    lines = []
    for _, toks in _content_lines(text):
        lines.append(toks)
        if len(lines) == 2:
            break
    return len(lines) == 2 and lines[0][0] in KEYWORDS and len(lines[1]) == 1 and lines[1][0].isdigit()


def convert(
    inputs: Sequence[Path],
    prefix: Path,
    *,
    npus: Optional[int] = None,
    passes: int = 1,
    dims: Optional[Sequence[int]] = None,
    model_group: Optional[int] = None,
    max_npus: Optional[int] = None,
) -> ConversionResult:
    """Convert one workload into PREFIX.<npu>.et (+ PREFIX.comm_groups.json).

    Without `npus` the header must name the count (`all_gpus: N`); either way at most `max_npus`
    trace files are written unless the limit is raised.
    """
    from chakra.converters.astrasim_text.build import DEFAULT_MAX_NPUS, convert_text
    from chakra.converters.astrasim_text.parse import header_npus, parse_text

    if len(inputs) != 1:
        raise InputError("the text converter takes exactly one workload file")
    path = Path(inputs[0])
    limit = DEFAULT_MAX_NPUS if max_npus is None else max_npus
    wl = parse_text(path)
    if npus is None:
        npus = header_npus(wl)
        if npus is None:
            raise InputError(
                f"{path}: a text workload does not say how many NPUs run it; "
                f"use: chakra convert text {path} --npus N -o {prefix}"
            )
        if npus > limit:
            raise TraceFormatError(
                path,
                f"all_gpus: {npus:,} would write {npus:,} trace files, above the limit of {limit:,}; "
                f"to allow it: chakra convert text {path} --npus {npus} --max-npus {npus} -o {prefix}",
                line=wl.header_line,
            )
    conv = convert_text(path, npus, passes, dims=dims, model_group=model_group, text=wl.text, max_npus=limit)
    written = conv.write(Path(prefix))
    return ConversionResult(written, {**conv.summary(), "written": [str(p) for p in written]}, list(conv.warnings))


def add_cli(app) -> None:
    from chakra.converters.astrasim_text.cli import register

    register(app, convert)


__getattr__ = lazy_exports("chakra.converters.astrasim_text", _LAZY)

"""`chakra jsonize` (.et -> lossless JSON) and `chakra dejsonize` (JSON -> .et)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from chakra.cli_common import QuietOption, handle_errors, info
from chakra.errors import InputError
from chakra.io import expand_trace_args, is_json_file, output_set, read_trace, write_trace


def _targets(inputs: list[str], output: Optional[Path], suffix: str) -> list[tuple[Path, Path, Optional[int]]]:
    pairs = expand_trace_args(inputs)
    if output is None:
        return [(p, p.with_name(_strip(p.name) + suffix), r) for r, p in pairs]
    if len(pairs) == 1 and (output.name.endswith(suffix) or output.name.endswith(suffix + ".gz")):
        return [(pairs[0][1], output, pairs[0][0])]
    # Several inputs: OUTPUT is a PREFIX (a trailing ".json"/".et" the user typed is not part of it).
    output = Path(_strip(str(output)))
    out = []
    for i, (r, p) in enumerate(pairs):
        rank = r if r is not None else i
        out.append((p, Path(f"{output}.{rank}{suffix}"), rank))
    return out


def _strip(name: str) -> str:
    for s in (".et.gz", ".json.gz", ".et", ".json"):
        if name.endswith(s):
            return name[: -len(s)]
    return name


def jsonize(
    inputs: list[str] = typer.Argument(..., help=".et files or PREFIXes."),
    output: Optional[Path] = typer.Option(
        None,
        "--output",
        "-o",
        help="Output file (one input) or PREFIX (writes PREFIX.<rank>.json). Default: beside each input.",
    ),
    quiet: bool = QuietOption,
) -> None:
    """Write the lossless JSON form of .et traces (round-trips byte-identically with dejsonize).

    Example: [bold]chakra jsonize run.0.et -o run.0.json[/]; add .gz to compress.
    """
    with handle_errors(), output_set():
        for src, dst, rank in _targets(inputs, output, ".json"):
            trace = read_trace(src, rank=rank)
            write_trace(dst, trace)
            info(f"wrote {dst} ({len(trace.nodes):,} nodes)", quiet)


def dejsonize(
    inputs: list[str] = typer.Argument(..., help="JSON traces (ours or the official JSON form), or PREFIXes."),
    output: Optional[Path] = typer.Option(
        None,
        "--output",
        "-o",
        help="Output file (one input) or PREFIX (writes PREFIX.<rank>.et). Default: beside each input.",
    ),
    quiet: bool = QuietOption,
) -> None:
    """Turn JSON traces back into .et (also reads the official feeder's JSON form).

    Example: [bold]chakra dejsonize run.0.json -o run.0.et[/]
    """
    with handle_errors(), output_set():
        for src, dst, rank in _targets(inputs, output, ".et"):
            if src == dst:
                raise InputError(f"{src}: input and output are the same file")
            if not is_json_file(src):
                raise InputError(
                    f"{src}: not a JSON trace (it does not start with {{ or [); .et files need no dejsonize"
                )
            trace = read_trace(src, rank=rank)
            write_trace(dst, trace)
            info(f"wrote {dst} ({len(trace.nodes):,} nodes)", quiet)


def register(app: typer.Typer) -> None:
    app.command("jsonize")(jsonize)
    app.command("dejsonize")(dejsonize)

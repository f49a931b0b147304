"""`chakra jsonize` (.et -> lossless JSON) and `chakra dejsonize` (JSON -> .et)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from chakra.cli_common import TRACES_HELP, JsonOption, QuietOption, handle_errors
from chakra.files import STDIN
from chakra.inputs import output_stem
from chakra.io import expand_trace_args, output_set, rank_path, read_trace, write_trace


def _targets(inputs: list[str], output: Optional[Path], suffix: str) -> list[tuple[Path, Path, Optional[int]]]:
    pairs = expand_trace_args(inputs)
    if output is None:
        _beside_each(inputs)
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


def _beside_each(inputs: list[str]) -> None:
    """Outputs beside their inputs: standard input has no place, so -o is needed."""
    if STDIN in inputs:
        output_stem(STDIN)  # raises, asking for -o


def _strip(name: str) -> str:
    for s in (".et.gz", ".json.gz", ".et", ".json"):
        if name.endswith(s):
            return name[: -len(s)]
    return name


def jsonize(
    inputs: list[str] = typer.Argument(..., help=TRACES_HELP + "."),
    output: Optional[Path] = typer.Option(
        None,
        "--output",
        "-o",
        help="Output file (one input) or PREFIX (writes PREFIX.<rank>.json). Default: beside each input.",
    ),
    quiet: bool = QuietOption,
    json_out: bool = JsonOption,
) -> None:
    """Write the lossless JSON form of .et traces (round-trips byte-identically with dejsonize).

    Example: [bold]chakra jsonize run.0.et -o run.0.json[/]; add .gz to compress.
    """
    from chakra.converters.chakra_json.cli import print_written
    from chakra.converters.result import ConversionResult

    written: list[Path] = []
    nodes: list[int] = []
    with handle_errors():
        with output_set():
            for src, dst, rank in _targets(inputs, output, ".json"):
                trace = read_trace(src, rank=rank)
                written.append(write_trace(dst, trace))
                nodes.append(len(trace.nodes))
        print_written(ConversionResult(written, {"written": [str(p) for p in written], "nodes": nodes}, []), quiet,
                      json_out)  # fmt: skip


def dejsonize(
    inputs: list[str] = typer.Argument(..., help="JSON traces (ours or the official JSON form), or PREFIXes."),
    output: Optional[Path] = typer.Option(
        None,
        "--output",
        "-o",
        help="Output file (one input) or PREFIX (writes PREFIX.<rank>.et). Default: beside each input.",
    ),
    quiet: bool = QuietOption,
    json_out: bool = JsonOption,
) -> None:
    """Turn JSON traces back into .et (also reads the official feeder's JSON form).

    The same conversion as [bold]chakra convert json[/]. Example: [bold]chakra dejsonize run.0.json -o run.0.et[/]
    """
    from chakra.converters.chakra_json import write_et
    from chakra.converters.chakra_json.cli import print_written

    with handle_errors():
        sources = [p for _, p in expand_trace_args(inputs)]
        if output is None:
            _beside_each(inputs)
            name = lambda src, _rank: src.with_name(_strip(src.name) + ".et")  # noqa: E731
        elif len(sources) == 1 and output.name.endswith((".et", ".et.gz")):
            name = lambda _src, _rank: output  # noqa: E731
        else:  # several inputs: OUTPUT is a PREFIX (a trailing ".et" the user typed is not part of it)
            prefix = Path(_strip(str(output)))
            name = lambda _src, rank: rank_path(prefix, rank)  # noqa: E731
        print_written(write_et(sources, name), quiet, json_out)


def register(app: typer.Typer) -> None:
    app.command("jsonize")(jsonize)
    app.command("dejsonize")(dejsonize)

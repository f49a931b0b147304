"""`chakra convert json`: JSON traces (our lossless form or the official feeder's form) -> .et."""

from __future__ import annotations

from pathlib import Path

import typer

from chakra.cli_common import QuietOption, handle_errors, info
from chakra.errors import InputError
from chakra.io import open_binary, output_set, rank_from_path, rank_path, write_trace
from chakra.jsonform import read_json_trace

NAME = "json"
DESCRIPTION = "Chakra JSON traces: our lossless form (chakra jsonize) or the official C++ feeder's workload_graph form."


def sniff(path: Path) -> bool:
    if not Path(path).is_file():
        return False
    with open_binary(path) as f:
        head = f.read(4096).lstrip()
    return head[:1] == b"{" and (b'"chakra-et-json/' in head or b'"workload_graph"' in head)


def convert_paths(inputs: list[Path], prefix: Path, *, quiet: bool = False) -> list[Path]:
    written = []
    seen: set[int] = set()
    with output_set():
        written = _convert_each(inputs, prefix, seen, quiet)
    return written


def _convert_each(inputs: list[Path], prefix: Path, seen: set[int], quiet: bool) -> list[Path]:
    written = []
    for i, path in enumerate(inputs):
        trace = read_json_trace(path)
        rank = trace.rank if trace.rank is not None else rank_from_path(path)
        if rank is None:
            rank = i
        if rank in seen:
            raise InputError(f"{path}: rank {rank} given twice; name files PREFIX.<rank>.json")
        seen.add(rank)
        trace.rank = rank
        written.append(write_trace(rank_path(prefix, rank), trace))
        info(f"{path} -> {written[-1]} ({len(trace.nodes):,} nodes)", quiet)
    return written


def add_cli(app: typer.Typer) -> None:
    @app.command(NAME, help=DESCRIPTION)
    def convert_json(
        inputs: list[Path] = typer.Argument(..., help="JSON trace files (rank from the document or the file name)."),
        output: Path = typer.Option(..., "--output", "-o", help="Output PREFIX: writes PREFIX.<rank>.et."),
        quiet: bool = QuietOption,
    ) -> None:
        with handle_errors():
            convert_paths(list(inputs), output, quiet=quiet)

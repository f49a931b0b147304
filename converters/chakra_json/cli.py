"""`chakra convert json` (and the lines `chakra dejsonize` prints)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import typer

from chakra.cli_common import QuietOption, handle_errors, info
from chakra.converters import expand_inputs
from chakra.converters.result import ConversionResult


def print_written(result: ConversionResult, quiet: bool) -> None:
    """`wrote PATH (N nodes)` per file (convert json and dejsonize print the same)."""
    for path, n in zip(result.paths, result.summary["nodes"]):
        info(f"wrote {path} ({n:,} nodes)", quiet)


def register(app: typer.Typer, convert: Callable[..., Any], help_text: str) -> None:
    @app.command("json", help=help_text)
    def convert_json(
        inputs: list[Path] = typer.Argument(
            ...,
            help="JSON trace files, folders, quoted patterns or PREFIXes (rank from the document or the file name).",
        ),
        output: Path = typer.Option(..., "--output", "-o", help="Output PREFIX: writes PREFIX.<rank>.et."),
        quiet: bool = QuietOption,
    ) -> None:
        with handle_errors():
            files, _ = expand_inputs("json", inputs, note=lambda line: info(line, quiet))
            print_written(convert(files, output), quiet)

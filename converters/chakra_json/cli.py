"""`chakra convert json` (and the lines `chakra dejsonize` prints)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import typer

from chakra.cli_common import JsonOption, QuietOption, handle_errors, info, print_json
from chakra.converters import expand_inputs
from chakra.converters.result import ConversionResult


def print_written(result: ConversionResult, quiet: bool, json_out: bool = False) -> None:
    """`wrote PATH (N nodes)` per file, or with --json `{"written": [...], "nodes": [...]}` on stdout
    (convert json, dejsonize and jsonize print the same)."""
    if json_out:
        print_json(result.summary)
        return
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
        json_out: bool = JsonOption,
    ) -> None:
        with handle_errors():
            files, _ = expand_inputs("json", inputs, note=lambda line: info(line, quiet or json_out))
            print_written(convert(files, output), quiet, json_out)

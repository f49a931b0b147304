"""`chakra convert cupti`: the same options and output as `chakra convert nsys`."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import typer

from chakra.cli_common import JsonOption, QuietOption, handle_errors, info
from chakra.converters import expand_inputs
from chakra.converters.daydream.cli import EngineOption, GapsOption, Per, PerOption, print_summary, run_with_progress


def register(app: typer.Typer, convert: Callable[..., Any]) -> None:
    @app.command("cupti")
    def convert_cupti(
        inputs: list[Path] = typer.Argument(
            ...,
            help="CUPTI records (JSON Lines, array, or {records: [...]}): files, folders, quoted globs, PREFIXes or -.",
        ),
        output: Path = typer.Option(..., "--output", "-o", help="Output PREFIX: writes PREFIX.<rank>.et."),
        per: Per = PerOption,
        gaps: bool = GapsOption,
        engine: bool = EngineOption,
        quiet: bool = QuietOption,
        as_json: bool = JsonOption,
    ) -> None:
        """Convert CUPTI activity records (JSON) to Chakra with the same task graph as `convert nsys`.

        One record per line, e.g.

          {"kind": "RUNTIME", "name": "cudaLaunchKernel", "start": 100, "end": 900,
           "processId": 7, "threadId": 7, "correlationId": 5}
          {"kind": "KERNEL", "name": "gemm", "start": 1000, "end": 5000,
           "deviceId": 0, "streamId": 7, "correlationId": 5}

        Example: chakra convert cupti records.json -o out/job   (see docs/nsys.md for every field)
        """
        with handle_errors():
            inputs = expand_inputs("cupti", inputs, note=lambda line: info(line, quiet or as_json))[0]
            result = run_with_progress(
                lambda cb: convert(inputs, output, per=per.value, gaps=gaps, copy_engine_order=engine, progress=cb),
                quiet or as_json,
            )
            print_summary(result, quiet, as_json)

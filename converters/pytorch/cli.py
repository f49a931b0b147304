"""`chakra convert pytorch` and `chakra convert kineto` command definitions."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from chakra.cli_common import JsonOption, QuietOption, err_console, handle_errors, print_json
from chakra.converters.pytorch.convert import Options, convert_files
from chakra.converters.pytorch.summary import render
from chakra.errors import InputError


def _run(ets: list[Path], kinetos: list[Path], output: Path, gap_min: float, no_io: bool, jobs: int,
         quiet: bool, json_out: bool) -> None:  # fmt: skip
    with handle_errors():
        for p in [*ets, *kinetos]:
            if not p.exists():
                raise InputError(f"{p}: no such file")
        summaries = convert_files(ets, kinetos, output, Options(gap_min_us=gap_min, io=not no_io, jobs=jobs))
        if json_out:
            print_json(summaries)
        elif not quiet:
            render(summaries, err_console)


def add_cli(app: typer.Typer) -> None:
    @app.command("pytorch")
    def pytorch_cmd(
        inputs: list[Path] = typer.Argument(
            ..., help="Execution Trace files (.json, .json.gz, .tar.gz); Kineto files given here are recognised too."
        ),  # fmt: skip
        kineto: Optional[list[Path]] = typer.Option(
            None, "--kineto", "-k", help="Kineto trace(s) of the same run (repeat the option per rank)."
        ),  # fmt: skip
        output: Path = typer.Option(..., "--output", "-o", help="Output PREFIX: writes PREFIX.<rank>.et."),
        gap_min: float = typer.Option(1.0, "--gap-min-us", help="CPU gaps shorter than this fold into the op before."),
        no_io: bool = typer.Option(False, "--no-io", help="Do not copy op inputs/outputs (smaller, faster)."),
        jobs: int = typer.Option(0, "--jobs", "-j", help="Parallel processes for several ranks (0 = auto)."),
        quiet: bool = QuietOption,
        json_out: bool = JsonOption,
    ) -> None:
        """Convert PyTorch Execution Traces (+ Kineto) to Chakra, one PREFIX.<rank>.et per rank.

        Files are paired by rank (Kineto distributedInfo, else the number in the file name), and
        ranks convert in parallel. Example:

          chakra convert pytorch et.0.json et.1.json -k kineto.0.json -k kineto.1.json -o out/ddp
        """
        _run(inputs, list(kineto or []), output, gap_min, no_io, jobs, quiet, json_out)


def add_kineto_cli(app: typer.Typer) -> None:
    @app.command("kineto")
    def kineto_cmd(
        inputs: list[Path] = typer.Argument(..., help="Kineto (PyTorch profiler) trace files, one per rank."),
        output: Path = typer.Option(..., "--output", "-o", help="Output PREFIX: writes PREFIX.<rank>.et."),
        gap_min: float = typer.Option(1.0, "--gap-min-us", help="CPU gaps shorter than this fold into the op before."),
        jobs: int = typer.Option(0, "--jobs", "-j", help="Parallel processes for several ranks (0 = auto)."),
        quiet: bool = QuietOption,
        json_out: bool = JsonOption,
    ) -> None:
        """Convert Kineto traces alone (no Execution Trace) to Chakra.

        Host ops come from cpu_op/user_annotation events, GPU work from kernels/memcpy/memset,
        collectives from NCCL kernels and record_param_comms args. Example:

          chakra convert kineto rank0.pt.trace.json.gz rank1.pt.trace.json.gz -o out/run
        """
        _run([], inputs, output, gap_min, True, jobs, quiet, json_out)

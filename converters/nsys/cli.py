"""`chakra convert nsys`: options, progress, a summary table (or --json), warnings."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional

import typer

from chakra.cli_common import (
    JsonOption,
    QuietOption,
    SchedulerOption,
    WorkersOption,
    handle_errors,
    info,
)
from chakra.converters import expand_inputs, one_input
from chakra.converters.daydream.cli import EngineOption, GapsOption, Per, PerOption, print_summary, run_with_progress


def add_cli(app: typer.Typer, convert: Callable[..., Any]) -> None:
    @app.command("nsys")
    def convert_nsys(
        inputs: list[Path] = typer.Argument(
            ...,
            help="Nsight Systems SQLite exports (nsys export --type sqlite): files, folders, quoted globs, "
            "PREFIXes or -.",
        ),
        output: Optional[Path] = typer.Option(
            None, "--output", "-o", help="Output PREFIX: writes PREFIX.<rank>.et (needed unless --cupti-records)."
        ),
        cupti_records: Optional[Path] = typer.Option(
            None,
            "--cupti-records",
            help="Also (or only) write the report's CUDA activity as CUPTI records (JSON Lines), "
            "the input of `chakra convert cupti`. One report.",
        ),
        per: Per = PerOption,
        gaps: bool = GapsOption,
        engine: bool = EngineOption,
        workers: Optional[int] = WorkersOption,
        scheduler: Optional[str] = SchedulerOption,
        quiet: bool = QuietOption,
        as_json: bool = JsonOption,
    ) -> None:
        """Convert Nsight Systems SQLite reports to Chakra: Daydream's kernel-level task graph.

        Nodes: CUDA API calls (CPU, per thread) with the CPU gaps between them, kernels, copies and
        memsets (GPU, per stream), NCCL kernels as collectives; NVTX ranges name layers. Dependencies:
        thread, stream, launch (correlation id), sync (device/stream/event/blocking copy), communicator.

        Examples:

          nsys export --type sqlite report1.nsys-rep
          chakra convert nsys report1.sqlite -o out/job           # out/job.0.et, one file per GPU
          chakra convert nsys a.sqlite b.sqlite -o job --per process
          chakra convert nsys report1.sqlite --cupti-records out/records.jsonl   # for convert cupti
        """
        from chakra.distributed.cli import run_batch, wants_dask

        if output is None and cupti_records is None:
            raise typer.BadParameter("give -o PREFIX (Chakra traces), --cupti-records FILE, or both", param_hint="-o")
        if cupti_records is not None:
            if len(inputs) != 1:
                raise typer.BadParameter(
                    f"takes one report, {len(inputs)} given (one records file per report)", param_hint="--cupti-records"
                )
            with handle_errors():
                from chakra.converters.cupti.records import export_cupti_records

                count = export_cupti_records(one_input("nsys", inputs[0]), cupti_records)
                info(f"wrote {cupti_records}: {count:,} CUPTI records", quiet or as_json)
            if output is None:
                return
        if wants_dask(workers, scheduler):  # one Dask task per report
            options = {"per": per.value, "gaps": gaps, "copy_engine_order": engine}
            run_batch("nsys", inputs, output, workers=workers, scheduler=scheduler, options=options, quiet=quiet,
                      json_out=as_json)  # fmt: skip
            return
        with handle_errors():
            inputs = expand_inputs("nsys", inputs, note=lambda line: info(line, quiet or as_json))[0]
            result = run_with_progress(
                lambda cb: convert(inputs, output, per=per.value, gaps=gaps, copy_engine_order=engine, progress=cb),
                quiet or as_json,
            )
            print_summary(result, quiet, as_json)

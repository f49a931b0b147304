"""`chakra convert nsys`: options, progress, a summary table (or --json), warnings."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Callable, Optional

import typer

from chakra.cli_common import (
    JsonOption,
    QuietOption,
    SchedulerOption,
    WorkersOption,
    console,
    handle_errors,
    info,
    make_progress,
    print_json,
    warn,
)
from chakra.converters.result import ConversionResult


class Per(str, Enum):
    device = "device"
    process = "process"


# Options shared by `convert nsys` and `convert cupti` (same task graph, same switches).
PerOption = typer.Option(Per.device, "--per", help="One rank per GPU (device) or per process (process).")
GapsOption = typer.Option(True, "--gaps/--no-gaps", help="Keep the CPU time between API calls as gap nodes.")
EngineOption = typer.Option(
    True, "--copy-engine-order/--no-copy-engine-order", help="Order host<->device copies per copy engine."
)


def add_cli(app: typer.Typer) -> None:
    @app.command("nsys")
    def convert_nsys(
        inputs: list[Path] = typer.Argument(..., help="Nsight Systems SQLite exports (nsys export --type sqlite)."),
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
        from chakra.converters.nsys import convert
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

                count = export_cupti_records(inputs[0], cupti_records)
                info(f"wrote {cupti_records}: {count:,} CUPTI records", quiet or as_json)
            if output is None:
                return
        if wants_dask(workers, scheduler):  # one Dask task per report
            options = {"per": per.value, "gaps": gaps, "copy_engine_order": engine}
            run_batch("nsys", inputs, output, workers=workers, scheduler=scheduler, options=options, quiet=quiet,
                      json_out=as_json)  # fmt: skip
            return
        with handle_errors():
            result = run_with_progress(
                lambda cb: convert(inputs, output, per=per.value, gaps=gaps, copy_engine_order=engine, progress=cb),
                quiet or as_json,
            )
            report(result, quiet, as_json)


def run_with_progress(fn: Callable, quiet: bool):
    """Run fn(progress_callback) with a spinner counting rows on stderr."""
    with make_progress(quiet) as progress:
        task: Optional[int] = None

        def cb(name: str, rows: int) -> None:
            nonlocal task
            if task is None:
                task = progress.add_task(f"converting {Path(name).name}", total=None)
            progress.update(task, completed=rows)

        return fn(cb)


def report(result: ConversionResult, quiet: bool, as_json: bool) -> None:
    """Warnings, then a per-rank table (or the summary as JSON) of an nsys or CUPTI conversion."""
    for message in result.warnings:
        warn(message)
    if as_json:
        print_json(result.summary)
        return
    if quiet:
        return
    from rich.table import Table

    table = Table(title="converted", show_lines=False)
    for col in ("rank", "source", "of", "nodes", "API", "kernels", "copies", "memsets", "gaps", "coll", "span ms"):
        table.add_column(col, justify="left" if col in ("source", "of") else "right")
    for d in result.summary["ranks"]:
        t = d["tasks"]
        table.add_row(
            str(d["rank"]),
            Path(d["source"]).name,
            d["key"],
            str(d["nodes"]),
            str(t["runtime"] + t["driver"]),
            str(t["kernel"]),
            str(t["memcpy"]),
            str(t["memset"]),
            str(t["gap_nodes"]),
            str(d["collectives"]),
            f"{d['span_us'] / 1000:.3f}",
        )
    console.print(table)
    for d in result.summary["ranks"]:
        edges = ", ".join(f"{k} {v}" for k, v in d["edges"].items() if v)
        info(f"rank {d['rank']} dependencies: {edges or 'none'}", quiet)
    for path in result.paths:
        info(f"wrote {path}", quiet)

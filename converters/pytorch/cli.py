"""`chakra convert pytorch` and `chakra convert kineto` command definitions."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional

import typer

from chakra.cli_common import (
    JsonOption,
    MetadataNodeOption,
    QuietOption,
    SchedulerOption,
    WorkersOption,
    console,
    handle_errors,
    info,
    print_json,
    warn,
)
from chakra.converters.result import ConversionResult


def show(result: ConversionResult, quiet: bool, json_out: bool) -> None:
    """Per-rank summary tables (their warnings included), or the summaries as JSON."""
    if json_out:
        print_json(result.summary)
    elif not quiet:
        from .summary import render

        render(result.summary, console, warn)


def _named(fmt: str, args: list[Path], quiet: bool) -> list[Path]:
    """The files the arguments name (files, folders, quoted patterns, PREFIXes, `-`), as on Dask."""
    from chakra.converters import expand_inputs

    return expand_inputs(fmt, args, note=lambda line: info(line, quiet))[0]


def _dask(fmt: str, inputs: list[Path], output: Path, workers: Optional[int], scheduler: Optional[str],
          kineto: Optional[list[Path]], options: dict, quiet: bool, json_out: bool) -> bool:  # fmt: skip
    """Hand the job to Dask (one task per rank; inputs may be folders or globs) when asked to."""
    from chakra.distributed.cli import run_batch, wants_dask

    if not wants_dask(workers, scheduler):
        return False
    run_batch(fmt, inputs, output, workers=workers, scheduler=scheduler, kineto=kineto, options=options,
              quiet=quiet, json_out=json_out)  # fmt: skip
    return True


def add_cli(app: typer.Typer, convert: Callable[..., Any]) -> None:
    @app.command("pytorch")
    def pytorch_cmd(
        inputs: list[Path] = typer.Argument(
            ...,
            help="Execution Traces (.json, .json.gz, .tar.gz): files, folders, quoted globs, PREFIXes or -; "
            "Kineto files given here are recognised too.",
        ),  # fmt: skip
        kineto: Optional[list[Path]] = typer.Option(
            None,
            "--kineto",
            "-k",
            help="Kineto trace(s) of the same run (repeat the option per rank; a folder or glob names them all).",
        ),  # fmt: skip
        output: Path = typer.Option(
            ..., "--output", "-o", help="Output PREFIX: writes PREFIX.<rank>.et (+ PREFIX.comm_groups.json)."
        ),
        gap_min: float = typer.Option(1.0, "--gap-min-us", help="CPU gaps shorter than this fold into the op before."),
        no_io: bool = typer.Option(False, "--no-io", help="Do not copy op inputs/outputs (smaller, faster)."),
        jobs: int = typer.Option(0, "--jobs", "-j", help="Parallel processes for several ranks (0 = auto)."),
        workers: Optional[int] = WorkersOption,
        scheduler: Optional[str] = SchedulerOption,
        metadata_node: bool = MetadataNodeOption,
        step_time: Optional[str] = typer.Option(
            None,
            "--step-time",
            help="The untraced step time (e.g. 27.8ms, from your training logs): the profiler's "
            "cost is fitted to it. Default: a chakra.record manifest beside the inputs, else estimated from the trace.",
        ),  # fmt: skip
        profiled: bool = typer.Option(
            False, "--profiled", help="Keep the profiled (recorded) host times instead of removing the profiler's cost."
        ),
        quiet: bool = QuietOption,
        json_out: bool = JsonOption,
    ) -> None:
        """Convert PyTorch Execution Traces (+ Kineto) to Chakra, one PREFIX.<rank>.et per rank.

        Files are paired by rank (Kineto distributedInfo, else the number in the file name), and
        ranks convert in parallel. Example:

          chakra convert pytorch et.0.json et.1.json -k kineto.0.json -k kineto.1.json -o out/ddp

        The profiler slows every host operator down, so host-side times lose the profiler's cost
        (GPU kernels keep their measured times): fitted to the untraced step time when it is
        known (--step-time, or the manifest chakra.record.Recorder writes beside the traces),
        estimated from the trace otherwise; the summary says which. --profiled keeps the
        recorded times (each changed node also keeps them in its profiled_dur_us attribute):

          chakra convert pytorch out/run/et.0.json.gz -k out/run/kineto.0.json.gz -o run --step-time 27.8ms

        The official linked host + device files (chakra_trace_link's "ET+", older et_plus files)
        are read alone, one per rank: chakra convert pytorch linked.0.json linked.1.json -o out/ddp

        INPUT may be files, a folder of a run (its ETs and Kineto traces are told apart by content
        and paired by rank: et.N.json + kineto.N.json, PARAM's dlrm_eg_N.json +
        workerN_step_*.pt.trace.json, rank-N.*.pt.trace.json, rank12/), a quoted glob
        ('traces/*.json'), a PREFIX (traces/et) or - (standard input); -k takes the same (see
        docs/inputs.md):

          chakra convert pytorch traces/ -o out/job

        With --workers N or --scheduler tcp://HOST:8786, every rank is a Dask task, on the same
        inputs:

          chakra convert pytorch traces/ --workers 8 -o out/job
        """
        step_ns = None
        if step_time is not None:
            from chakra.record.manifest import parse_step_time

            with handle_errors():
                step_ns = parse_step_time(step_time)
        options = {"gap_min_us": gap_min, "io": not no_io, "metadata_node": metadata_node,
                   "overhead": "keep" if profiled else "remove", "step_time_ns": step_ns}  # fmt: skip
        if _dask("pytorch", inputs, output, workers, scheduler, list(kineto or []), options, quiet, json_out):
            return
        with handle_errors():
            inputs, kineto = _named("pytorch", inputs, quiet or json_out), _named("kineto", kineto or [], True)
            result = convert(
                inputs, output, kineto=kineto, gap_min_us=gap_min, io=not no_io, jobs=jobs,
                metadata_node=metadata_node, profiled=profiled, step_time_ns=step_ns,
            )  # fmt: skip
            show(result, quiet, json_out)


def add_kineto_cli(app: typer.Typer, convert: Callable[..., Any]) -> None:
    @app.command("kineto")
    def kineto_cmd(
        inputs: list[Path] = typer.Argument(
            ..., help="Kineto (PyTorch profiler) traces, one per rank: files, folders, quoted globs, PREFIXes or -."
        ),
        output: Path = typer.Option(..., "--output", "-o", help="Output PREFIX: writes PREFIX.<rank>.et."),
        gap_min: float = typer.Option(1.0, "--gap-min-us", help="CPU gaps shorter than this fold into the op before."),
        jobs: int = typer.Option(0, "--jobs", "-j", help="Parallel processes for several ranks (0 = auto)."),
        workers: Optional[int] = WorkersOption,
        scheduler: Optional[str] = SchedulerOption,
        quiet: bool = QuietOption,
        json_out: bool = JsonOption,
    ) -> None:
        """Convert Kineto traces alone (no Execution Trace) to Chakra.

        Host ops come from cpu_op/user_annotation events, GPU work from kernels/memcpy/memset,
        collectives from NCCL kernels and record_param_comms args. Example:

          chakra convert kineto rank0.pt.trace.json.gz rank1.pt.trace.json.gz -o out/run
        """
        if _dask(
            "kineto", inputs, output, workers, scheduler, None, {"gap_min_us": gap_min, "io": False}, quiet, json_out
        ):
            return
        with handle_errors():
            inputs = _named("kineto", inputs, quiet or json_out)
            show(convert(inputs, output, gap_min_us=gap_min, jobs=jobs), quiet, json_out)

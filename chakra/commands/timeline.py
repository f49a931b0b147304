"""`chakra timeline LOG|PREFIX [-o OUT.json]`: Chrome/Perfetto trace JSON from a simulator log or a trace."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from chakra.cli_common import TRACES_HELP, JsonOption, QuietOption, err_console, handle_errors, info, print_json, warn


def timeline_cmd(
    inputs: list[str] = typer.Argument(
        ..., help="A simulator log (chakra CSV or ASTRA-sim output), or " + TRACES_HELP + " with start times."
    ),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Output JSON file (default: stdout)."),
    trace: Optional[list[str]] = typer.Option(
        None, "--trace", help="For a log: the simulated trace (PREFIX or files) to look up node types and sizes."
    ),
    flows: bool = typer.Option(False, "--flows", help="Draw dependency arrows (flow events)."),
    recorded: bool = typer.Option(
        True,
        "--recorded/--no-recorded",
        help="For a log with --trace that has start times: show each rank's recorded timeline under its simulated one.",
    ),
    quiet: bool = QuietOption,
    as_json: bool = JsonOption,
) -> None:
    """Write a timeline for https://ui.perfetto.dev or chrome://tracing.

    One process per NPU/rank. A trace that records host threads and GPU
    streams (converted PyTorch/Kineto, Nsight, CUPTI) gets one named track
    per thread and stream, host operators nested by call stack, arrows from
    each kernel's launching operator, and arrows between ranks for messages
    and collectives. Otherwise (and for simulator logs) threads 1, 2, 3 are
    the memory, compute and communication resources. Times are µs; node id,
    type and sizes are in each slice's args.

    Inputs: the simulator's log (issue|callback,npu,time_ns,node_id,name
    lines from `chakra simulate --log`), ASTRA-sim's stdout with workload
    trace lines, or Chakra traces whose nodes carry start times (a PREFIX
    means every PREFIX.<rank>.et).

    Examples:

      chakra timeline sim.csv --trace run/trace -o timeline.json

      chakra timeline astra_stdout.txt -o timeline.json

      chakra timeline run/trace --flows > timeline.json
    """
    with handle_errors():
        from chakra.errors import InputError
        from chakra.inputs import as_path
        from chakra.io import read_traces
        from chakra.simlog import looks_like_log
        from chakra.visualizers.timeline import timeline_from_log, timeline_from_traces

        first = as_path(inputs[0])  # `-`: what came in on standard input
        if first.is_file() and looks_like_log(first):
            if len(inputs) > 1:
                raise InputError("give one log file at a time (the log already holds every NPU)")
            traces = read_traces(trace) if trace else None
            result = timeline_from_log(first, output, traces=traces, flows=flows, recorded=recorded)
        else:
            if trace:
                raise InputError("--trace is for log inputs; the inputs here are traces already")
            result = timeline_from_traces(read_traces(inputs), output, flows=flows)
        for message in result.warnings:
            warn(message)
        if as_json:
            if output is None:
                err_console.print_json(data=result.summary())
            else:
                print_json(result.summary())
        elif output is not None:
            info(
                f"wrote {escape(str(output))}: {result.processes} processes, {result.complete_events} events"
                f"{f', {result.flow_events // 2} arrows' if result.flow_events else ''}, "
                f"span {result.span_us:,.3f} µs. Open it in https://ui.perfetto.dev or chrome://tracing",
                quiet,
            )


def register(app: typer.Typer) -> None:
    app.command("timeline")(timeline_cmd)

"""`chakra analyze PREFIX|LOG`: critical path, per-rank time breakdown, comm/compute overlap."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table

from chakra.cli_common import TRACES_HELP, JsonOption, QuietOption, console, handle_errors, info, print_json, warn


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.3f}"


def analyze_cmd(
    traces: list[str] = typer.Argument(..., help=TRACES_HELP + "; or one simulator --log file."),
    schedule: str = typer.Option(
        "auto", "--schedule", help="auto | simulate | recorded (start_time_micros) | asap (dependencies only)."
    ),
    network: Optional[Path] = typer.Option(None, "--network", "-n", help="Network config for the simulation."),
    system: Optional[Path] = typer.Option(None, "--system", "-s", help="System config for the simulation."),
    html: Optional[Path] = typer.Option(
        None, "--html", help="Also write an interactive, self-contained HTML report (breakdown, critical path)."
    ),
    json_out: bool = JsonOption,
    quiet: bool = QuietOption,
) -> None:
    """Where time goes, per rank: CPU-only / GPU-only / overlapped compute, exposed vs overlapped
    communication, idle; the critical path (dependency chain) and the schedule path (what really
    delayed the end) with the operator classes that dominate them; with several ranks, the
    stragglers (ranks that finish late or make the others wait) and why: compute or waiting.

    The schedule comes from the simulator by default (falling back to recorded timestamps, then to
    the dependency-only schedule, when the traces cannot be simulated). A simulator timeline log
    (`chakra simulate ... --log run.log`) gives finish/busy times and operator classes.

    Examples: [bold]chakra analyze out/ddp2[/]   [bold]chakra analyze out/ddp2 --schedule recorded --json[/]
    [bold]chakra analyze run.log[/]
    """
    from chakra import analysis
    from chakra.columns import open_traces
    from chakra.footprint import rank_footprints
    from chakra.inputs import as_path

    with handle_errors():
        if len(traces) == 1 and analysis.is_sim_log(first := as_path(traces[0])):
            report = analysis.analyze_log(analysis.read_sim_log(first))
            if json_out:
                print_json(report)
            else:
                _print_log(report)
            return
        # .et files stay on disk: each rank is read once into columns, the simulator reads its own
        loaded = open_traces(traces)
        ranks = analysis.read_ranks(loaded)
        times, source, note = analysis.schedule_ranks(loaded, ranks, schedule, network=network, system=system)
        if note:
            warn(note)
        info(f"schedule: {source}", quiet)
        report = analysis.analyze_ranks(ranks, times, source=source)
        report["timebase"] = _timebase(traces, source)
        del ranks, times
        memory = rank_footprints(loaded, top=5)
        if any(r["operators"] for r in memory["ranks"].values()):  # a trace that lists tensors (PyTorch)
            report["memory"] = memory
        if html is not None:
            from chakra.report.figures import analyze_sections
            from chakra.report.html import write_html

            subtitle = f"{len(loaded)} rank(s), {source} schedule; times: {report['timebase']['label']}"
            write_html(html, f"chakra analyze: {', '.join(traces)}", analyze_sections(report), subtitle=subtitle)
            info(f"wrote {html}", quiet)
        if json_out:
            print_json(report)
            return
        _print_report(report)
        console.print(f"times: {report['timebase']['label']}")
        if "stragglers" in report:
            _print_stragglers(report["stragglers"])


def _timebase(traces: list[str], source: str) -> dict[str, Any]:
    """Which run the breakdown's times describe (chakra.sim.steps.timebase), for a recorded schedule
    the profiled run's own timestamps."""
    from chakra.errors import ChakraError
    from chakra.io import expand_trace_args
    from chakra.sim.steps import overhead_of_file, timebase

    try:
        pairs = expand_trace_args(traces)
        rec = overhead_of_file(pairs[0][1]) if pairs else None
    except (ChakraError, OSError):
        rec = None
    tb = timebase(rec)
    if rec is not None and source.startswith("recorded"):
        tb = {**tb, "times": "profiled", "label": "the profiled run (recorded start times)"}
    return tb


def _print_report(report: dict[str, Any]) -> None:
    t = Table(title=f"Time breakdown per rank (ms, {report['schedule']} schedule)", title_justify="left")
    cols = ("rank", "step", "cpu only", "gpu only", "cpu+gpu", "comm", "exposed comm", "overlap %", "idle")
    for c in cols:
        t.add_column(c, justify="right")
    for rank, r in report["ranks"].items():
        b = r["breakdown"]
        ov = "-" if r["overlap_pct"] is None else f"{r['overlap_pct']:.1f}"
        t.add_row(
            str(rank),
            _ms(b["step"]),
            _ms(b["cpu_only"]),
            _ms(b["gpu_only"]),
            _ms(b["cpu_gpu_overlap"]),
            _ms(b["comm"]),
            _ms(b["exposed_comm"]),
            ov,
            _ms(b["idle"]),
        )
    console.print(t)
    for rank, r in report["ranks"].items():
        for key, title in (("critical_path", "critical path (dependencies)"), ("schedule_path", "schedule path")):
            p = r[key]
            length = p.get("length_ns", p["busy_ns"])
            tb = Table(
                title=f"rank {rank} {title}: {p['nodes']} nodes, {_ms(length)} ms; busy by resource: "
                + ", ".join(f"{k} {_ms(v)}" for k, v in p["by_resource"].items()),
                title_justify="left",
            )
            tb.add_column("operator class")
            tb.add_column("ms", justify="right")
            tb.add_column("share %", justify="right")
            for row in p["by_class"][:8]:
                tb.add_row(row["class"], _ms(row["ns"]), f"{100 * row['share']:.1f}")
            console.print(tb)
    if "memory" in report:
        _print_memory(report["memory"])


def _print_memory(memory: dict[str, Any]) -> None:
    from chakra.footprint import fmt_bytes

    t = Table(title="Peak live tensor bytes per rank (chakra memory for more)", title_justify="left")
    for c in ("rank", "device", "peak", "resident", "at (operator)"):
        t.add_column(c, justify="left" if c in ("device", "at (operator)") else "right")
    for rank, r in memory["ranks"].items():
        op = r["peak_op"]["name"] if r["peak_op"] else "-"
        t.add_row(str(rank), str(r["device"]), fmt_bytes(r["peak_bytes"]), fmt_bytes(r["resident_bytes"]), op)
    console.print(t)


def _print_stragglers(s: dict[str, Any]) -> None:
    """The ranks that finish late or hold the others up, against the median rank, and why."""
    med = s["median"]
    against = (
        f"the median rank: finish {_ms(med['finish_ns'])} ms, compute {_ms(med['compute_ns'])} ms, "
        f"waiting {_ms(med['wait_ns'])} ms"
    )
    if not s["stragglers"]:
        console.print(f"no straggler: every rank within {100 * s['threshold_share']:g}% of {against}")
        return
    t = Table(title=f"Stragglers (ms) against {against}", title_justify="left")
    for col in ("rank", "finish", "late by", "compute", "vs median", "waiting", "vs median", "cause"):
        t.add_column(col, justify="left" if col == "cause" else "right")
    for rank in s["stragglers"]:
        r = s["ranks"][rank]
        cause = (
            "compute: slow itself, the others wait for it"
            if r["cause"] == "compute"
            else "waiting on collectives/peers"
        )
        t.add_row(
            str(rank),
            _ms(r["finish_ns"]),
            f"{r['late_ns'] / 1e6:+,.3f}",
            _ms(r["compute_ns"]),
            f"{r['compute_excess_ns'] / 1e6:+,.3f}",
            _ms(r["wait_ns"]),
            f"{r['wait_excess_ns'] / 1e6:+,.3f}",
            cause,
        )
    t.caption = (
        f"a straggler finishes, or computes, more than {100 * s['threshold_share']:g}% of the median step "
        "beyond the median rank; waiting = exposed communication + idle"
    )
    console.print(t)


def _print_log(report: dict[str, Any]) -> None:
    t = Table(title="Simulated timeline log (ms)", title_justify="left")
    for c in ("rank", "nodes", "finish", "busy", "idle"):
        t.add_column(c, justify="right")
    for rank, r in report["ranks"].items():
        t.add_row(str(rank), f"{r['nodes']:,}", _ms(r["finish_ns"]), _ms(r["busy_ns"]), _ms(r["idle_ns"]))
    console.print(t)
    c = Table(title="Operator classes (all ranks)", title_justify="left")
    for col in ("class", "count", "total ms"):
        c.add_column(col, justify="left" if col == "class" else "right")
    for row in report["classes"]:
        c.add_row(row["class"], f"{row['count']:,}", _ms(row["total_ns"]))
    console.print(c)


def register(app: typer.Typer) -> None:
    app.command("analyze")(analyze_cmd)

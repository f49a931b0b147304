"""`chakra calibrate PREFIX`: fit the network and a compute scale to a recorded run's measured times."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table

from chakra.cli_common import TRACES_HELP, Congestion, JsonOption, QuietOption, console, handle_errors, info, print_json


def _pct(x: Optional[float]) -> str:
    return "" if x is None else f"{100 * x:+.1f}%"


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.3f}"


def calibrate_cmd(
    traces: list[str] = typer.Argument(..., help=TRACES_HELP + " of a converted real run."),
    network: Optional[Path] = typer.Option(
        None, "--network", "-n", help="Network to start from (its topology is kept; default: a Ring of all ranks)."
    ),
    system: Optional[Path] = typer.Option(None, "--system", "-s", help="System config (default: the bundled one)."),
    comm_group: Optional[Path] = typer.Option(
        None, "--comm-group", help="Comm-group JSON (default: PREFIX.comm_groups.json beside the traces)."
    ),
    congestion: Congestion = typer.Option(
        Congestion.aware, "--congestion", "--backend", help="Analytical backend to fit (aware | unaware)."
    ),
    output: Optional[str] = typer.Option(
        None,
        "--output",
        "-o",
        help="Output prefix: OUT.network.yml, OUT.system.json, OUT.calibration.json (default: PREFIX.calibrated).",
    ),  # fmt: skip
    report: Optional[Path] = typer.Option(None, "--html", "--report", help="Also write an HTML report with the plots."),
    json_out: bool = JsonOption,
    quiet: bool = QuietOption,
) -> None:
    """Fit each network dimension's bandwidth and latency to the recorded collective times, then one
    compute scale to the recorded step; print simulated vs measured per collective and per rank.

    A collective's measured time is the shortest of its members' recorded durations (the last to
    arrive waited for nobody); the measured step is the slowest rank's recorded span.

    Examples:

      [bold]chakra calibrate out/ddp4[/]   (writes out/ddp4.calibrated.network.yml, ...)

      [bold]chakra calibrate out/ddp4 -o fit/ddp4 --report fit.html --json[/]
    """
    from chakra.commgroups import groups_beside, read_comm_groups
    from chakra.inputs import output_stem
    from chakra.io import check_output_path, read_traces
    from chakra.sim.config import load_network, load_system
    from chakra.whatif.calibrate import calibrate, write_outputs

    with handle_errors():
        net = load_network(network) if network is not None else None
        sys_cfg = load_system(system) if system is not None else None
        groups = read_comm_groups(comm_group) if comm_group is not None else groups_beside(traces)
        out = output if output is not None else f"{output_stem(traces[0])}.calibrated"
        for path in [Path(f"{out}.{x}") for x in ("network.yml", "system.json", "calibration.json")] + [report]:
            if path is not None:
                check_output_path(path)  # before the fit, not after it
        loaded = read_traces(traces)
        result = calibrate(loaded, net, sys_cfg, groups=groups, congestion=congestion.value,
                           progress=lambda msg: info(msg, quiet))  # fmt: skip
        paths = write_outputs(out, result, system)
        info("wrote " + ", ".join(str(p) for p in paths), quiet)
        if report is not None:
            from chakra.report.figures import calibration_sections
            from chakra.report.html import write_html

            write_html(report, f"chakra calibrate: {', '.join(traces)}", calibration_sections(result),
                       subtitle=f"{result['ranks']} ranks, congestion-{result['congestion']}")  # fmt: skip
            info(f"wrote {report}", quiet)
        if json_out:
            print_json(result)
        else:
            _print(result)


def _print(r: dict[str, Any]) -> None:
    net = r["network"]
    t = Table(title="fitted network", title_justify="left")
    for c in ("dim", "topology", "NPUs", "bandwidth GB/s", "latency ns", "was"):
        t.add_column(c, justify="right")
    for d, topo in enumerate(net["topology"]):
        was = f"{net['before']['bandwidth_GBps'][d]:g} GB/s, {net['before']['latency_ns'][d]:g} ns"
        if d not in net["fitted_dimensions"]:
            was = "not fitted: no collective crosses it"
        t.add_row(str(d), topo, str(net["npus_count"][d]), f"{net['bandwidth_GBps'][d]:.4g}",
                  f"{net['latency_ns'][d]:,.0f}", was)  # fmt: skip
    console.print(t)
    c = Table(title="collectives: simulated vs measured (ms)", title_justify="left")
    for col in ("collective", "bytes", "measured", "before", "error", "after", "error"):
        c.add_column(col, justify="left" if col == "collective" else "right")
    rows = r["collectives"]
    for x in rows[:40]:
        c.add_row(x["collective"], f"{x['bytes']:,}", _ms(x["measured_ns"]), _ms(x["before_ns"]),
                  _pct(x["error_before"]), _ms(x["after_ns"]), _pct(x["error_after"]))  # fmt: skip
    e = r["collective_error"]
    c.caption = (
        f"{len(rows)} collectives{' (first 40 shown; --json for all)' if len(rows) > 40 else ''}; median |error| "
        f"{100 * e['median_before']:.1f}% before, {100 * e['median_after']:.1f}% after"
    )
    console.print(c)
    s = Table(title="step: simulated vs measured (ms)", title_justify="left")
    for col in ("rank", "measured", "before", "error", "after", "error"):
        s.add_column(col, justify="right")
    for x in r["per_rank"]:
        s.add_row(str(x["rank"]), _ms(x["measured_ns"]), _ms(x["before_ns"]), _pct(x["error_before"]),
                  _ms(x["after_ns"]), _pct(x["error_after"]))  # fmt: skip
    st = r["step"]
    s.add_row("job", _ms(st["measured_ns"]), _ms(st["before_ns"]), _pct(st["error_before"]), _ms(st["after_ns"]),
              _pct(st["error_after"]), style="bold")  # fmt: skip
    s.caption = f"compute durations x{r['compute_scale']:.4g}; measured step = {r['measured_step']}"
    console.print(s)


def register(app: typer.Typer) -> None:
    app.command("calibrate")(calibrate_cmd)

"""`chakra interpolate PREFIX --scale F | --samples S --model EXPR -o OUT`: BigSim-style duration rewriting."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from chakra.cli_common import TRACES_HELP, JsonOption, QuietOption, console, handle_errors, info, print_json, warn
from chakra.errors import InputError


class Which(str, Enum):
    compute = "compute"
    all = "all"


def interpolate_cmd(
    traces: Optional[list[str]] = typer.Argument(
        None, help=TRACES_HELP + " to rewrite (omit to only fit and report the model)."
    ),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Output PREFIX (writes PREFIX.<rank>.et)."),
    scale: float = typer.Option(
        1.0, "--scale", help="Default factor for every node without a fitted model (BigSim's time_dilation_factor)."
    ),
    samples: Optional[Path] = typer.Option(
        None, "--samples", help="Timing samples: TRACEBIGSIM lines, a CSV (name, params..., duration) or a trace."
    ),
    model: Optional[str] = typer.Option(
        None, "--model", help="Model linear in c0, c1...: e.g. 'c0 + c1*p1 + c2*p1^2 + c3*p2' or 'c0 + c1*bytes'."
    ),
    match: Optional[str] = typer.Option(None, "--match", help="Only fit sample names matching this regex."),
    nodes: Which = typer.Option(Which.compute, "--nodes", help="Which nodes to rewrite: compute (COMP nodes) | all."),
    json_out: bool = JsonOption,
    quiet: bool = QuietOption,
) -> None:
    """Rewrite node durations as BigSim's interpolation tool does: from a least-squares model of
    duration over parameters, fitted per name to timing samples, and by a constant factor for every
    node without a model. Reports each fit's coefficients, R² and χ² (durations in µs).

    A node uses the model of its name (or operator class) with parameters from its attributes:
    [bold]flops[/] = num_ops, [bold]bytes[/] = tensor_size (also p1, p2), and any p1..pN attributes.

    Examples:
      [bold]chakra interpolate run --scale 0.5 -o fast[/]   (every compute node twice as fast)
      [bold]chakra interpolate --samples sample_namd_timings.txt --model 'c0 + c1*p2'[/]   (fit only)
      [bold]chakra interpolate run --samples other_machine --model 'c0 + c1*flops + c2*bytes' -o moved[/]
    """
    from chakra.commgroups import groups_beside, write_comm_groups
    from chakra.io import read_traces, write_rank_traces
    from chakra.whatif import interpolate as ip

    with handle_errors():
        if (samples is None) != (model is None):
            raise InputError("--samples and --model go together")
        if traces and output is None:
            raise InputError("rewriting traces needs -o/--output PREFIX")
        if not traces and samples is None:
            raise InputError("give traces to rewrite, or --samples and --model to fit")
        fits: dict = {}
        if samples is not None and model is not None:
            m = ip.Model(model)
            groups = ip.load_samples(samples)
            fits = ip.fit_all(groups, m, match=match)
            if not fits:
                raise InputError(f"{samples}: no sample group has the parameters {m.params} the model uses")
            for f in fits.values():
                if f.rank < len(f.coefs):
                    warn(f"{f.name}: the samples determine only {f.rank} of {len(f.coefs)} coefficients")
        result: dict = {"fits": [f.to_json() for f in fits.values()], "scale": scale}
        if traces:
            loaded = read_traces(traces)
            rep = ip.rewrite(loaded, fits, scale=scale, what=nodes.value)
            paths = write_rank_traces(output, loaded)
            write_comm_groups(output, groups_beside(traces))  # the groups travel with the traces
            result["rewrite"] = {
                "modelled": rep.modelled,
                "scaled": rep.scaled,
                "untouched": rep.untouched,
                "by_model": rep.by_name,
                "outputs": [str(p) for p in paths],
            }
        if json_out:
            print_json(result)
            return
        if fits:
            t = Table(title=f"Least-squares fits of {model} (durations in µs)", title_justify="left")
            for col in ("name", "samples", "coefficients", "R²", "χ²", "χ²/dof"):
                t.add_column(col, justify="left" if col in ("name", "coefficients") else "right")
            for f in fits.values():
                j = f.to_json()
                t.add_row(
                    f.name,
                    f"{f.n:,}",
                    "  ".join(f"{k}={v:.6g}" for k, v in f.coefs.items()),
                    "-" if f.r2 is None else f"{f.r2:.4f}",
                    f"{f.chi2:.6g}",
                    "-" if j["reduced_chi2"] is None else f"{j['reduced_chi2']:.6g}",
                )
            console.print(t)
        if traces:
            r = result["rewrite"]
            info(
                f"{r['modelled']:,} nodes from a model, {r['scaled']:,} scaled by {scale:g}, "
                f"{r['untouched']:,} left alone; wrote {len(r['outputs'])} file(s) to {output}.<rank>.et",
                quiet,
            )


def register(app: typer.Typer) -> None:
    app.command("interpolate")(interpolate_cmd)

"""`chakra diff A B`: per operator class, count and total time of two traces or two simulation logs."""

from __future__ import annotations

import typer
from rich.table import Table

from chakra.cli_common import TRACES_HELP, JsonOption, QuietOption, console, handle_errors, print_json


def _load(arg: str) -> tuple[str, dict]:
    from chakra import analysis
    from chakra.inputs import as_path
    from chakra.io import read_traces

    if analysis.is_sim_log(path := as_path(arg)):
        return "log", analysis.classes_of_log(analysis.read_sim_log(path))
    return "trace", analysis.classes_of_traces(read_traces([arg]))


def diff_cmd(
    a: str = typer.Argument(..., help="Baseline: " + TRACES_HELP + "; or a simulator --log file."),
    b: str = typer.Argument(..., help="Other side: the same kinds of input."),
    top: int = typer.Option(25, "--top", help="Rows to show (largest |delta| first); 0 = all."),
    json_out: bool = JsonOption,
    quiet: bool = QuietOption,
) -> None:
    """Compare two traces (recorded durations, summed over ranks) or two simulation logs (simulated
    durations) per operator class: count, total time and the change B - A.

    Examples: [bold]chakra diff out/base out/amp[/]   [bold]chakra diff base.log whatif.log --json[/]
    """
    from chakra.analysis import diff_classes

    with handle_errors():
        kind_a, ca = _load(a)
        kind_b, cb = _load(b)
        rows = diff_classes(ca, cb)
        tot_a = sum(s.total_ns for s in ca.values())
        tot_b = sum(s.total_ns for s in cb.values())
        summary = {
            "a": a,
            "b": b,
            "kinds": [kind_a, kind_b],
            "total_a_ns": tot_a,
            "total_b_ns": tot_b,
            "delta_ns": tot_b - tot_a,
            "count_a": sum(s.count for s in ca.values()),
            "count_b": sum(s.count for s in cb.values()),
        }
        if json_out:
            print_json({"summary": summary, "classes": rows, "units": "ns"})
            return
        t = Table(title=f"A = {a}, B = {b} (µs; delta = B - A)", title_justify="left")
        t.caption = "total: the durations of the class's nodes added up over every rank (work, not a step time)"
        for col in ("operator class", "count A", "count B", "total A", "total B", "delta", "delta %"):
            t.add_column(col, justify="left" if col == "operator class" else "right")
        for r in rows[: top or None]:
            pct = "-" if r["delta_pct"] is None else f"{r['delta_pct']:+.1f}"
            t.add_row(
                r["class"],
                f"{r['count_a']:,}",
                f"{r['count_b']:,}",
                f"{r['total_a_ns'] / 1e3:,.1f}",
                f"{r['total_b_ns'] / 1e3:,.1f}",
                f"{r['delta_ns'] / 1e3:+,.1f}",
                pct,
            )
        console.print(t)
        console.print(
            f"durations summed over every node and rank: A {tot_a / 1e3:,.1f} µs in {summary['count_a']:,} nodes, "
            f"B {tot_b / 1e3:,.1f} µs in "
            f"{summary['count_b']:,} nodes, delta {summary['delta_ns'] / 1e3:+,.1f} µs; {len(rows)} classes"
        )


def register(app: typer.Typer) -> None:
    app.command("diff")(diff_cmd)

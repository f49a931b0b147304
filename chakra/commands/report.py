"""`chakra report RESULTS -o report.html`: one self-contained interactive page of sweep results."""

from __future__ import annotations

from pathlib import Path

import typer

from chakra.cli_common import QuietOption, handle_errors, info


def report_cmd(
    results: Path = typer.Argument(..., help="RESULTS of `chakra sweep` (RESULTS.parquet, or the .parquet file)."),
    output: Path = typer.Option(..., "--output", "-o", help="HTML file to write (plotly.js embedded: works offline)."),
    title: str = typer.Option("", "--title", help="Page title (default: from RESULTS)."),
    quiet: bool = QuietOption,
) -> None:
    """Plot a sweep: step time against each swept parameter, the per-rank breakdown (compute,
    exposed communication, idle) of the fastest and slowest points, baseline vs what-if, the best
    points and the failed ones. One HTML file with interactive plots; no network needed to view it.

    Example: [bold]chakra report out/gpt_sweep -o out/gpt_sweep.html[/]
    """
    from chakra.distributed.sweep import read_results, results_paths
    from chakra.errors import InputError
    from chakra.report.figures import sweep_sections
    from chakra.report.html import write_html

    with handle_errors():
        parquet, _ = results_paths(results)
        rows = read_results(results)
        if not rows:
            raise InputError(f"{parquet}: no such results table (run chakra sweep ... -o {results} first)")
        points = len({r["point_id"] for r in rows})
        write_html(output, title or f"chakra sweep: {parquet.name}", sweep_sections(rows),
                   subtitle=f"{points} point(s) from {parquet}")  # fmt: skip
        info(f"wrote {output}", quiet)


def register(app: typer.Typer) -> None:
    app.command("report")(report_cmd)

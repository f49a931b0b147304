"""`chakra report RESULTS -o report.html`: one self-contained interactive page of sweep results."""

from __future__ import annotations

from pathlib import Path

import typer

from chakra.cli_common import QuietOption, handle_errors, info


def report_cmd(
    results: Path = typer.Argument(..., help="RESULTS of `chakra sweep` (RESULTS.parquet, or the .parquet file)."),
    output: Path = typer.Option(..., "--output", "-o", help="HTML file to write (plotly.js embedded: works offline)."),
    title: str = typer.Option("", "--title", help="Page title (default: from RESULTS)."),
    critical_path: bool = typer.Option(
        True,
        "--critical-path/--no-critical-path",
        help="Re-simulate the fastest and slowest points to show their critical paths (needs the traces).",
    ),
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
        sections = sweep_sections(rows)
        if critical_path:
            sections.insert(2, _critical_paths(rows))
        write_html(output, title or f"chakra sweep: {parquet.name}", sections,
                   subtitle=f"{points} point(s) from {parquet}")  # fmt: skip
        info(f"wrote {output}", quiet)


def _critical_paths(rows: list[dict]):
    """The critical path of the fastest and the slowest point (or why it cannot be shown)."""
    import json

    from chakra.distributed.sweep import critical_path_of
    from chakra.errors import ChakraError
    from chakra.report.figures import critical_path_figure
    from chakra.report.html import Section

    ok = [r for r in rows if r.get("scope") == "overall" and r.get("status") == "ok" and r.get("config")]
    figs, notes = [], []
    if ok:
        fastest = min(ok, key=lambda r: r["finish_ns"])
        slowest = max(ok, key=lambda r: r["finish_ns"])
        for what, row in (("fastest", fastest), ("slowest", slowest))[: 1 if fastest is slowest else 2]:
            try:
                rank, cp = critical_path_of(json.loads(row["config"]))
            except (ChakraError, OSError) as exc:
                notes.append(f"{what} point {row['point_id']}: not available ({exc})")
                continue
            figs.append(critical_path_figure(f"{what} point {row['point_id']}, slowest rank {rank}", cp))
    note = "The dependency chain that sets the step time, by operator class. " + " ".join(notes)
    return Section("Critical path: top operators", note.strip(), figs)


def register(app: typer.Typer) -> None:
    app.command("report")(report_cmd)

"""`chakra validate PREFIX|FILE...`: structural checks per rank and agreement across ranks."""

from __future__ import annotations

import typer
from rich.table import Table

from chakra.cli_common import JsonOption, QuietOption, console, handle_errors, load_traces, print_json
from chakra.commgroups import groups_beside
from chakra.validate import ERROR, validate_traces


def validate(
    traces: list[str] = typer.Argument(..., help="Trace files or PREFIXes (PREFIX = every PREFIX.<rank>.et)."),
    no_cross_rank: bool = typer.Option(False, "--no-cross-rank", help="Only check each rank on its own."),
    json_out: bool = JsonOption,
    quiet: bool = QuietOption,
) -> None:
    """Check that traces are replayable: unique ids, existing dependencies, no cycles, comm nodes with
    the attributes simulators read (in the protobuf arm they read), and across ranks: the same
    collective sequence on every member of a process group and a receive for every send.

    Exit code 1 when any error is found (warnings alone pass).

    Example: [bold]chakra validate out/ddp2[/]
    """
    with handle_errors():
        loaded = load_traces(traces, quiet)
        report = validate_traces(loaded, cross_rank=not no_cross_rank, groups=groups_beside(traces))
        if json_out:
            print_json(report.to_json())
        else:
            if report.findings:
                table = Table(title="Findings (first 20 of each kind)", title_justify="left")
                for col in ("severity", "check", "rank", "node", "message"):
                    table.add_column(col)
                for f in report.findings:
                    style = "red" if f.severity == ERROR else "yellow"
                    table.add_row(
                        f"[{style}]{f.severity}[/]",
                        f.code,
                        "-" if f.rank is None else str(f.rank),
                        "-" if f.node_id is None else str(f.node_id),
                        f.message,
                    )
                console.print(table)
            verdict = "[bold green]OK[/]" if report.ok else "[bold red]FAILED[/]"
            console.print(
                f"{verdict}: {len(loaded)} rank(s), {report.nodes:,} nodes, "
                f"{report.error_count:,} error(s), {report.warning_count:,} warning(s)"
            )
        if not report.ok:
            raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("validate")(validate)

"""`chakra export astra-sim PREFIX -o OUT`: a variant of any trace that the real ASTRA-sim runs to the end."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from chakra.cli_common import (
    TRACES_HELP,
    Congestion,
    JsonOption,
    MissingDeps,
    QuietOption,
    console,
    handle_errors,
    info,
    load_traces,
    print_json,
)

app = typer.Typer(
    name="export",
    help="Write traces for other tools. See docs/astra-sim-export.md.",
    no_args_is_help=True,
    rich_markup_mode="rich",
)


@app.command("astra-sim")
def astrasim_cmd(
    traces: list[str] = typer.Argument(..., help=TRACES_HELP + "."),
    output: Path = typer.Option(
        ...,
        "--output",
        "-o",
        help="Output PREFIX: OUT.<rank>.et, OUT.comm_groups.json, OUT.{network.yml,system.json,memory.json}.",
    ),
    unsupported: str = typer.Option(
        "rewrite",
        "--unsupported",
        help="Collectives ASTRA-sim cannot run: rewrite (a runnable one moving the same bytes) or compute "
        "(a compute node of the recorded duration).",
    ),
    broadcast: str = typer.Option(
        "network", "--broadcast", help="network: rewrite to ALL_GATHER; replay: keep (ASTRA-sim replays its duration)."
    ),
    missing_deps: MissingDeps = typer.Option(
        MissingDeps.error,
        "--missing-deps",
        help="A dependency on a node id absent from the trace: error, or drop the edge.",
    ),
    comm_group: Optional[Path] = typer.Option(
        None, "--comm-group", help="Comm-group JSON of the input (default: PREFIX.comm_groups.json beside it)."
    ),
    backend: Congestion = typer.Option(
        Congestion.aware,
        "--backend",
        "--congestion",
        help="ASTRA-sim binary: aware (1-D networks) | unaware.",
    ),
    network: Optional[Path] = typer.Option(
        None, "--network", "-n", help="Your network YAML (checked for this rank count and backend, then copied)."
    ),
    system: Optional[Path] = typer.Option(None, "--system", "-s", help="Your system JSON (default: the bundled one)."),
    memory: Optional[Path] = typer.Option(
        None, "--memory", "-m", help="Your remote-memory JSON (default: PER_NPU_MEMORY_EXPANSION at local-mem-bw)."
    ),
    json_out: bool = JsonOption,
    quiet: bool = QuietOption,
) -> None:
    """Write a variant of the traces that ASTRA-sim 2.x runs to the end on every rank, its config
    files, and the command line that runs it.

    METADATA nodes are dropped (groups go to OUT.comm_groups.json), collectives ASTRA-sim does not
    implement are rewritten to ones moving the same bytes (or to compute nodes), members' sizes are
    made to agree, and more: see docs/astra-sim-export.md. `chakra validate --for astra-sim` lists
    the same findings without writing anything.

    Example: [bold]chakra export astra-sim out/ddp2 -o out/ddp2_astra[/]
    """
    with handle_errors():
        from chakra.commgroups import groups_beside, read_comm_groups
        from chakra.export.astrasim import export_astrasim

        loaded = load_traces(traces, quiet)
        groups = read_comm_groups(comm_group) if comm_group is not None else groups_beside(traces)
        result = export_astrasim(
            loaded,
            output,
            file_groups=groups,
            unsupported=unsupported,
            broadcast=broadcast,
            missing_deps=missing_deps.value,
            backend=backend.value,
            network=network,
            system=system,
            memory=memory,
        )
        summary = result.summary()
        if json_out:
            print_json(summary)
            return
        from rich.table import Table

        table = Table(title=f"exported for ASTRA-sim: {summary['ranks']} rank(s)", show_header=False)
        if not summary["changes"]:
            table.add_row("changes", "none: the traces ran as they were")
        for what, count in summary["changes"].items():
            table.add_row(what, f"{count:,}")
        if summary["padded_rank"]:
            table.add_row("idle rank added", "1 (ASTRA-sim needs two NPUs)")
        table.add_row("traces", f"{output}.0.et .. {output}.{summary['ranks'] - 1}.et")
        for key in ("comm_groups", "network", "system", "memory"):
            if summary[key]:
                table.add_row(key.replace("_", " "), summary[key])
        console.print(table)
        from rich.markup import escape

        from chakra.export.astrasim import finding_line

        for finding in summary["not_fixed"]:  # one line per kind, with the ranks it touches
            info(f"[yellow]not fixed[/]: {escape(finding_line(finding))}", quiet)
        console.print("run it with:", style="bold")
        console.print(summary["command"], markup=False, highlight=False, soft_wrap=True)
        info(f"same files in chakra simulate: {summary['simulate_command']}", quiet)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="export")

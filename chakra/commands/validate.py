"""`chakra validate PREFIX|FILE...`: structural checks per rank and agreement across ranks."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.table import Table

from chakra.cli_common import (
    TRACES_HELP,
    Congestion,
    JsonOption,
    QuietOption,
    console,
    handle_errors,
    load_traces,
    print_json,
)
from chakra.errors import InputError


def validate(
    traces: list[str] = typer.Argument(..., help=TRACES_HELP + "."),
    no_cross_rank: bool = typer.Option(False, "--no-cross-rank", help="Only check each rank on its own."),
    target: Optional[str] = typer.Option(
        None,
        "--for",
        help="astra-sim: list, node by node, what the real ASTRA-sim 2.x rejects or silently stops on "
        "(and what `chakra export astra-sim` does about it).",
    ),
    comm_group: Optional[Path] = typer.Option(
        None, "--comm-group", help="Comm-group JSON (default: PREFIX.comm_groups.json beside the traces)."
    ),
    backend: Optional[Congestion] = typer.Option(
        None,
        "--backend",
        "--congestion",
        help="With --for astra-sim: the binary it will run on, aware | unaware (default: either).",
    ),
    network: Optional[Path] = typer.Option(
        None, "--network", "-n", help="With --for astra-sim: the network YAML it will run on (default: export's)."
    ),
    system: Optional[Path] = typer.Option(
        None, "--system", "-s", help="With --for astra-sim: the system JSON it will run on (default: the bundled one)."
    ),
    memory: Optional[Path] = typer.Option(
        None,
        "--memory",
        "-m",
        help="With --for astra-sim: the remote-memory JSON it will run on (default: export's, PER_NPU).",
    ),
    algorithm: Optional[str] = typer.Option(
        None,
        "--algorithm",
        help="Check PREFIX as a custom collective algorithm (ASTRA-sim's *-implementation-custom files) of this "
        "collective: all-reduce, all-gather, reduce-scatter, all-to-all, or auto (as its metadata says): every "
        "receive has its send, no deadlock, and (chunks named) every rank ends with the data it must hold.",
    ),
    json_out: bool = JsonOption,
    quiet: bool = QuietOption,
) -> None:
    """Check that traces are replayable: unique ids, existing dependencies, no cycles, comm nodes with
    the attributes simulators read (in the protobuf arm they read), and across ranks: the same
    collective sequence on every member of a process group and a receive for every send.

    Exit code 1 when any error is found (warnings alone pass). With --for astra-sim: exit code 1
    when ASTRA-sim would abort, throw or leave a rank unfinished on any node.

    Examples: [bold]chakra validate out/ddp2[/]    [bold]chakra validate --for astra-sim out/ddp2[/]
    """
    # imported here, so that `validate --help` stays fast
    from chakra.commgroups import groups_beside, read_comm_groups
    from chakra.validate import ERROR, validate_traces

    with handle_errors():
        if algorithm is not None:
            _algorithm(traces, algorithm, json_out)
            return
        if target is not None and target != "astra-sim":
            raise InputError(f"--for takes astra-sim, not {target!r}")
        loaded = load_traces(traces, quiet, stream=target is None)
        groups = read_comm_groups(comm_group) if comm_group is not None else groups_beside(traces)
        if target == "astra-sim":
            _for_astrasim(loaded, groups, json_out, backend.value if backend else None, network, system, memory)
            return
        report = validate_traces(loaded, cross_rank=not no_cross_rank, groups=groups)
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


def _algorithm(traces: list[str], collective: str, json_out: bool) -> None:
    from chakra.collective_algorithm import COLLECTIVES, check, load

    if len(traces) != 1:
        raise InputError("--algorithm takes one PREFIX (the algorithm's PREFIX.<rank>.et files)")
    if collective != "auto" and collective not in COLLECTIVES:
        raise InputError(f"--algorithm {collective!r}: use {', '.join(COLLECTIVES)} or auto")
    alg = load(traces[0])
    report = check(alg, None if collective == "auto" else collective)
    if json_out:
        print_json(
            {
                "ok": report.ok,
                "ranks": alg.size,
                "collective": collective if collective != "auto" else alg.collective,
                "messages": alg.messages(),
                "problems": report.problems,
                "notes": report.notes,
            }
        )
    else:
        for msg in report.problems:
            console.print(f"[red]error[/] {escape(msg)}")
        for msg in report.notes:
            console.print(f"[yellow]note[/] {escape(msg)}")
        verdict = "[bold green]OK[/]" if report.ok else "[bold red]FAILED[/]"
        console.print(
            f"{verdict}: {alg.size} rank(s), {alg.messages():,} messages, {len(report.problems)} problem(s)"
            + (" (no deadlock; every rank ends with its data)" if report.ok and not report.notes else "")
        )
    if not report.ok:
        raise typer.Exit(1)


def _for_astrasim(
    loaded: list,
    groups: dict,
    json_out: bool,
    backend: Optional[str],
    network: Optional[Path],
    system: Optional[Path],
    memory: Optional[Path],
) -> None:
    from chakra.export.astrasim import plan
    from chakra.sim.config import load_memory, load_network, load_system

    net = load_network(network) if network is not None else None
    sysc = load_system(system) if system is not None else None
    mem = load_memory(memory) if memory is not None else None
    p = plan(loaded, groups, network=net, system=sysc, backend=backend, memory=mem)
    issues, errors = p.issues, p.errors
    if json_out:
        print_json({"target": "astra-sim", "ok": not errors, "findings": [i.to_json() for i in issues]})
    else:
        if issues:
            table = Table(title="What ASTRA-sim 2.x would reject or stop on", title_justify="left")
            for col in ("severity", "rank", "node", "name", "check", "reason", "chakra export astra-sim"):
                table.add_column(col, overflow="fold")
            for i in issues:
                style = "red" if i.severity == "error" else "yellow"
                table.add_row(
                    f"[{style}]{i.severity}[/]",
                    "-" if i.rank is None else str(i.rank),
                    "-" if i.node_id is None else str(i.node_id),
                    i.name,
                    i.code,
                    i.reason,
                    i.fix or "[red]cannot fix[/]",
                )
            console.print(table)
        verdict = "[bold green]OK[/]" if not errors else "[bold red]FAILED[/]"
        console.print(
            f"{verdict} for ASTRA-sim: {len(loaded)} rank(s), {len(errors):,} error(s), "
            f"{len(issues) - len(errors):,} warning(s)"
            + ("; `chakra export astra-sim` writes a variant that runs" if issues and not p.blocking else "")
        )
    if errors:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("validate")(validate)

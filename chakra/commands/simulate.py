"""`chakra simulate PREFIX --network NET.yml --system SYS.json`: the reference simulator."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table

from chakra.cli_common import (
    CommMode,
    Congestion,
    JsonOption,
    MissingDeps,
    QuietOption,
    console,
    handle_errors,
    info,
    make_progress,
    print_json,
    warn,
)
from chakra.errors import ChakraError, ConfigError, excerpt
from chakra.files import create_temp, remove_stale_temps, write_error


def simulate_cmd(
    traces: list[str] = typer.Argument(..., help="PREFIX (every PREFIX.<rank>.et) or trace files, one per rank."),
    network: Optional[Path] = typer.Option(
        None,
        "--network",
        "-n",
        help="ASTRA-sim analytical network YAML (default: what export astra-sim writes: a Ring of all ranks, "
        "FullyConnected for 2, 50 GB/s, 500 ns).",
    ),
    system: Optional[Path] = typer.Option(
        None, "--system", "-s", help="ASTRA-sim system JSON (default: bundled copy of ASTRA-sim's regression config)."
    ),
    memory: Optional[Path] = typer.Option(None, "--memory", "-m", help="ASTRA-sim remote memory JSON."),
    comm_group: Optional[Path] = typer.Option(
        None,
        "--comm-group",
        help='ASTRA-sim comm-group JSON: {"1": [0, 1, 2, 3], ...} (pg_name "1" -> ranks). '
        "Default: PREFIX.comm_groups.json beside the traces, if any.",
    ),
    congestion: Congestion = typer.Option(Congestion.aware, "--congestion", help="Analytical backend."),
    comm: CommMode = typer.Option(
        CommMode.model, "--comm", help="model: network model; replay: recorded duration_micros."
    ),
    corrected: bool = typer.Option(
        False, "--corrected", help="Use the corrected model instead of ASTRA-sim's known quirks (see docs)."
    ),
    astra_sim_breakdown: bool = typer.Option(
        False,
        "--astra-sim-breakdown",
        help="exposed comm as ASTRA-sim prints it (finish - sum of GPU compute) instead of the overlap-aware one.",
    ),
    rendezvous: bool = typer.Option(
        False,
        "--rendezvous-protocol",
        help="Rendezvous protocol: an 8 KiB handshake before every message (ASTRA-sim's option of that name).",
    ),
    injection_scale: Optional[float] = typer.Option(
        None, "--injection-scale", help="Multiply endpoint-delay (ASTRA-sim's --injection-scale)."
    ),
    num_queues_per_dim: int = typer.Option(
        1, "--num-queues-per-dim", help="Queues per network dimension (ASTRA-sim's option of that name)."
    ),
    comm_scale: float = typer.Option(
        1.0, "--comm-scale", help="ASTRA-sim's --comm-scale: accepted, unused (as in ASTRA-sim 2.x)."
    ),
    policy: str = typer.Option(
        "id",
        "--policy",
        help="Scheduling policy: id (smallest ready id, ASTRA-sim) or a name from chakra.sim.policies.",
    ),
    slots: Optional[str] = typer.Option(
        None, "--slots", help="Ops in flight per rank and class, e.g. cpu=1,gpu=1,comm=2 (0 = unlimited)."
    ),
    log: Optional[Path] = typer.Option(None, "--log", help="Write the timeline log (issue/callback CSV lines)."),
    timeline: Optional[Path] = typer.Option(
        None, "--timeline", help="Write a Chrome/Perfetto trace JSON of the simulated run."
    ),
    missing_deps: MissingDeps = typer.Option(
        MissingDeps.error,
        "--missing-deps",
        help="A dependency on a node id absent from the trace: error, or drop the edge (official converter output).",
    ),
    json_out: bool = JsonOption,
    quiet: bool = QuietOption,
) -> None:
    """Simulate one training step of every rank on ASTRA-sim's analytical network model.

    Times are integer ns. Reads ASTRA-sim's own config files, so existing ones work unchanged;
    the 1 MiB all-reduce regression case gives 117,780 ns on every rank, as ASTRA-sim.

    Examples:

      [bold]chakra simulate all_reduce --network network_cfg.yml --system system_cfg.json[/]

      [bold]chakra simulate out/ddp2 --comm replay --json[/]   (replay recorded comm times)

      [bold]chakra simulate out/ddp2 --log run.csv --timeline run.json[/]
    """
    from chakra.sim import SimOptions, simulate

    with handle_errors():
        from chakra.files import STDIN
        from chakra.sim.config import load_network, load_system

        # A config on standard input can be read once: load it here for the simulation and the
        # ASTRA-sim checks alike.
        if network is not None and str(network) == STDIN:
            network = load_network(network)
        if system is not None and str(system) == STDIN:
            system = load_system(system)
        log_path = log
        tmp_log = None
        if timeline is not None and log_path is None:
            # Beside the timeline, under a name a later run can prove stale (chakra.files).
            from chakra.io import check_output_path

            check_output_path(timeline)
            remove_stale_temps(timeline)
            try:
                fd, log_path = create_temp(timeline)
            except OSError as exc:
                raise write_error(timeline, exc) from None
            os.close(fd)
            tmp_log = log_path
        try:
            with make_progress(quiet) as bar:
                task = bar.add_task("reading ranks", total=None)
                options = SimOptions(
                    comm_groups=comm_group,
                    congestion=congestion.value,
                    comm_mode=comm.value,
                    log_path=log_path,
                    compat=not corrected,
                    breakdown="astra-sim" if astra_sim_breakdown else "overlap",
                    rendezvous_protocol=rendezvous,
                    injection_scale=injection_scale,
                    num_queues_per_dim=num_queues_per_dim,
                    comm_scale=comm_scale,
                    policy=policy,
                    slots=_parse_slots(slots),
                    missing_deps=missing_deps.value,
                    progress=lambda done, total: bar.update(task, completed=done, total=total),
                )
                result = simulate(traces, network, system, memory, options=options)
            if timeline is not None:
                from chakra.visualizers.timeline import timeline_from_log

                try:
                    timeline_from_log(log_path, timeline)  # type: ignore[arg-type]
                except ChakraError as exc:  # name the log the user knows, never an internal file
                    if tmp_log is None:
                        raise
                    raise ChakraError(str(exc).replace(str(tmp_log), "the simulation's own log")) from None
                info(f"wrote {timeline}", quiet)
        finally:
            if tmp_log is not None:
                with contextlib.suppress(OSError):
                    tmp_log.unlink()
        if log is not None:
            info(f"wrote {log}", quiet)
        for line in result.warnings:
            warn(line)
        _astrasim_warnings(traces, comm_group, network, system, congestion, comm, quiet)
        if json_out:
            print_json(result.to_json())
            return
        s = result.settings
        table = Table(
            title=f"simulated: congestion-{s['congestion']}, comm {s['comm_mode']}, {s['compat']} model (times in ns)"
        )
        for col in ("rank", "finish", "compute", "comm", "exposed comm", "idle", "nodes"):
            table.add_column(col, justify="right")
        rows = sorted(result.ranks.items())
        if len(rows) > 32:  # many ranks: the fastest, the median and the slowest; --json has all
            by_finish = sorted(rows, key=lambda x: (x[1].finish_ns, x[0]))
            rows = [by_finish[0], by_finish[len(by_finish) // 2], by_finish[-1]]
            table.caption = f"{len(result.ranks)} ranks: fastest, median and slowest shown (--json for all)"
        table.caption = (table.caption + "; " if table.caption else "") + s["breakdown_definition"]
        for rank, r in rows:
            table.add_row(
                str(rank),
                f"{r.finish_ns:,}",
                f"{r.compute_ns:,}",
                f"{r.comm_ns:,}",
                f"{r.exposed_comm_ns:,}",
                f"{r.idle_ns:,}",
                f"{r.nodes:,}",
            )
        console.print(table)
        console.print(f"finish: [bold]{result.finish_ns:,} ns[/] ({result.finish_ns / 1e6:,.3f} ms)")
        if s.get("replayed_collectives"):
            info(
                f"{s['replayed_collectives']} collective(s) replayed from duration_micros (BROADCAST, types "
                "ASTRA-sim does not model, or no comm_type/comm_size)",
                quiet,
            )


def _parse_slots(text: Optional[str]) -> Optional[dict[str, int]]:
    if not text:
        return None
    out = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or not value.strip().isdigit():
            raise ConfigError(f"--slots: expected class=count pairs like cpu=1,gpu=1,comm=2, got {excerpt(part)}")
        out[key.strip()] = int(value)
    return out


def register(app: typer.Typer) -> None:
    app.command("simulate")(simulate_cmd)


def _astrasim_warnings(
    traces: Any, comm_group: Any, network: Any, system: Any, congestion: str, comm: str, quiet: bool
) -> None:
    """What the real ASTRA-sim would do on these files (the checks of `validate --for astra-sim`),
    less what the simulator itself already said (METADATA nodes, collectives ASTRA-sim does not
    implement, send/recv pairs of different sizes). In model mode, the mode that stands in for
    ASTRA-sim, one warning per kind; a replay of recorded durations answers another question, so
    there it is one note naming the kinds."""
    from chakra.export.astrasim import failure_kinds, simulate_warnings

    skip = {"metadata-node", "p2p-size-mismatch"}
    skip |= {f"unsupported-{t}" for t in ("reduce", "gather", "scatter", "barrier", "reduce_scatter_block")}
    if comm == "model":
        for line in simulate_warnings(traces, comm_group, network, system, congestion, frozenset(skip)):
            warn(line)
        return
    kinds = failure_kinds(traces, comm_group, network, system, congestion, frozenset(skip))
    if kinds:
        info(
            f"note: the real ASTRA-sim would not run these files as they are ({', '.join(kinds)}): "
            "`chakra validate --for astra-sim` says where; `chakra export astra-sim` writes a variant it runs",
            quiet,
        )

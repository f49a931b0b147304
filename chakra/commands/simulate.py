"""`chakra simulate PREFIX --network NET.yml --system SYS.json`: the reference simulator."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional

import typer

from chakra.cli_common import (
    TRACES_HELP,
    CommMode,
    Congestion,
    JsonOption,
    MissingDeps,
    QuietOption,
    handle_errors,
    info,
    make_progress,
    print_json,
    warn,
)
from chakra.errors import ChakraError, ConfigError, excerpt
from chakra.files import create_temp, remove_stale_temps, write_error

# The command's options, one line each in its signature below.
_Network = typer.Option(
    None,
    "--network",
    "-n",
    help="ASTRA-sim analytical network YAML (default: what export astra-sim writes: a Ring of all ranks, "
    "FullyConnected for 2, 50 GB/s, 500 ns).",
)
_System = typer.Option(
    None, "--system", "-s", help="ASTRA-sim system JSON (default: bundled copy of ASTRA-sim's regression config)."
)
_Memory = typer.Option(None, "--memory", "-m", help="ASTRA-sim remote memory JSON.")
_CommGroup = typer.Option(
    None,
    "--comm-group",
    help='ASTRA-sim comm-group JSON: {"1": [0, 1, 2, 3], ...} (pg_name "1" -> ranks). '
    "Default: PREFIX.comm_groups.json beside the traces, if any.",
)
# One option, two spellings: ASTRA-sim's own (--congestion) and the name export/validate use (--backend).
_Congestion = typer.Option(Congestion.aware, "--congestion", "--backend", help="Analytical backend (aware | unaware).")
_Comm = typer.Option(CommMode.model, "--comm", help="model: network model; replay: recorded duration_micros.")
_Corrected = typer.Option(
    False, "--corrected", help="Use the corrected model instead of ASTRA-sim's known quirks (see docs)."
)
_Breakdown = typer.Option(
    False,
    "--astra-sim-breakdown",
    help="exposed comm as ASTRA-sim prints it (finish - sum of GPU compute) instead of the overlap-aware one.",
)
_Rendezvous = typer.Option(
    False,
    "--rendezvous-protocol",
    help="Rendezvous protocol: an 8 KiB handshake before every message (ASTRA-sim's option of that name).",
)
_InjectionScale = typer.Option(
    None, "--injection-scale", help="Multiply endpoint-delay (ASTRA-sim's --injection-scale)."
)
_Queues = typer.Option(
    1, "--num-queues-per-dim", help="Queues per network dimension (ASTRA-sim's option of that name)."
)
_CommScale = typer.Option(1.0, "--comm-scale", help="ASTRA-sim's --comm-scale: accepted, unused (as in ASTRA-sim 2.x).")
_Policy = typer.Option(
    "id",
    "--policy",
    help="Scheduling policy: id (smallest ready id, ASTRA-sim) or a name from chakra.sim.policies.",
)
_Slots = typer.Option(
    None, "--slots", help="Ops in flight per rank and class, e.g. cpu=1,gpu=1,comm=2 (0 = unlimited)."
)
_Log = typer.Option(None, "--log", help="Write the timeline log (issue/callback CSV lines).")
_Timeline = typer.Option(None, "--timeline", help="Write a Chrome/Perfetto trace JSON of the simulated run.")
_Traffic = typer.Option(
    False,
    "--traffic",
    help="Record bytes, busy time and utilization per dimension and (aware backend) per link over time; "
    "in the tables, --json, the --log and the --html report.",
)
_TrafficBins = typer.Option(40, "--traffic-bins", help="Time bins of the --traffic figures.")
_NoFold = typer.Option(
    False,
    "--no-fold",
    help="Run every rank even where data-parallel copies of one slice of ranks fold into it "
    "(the answers are the same; for checking).",
)
_Html = typer.Option(None, "--html", help="Write a self-contained HTML report (per-rank times; traffic heat map).")
_MissingDeps = typer.Option(
    MissingDeps.error,
    "--missing-deps",
    help="A dependency on a node id absent from the trace: error, or drop the edge (official converter output).",
)


def simulate_cmd(
    traces: list[str] = typer.Argument(..., help=TRACES_HELP + "."),
    network: Optional[Path] = _Network,
    system: Optional[Path] = _System,
    memory: Optional[Path] = _Memory,
    comm_group: Optional[Path] = _CommGroup,
    congestion: Congestion = _Congestion,
    comm: CommMode = _Comm,
    corrected: bool = _Corrected,
    astra_sim_breakdown: bool = _Breakdown,
    rendezvous: bool = _Rendezvous,
    injection_scale: Optional[float] = _InjectionScale,
    num_queues_per_dim: int = _Queues,
    comm_scale: float = _CommScale,
    policy: str = _Policy,
    slots: Optional[str] = _Slots,
    log: Optional[Path] = _Log,
    timeline: Optional[Path] = _Timeline,
    missing_deps: MissingDeps = _MissingDeps,
    traffic: bool = _Traffic,
    traffic_bins: int = _TrafficBins,
    no_fold: bool = _NoFold,
    html: Optional[Path] = _Html,
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

      [bold]chakra simulate out/ddp2 --traffic --html run.html[/]   (where the bytes went)
    """
    from chakra.sim import SimOptions
    from chakra.sim.config import load_memory, load_network, load_system

    with handle_errors():
        # 1. the options, checked before any trace is read
        options = SimOptions(
            comm_groups=comm_group,
            congestion=congestion.value,
            comm_mode=comm.value,
            compat=not corrected,
            breakdown="astra-sim" if astra_sim_breakdown else "overlap",
            rendezvous_protocol=rendezvous,
            injection_scale=injection_scale,
            num_queues_per_dim=num_queues_per_dim,
            comm_scale=comm_scale,
            policy=policy,
            slots=_parse_slots(slots),
            missing_deps=missing_deps.value,
            traffic=traffic,
            traffic_bins=traffic_bins,
            fold=not no_fold,
        )
        # The configs are read once, here, for the simulation and the ASTRA-sim checks alike (a
        # config on standard input could not be read twice).
        network = load_network(network) if network is not None else None
        system = load_system(system) if system is not None else None
        memory = load_memory(memory) if memory is not None else None
        # What the real ASTRA-sim would do on these files, worked out before the run: where it hangs
        # on how the run goes (a memory rank ending on a send/recv), the run records node times.
        # The rank files are read once: the checks read them into `framed`, the simulation takes them.
        from chakra.sim.loading import FramedFiles

        framed = FramedFiles()
        astra = _astrasim_plan(traces, comm_group, network, system, memory, congestion.value, comm.value, framed)
        options = replace(options, framed=framed)
        recording = _recording(traces)
        # node times are kept for a converted PyTorch recording (its steps are reported) and for a
        # memory rank whose ASTRA-sim outcome depends on how it ends
        if recording is not None or (astra is not None and astra.p2p_ends):
            options = replace(options, record_nodes=True)
        # 2. the run, logged where asked (or to a temp file a timeline is drawn from)
        with _event_log(log, timeline) as log_path:
            result = _run(traces, network, system, memory, replace(options, log_path=log_path), quiet)
            if timeline is not None:
                _write_timeline(log_path, timeline, traces, own_log=log is None, quiet=quiet)
        if log is not None:
            info(f"wrote {log}", quiet)
        # 3. what came out: every warning on stderr and in --json's `warnings` (a script sees them too)
        if traffic and comm.value == "replay":
            result.warnings.append(
                "--traffic with --comm replay: replayed communication sends no messages, so no traffic is counted"
            )
        for line in _astrasim_warnings(astra, result):
            if line not in result.warnings:
                result.warnings.append(line)
        for line in result.warnings:
            if line.startswith("note: "):
                info(line, quiet)
            else:
                warn(line)
        step = _step(traces, result, recording)
        if html is not None:
            from chakra.report.figures import simulate_sections
            from chakra.report.html import write_html

            title = f"chakra simulate: {', '.join(traces)}"
            sim_json = result.to_json()
            if step is not None:
                sim_json["step"] = step
            write_html(html, title, simulate_sections(sim_json), subtitle=_subtitle(result))
            info(f"wrote {html}", quiet)
        if json_out:
            out = result.to_json()
            if step is not None:
                out["step"] = step
            print_json(out)
        else:
            _print_result(result, quiet)
            if step is not None:
                _print_step(step)
            if result.traffic is not None:
                _print_traffic(result.traffic)


def _recording(traces: list[str]) -> Optional[dict[str, Any]]:
    """The `profiler_overhead` record of a converted PyTorch recording (rank 0's metadata), else None."""
    from chakra.io import expand_trace_args
    from chakra.sim.steps import overhead_of_file

    try:
        pairs = expand_trace_args(traces)
        return overhead_of_file(pairs[0][1]) if pairs else None
    except (ChakraError, OSError):
        return None  # the simulation reports unreadable inputs itself


def _step(traces: list[str], result: Any, recording: Optional[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """The step (chakra.sim.steps, the definition whatif and analyze use) and which run it describes."""
    if recording is None or result.node_times is None:
        return None
    from chakra.io import expand_trace_args
    from chakra.sim.steps import step_ids_of_files, step_time_of_ids, timebase

    pairs = [(r if r is not None else i, p) for i, (r, p) in enumerate(expand_trace_args(traces))]
    st = step_time_of_ids(
        step_ids_of_files(pairs), {r: v.finish_ns for r, v in result.ranks.items()}, result.node_times
    )
    return {**st.as_dict(), **timebase(recording)}


def _print_step(step: dict[str, Any]) -> None:
    """Per-step time of the run the durations describe, with the profiled step beside it."""
    from chakra.cli_common import console

    line = f"step: [bold]{step['step_ns'] / 1e6:,.3f} ms[/] (median of {step['steps']} steps) — {step['label']}"
    console.print(line)
    if step["times"] == "untraced" and step.get("profiled_recorded_step_ns"):
        rec = step["profiled_recorded_step_ns"] / 1e6
        replayed = step.get("profiled_replay_step_ns")
        also = f", {replayed / 1e6:,.3f} ms replayed with the recorded durations" if replayed else ""
        console.print(
            f"profiled step: {rec:,.3f} ms recorded by the profiler{also} (convert with --profiled to replay it)"
        )


@contextlib.contextmanager
def _event_log(log: Optional[Path], timeline: Optional[Path]) -> Iterator[Optional[Path]]:
    """The log the simulator writes: `--log`, else (for `--timeline`) a temp file beside the timeline,
    under a name a later run can prove stale (chakra.files), removed afterwards."""
    if timeline is None or log is not None:
        yield log
        return
    from chakra.io import check_output_path

    check_output_path(timeline)
    remove_stale_temps(timeline)
    try:
        fd, tmp_log = create_temp(timeline)
    except OSError as exc:
        raise write_error(timeline, exc) from None
    os.close(fd)
    try:
        yield tmp_log
    finally:
        with contextlib.suppress(OSError):
            tmp_log.unlink()


def _run(traces: list[str], network, system, memory, options, quiet: bool):
    """`chakra.sim.simulate` under a progress bar (ranks read, then nodes simulated)."""
    from chakra.sim import simulate

    with make_progress(quiet) as bar:
        task = bar.add_task("reading ranks", total=None)
        options = replace(options, progress=lambda done, total: bar.update(task, completed=done, total=total))
        return simulate(traces, network, system, memory, options=options)


def _write_timeline(log_path: Path, timeline: Path, traces: list[str], own_log: bool, quiet: bool) -> None:
    """The run's timeline; a trace that records start times (a converted recording) also shows
    each rank's recorded timeline under its simulated one, as `chakra timeline LOG --trace` does."""
    from chakra.io import read_traces
    from chakra.visualizers.timeline import timeline_from_log

    try:
        timeline_from_log(log_path, timeline, traces=read_traces(traces))
    except ChakraError as exc:  # name the log the user knows, never an internal file
        if not own_log:
            raise
        raise ChakraError(str(exc).replace(str(log_path), "the simulation's own log")) from None
    info(f"wrote {timeline}", quiet)


def _print_result(result, quiet: bool) -> None:
    """Per-rank table (fastest, median and slowest beyond 32 ranks), finish time, replay note."""
    from rich.table import Table  # here: --json and -q print no table (nor make the console)

    from chakra.cli_common import console

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
    table.caption = (
        (table.caption + "; " if table.caption else "")
        + "compute, comm: time busy with them (CPU and GPU, or overlapping messages, counted once); "
        + s["breakdown_definition"]
    )
    for rank, r in rows:
        cells = (r.finish_ns, r.compute_ns, r.comm_ns, r.exposed_comm_ns, r.idle_ns, r.nodes)
        table.add_row(str(rank), *(f"{v:,}" for v in cells))
    console.print(table)
    # highlight=False: the figure is bold already, and rich's number highlighter costs start-up
    console.print(f"finish: [bold]{result.finish_ns:,} ns[/] ({result.finish_ns / 1e6:,.3f} ms)", highlight=False)
    if s.get("fold"):
        copies = s["fold"]["copies"]
        info(
            f"{len(result.ranks) // copies} of {len(result.ranks)} ranks simulated, each standing for its {copies} "
            "data-parallel copies (exact; --no-fold runs every rank)",
            quiet,
        )
    if s.get("replayed_collectives"):
        info(
            f"{s['replayed_collectives']} collective(s) replayed from duration_micros (BROADCAST, types "
            "ASTRA-sim does not model, or no comm_type/comm_size)",
            quiet,
        )


def _subtitle(result) -> str:
    s = result.settings
    return f"congestion-{s['congestion']}, comm {s['comm_mode']}, {s['compat']} model"


def _print_traffic(t: dict) -> None:
    """Bytes and utilization per dimension, then the heaviest links and what loaded them."""
    from rich.table import Table

    from chakra.cli_common import console

    table = Table(title=f"traffic per dimension ({t['backend']} backend, over {t['span_ns']:,} ns)")
    for col in ("dim", "topology", "NPUs", "messages", "bytes", "busy ns", "utilization", "peak bin"):
        table.add_column(col, justify="right")
    for d in t["dimensions"]:
        table.add_row(
            str(d["dim"]), d["topology"], str(d["npus"]), f"{d['messages']:,}", f"{d['bytes']:,}",
            f"{d['busy_ns']:,}", f"{100 * d['utilization']:.3g}%", f"{100 * max(d['bins'], default=0):.3g}%",
        )  # fmt: skip
    table.caption = (
        f"utilization: busy time over {'links' if t['backend'] == 'aware' else 'NPUs'} x time; "
        f"{t['bins']} bins of {t['bin_ns']:,.0f} ns"
    )
    console.print(table)
    if not t["links"]:
        return
    links = Table(title=f"heaviest links (of {len(t['links'])})")
    for col in ("link", "bytes", "busy ns", "utilization", "peak bin", "loaded by"):
        links.add_column(col, justify="left" if col in ("link", "loaded by") else "right")
    for r in t["links"][:8]:
        who = "\n".join(f"{c['name']}: {c['bytes']:,} B" for c in r["collectives"][:3])
        links.add_row(
            r["link"], f"{r['bytes']:,}", f"{r['busy_ns']:,}", f"{100 * r['utilization']:.3g}%",
            f"{100 * max(r['bins'], default=0):.3g}%", who,
        )  # fmt: skip
    console.print(links)


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


#: What the simulator itself already says (METADATA nodes, collectives ASTRA-sim does not implement,
#: send/recv pairs of different sizes): not said twice.
_SAID_BY_THE_SIMULATOR = frozenset(
    {"metadata-node", "p2p-size-mismatch"}
    | {f"unsupported-{t}" for t in ("reduce", "gather", "scatter", "barrier", "reduce_scatter_block")}
)


def _astrasim_plan(
    traces: Any,
    comm_group: Any,
    network: Any,
    system: Any,
    memory: Any,
    congestion: str,
    comm: str,
    framed: Any = None,
) -> Any:
    """The checks of `validate --for astra-sim` on these inputs (`chakra.export.astrasim.Plan`), in
    model mode only: a replay of recorded durations answers another question (what the recorded run
    did), so it says nothing about ASTRA-sim; the user did not ask."""
    if comm != "model":
        return None
    from chakra.export.astrasim import simulate_plan

    return simulate_plan(traces, comm_group, network, system, congestion, memory, framed)


def _astrasim_warnings(astra: Any, result: Any) -> list[str]:
    """What the real ASTRA-sim would do on these files, less what the simulator already said: one
    warning per kind, a memory rank that can end on a send/recv settled by the run's node times."""
    if astra is None:
        return []
    from chakra.export.astrasim import settle_memory_ends, warning_lines

    settle_memory_ends(astra, {r: v.finish_ns for r, v in result.ranks.items()}, result.node_times)
    return warning_lines(astra, _SAID_BY_THE_SIMULATOR)

"""`chakra stats PREFIX|FILE...`: node, collective and compute figures per rank."""

from __future__ import annotations

import typer
from rich.table import Table

from chakra.cli_common import (
    TRACES_HELP,
    JsonOption,
    QuietOption,
    console,
    handle_errors,
    load_traces,
    print_json,
    warn,
)
from chakra.stats import rank_stats, trace_stats
from chakra.trace import rank_set_problem
from chakra.units import fmt_bytes


def stats(
    traces: list[str] = typer.Argument(..., help=TRACES_HELP + "."),
    json_out: bool = JsonOption,
    quiet: bool = QuietOption,
) -> None:
    """Per-rank node counts by type, collectives (count, bytes), point-to-point, compute time and
    critical-path length (µs, by recorded durations), plus a cross-rank summary.

    Compute and comm are sums of node durations (CPU ops and GPU kernels apart): work done, which
    overlaps in time, so a GPU run's CPU + GPU compute exceeds its step. The critical path is the
    longest chain of dependencies of one rank, the nearest figure to a step time.

    Example: [bold]chakra stats out/ddp2[/]   or   [bold]chakra stats out/ddp2 --json | jq .summary[/]
    """
    with handle_errors():
        loaded = load_traces(traces, quiet, stream=True)
        problem = rank_set_problem([t.rank for t in loaded]) if len(loaded) > 1 else None
        if problem:  # figures per rank still make sense; simulate and export refuse the set
            warn(f"{problem}: not one job (validate reports an error, simulate refuses it)")
        result = trace_stats(loaded)
        if json_out:
            print_json(result)
            return
        _print_tables(result)


def _print_tables(result: dict) -> None:
    table = Table(title="Chakra trace statistics (times in µs)", title_justify="left")
    numeric = ("nodes", "CPU compute (sum)", "GPU compute (sum)", "comm (sum)", "critical path")
    for col in ("rank", "nodes", "by type", "collectives (count, bytes)", "p2p", *numeric[1:]):
        table.add_column(col, justify="right" if col in numeric else "left")
    table.caption = (
        "(sum): node durations added up (work done; CPU, GPU and comm overlap in time, so sums exceed the step); "
        "critical path: the rank's longest dependency chain"
    )
    for rank, r in result["ranks"].items():
        table.add_row(
            rank,
            f"{r['nodes']:,}",
            "\n".join(f"{k.removesuffix('_NODE')}: {v:,}" for k, v in r["by_type"].items()) or "-",
            "\n".join(f"{k}: {v['count']:,} ({fmt_bytes(v['bytes'])})" for k, v in r["collectives"].items()) or "-",
            "\n".join(f"{k}: {v['count']:,} ({fmt_bytes(v['bytes'])})" for k, v in r["p2p"].items()) or "-",
            f"{r['cpu_compute_us']:,}",
            f"{r['gpu_compute_us']:,}",
            f"{r['comm_us']:,}",
            "cycle!" if r["critical_path_us"] is None else f"{r['critical_path_us']:,.0f}",
        )
    console.print(table)
    s = result["summary"]
    console.print(
        f"{s['ranks']} rank(s), {s['nodes']:,} nodes; node durations summed over "
        f"{'every rank' if s['ranks'] > 1 else 'the rank'}: CPU compute {s['cpu_compute_us']:,} µs, "
        f"GPU compute {s['gpu_compute_us']:,} µs, comm {s['comm_us']:,} µs; "
        f"longest critical path (one rank) {s['max_critical_path_us']:,.0f} µs"
    )


__all__ = ["stats", "rank_stats"]


def register(app: typer.Typer) -> None:
    app.command("stats")(stats)

"""The per-rank conversion summary as rich tables (people) or plain dicts (`--json`).

Tables are results (stdout); the warnings under them go to stderr with every other warning."""

from __future__ import annotations

from typing import Any, Callable

from rich.console import Console
from rich.table import Table

from chakra.units import fmt_bytes


def _groups_line(s: dict[str, Any]) -> str:
    """Where the rank's process groups went: the comm-groups file, or why there is none."""
    groups = s.get("process_groups") or {}
    if s.get("comm_groups"):
        return f"{len(groups)} written to {s['comm_groups']}"
    if groups:
        return "only the default group (all ranks): no comm_groups.json needed"
    return "none recorded"


def overhead_line(o: dict[str, Any]) -> str:
    """What the conversion did about the profiler's cost, and the step it predicts when it knows."""
    recorded = o.get("profiled_step_ns") or 0
    prof = f"profiled step {recorded / 1e6:,.3f} ms (Kineto)" if recorded else "no ProfilerStep# marks"
    if o["mode"] == "kept":
        return f"kept (--profiled): {prof}"
    host = o.get("host_recorded_us") or 0
    share = f" ({100 * o['removed_us'] / host:.0f}% of the recorded host time)" if host else ""
    removed = f"{o['removed_us'] / 1e3:,.1f} ms of host time removed{share}"
    if o["mode"] == "measured":
        how = f"fitted to the measured step {o['measured_step_ns'] / 1e6:,.3f} ms ({o['measured_source']})"
        pred, replayed = o["predicted_step_ns"] / 1e6, o["replay_profiled_ns"] / 1e6
        notes = "".join(f"; {n}" for n in o.get("notes") or [])
        return f"removed, {how}: replay {replayed:,.3f} -> {pred:,.3f} ms/step; {removed}; {prof}{notes}"
    how = (
        "estimated from the trace alone (give --step-time or a chakra.record manifest to fit it: a trace does "
        "not hold the host's untraced speed, and where the host sets the step the estimate was off by -51% to "
        "+63% on H200 runs, docs/whatif-validation.md)"
    )
    return f"removed, {how}: {removed}; {prof}"


def render(summaries: list[dict[str, Any]], console: Console, warn: Callable[[str], None]) -> None:
    for s in summaries:
        title = f"rank {s['rank']}: {s.get('output', '')}"
        table = Table(title=title, title_justify="left", show_header=True, header_style="bold")
        table.add_column("what")
        table.add_column("value", overflow="fold")
        src = s.get("et") or "-"
        table.add_row("inputs", f"ET {src} ({s.get('schema') or 'no ET'})\nKineto {s.get('kineto') or '-'}")
        table.add_row("nodes", f"{s['nodes']:,}")
        for name, count in s["nodes_by_type"].items():
            table.add_row(f"  {name}", f"{count:,}")
        if "linked" in s:
            rate = f"{100 * s['link_rate']:.1f}%"
            table.add_row(
                "linked to Kineto", f"{s['linked']:,} of {s['et_ops_with_rf_id']:,} ET ops ({rate}) by {s['link_key']}"
            )
        if s.get("iterations_differ"):
            table.add_row("ET vs Kineto", "[bold]recorded over different iterations[/] (see the warnings)")
        if s.get("comm_kernels_matched_by_order"):
            table.add_row("NCCL kernels", f"{s['comm_kernels_matched_by_order']} matched to their calls by order")
        table.add_row("durations", s["durations"])
        if s.get("gap_nodes"):
            table.add_row("CPU gap nodes", f"{s['gap_nodes']:,} ({s['gap_us']:,} µs)")
        if s.get("queue_nodes"):
            table.add_row("queue-delay nodes", f"{s['queue_nodes']:,}")
        if s.get("gpu_ops"):
            table.add_row("GPU ops", f"{s['gpu_ops']:,} ({s.get('gpu_ops_without_launcher', 0)} without launcher)")
        for coll, v in s.get("collectives", {}).items():
            table.add_row(f"  comm {coll}", f"{v['count']} x, {fmt_bytes(v['bytes'])} total")
        for step, us in (s.get("profiler_steps_us") or {}).items():
            table.add_row(f"  {step}", f"{us:,} µs")
        table.add_row("process groups", _groups_line(s))
        if s.get("profiler_overhead"):
            table.add_row("profiler cost", overhead_line(s["profiler_overhead"]))
        for reason, count in s.get("dropped", {}).items():
            table.add_row("dropped", f"{count:,} {reason}")
        for name, count in (s.get("unknown") or {}).items():
            table.add_row("unknown -> compute", f"{count} x {name}")
        table.add_row("time", f"{s.get('seconds', 0)} s")
        console.print(table)
        for w in s.get("warnings", []):
            warn(f"rank {s['rank']}: {w}")

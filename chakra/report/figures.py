"""Figures for the HTML reports: sweep results, `chakra analyze` and `chakra whatif` reports."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from .html import Section, plotly

PARAM_PREFIXES = ("network.", "system.", "memory.", "simulate.", "whatif")
BREAKDOWN = (
    ("compute_ns", "compute", "#4C78A8"),
    ("exposed_comm_ns", "exposed communication", "#F58518"),
    ("idle_ns", "idle", "#BAB0AC"),
)
_MS = 1e6


def _layout(fig: Any, title: str, x: str, y: str, **kw: Any) -> Any:
    fig.update_layout(
        title=title,
        xaxis_title=x,
        yaxis_title=y,
        template="plotly_white",
        height=420,
        margin={"l": 60, "r": 20, "t": 50, "b": 60},
        **kw,
    )
    return fig


def swept_parameters(overall: Sequence[dict[str, Any]]) -> list[str]:
    """Parameter columns that take more than one value among the points."""
    names: list[str] = []
    for row in overall:
        names.extend(k for k in row if k.startswith(PARAM_PREFIXES) and k not in names)
    return [k for k in names if len({repr(r.get(k)) for r in overall}) > 1]


def _label(row: dict[str, Any], params: Sequence[str]) -> str:
    return ", ".join(f"{p.split('.', 1)[-1]}={row.get(p)}" for p in params)


def sweep_sections(rows: Sequence[dict[str, Any]]) -> list[Section]:
    go = plotly()
    overall = [r for r in rows if r.get("scope") == "overall" and r.get("status") == "ok"]
    failed = [r for r in rows if r.get("status") == "error"]
    params = swept_parameters(overall)
    sections: list[Section] = []
    if not overall:
        return [Section("No results", f"{len(failed)} point(s), all failed.", table=_errors(failed))]

    # Step time against each swept parameter; the other parameters tell the points apart on hover.
    figs = []
    for p in params:
        fig = go.Figure()
        groups: dict[Any, list[dict[str, Any]]] = defaultdict(list)
        for r in overall:
            groups[r.get(p)].append(r)
        numeric = all(isinstance(k, (int, float)) and not isinstance(k, bool) for k in groups)
        keys = sorted(groups, key=lambda k: (k is None, k if numeric else (str(k) != "none", str(k))))
        xs = [r.get(p) if numeric else str(r.get(p)) for k in keys for r in groups[k]]
        ys = [r["finish_ns"] / _MS for k in keys for r in groups[k]]
        text = [_label(r, [q for q in params if q != p]) for k in keys for r in groups[k]]
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="markers",
                name="points",
                text=text,
                hovertemplate="%{x}: %{y:.3f} ms<br>%{text}<extra></extra>",
                opacity=0.6,
            )
        )
        best = [min(r["finish_ns"] for r in groups[k]) / _MS for k in keys]
        fig.add_trace(
            go.Scatter(
                x=keys if numeric else [str(k) for k in keys], y=best, mode="lines+markers", name="best at this value"
            )
        )
        figs.append(_layout(fig, f"step time vs {p}", p, "step time (ms)", xaxis_type="log" if _spread(keys) else None))
    sections.append(
        Section(
            "Step time against each swept parameter",
            f"{len(overall)} point(s) simulated, {len(failed)} failed; step = slowest rank's finish.",
            figs,
        )
    )

    # Per-rank breakdown of the fastest and the slowest point.
    by_point: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if r.get("scope") == "rank" and r.get("status") == "ok":
            by_point[r["point_id"]].append(r)
    fastest = min(overall, key=lambda r: r["finish_ns"])
    slowest = max(overall, key=lambda r: r["finish_ns"])
    figs = []
    for what, row in (("fastest", fastest), ("slowest", slowest)):
        title = f"{what} point ({row['finish_ns'] / _MS:,.3f} ms): {_label(row, params)}"
        figs.append(rank_breakdown_figure(by_point.get(row["point_id"], []), title))
        if fastest is slowest:
            break
    sections.append(
        Section("Where each rank's time goes", "Stacked per rank: compute, exposed communication, idle.", figs)
    )

    wi = whatif_pairs(overall, params)
    if wi is not None:
        sections.append(wi)
    top = sorted(overall, key=lambda r: r["finish_ns"])[:10]
    header = ["step ms", *params, "point"]
    sections.append(
        Section(
            "Best points",
            table=(header, [[r["finish_ns"] / _MS, *(r.get(p) for p in params), r["point_id"]] for r in top]),
        )
    )
    if failed:
        sections.append(Section("Failed points", table=_errors(failed)))
    return sections


def _spread(keys: Sequence[Any]) -> bool:
    nums = [k for k in keys if isinstance(k, (int, float)) and not isinstance(k, bool) and k > 0]
    return len(nums) == len(keys) and len(nums) > 2 and max(nums) / min(nums) >= 16


def _errors(failed: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    return ["point", "error"], [[r["point_id"], r.get("error")] for r in failed[:50]]


def rank_breakdown_figure(ranks: Sequence[dict[str, Any]], title: str) -> Any:
    go = plotly()
    ranks = sorted(ranks, key=lambda r: r["rank"])
    fig = go.Figure()
    xs = [str(r["rank"]) for r in ranks]
    for key, name, color in BREAKDOWN:
        fig.add_trace(go.Bar(x=xs, y=[(r.get(key) or 0) / _MS for r in ranks], name=name, marker_color=color))
    return _layout(fig, title, "rank", "ms", barmode="stack")


def whatif_pairs(overall: Sequence[dict[str, Any]], params: Sequence[str]) -> Any:
    """Baseline (whatif=none) next to each recipe at the same other parameters."""
    if "whatif" not in params:
        return None
    go = plotly()
    others = [p for p in params if not p.startswith("whatif")]
    by_cfg: dict[str, dict[str, float]] = defaultdict(dict)
    for r in overall:
        by_cfg[_label(r, others) or "base"][str(r.get("whatif"))] = r["finish_ns"] / _MS
    cfgs = [c for c, v in by_cfg.items() if "none" in v][:40]
    recipes = sorted({k for c in cfgs for k in by_cfg[c]} - {"none"})
    if not cfgs or not recipes:
        return None
    fig = go.Figure()
    for name in ["none", *recipes]:
        label = "baseline" if name == "none" else name
        fig.add_trace(go.Bar(x=cfgs, y=[by_cfg[c].get(name) for c in cfgs], name=label))
    _layout(fig, "baseline vs what-if, per configuration", "configuration", "step time (ms)", barmode="group")
    return Section("Baseline vs what-if", "Each configuration simulated as is and with each recipe.", [fig])


# ----------------------------------------------------------------------------- analyze / whatif


_ANALYZE_PARTS = (
    ("cpu_only", "CPU only", "#72B7B2"),
    ("gpu_only", "GPU only", "#4C78A8"),
    ("cpu_gpu_overlap", "CPU+GPU overlapped", "#54A24B"),
    ("exposed_comm", "exposed communication", "#F58518"),
    ("mem", "memory", "#B279A2"),
    ("idle", "idle", "#BAB0AC"),
)


def analyze_sections(report: dict[str, Any], top: int = 12) -> list[Section]:
    go = plotly()
    ranks = report["ranks"]
    fig = go.Figure()
    xs = [str(r) for r in ranks]
    for key, name, color in _ANALYZE_PARTS:
        ys = [r["breakdown"].get(key, 0) / _MS for r in ranks.values()]
        if any(ys):
            fig.add_trace(go.Bar(x=xs, y=ys, name=name, marker_color=color))
    _layout(fig, f"time breakdown per rank ({report.get('schedule')} schedule)", "rank", "ms", barmode="stack")
    sections = [
        Section("Where each rank's time goes", "Stacked: compute by resource, exposed communication, idle.", [fig])
    ]
    slowest = sorted(ranks, key=lambda r: -ranks[r]["breakdown"]["step"])[:4]
    figs = [critical_path_figure(f"rank {r}", ranks[r]["critical_path"], top) for r in slowest]
    sections.append(Section("Critical path: top operators", "The dependency chain that sets the step time "
                            "(slowest ranks first), by operator class.", figs))  # fmt: skip
    if "memory" in report:
        sections.append(memory_section(report["memory"]))
    return sections


def memory_section(memory: dict[str, Any]) -> Section:
    """Live tensor bytes over time per rank (chakra.footprint), with the peaks as a table."""
    go = plotly()
    fig = go.Figure()
    for rank, r in memory["ranks"].items():
        pts = r["timeline"]
        if not pts:
            continue
        t0 = pts[0][0]
        fig.add_trace(go.Scatter(x=[(t - t0) / 1e3 for t, _ in pts], y=[b / 1e6 for _, b in pts], name=f"rank {rank}",
                                 mode="lines", line_shape="hv"))  # fmt: skip
    _layout(fig, "live tensor bytes per rank", "ms from the rank's first operator", "MB")
    rows = [[str(rank), r["device"], r["peak_bytes"] / 1e6, r["resident_bytes"] / 1e6,
             (r["peak_op"] or {}).get("name", "-")] for rank, r in memory["ranks"].items()]  # fmt: skip
    note = (
        "From the tensors each operator reads and writes: allocations first seen as an input (parameters, "
        "optimizer state) count all along, the others from first to last use. A lower bound of the allocator's figure."
    )
    return Section("Memory footprint", note, [fig], table=(["rank", "device", "peak MB", "resident MB", "at"], rows))


def critical_path_figure(who: str, cp: dict[str, Any], top: int = 12) -> Any:
    """Horizontal bars: the operator classes that take most of a critical path."""
    go = plotly()
    rows = cp["by_class"][:top][::-1]
    f = go.Figure(go.Bar(x=[x["ns"] / _MS for x in rows], y=[x["class"] for x in rows], orientation="h",
                         text=[f"{100 * x['share']:.1f}%" for x in rows], textposition="auto"))  # fmt: skip
    length = cp.get("length_ns", cp.get("busy_ns", 0))
    _layout(f, f"{who}: critical path {length / _MS:,.3f} ms, {cp['nodes']} nodes: top operators", "ms", "")
    f.update_layout(height=max(300, 28 * len(rows) + 120))
    return f


_WHATIF_ROWS = (
    ("cpu_only", "CPU only"),
    ("gpu_only", "GPU only"),
    ("cpu_gpu_overlap", "CPU+GPU overlapped"),
    ("exposed_comm", "exposed communication"),
    ("idle", "idle"),
)


def whatif_sections(report: dict[str, Any]) -> list[Section]:
    go = plotly()
    b, p = report["baseline"], report["predicted"]
    fig = go.Figure()
    cols = ["baseline", f"what-if: {report['recipe']}"]
    colors = {key: color for key, _, color in _ANALYZE_PARTS}
    for key, name in _WHATIF_ROWS:
        ys = [b["breakdown_per_step_ns"].get(key, 0) / _MS, p["breakdown_per_step_ns"].get(key, 0) / _MS]
        if any(ys):
            fig.add_trace(go.Bar(x=cols, y=ys, name=name, marker_color=colors.get(key)))
    _layout(fig, "per step, slowest rank: baseline vs what-if", "", "ms", barmode="stack")
    sp = report.get("speedup")
    note = f"predicted speedup {sp:.3f}x" if sp else "predicted step time is 0"
    if report.get("timebase"):
        note += f" (times: {report['timebase']['label']})"
    ys = [b["step_ns"] / _MS, p["step_ns"] / _MS]
    bar = go.Bar(x=cols, y=ys, marker_color=["#4C78A8", "#F58518"], text=[f"{y:,.3f}" for y in ys])
    step = go.Figure(bar)
    _layout(step, "step time", "", "ms")
    rows = [
        [name, b["breakdown_per_step_ns"].get(k, 0) / _MS, p["breakdown_per_step_ns"].get(k, 0) / _MS]
        for k, name in (("step", "step"), *_WHATIF_ROWS)
        if k in b["breakdown_per_step_ns"]
    ]
    sections = [
        Section(
            f"Baseline vs what-if ({report['recipe']})",
            note + "; " + "; ".join(report.get("notes") or []),
            [step, fig],
            table=(["ms per step", "baseline", "predicted"], rows),
        )
    ]
    if "memory" in report:  # a memory recipe: the peak per rank, before and after
        mem = report["memory"]["ranks"]
        xs = [f"rank {r}" for r in mem]
        peaks = go.Figure()
        for key, name, color in (("baseline_peak_bytes", "baseline", "#4C78A8"),
                                 ("predicted_peak_bytes", f"what-if: {report['recipe']}", "#F58518")):  # fmt: skip
            peaks.add_trace(go.Bar(x=xs, y=[v[key] / 1e6 for v in mem.values()], name=name, marker_color=color))
        _layout(peaks, "peak live tensor bytes per rank", "", "MB", barmode="group")
        rows = [[f"rank {r}", v["baseline_peak_bytes"] / 1e6, v["predicted_peak_bytes"] / 1e6] for r, v in mem.items()]
        sections.append(Section("Memory: peak per rank", "chakra memory's rules (docs/memory.md).", [peaks],
                                table=(["", "baseline MB", "predicted MB"], rows)))  # fmt: skip
    return sections


# ----------------------------------------------------------------------------- simulate --traffic


def simulate_sections(result: dict[str, Any], top_links: int = 32) -> list[Section]:
    """`chakra simulate --html`: the per-rank breakdown and, with --traffic, the traffic figures."""
    ranks = [{"rank": int(r), **v} for r, v in result["ranks"].items()]
    sections = [
        Section(
            "Where each rank's time goes",
            f"finish {result['finish_ns'] / _MS:,.3f} ms"
            + (
                f"; step {result['step']['step_ns'] / _MS:,.3f} ms, {result['step']['label']}"
                if result.get("step")
                else ""
            )
            + f"; {result['settings'].get('breakdown_definition', '')}",
            [rank_breakdown_figure(ranks, "simulated time per rank")],
        )
    ]
    traffic = result.get("traffic")
    if traffic:
        sections.extend(traffic_sections(traffic, top_links))
    return sections


def traffic_sections(t: dict[str, Any], top_links: int = 32) -> list[Section]:
    """Heat maps of utilization over time (links on the aware backend, else dimensions), bytes per
    dimension, and the heaviest links with the collectives that loaded them."""
    go = plotly()
    bin_ms = t["bin_ns"] / _MS
    xs = [round((i + 0.5) * bin_ms, 6) for i in range(t["bins"])]
    links = t["links"][:top_links]
    if links:
        rows, names = [r["bins"] for r in links], [r["link"] for r in links]
        what = f"utilization of the {len(links)} busiest links (of {len(t['links'])})"
    else:
        rows, names = (
            [d["bins"] for d in t["dimensions"]],
            [f"dim {d['dim']} ({d['topology']})" for d in t["dimensions"]],
        )
        what = "utilization per dimension (busy NPU-ns over NPUs x time)"
    hover = "%{y}<br>t=%{x:.3f} ms<br>utilization %{z:.4f}<extra></extra>"
    heat = go.Figure(go.Heatmap(z=rows, x=xs, y=names, colorscale="YlOrRd", zmin=0, colorbar={"title": "util."},
                                hovertemplate=hover))  # fmt: skip
    _layout(heat, f"{what}, {t['bins']} bins of {bin_ms:,.3f} ms", "time (ms)", "")
    heat.update_layout(height=max(320, 22 * len(names) + 140), yaxis={"autorange": "reversed"})
    dims = t["dimensions"]
    bars = go.Figure(go.Bar(x=[f"dim {d['dim']} ({d['topology']})" for d in dims], y=[d["bytes"] for d in dims],
                            text=[f"{100 * d['utilization']:.3g}%" for d in dims], textposition="auto"))  # fmt: skip
    _layout(bars, "bytes per dimension (label: utilization over the run)", "", "bytes")
    rows_t = []
    for r in t["links"][:8]:
        top = "; ".join(f"{c['name']}: {c['bytes']:,} B" for c in r["collectives"][:3])
        rows_t.append([r["link"], r["bytes"], r["busy_ns"], 100 * r["utilization"], top])
    note = f"{t['backend']} backend, span {t['span_ns'] / _MS:,.3f} ms. Utilization: busy time over " + (
        "the link's time."
        if t["backend"] == "aware"
        else "NPUs x time (the unaware backend never queues: >100% means congestion)."
    )
    table = (["link", "bytes", "busy ns", "utilization %", "top collectives"], rows_t) if rows_t else None
    return [Section("Traffic", note, [heat, bars], table=table)]


# ----------------------------------------------------------------------------- calibrate


def calibration_sections(r: dict[str, Any]) -> list[Section]:
    """Measured vs simulated per collective (before and after the fit) and per rank's step."""
    go = plotly()
    rows = r["collectives"]
    meas = [x["measured_ns"] / _MS for x in rows]
    scatter = go.Figure()
    for key, name, color in (("before_ns", "before", "#BAB0AC"), ("after_ns", "after", "#F58518")):
        ys = [x[key] / _MS for x in rows]
        names = [x["collective"] for x in rows]
        scatter.add_trace(go.Scatter(x=meas, y=ys, mode="markers", name=name, marker={"color": color, "size": 9},
                                     text=names))  # fmt: skip
    top = max(meas + [x["after_ns"] / _MS for x in rows], default=1.0)
    scatter.add_trace(go.Scatter(x=[0, top], y=[0, top], mode="lines", name="simulated = measured",
                                 line={"dash": "dot", "color": "#444"}))  # fmt: skip
    _layout(scatter, "collectives: simulated vs measured", "measured (ms)", "simulated (ms)")
    ranks = r["per_rank"]
    xs = [str(x["rank"]) for x in ranks] + ["job"]
    st = r["step"]
    step = go.Figure()
    for key, name, color in (("measured_ns", "measured", "#4C78A8"), ("before_ns", "before", "#BAB0AC"),
                             ("after_ns", "after", "#F58518")):  # fmt: skip
        step.add_trace(go.Bar(x=xs, y=[x[key] / _MS for x in ranks] + [st[key] / _MS], name=name, marker_color=color))
    _layout(step, "step per rank: measured, simulated before and after", "rank", "ms", barmode="group")
    net = r["network"]
    note = (
        f"fitted: bandwidth {', '.join(f'{b:.4g}' for b in net['bandwidth_GBps'])} GB/s, latency "
        f"{', '.join(f'{x:,.0f}' for x in net['latency_ns'])} ns, compute x{r['compute_scale']:.4g}; step error "
        f"{100 * st['error_before']:+.2f}% before, {100 * st['error_after']:+.2f}% after"
    )
    table = (
        ["collective", "bytes", "measured ms", "before ms", "after ms"],
        [
            [x["collective"], x["bytes"], x["measured_ns"] / _MS, x["before_ns"] / _MS, x["after_ns"] / _MS]
            for x in rows[:60]
        ],
    )
    return [Section("Calibration", note, [scatter, step], table=table)]

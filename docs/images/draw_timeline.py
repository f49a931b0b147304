"""Draw a window of a `chakra timeline` JSON as a PNG, for the figure in docs/visualizers.md.

Perfetto cannot run here (its UI is a web app and its trace processor a download), so the figure
is drawn from the JSON itself, the way Perfetto lays it out: one row per track of one process,
slices stacked by nesting depth, arrows for the flows. Graphviz places nothing: every box is
pinned (`neato -n2`), so the picture is exactly the times in the file.

    chakra timeline out/fp32 -o fp32.json
    python docs/images/draw_timeline.py fp32.json docs/images/timeline-gpu-step.png --start-ms 24.6 --ms 1.2
"""

from __future__ import annotations

import argparse
import json
import subprocess
from collections import defaultdict
from pathlib import Path

ROW_PT, LEFT_PT = 16.0, 170.0
COLOURS = {"cpu": "#cfe2f3", "gpu": "#b6d7a8", "coll": "#f9cb9c", "send": "#ea9999", "recv": "#d5a6bd"}
ARROWS = {"launch": "#3c78d8", "p2p": "#cc0000", "collective": "#cc0000"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("timeline")
    ap.add_argument("png")
    ap.add_argument("--pid", type=int, action="append", help="processes to draw (default: all)")
    ap.add_argument("--start-ms", type=float, required=True, help="window start, ms after the first slice")
    ap.add_argument("--ms", type=float, default=1.0, help="window length in ms")
    ap.add_argument("--width-pt", type=float, default=1400.0)
    args = ap.parse_args()
    events = json.loads(Path(args.timeline).read_text(encoding="utf-8"))["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    pids = set(args.pid) if args.pid else set(procs)
    tracks = {
        (e["pid"], e["tid"]): f"{procs[e['pid']]} · {e['args']['name']}" if len(pids) > 1 else e["args"]["name"]
        for e in events
        if e["ph"] == "M" and e["name"] == "thread_name"
    }
    for e in events:
        e["track"] = (e.get("pid"), e.get("tid"))
    xs = [e for e in events if e["ph"] == "X" and e["pid"] in pids]
    t0 = min(e["ts"] for e in xs) + args.start_ms * 1000
    t1 = t0 + args.ms * 1000
    scale = (args.width_pt - LEFT_PT) / (t1 - t0)
    shown = [e for e in xs if e["ts"] < t1 and e["ts"] + e["dur"] > t0]
    # depth of each slice on its track (the writer guarantees nesting)
    depth: dict[int, int] = {}
    rows_of: dict[tuple, int] = defaultdict(int)
    by_tid = defaultdict(list)
    for i, e in enumerate(shown):
        by_tid[e["track"]].append(i)
    for tid, idx in by_tid.items():
        idx.sort(key=lambda i: (shown[i]["ts"], -shown[i]["dur"]))
        stack: list[float] = []
        for i in idx:
            e = shown[i]
            while stack and stack[-1] <= e["ts"]:
                stack.pop()
            depth[i] = len(stack)
            rows_of[tid] = max(rows_of[tid], len(stack) + 1)
            stack.append(e["ts"] + e["dur"])
    top: dict[tuple, float] = {}
    y = 0.0
    out = [
        "digraph t { graph [splines=line, outputorder=edgesfirst, bgcolor=white]; node [shape=box, style=filled, "
        "fixedsize=true, fontname=Helvetica, fontsize=7, penwidth=0.4, margin=0]; edge [arrowsize=0.4];"
    ]
    for n, tid in enumerate(sorted(rows_of)):
        top[tid] = y
        name = tracks.get(tid, str(tid))
        h = rows_of[tid] * ROW_PT
        out.append(
            f'  lbl{n} [shape=plaintext, style="", fontsize=9, width={LEFT_PT / 72:.2f}, height={h / 72:.2f}, '
            f'label="{name}", pos="{LEFT_PT / 2:.1f},{-(y + h / 2):.1f}!"];'
        )
        y += h + 8
    pos: dict[int, tuple[float, float, float]] = {}
    for i, e in enumerate(shown):
        a, b = max(e["ts"], t0), min(e["ts"] + e["dur"], t1)
        x0, x1 = LEFT_PT + (a - t0) * scale, LEFT_PT + (b - t0) * scale
        yc = -(top[e["track"]] + depth[i] * ROW_PT + ROW_PT / 2)
        w = max(x1 - x0, 0.8)
        label = e["name"].split("(")[0].split("<")[0].split("::")[-1].replace('"', "'")[: int(w / 4)] if w > 14 else ""
        colour = COLOURS.get(e["cat"], "#e6e6e6")
        out.append(
            f'  s{i} [label="{label}", fillcolor="{colour}", width={w / 72:.3f}, height={(ROW_PT - 2) / 72:.3f}, '
            f'pos="{(x0 + x1) / 2:.1f},{yc:.1f}!"];'
        )
        pos[i] = (x0, yc, x1)

    def at(end: dict) -> int | None:
        """The deepest drawn slice of the flow end's track that holds its timestamp."""
        best = None
        for i in by_tid.get(end["track"], ()):
            e = shown[i]
            if e["ts"] <= end["ts"] <= e["ts"] + e["dur"] and (best is None or depth[i] > depth[best]):
                best = i
        return best

    flows: dict[tuple[str, int], dict[str, dict]] = defaultdict(dict)
    for e in events:
        if e["ph"] in "sf" and e["pid"] in pids and t0 <= e["ts"] <= t1:
            flows[(e["cat"], e["id"])][e["ph"]] = e
    for (cat, _), ends in flows.items():
        if "s" in ends and "f" in ends:
            a, b = at(ends["s"]), at(ends["f"])
            if a is not None and b is not None:
                out.append(f'  s{a} -> s{b} [color="{ARROWS.get(cat, "#666666")}", penwidth=0.6];')
    out.append("}")
    subprocess.run(["neato", "-n2", "-Tpng", "-Gdpi=110", "-o", args.png], input="\n".join(out).encode(), check=True)


if __name__ == "__main__":
    main()

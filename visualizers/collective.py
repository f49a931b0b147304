"""A custom collective algorithm drawn step by step (Graphviz DOT).

One row per step boundary, one column per rank: an arrow from rank s on row k to rank d on row
k+1 is a message of step k, labelled with the chunks it carries (when named) and its bytes; a
reduction on arrival is drawn bold. Steps come from the `step` attribute our writer adds, else
from the message's depth: the longest chain of dependencies and messages before it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Union

from chakra.collective_algorithm import (
    RECV,
    SEND,
    Algorithm,
    Report,
    global_order,
    match_messages,
    reduced_receives,
)
from chakra.errors import InputError
from chakra.io import atomic_output
from chakra.units import fmt_bytes
from chakra.visualizers.graph import render

FORMATS = ("svg", "pdf", "png", "dot")


def steps(alg: Algorithm) -> list[tuple[int, int, int, object]]:
    """(step, src, dst, send Op) of every message, by step."""
    report = Report()
    pairs = match_messages(alg, report)
    order = global_order(alg, report, pairs) if not report.problems else None
    if order is None:
        raise InputError(f"{alg.path}: cannot draw: {report.problems[0]}")
    inverse = {v: k for k, v in pairs.items()}
    ids = [{op.id: i for i, op in enumerate(ops)} for ops in alg.ranks]
    depth: dict[tuple[int, int], int] = {}
    out = []
    for r, i in order:
        op = alg.ranks[r][i]
        d = max((depth[(r, ids[r][p])] for p in op.deps), default=0)
        if op.kind == RECV and (r, i) in inverse:
            d = max(d, depth[inverse[(r, i)]] + 1)
        depth[(r, i)] = d
        if op.kind == SEND:
            out.append((op.step if op.step >= 0 else d, r, op.peer, op))
    out.sort(key=lambda x: (x[0], x[1], x[2]))
    return out


def dot_source(alg: Algorithm) -> str:
    msgs = steps(alg)
    p = alg.size
    rows = (max(s for s, *_ in msgs) + 2) if msgs else 1
    pairs = match_messages(alg, Report())
    reduced = reduced_receives(alg)
    title = f"{alg.name or 'algorithm'}: {alg.collective or 'collective'} on {p} ranks, {len(msgs)} messages"
    lines = [
        "digraph collective {",
        f'  label="{title}"; labelloc=t; fontname="Helvetica"; rankdir=TB; nodesep=0.5; ranksep=0.6;',
        '  node [shape=circle, fontname="Helvetica", fontsize=10, width=0.4, fixedsize=true];',
        '  edge [fontname="Helvetica", fontsize=8];',
    ]
    for k in range(rows):
        names = " ".join(f"s{k}r{r}" for r in range(p))
        lines.append(
            f'  {{ rank=same; step{k} [shape=plaintext, label="{"start" if k == 0 else f"after {k - 1}"}"]; {names} }}'
        )
        for r in range(p):
            lines.append(f'  s{k}r{r} [label="{r}"];')
        # ranks left to right in every row
        chain = " -> ".join([f"step{k}"] + [f"s{k}r{r}" for r in range(p)])
        lines.append(f"  {chain} [style=invis];")
    for k in range(rows - 1):
        lines.append(f"  step{k} -> step{k + 1} [style=invis];")
        for r in range(p):
            lines.append(f"  s{k}r{r} -> s{k + 1}r{r} [style=dotted, arrowhead=none, color=gray, weight=100];")
    index = [{op.id: i for i, op in enumerate(ops)} for ops in alg.ranks]
    for s, src, dst, op in msgs:
        label = fmt_bytes(op.size)
        if op.chunks:
            shown = ",".join(str(c) for c in op.chunks[:6]) + ("..." if len(op.chunks) > 6 else "")
            label = f"[{shown}] {label}"
        match = pairs.get((src, index[src][op.id]))
        bold = match is not None and (match[0], alg.ranks[match[0]][match[1]].id) in reduced
        style = ', penwidth=2, color="#c0392b"' if bold else ', color="#2c3e50"'
        lines.append(f'  s{s}r{src} -> s{s + 1}r{dst} [label="{label}", constraint=false{style}];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def draw(alg: Algorithm, output: Union[str, Path], fmt: str, timeout: float = 120.0) -> Path:
    if fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r} for a collective diagram (use {', '.join(FORMATS)})")
    source = dot_source(alg)
    if fmt == "dot":
        with atomic_output(output, "w") as f:
            f.write(source)
        return Path(output)
    return render(source, fmt, output, timeout)

"""Writing a graph view as Graphviz DOT text or GraphML, in pure Python (no Graphviz needed).

Labels are Graphviz HTML-like labels, so names are escaped as XML text (`<`, `>`, `&`, `"`);
in that form `|`, `{` and `}` are ordinary characters (they only mean something in `record`
shapes, which we never use). Tooltips and other quoted attributes escape `\\` and `"`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import IO, Callable

from chakra.schema.kinds import COMM_KINDS, CPU, GPU, INVALID, KINDS, META
from chakra.visualizers.kinds import STYLES
from chakra.visualizers.select import Box, View

_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_ARGS_RE = re.compile(r"\((?:[^()]|\([^()]*\))*\)")
_TEMPLATE_RE = re.compile(r"<(?:[^<>]|<[^<>]*>)*>")
LABEL_WIDTH = 44
# Long wrappers PyTorch puts in front of the interesting part of a name.
_ABBREVIATIONS = (("autograd::engine::evaluate_function: ", "autograd: "),)

EDGE_STYLE = {
    "data": 'color="#333333", arrowhead=normal',
    "ctrl": 'color="#8a8a8a", style=dashed, arrowhead=onormal',
    "peer": 'color="#cc0000", style=dotted, penwidth=1.3, constraint=false',
    "order": 'color="#b0b0b0", arrowhead=vee, arrowsize=0.4',
    "step": "style=invis, weight=50",
}
# Collective membership edges keep layout constraints so the instance diamond sits below its members.
HUB_EDGE_STYLE = 'color="#cc0000", style=dotted, penwidth=1.3, dir=none'
COLLAPSE_TEXT = {
    "op": "grouped by top-level operator",
    "annotation": "grouped by annotation",
    "prefix": "grouped by name prefix",
    "name": "grouped by repeated name",
    "adaptive": "grouped by top-level operator, busiest annotations folded",
    "overview": "overview",
}
OVERVIEW_TEXT = {
    "step": "one box per step and lane",
    "phase": "one box per phase run (forward, backward, optimizer) of each lane",
    "block": "phases cut into repeated blocks (layers)",
    "op": "one box per top-level operator",
    "node": "one box per node",
}


def xml_text(text: str) -> str:
    """Escape for XML text and attribute values (and drop characters XML cannot hold)."""
    text = _XML_BAD.sub("", text)
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def dot_string(text: str) -> str:
    """A DOT double-quoted string: backslashes and quotes escaped, newlines as \\n."""
    text = _XML_BAD.sub("", text).replace("\\", "\\\\").replace('"', '\\"')
    return '"' + text.replace("\r", "").replace("\n", "\\n") + '"'


#: A tooltip keeps this much of a name: graphviz refuses strings of megabytes.
TOOLTIP_CHARS = 1000


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _bold(text: str) -> str:
    """A bold HTML-label line; an empty name shows as (no name) (graphviz rejects an empty <B></B>)."""
    text = xml_text(text)
    return f"<B>{text}</B>" if text.strip() else "<I>(no name)</I>"


def shorten(name: str, width: int = LABEL_WIDTH) -> str:
    """A label-sized name: long C++ argument lists and template arguments become `(…)` / `<…>`."""
    for long, abbrev in _ABBREVIATIONS:
        if name.startswith(long):
            name = abbrev + name[len(long) :]
    if len(name) <= width:
        return name
    name = name[: width * 8]  # the abbreviations below need no more; a 10 MB name costs nothing
    short = _ARGS_RE.sub(lambda m: "(…)" if len(m.group(0)) > 6 else m.group(0), name)
    short = _TEMPLATE_RE.sub(lambda m: "<…>" if len(m.group(0)) > 6 else m.group(0), short)
    if len(short) > width:
        short = short[: width - 1] + "…"
    return short


def fmt_us(us: float) -> str:
    """Durations in µs as people read them: 850 µs, 1.25 ms, 2.10 s."""
    if us < 1000:
        return f"{us:g} µs" if us == int(us) else f"{us:.2f} µs"
    if us < 1_000_000:
        return f"{us / 1000:.3g} ms"
    return f"{us / 1_000_000:.3g} s"


_KIND_WORD = {CPU: "CPU", GPU: "GPU", "coll": "coll", "send": "send", "recv": "recv", "mem": "mem", META: "meta"}


def _box_label(box: Box) -> str:
    small = '<FONT POINT-SIZE="8" COLOR="#333333">'
    lines = []
    title = _bold(shorten(box.name))
    if box.is_group and not box.detail:
        title += f" ×{box.count}"
    lines.append(title)
    info = []
    if box.is_group:
        info.append(f"{box.count} nodes" if box.detail else f"ids {box.first_id}–{box.last_id}")
        if box.duration_us:
            info.append(f"Σ {fmt_us(box.duration_us)}")
    else:
        info.append(f"#{box.first_id}")
        if box.duration_us:
            info.append(fmt_us(box.duration_us))
    lines.append(small + xml_text(" · ".join(info)) + "</FONT>")
    if box.detail:
        lines.append(small + xml_text(_cut(box.detail, LABEL_WIDTH + 8)) + "</FONT>")
    if box.is_group and len(box.kinds) > 1 and not box.detail:
        mix = " · ".join(f"{c} {_KIND_WORD.get(k, k)}" for k, c in sorted(box.kinds.items(), key=lambda kv: -kv[1]))
        lines.append(small + xml_text(mix) + "</FONT>")
    if box.comm:
        text = ", ".join(box.comm[:2]) + (f" (+{len(box.comm) - 2} more)" if len(box.comm) > 2 else "")
        if box.cpu_side_comm:
            text += " [CPU]"
        lines.append('<FONT POINT-SIZE="8">' + xml_text(text) + "</FONT>")
    return "<" + "<BR/>".join(lines) + ">"


def _box_attrs(box: Box) -> str:
    style = STYLES[box.kind]
    parts = [f"label={_box_label(box)}", f"shape={style.shape}", f'fillcolor="{style.fill}"']
    if box.kind == INVALID:
        parts.append('style="filled,dashed"')
    if box.is_group:
        parts.append("peripheries=2")
    name = _cut(box.name, TOOLTIP_CHARS)
    tooltip = f"{name}\nids {box.first_id}-{box.last_id}" if box.is_group else f"{name}\nid {box.first_id}"
    parts.append(f"tooltip={dot_string(tooltip)}")
    return ", ".join(parts)


def _legend_row(view: View, per_row: int = 4) -> str:
    """The legend as rows of (symbol, meaning) cells, for the title of an overview (no wider than a step)."""
    cells = [c.replace("<TR>", "").replace("</TR>", "") for c in _legend_cells(view)]
    rows = "".join("<TR>" + "".join(cells[k : k + per_row]) + "</TR>" for k in range(0, len(cells), per_row))
    return f'<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0" CELLPADDING="2">{rows}</TABLE>'


def _legend(view: View) -> str:
    """The legend as a node: a column of (symbol, meaning) rows."""
    cells = _legend_cells(view)
    rows = ['<TR><TD COLSPAN="2"><B>Legend</B></TD></TR>', *cells]
    table = '<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0" CELLPADDING="3">' + "".join(rows) + "</TABLE>"
    return f'  legend [shape=plain, style="", label=<{table}>];\n'


def _legend_cells(view: View) -> list[str]:
    used = {b.kind for b in view.boxes} | {k for b in view.boxes for k in b.kinds}
    rows: list[str] = []
    for kind in KINDS:
        if kind in used:
            st = STYLES[kind]
            rows.append(
                f'<TR><TD BGCOLOR="{st.fill}" WIDTH="26">{xml_text(st.shape if kind in COMM_KINDS else "")}</TD>'
                f'<TD ALIGN="LEFT">{xml_text(st.legend)}</TD></TR>'
            )
    deps = {e.dep for e in view.edges}
    if "data" in deps:
        rows.append('<TR><TD>──▶</TD><TD ALIGN="LEFT">data dependency</TD></TR>')
    if "ctrl" in deps:
        rows.append('<TR><TD><FONT COLOR="#8a8a8a">- - ▷</FONT></TD><TD ALIGN="LEFT">control dependency</TD></TR>')
    if "peer" in deps or view.hubs:
        rows.append(
            '<TR><TD><FONT COLOR="#cc0000">····</FONT></TD>'
            '<TD ALIGN="LEFT">cross-rank: send→recv, collective members</TD></TR>'
        )
    if "order" in deps:
        rows.append('<TR><TD><FONT COLOR="#9a9a9a">──›</FONT></TD><TD ALIGN="LEFT">next box in the same lane</TD></TR>')
    if view.lanes:
        rows.append('<TR><TD>▢</TD><TD ALIGN="LEFT">lane: host thread, GPU stream, communication</TD></TR>')
    if any(b.is_group for b in view.boxes):
        rows.append('<TR><TD>▭▭</TD><TD ALIGN="LEFT">double outline: group of consecutive nodes</TD></TR>')
    return rows


def _title(view: View) -> str:
    src = view.sources[0].rsplit("/", 1)[-1] if view.sources else "trace"
    if len(view.sources) > 1:
        src = _common_prefix([s.rsplit("/", 1)[-1] for s in view.sources]) + f"* ({len(view.sources)} files)"
    parts = [_bold(shorten(src))]
    ranks = view.ranks
    if len(ranks) == 1:
        parts.append(f"rank {ranks[0]}")
    elif ranks:
        parts.append(f"{len(ranks)} ranks")
    shown = f"{view.selected_nodes} of {view.total_nodes} nodes"
    if view.level:
        shown += f" in {len(view.boxes)} boxes (overview: {OVERVIEW_TEXT.get(view.level, view.level)})"
    elif view.collapsed_by:
        shown += f" in {len(view.boxes)} boxes ({COLLAPSE_TEXT.get(view.collapsed_by, view.collapsed_by)})"
    parts.append(shown)
    line2 = []
    if view.hidden_edges:
        n = view.hidden_edges
        line2.append(f"{n} {'dependency' if n == 1 else 'dependencies'} on nodes not shown omitted")
    text = " · ".join(parts)
    if line2:
        text += '<BR/><FONT POINT-SIZE="9">' + xml_text("; ".join(line2)) + "</FONT>"
    return text


def _common_prefix(names: list[str]) -> str:
    first, last = min(names), max(names)
    i = 0
    while i < min(len(first), len(last)) and first[i] == last[i]:
        i += 1
    return first[:i]


class _Cluster:
    __slots__ = ("boxes", "children")

    def __init__(self) -> None:
        self.boxes: list[Box] = []
        self.children: dict[int, _Cluster] = {}


def _write_clusters(
    w: Callable[[str], object], rank: int, boxes: list[Box], names: dict, indent: str, lanes: frozenset = frozenset()
) -> None:
    """Boxes nested in annotation clusters; a cluster holding a single box is not drawn, except a lane."""
    counts: Counter = Counter(a for b in boxes for a in b.path)
    root = _Cluster()
    for box in boxes:
        node = root
        for a in box.path:
            if counts[a] > 1 or (rank, a) in lanes:
                node = node.children.setdefault(a, _Cluster())
        node.boxes.append(box)
    stack: list[tuple[str, object]] = [("node", root)]
    depth = 0
    while stack:
        what, item = stack.pop()
        pad = indent + "  " * depth
        if what == "close":
            depth -= 1
            w(indent + "  " * depth + "}\n")
            continue
        if what == "open":
            a, cluster = item  # type: ignore[misc]
            label = xml_text(shorten(names.get((rank, a), str(a)), 60))
            w(f"{pad}subgraph cluster_r{rank}_a{str(a).replace('-', 'm')} {{\n")
            if (rank, a) in lanes:
                w(f'{pad}  label=<<B>{label}</B>>; style="filled"; fillcolor="#ffffff"; color="#7f9fbf"; ')
            else:
                w(f'{pad}  label=<<I>{label}</I>>; style="rounded,filled"; fillcolor="#f7f7f7"; color="#b0b0b0"; ')
            w("fontsize=10;\n")
            depth += 1
            stack.append(("close", None))
            stack.append(("node", cluster))
            continue
        cluster = item
        for box in cluster.boxes:  # type: ignore[attr-defined]
            w(f"{pad}{dot_string(box.key)} [{_box_attrs(box)}];\n")
        for a, child in reversed(list(cluster.children.items())):  # type: ignore[attr-defined]
            stack.append(("open", (a, child)))


def write_dot(view: View, out: IO[str], filters_text: str = "") -> None:
    """Write the view as a DOT digraph: clusters per rank (when several), legend, title."""
    w = out.write
    w("digraph chakra {\n")
    title = _title(view)
    if filters_text:
        title += '<BR/><FONT POINT-SIZE="9">filters: ' + xml_text(filters_text) + "</FONT>"
    if view.lanes:  # the overview is a tall page: its legend is a row under the title, not a column
        title = (
            f'<TABLE BORDER="0" CELLSPACING="0" CELLPADDING="1"><TR><TD ALIGN="LEFT">{title}</TD></TR>'
            f'<TR><TD ALIGN="LEFT">{_legend_row(view)}</TD></TR></TABLE>'
        )
    w(
        '  graph [rankdir=TB, newrank=true, nodesep=0.25, ranksep=0.35, fontname="Helvetica", fontsize=12, '
        f'labelloc=t, labeljust=l, label=<{title}>, outputorder=edgesfirst, charset="UTF-8"];\n'
    )
    w('  node [fontname="Helvetica", fontsize=10, style=filled, penwidth=0.8, margin="0.10,0.04", height=0.3];\n')
    w('  edge [fontname="Helvetica", fontsize=8, arrowsize=0.6];\n')
    if not view.lanes:
        w(_legend(view))
    by_rank: dict[int, list[Box]] = {}
    for box in view.boxes:
        by_rank.setdefault(box.rank, []).append(box)
    clustered = len(view.ranks) > 1
    for rank in view.ranks:
        indent = "  "
        if clustered:
            w(f"  subgraph cluster_rank{rank} {{\n")
            w(f'    label=<<B>rank {rank}</B>>; style="rounded"; color="#9e9e9e"; fontsize=11;\n')
            indent = "    "
        _write_clusters(w, rank, by_rank.get(rank, []), view.cluster_names, indent, frozenset(view.lanes))
        if clustered:
            w("  }\n")
    if clustered and view.lanes:
        # Ranks left to right in rank order: their first boxes share a row, chained invisibly.
        # (An invisible row of anchors above the clusters, chained left to right, each holding its
        # rank's first box below it: Graphviz keeps a chained row in order, not clusters.)
        firsts = [(r, min(by_rank[r], key=lambda b: b.start_us).key) for r in view.ranks if by_rank.get(r)]
        if len(firsts) > 1:
            anchors = [f"rank_anchor_{r}" for r, _ in firsts]
            w("  { rank=min; " + "; ".join(f"{a} [style=invis, shape=point, width=0]" for a in anchors) + "; }\n")
            w("  " + " -> ".join(anchors) + " [style=invis, weight=10];\n")
            for a, (_, key) in zip(anchors, firsts):
                w(f"  {a} -> {dot_string(key)} [style=invis, weight=10];\n")
    for hub in view.hubs:
        w(f'  {dot_string(hub.key)} [shape=diamond, fillcolor="#fde9d9", fontsize=8, label={dot_string(hub.label)}];\n')
        for member in hub.members:
            w(f"  {dot_string(member)} -> {dot_string(hub.key)} [{HUB_EDGE_STYLE}];\n")
    for e in view.edges:
        extra = ""
        if e.dep == "step":
            w(f"  {dot_string(e.src)} -> {dot_string(e.dst)} [{EDGE_STYLE[e.dep]}];\n")
            continue
        if e.count > 1:
            extra = f', label="×{e.count}", penwidth={min(1 + e.count / 10, 3):.1f}'
        w(f"  {dot_string(e.src)} -> {dot_string(e.dst)} [{EDGE_STYLE[e.dep]}{extra}];\n")
    w("}\n")


# ---------------------------------------------------------------------------------------------
# GraphML

_GRAPHML_NODE_KEYS = (
    ("label", "string"),
    ("name", "string"),
    ("kind", "string"),
    ("node_type", "int"),
    ("rank", "int"),
    ("first_id", "long"),
    ("last_id", "long"),
    ("count", "int"),
    ("duration_us", "long"),
    ("comm", "string"),
)
_GRAPHML_EDGE_KEYS = (("dependency", "string"), ("count", "int"))


def _data(key: str, value: object) -> str:
    return f'<data key="{key}">{xml_text(str(value))}</data>'


def write_graphml(view: View, out: IO[str]) -> None:
    """GraphML that networkx, yEd and Gephi read: node and edge attributes declared as typed keys."""
    w = out.write
    w('<?xml version="1.0" encoding="UTF-8"?>\n')
    w('<graphml xmlns="http://graphml.graphdrawing.org/xmlns">\n')
    for name, typ in _GRAPHML_NODE_KEYS:
        w(f'  <key id="n_{name}" for="node" attr.name="{name}" attr.type="{typ}"/>\n')
    for name, typ in _GRAPHML_EDGE_KEYS:
        w(f'  <key id="e_{name}" for="edge" attr.name="{name}" attr.type="{typ}"/>\n')
    w('  <graph id="chakra" edgedefault="directed">\n')
    for box in view.boxes:
        fields: Iterable[tuple[str, object]] = (
            ("label", box.name),
            ("name", box.name),
            ("kind", box.kind),
            ("node_type", box.node_type),
            ("rank", box.rank),
            ("first_id", box.first_id),
            ("last_id", box.last_id),
            ("count", box.count),
            ("duration_us", box.duration_us),
            ("comm", "; ".join(box.comm)),
        )
        w(f'    <node id="{xml_text(box.key)}">' + "".join(_data(f"n_{k}", v) for k, v in fields) + "</node>\n")
    for hub in view.hubs:
        w(
            f'    <node id="{xml_text(hub.key)}">{_data("n_label", hub.label)}{_data("n_kind", "collective_instance")}'
            "</node>\n"
        )
    n = 0
    for e in view.edges:
        if e.dep == "step":
            continue  # layout only
        w(
            f'    <edge id="e{n}" source="{xml_text(e.src)}" target="{xml_text(e.dst)}">'
            f"{_data('e_dependency', e.dep)}{_data('e_count', e.count)}</edge>\n"
        )
        n += 1
    for hub in view.hubs:
        for member in hub.members:
            w(
                f'    <edge id="e{n}" source="{xml_text(member)}" target="{xml_text(hub.key)}">'
                f"{_data('e_dependency', 'collective')}{_data('e_count', 1)}</edge>\n"
            )
            n += 1
    w("  </graph>\n</graphml>\n")

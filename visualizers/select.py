"""Choosing what a graph drawing shows: node filters and the collapsed (grouped) view.

Real traces hold thousands of nodes and a drawing of all of them is unreadable (and Graphviz can
take minutes on it), so the drawing is built from a *view*: the nodes that pass the filters, in
file order, optionally merged into boxes of consecutive nodes that share a key (their top-level
operator, their innermost annotation, or a name prefix). The view is plain data; the writers in
`graph_formats` turn it into DOT or GraphML.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Optional

from chakra.schema import NodeType, pb
from chakra.schema.kinds import COMM_KINDS, kind_of, node_kind
from chakra.trace import Trace
from chakra.visualizers.grouping import Plan, group_runs, is_wrapper, plan_groups
from chakra.visualizers.kinds import KIND_PRIORITY, describe_comm, node_facts

COLLAPSE_MODES = ("auto", "overview", "none", "op", "annotation", "prefix", "name", "adaptive")
EDGE_MODES = ("all", "data", "ctrl")


@dataclass
class Filters:
    """Which nodes to draw. All given filters must hold (AND)."""

    ranks: Optional[frozenset[int]] = None
    id_min: Optional[int] = None
    id_max: Optional[int] = None
    around: Optional[int] = None
    depth: int = 2
    kinds: Optional[frozenset[str]] = None
    name: Optional[re.Pattern[str]] = None
    #: Only the nodes of the profiler steps whose name matches (applied in graph.choose_view: the
    #: step of a node on another thread or stream is found by the overview's analysis).
    step: Optional[re.Pattern[str]] = None

    def describe(self) -> str:
        parts = []
        if self.ranks is not None:
            parts.append("ranks " + ",".join(map(str, sorted(self.ranks))))
        if self.id_min is not None or self.id_max is not None:
            lo = "" if self.id_min is None else self.id_min
            hi = "" if self.id_max is None else self.id_max
            parts.append(f"ids {lo}:{hi}")
        if self.around is not None:
            parts.append(f"around {self.around} depth {self.depth}")
        if self.kinds is not None:
            parts.append("type " + ",".join(sorted(self.kinds)))
        if self.name is not None:
            parts.append(f"name /{self.name.pattern}/")
        if self.step is not None:
            parts.append(f"step /{self.step.pattern}/")
        return "; ".join(parts)


def parse_id_range(text: str) -> tuple[Optional[int], Optional[int]]:
    """`A:B` (inclusive), `A:`, `:B` or a single id `A`; ValueError on anything else."""
    text = text.strip()
    try:
        if ":" not in text:
            value = int(text)
            return value, value
        lo, hi = text.split(":", 1)
        lo_v = int(lo) if lo.strip() else None
        hi_v = int(hi) if hi.strip() else None
    except ValueError:
        raise ValueError(f"bad id range {text!r}: expected A:B, A:, :B or a single id") from None
    if lo_v is not None and hi_v is not None and lo_v > hi_v:
        raise ValueError(f"bad id range {text!r}: start is after end")
    return lo_v, hi_v


# ---------------------------------------------------------------------------------------------
# View data


@dataclass
class Box:
    """One drawn node: a single trace node, or a group of consecutive nodes (count > 1)."""

    key: str
    rank: int
    name: str
    kind: str
    first_id: int
    last_id: int
    count: int = 1
    duration_us: int = 0
    kinds: Counter = field(default_factory=Counter)
    comm: list[str] = field(default_factory=list)
    node_type: int = 0
    cpu_side_comm: bool = False
    path: tuple[int, ...] = ()  # annotation clusters holding this box, outermost first
    header_of: Optional[int] = None  # set when this box is the annotation node heading its cluster
    detail: str = ""  # one more line about what the box holds (the overview's operator mix)
    start_us: int = 0  # earliest recorded start of its nodes (orders the boxes of a lane)

    @property
    def is_group(self) -> bool:
        return self.count > 1


@dataclass
class Edge:
    src: str
    dst: str
    dep: str  # "data", "ctrl", "order" (next box of a lane), "step" (layout only) or "peer" (send->recv)
    count: int = 1


@dataclass
class Hub:
    """A cross-rank collective instance: the k-th collective of one process group."""

    key: str
    label: str
    members: list[str]


@dataclass
class View:
    boxes: list[Box]
    edges: list[Edge]
    hubs: list[Hub]
    ranks: list[int]
    total_nodes: int
    selected_nodes: int
    hidden_edges: int
    collapsed_by: Optional[str]
    sources: list[str]
    cluster_names: dict[tuple[int, int], str] = field(default_factory=dict)  # (rank, annotation id) -> name
    lanes: set[tuple[int, int]] = field(default_factory=set)  # (rank, cluster id) of the overview's lanes
    level: str = ""  # the overview's level of detail


# ---------------------------------------------------------------------------------------------
# Filtering


def _parent_lists(nodes: Sequence[pb.Node]) -> tuple[dict[int, int], list[list[int]]]:
    index = {n.id: i for i, n in enumerate(nodes)}
    parents = []
    get = index.get
    for i, n in enumerate(nodes):
        ps = []
        for d in (*n.data_deps, *n.ctrl_deps):
            j = get(d)
            if j is not None and j != i:
                ps.append(j)
        parents.append(ps)
    return index, parents


def _neighbourhood(nodes: Sequence[pb.Node], centre: int, depth: int) -> Optional[set[int]]:
    """Indices of the centre node, its ancestors and its descendants up to `depth` hops."""
    index, parents = _parent_lists(nodes)
    start = index.get(centre)
    if start is None:
        return None
    children: list[list[int]] = [[] for _ in nodes]
    for i, ps in enumerate(parents):
        for p in ps:
            children[p].append(i)
    keep = {start}
    for links in (parents, children):
        seen = {start}
        frontier = deque([(start, 0)])
        while frontier:
            i, d = frontier.popleft()
            if d == depth:
                continue
            for j in links[i]:
                if j not in seen:
                    seen.add(j)
                    keep.add(j)
                    frontier.append((j, d + 1))
    return keep


def select_nodes(trace: Trace, filters: Filters) -> list[int]:
    """Indices (file order) of the nodes of one trace that pass every filter."""
    nodes = trace.nodes
    allowed: Optional[set[int]] = None
    if filters.around is not None:
        allowed = _neighbourhood(nodes, filters.around, filters.depth)
        if allowed is None:
            return []
    lo, hi, kinds, pattern = filters.id_min, filters.id_max, filters.kinds, filters.name
    out = []
    for i, n in enumerate(nodes):
        if allowed is not None and i not in allowed:
            continue
        if lo is not None and n.id < lo:
            continue
        if hi is not None and n.id > hi:
            continue
        if pattern is not None and not pattern.search(n.name):
            continue
        if kinds is not None and node_kind(n) not in kinds:
            continue
        out.append(i)
    return out


# ---------------------------------------------------------------------------------------------
# Building the view

_COMM_OR_MEM_TYPES = frozenset(
    {
        NodeType.COMM_SEND_NODE,
        NodeType.COMM_RECV_NODE,
        NodeType.COMM_COLL_NODE,
        NodeType.MEM_LOAD_NODE,
        NodeType.MEM_STORE_NODE,
    }
)


def _single_box(rank: int, n: pb.Node) -> Box:
    facts = node_facts(n)
    kind = kind_of(n.type, facts.get("is_cpu_op"))
    comm = describe_comm(n.type, facts)
    cpu_side = kind in COMM_KINDS and bool(facts.get("is_cpu_op"))
    return Box(
        key=f"r{rank}_n{n.id}",
        rank=rank,
        name=n.name,
        kind=kind,
        first_id=n.id,
        last_id=n.id,
        duration_us=n.duration_micros,
        kinds=Counter({kind: 1}),
        comm=[comm] if comm else [],
        node_type=n.type,
        cpu_side_comm=cpu_side,
    )


def _boxes(rank: int, trace: Trace, kept: list[int], plan: Plan) -> tuple[list[Box], dict[int, str]]:
    """One box per run of equal keys; returns boxes and node id -> box key.

    Only the first node of a run gets a full Box; the others add counts cheaply (big traces
    collapse hundreds of thousands of nodes here).
    """
    nodes = trace.nodes
    boxes: list[Box] = []
    owner: dict[int, str] = {}
    comm_types = _COMM_OR_MEM_TYPES
    for run in group_runs(plan):
        first = nodes[kept[run[0]]]
        box = _single_box(rank, first)
        box.path = plan.paths[run[0]]
        box.start_us = first.start_time_micros
        if plan.level:
            box.name = plan.labels[run[0]]
            box.detail = plan.details.get(plan.keys[run[0]], "")
        if len(run) > 1:
            box.key = f"r{rank}_g{first.id}"
            box.name = plan.labels[run[0]]
            kinds = box.kinds
            lo = hi = first.id
            dur = box.duration_us
            start = box.start_us
            for pos in run[1:]:
                n = nodes[kept[pos]]
                nid = n.id
                if n.start_time_micros and (not start or n.start_time_micros < start):
                    start = n.start_time_micros
                if nid < lo:
                    lo = nid
                elif nid > hi:
                    hi = nid
                dur += n.duration_micros
                if n.type in comm_types:
                    other = _single_box(rank, n)
                    kinds.update(other.kinds)
                    box.comm.extend(c for c in other.comm if c not in box.comm)
                    box.cpu_side_comm = box.cpu_side_comm or other.cpu_side_comm
                else:
                    kinds[node_kind(n)] += 1
            box.count = len(run)
            box.first_id, box.last_id, box.duration_us, box.start_us = lo, hi, dur, start
            # Colour of the most common kind; ties go to the more telling kind (comm over compute).
            box.kind = min(kinds, key=lambda k: (-kinds[k], KIND_PRIORITY.index(k)))
        elif plan.keys[run[0]][0] == "ann":
            box.name = plan.labels[run[0]]
        elif box.path and box.path[-1] == first.id:
            box.header_of = first.id  # an annotation drawn as the head of its own cluster
        boxes.append(box)
        key = box.key
        for pos in run:
            owner[nodes[kept[pos]].id] = key
    return boxes, owner


def rank_of(trace: Trace, pos: int) -> int:
    return trace.rank if trace.rank is not None else pos


def selections(traces: Sequence[Trace], filters: Filters) -> dict[int, list[int]]:
    """rank -> indices of the nodes that pass the filters (ranks filtered out are absent)."""
    out = {}
    for pos, trace in enumerate(traces):
        rank = rank_of(trace, pos)
        if filters.ranks is not None and rank not in filters.ranks:
            continue
        out[rank] = select_nodes(trace, filters)
    return out


def count_boxes(
    traces: Sequence[Trace],
    kept_by_rank: dict[int, list[int]],
    mode: str,
    target: int,
    cache: dict,
    expand: Sequence[re.Pattern[str]] = (),
) -> int:
    """How many boxes a collapse mode gives, without building them."""
    total = 0
    for pos, trace in enumerate(traces):
        kept = kept_by_rank.get(rank_of(trace, pos))
        if kept is not None:
            total += len(group_runs(plan_groups(trace, kept, mode, target, cache, expand)))
    return total


def build_view(
    traces: Sequence[Trace],
    filters: Filters,
    collapse: str = "none",
    edges: str = "all",
    links: bool = True,
    target: int = 0,
    kept_by_rank: Optional[dict[int, list[int]]] = None,
    cache: Optional[dict] = None,
    expand: Sequence[re.Pattern[str]] = (),
) -> View:
    """The view of `traces` after filters and grouping (`adaptive` aims at `target` boxes per rank).

    Control edges from an annotation to the nodes inside its cluster are not drawn: the cluster
    already shows that containment. In the overview, the boxes of one lane are chained in time
    order and only dependencies between lanes (launches, syncs) are drawn besides.
    """
    if collapse == "auto":
        raise ValueError("resolve 'auto' before build_view (see graph.choose_view)")
    all_boxes: list[Box] = []
    edge_counts: dict[tuple[str, str, str], int] = defaultdict(int)
    hidden = 0
    total = selected = 0
    ranks = []
    owners: dict[int, dict[int, str]] = {}
    if kept_by_rank is None:
        kept_by_rank = selections(traces, filters)
    cache = {} if cache is None else cache
    cluster_names: dict[tuple[int, int], str] = {}
    lanes: set[tuple[int, int]] = set()
    level = ""
    for pos, trace in enumerate(traces):
        rank = rank_of(trace, pos)
        total += len(trace.nodes)
        if rank not in kept_by_rank:
            continue
        ranks.append(rank)
        kept = kept_by_rank[rank]
        selected += len(kept)
        plan = plan_groups(trace, kept, collapse, target, cache, expand)
        boxes, owner = _boxes(rank, trace, kept, plan)
        cluster_names.update(((rank, a), name) for a, name in plan.cluster_names.items())
        level = level or plan.level
        if plan.lanes:
            lanes.update((rank, a) for a in plan.lanes)
            _lane_order(boxes, plan.lanes, edge_counts)
        owners[rank] = owner
        all_boxes.extend(boxes)
        by_key = {b.key: b for b in boxes}
        nodes = trace.nodes
        for i in kept:
            n = nodes[i]
            dst = owner[n.id]
            for dep, deps in (("data", n.data_deps), ("ctrl", n.ctrl_deps)):
                if edges not in ("all", dep):
                    continue
                for d in deps:
                    src = owner.get(d)
                    if src is None:
                        if d != n.id:
                            hidden += 1
                        continue
                    if src == dst:
                        continue
                    if plan.lanes and plan.lanes.get(by_key[src].path[-1]) == plan.lanes.get(by_key[dst].path[-1]):
                        continue  # within a lane the time order is drawn instead
                    if dep == "ctrl" and plan.ctrl_is_tree:
                        head = by_key[src].header_of
                        if head is not None and head in by_key[dst].path:
                            continue
                        if is_wrapper(by_key[src].name):
                            continue  # thread/process roots: every top-level node is their child
                    edge_counts[(src, dst, dep)] += 1
    # One edge per box pair: data wins over ctrl when both exist.
    merged: dict[tuple[str, str], Edge] = {}
    for (src, dst, dep), count in edge_counts.items():
        e = merged.get((src, dst))
        if e is None:
            merged[(src, dst)] = Edge(src, dst, dep, count)
        else:
            e.count += count
            if dep == "data":
                e.dep = "data"
    hubs: list[Hub] = []
    edge_list = list(merged.values())
    if links and len(ranks) > 1:
        peer_edges, hubs = _cross_rank_links(traces, kept_by_rank, owners)
        edge_list.extend(peer_edges)
    return View(
        boxes=all_boxes,
        edges=edge_list,
        hubs=hubs,
        ranks=ranks,
        total_nodes=total,
        selected_nodes=selected,
        hidden_edges=hidden,
        collapsed_by=None if collapse == "none" else collapse,
        sources=[str(t.path) for t in traces if t.path is not None],
        cluster_names=cluster_names,
        lanes=lanes,
        level=level,
    )


def _lane_order(boxes: list[Box], lanes: dict[int, str], edge_counts: dict[tuple[str, str, str], int]) -> None:
    """Chain the boxes of each lane in the order they start (file order where no times are recorded)."""
    by_lane: dict[str, list[Box]] = defaultdict(list)
    for box in boxes:
        if box.path and box.path[-1] in lanes:
            by_lane[lanes[box.path[-1]]].append(box)
    for members in by_lane.values():
        members.sort(key=lambda b: b.start_us)
        for a, b in zip(members, members[1:]):
            edge_counts[(a.key, b.key, "order")] += 1
    # Steps one under the other: the last box to start in a step holds the next step's first box
    # below it (an invisible, heavy edge; without it Graphviz tends to set steps side by side).
    by_step: dict[int, list[Box]] = defaultdict(list)
    for box in boxes:
        if len(box.path) == 2:
            by_step[box.path[0]].append(box)
    steps = sorted(by_step.values(), key=lambda bs: min(b.start_us for b in bs))
    for a_boxes, b_boxes in zip(steps, steps[1:]):
        last = max(a_boxes, key=lambda b: b.start_us)
        first = min(b_boxes, key=lambda b: b.start_us)
        edge_counts[(last.key, first.key, "step")] += 1


def _cross_rank_links(
    traces: Sequence[Trace], kept_by_rank: dict[int, list[int]], owners: dict[int, dict[int, str]]
) -> tuple[list[Edge], list[Hub]]:
    """Send->recv edges (FIFO per (src, dst, tag)) and one hub per k-th collective of each process group.

    Ordinals are counted over the whole trace in file order, so filtering does not shift them.
    """
    sends: dict[tuple[int, int, int], deque[Optional[str]]] = defaultdict(deque)
    recvs: dict[tuple[int, int, int], deque[Optional[str]]] = defaultdict(deque)
    colls: dict[tuple[str, int], list[tuple[str, str]]] = defaultdict(list)
    for pos, trace in enumerate(traces):
        rank = trace.rank if trace.rank is not None else pos
        if rank not in kept_by_rank:
            continue
        owner = owners[rank]
        ordinal: Counter = Counter()
        for n in trace.nodes:
            if n.type not in (NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE, NodeType.COMM_COLL_NODE):
                continue
            facts = node_facts(n)
            box = owner.get(n.id)
            if n.type == NodeType.COMM_COLL_NODE:
                pg = str(facts.get("pg_name") or "")
                k = ordinal[pg]
                ordinal[pg] += 1
                if box is not None:
                    colls[(pg, k)].append((box, describe_comm(n.type, facts)))
                continue
            src, dst, tag = facts.get("comm_src"), facts.get("comm_dst"), facts.get("comm_tag", 0)
            if not isinstance(src, int) or not isinstance(dst, int):
                continue
            queue = sends if n.type == NodeType.COMM_SEND_NODE else recvs
            queue[(src, dst, int(tag or 0))].append(box)
    edges = []
    for key, sq in sends.items():
        rq = recvs.get(key)
        while sq and rq:
            s, r = sq.popleft(), rq.popleft()
            if s is not None and r is not None:
                edges.append(Edge(s, r, "peer"))
    hubs = []
    for (pg, k), members in sorted(colls.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        if len(members) < 2:
            continue
        what = members[0][1] or "collective"
        pg_text = f" pg {pg}" if pg else ""
        hub_key = f"coll_{len(hubs)}"
        hubs.append(Hub(hub_key, f"{what}\n#{k}{pg_text} · {len(members)} ranks", [m[0] for m in members]))
    return edges, hubs

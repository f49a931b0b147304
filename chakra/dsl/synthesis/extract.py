"""Read the statistics synthesis learns from out of real multi-rank traces.

Each rank is read in node-id order (the order producers write program order in). A rank's
*timeline* is its sequence of events: compute nodes (operator class, duration) and
communication (collective type, size, process group; or a send/receive with its peer). For every
communication node we also record how far ahead its first dependent sits, counted in compute
nodes (the "dependency structure around comm": 0 = the very next compute waits for it, None =
nothing waits for it, i.e. fully overlapped).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from chakra.schema import COMM_NODE_TYPES, NodeType
from chakra.schema.attrs import get_attr, get_int
from chakra.trace import Trace

COMPUTE_TYPES = frozenset({NodeType.COMP_NODE, NodeType.MEM_LOAD_NODE, NodeType.MEM_STORE_NODE})


def op_class(name: str) -> str:
    """Operator class of a node name, as `chakra analyze` and `chakra diff` group operators
    (chakra.analysis.op_class): the name less call-site noise and a trailing step or instance
    number, so `ProfilerStep#2` is `ProfilerStep` and `c10d::allreduce_` stays itself. Synthetic
    nodes are named by their class, so a diff of real and synthetic traces lines them up."""
    from chakra.analysis import op_class as analysis_class

    return analysis_class(name)


@dataclass
class CommEvent:
    kind: str  # "coll" or "p2p"
    ctype: int  # collective type; for p2p: +1 send, -1 recv
    size: int
    pg: str  # pg_name for collectives; "src>dst" (global ranks) for p2p
    lag: Optional[int]  # compute nodes until the first dependent, None if nothing depends on it
    gap: int  # compute nodes since the previous comm event
    duration: int = 0  # recorded duration_micros


@dataclass
class RankTimeline:
    rank: int
    classes: list[str] = field(default_factory=list)  # every compute node's class, in order
    durations: list[int] = field(default_factory=list)
    work: list[tuple[int, int, bool]] = field(default_factory=list)  # (num_ops, tensor_size, is_cpu_op)
    comms: list[CommEvent] = field(default_factory=list)
    tail: int = 0  # compute nodes after the last comm


@dataclass
class JobView:
    world: int
    groups: dict[str, list[int]]
    ranks: list[RankTimeline]


def timeline(trace: Trace, rank: int, world: int) -> RankTimeline:
    nodes = sorted(trace.nodes, key=lambda n: n.id)
    tl = RankTimeline(rank)
    position: dict[int, tuple[int, int]] = {}  # node id -> (compute index at it, comm index or -1)
    comp_index = 0
    since = 0
    for n in nodes:
        t = n.type
        if t in COMPUTE_TYPES:
            tl.classes.append(op_class(n.name))
            tl.durations.append(int(n.duration_micros))
            tl.work.append((get_int(n, "num_ops"), get_int(n, "tensor_size"), bool(get_attr(n, "is_cpu_op", False))))
            position[n.id] = (comp_index, -1)
            comp_index += 1
            since += 1
        elif t in COMM_NODE_TYPES:
            size = get_int(n, "comm_size")
            if t == NodeType.COMM_COLL_NODE:
                ev = CommEvent(
                    "coll", get_int(n, "comm_type"), size, str(get_attr(n, "pg_name", "") or ""), None, since
                )
            else:
                src, dst = get_int(n, "comm_src", rank), get_int(n, "comm_dst", rank)
                direction = 1 if t == NodeType.COMM_SEND_NODE else -1
                ev = CommEvent("p2p", direction, size, f"{src}>{dst}", None, since)
            ev.duration = int(n.duration_micros)
            position[n.id] = (comp_index, len(tl.comms))
            tl.comms.append(ev)
            since = 0
    tl.tail = since
    # First dependent of each comm node, in compute nodes after it.
    for n in nodes:
        deps = list(n.data_deps) + list(n.ctrl_deps)
        if not deps or n.id not in position:
            continue
        here = position[n.id][0]
        for d in deps:
            pos = position.get(d)
            if pos is None or pos[1] < 0:
                continue
            ev = tl.comms[pos[1]]
            lag = max(0, here - pos[0])
            if ev.lag is None or lag < ev.lag:
                ev.lag = lag
    return tl


def job_view(traces: list[Trace]) -> JobView:
    """Timelines of every rank plus the process-group membership (metadata, else inferred)."""
    from chakra.validate import process_groups

    world = len(traces)
    groups: dict[str, list[int]] = {}
    for t in traces:
        groups.update(process_groups(t))
    ranks = []
    for i, t in enumerate(traces):
        rank = t.rank if t.rank is not None else i
        ranks.append(timeline(t, rank, world))
    seen: dict[str, set[int]] = {}
    for tl in ranks:
        for ev in tl.comms:
            if ev.kind == "coll":
                seen.setdefault(ev.pg, set()).add(tl.rank)
    for pg, members in seen.items():
        if pg not in groups or not groups[pg]:
            groups[pg] = sorted(members) if pg not in ("", "0") else list(range(world))
    return JobView(world, groups, ranks)

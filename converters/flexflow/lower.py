"""Task graph + devices -> one Chakra trace per device.

* A compute task becomes a COMP_NODE on its device (duration and start in µs, rounded).
* A transfer becomes a COMM_SEND_NODE on its source and a COMM_RECV_NODE on its destination with
  the same `comm_tag` (a counter over the whole graph), `comm_src`, `comm_dst` and `comm_size`.
  In the upstream export a transfer is a chain of Comm tasks with one name, one per network hop
  (`seg <j> from A to B`); each segment chain is one message. FlexFlow also links segment j's
  hop i to segment j+1's hop i-1 to keep NIC queues in order; those links are inside the network
  and are dropped (counted in the summary). Collectives FlexFlow expresses as transfers stay
  point-to-point.
* A transfer whose two ends are on one device moves nothing: its consumers depend directly on its
  producers.
* A dependency between tasks on two devices with no transfer between them (possible only under a
  user placement) becomes a zero-byte message, so no cross-device order is lost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from chakra.converters.flexflow.taskgraph import Task, TaskGraph
from chakra.converters.result import DEFAULT_MAX_RANKS
from chakra.errors import InputError, TraceFormatError
from chakra.graph import priority_topo_order
from chakra.schema import NodeType, pb
from chakra.trace import Trace, make_metadata, make_node


@dataclass
class Item:
    """A compute task, or one message (a chain of Comm tasks / one legacy comm node)."""

    index: int
    kind: str  # "comp" or "xfer"
    tasks: list[Task]
    name: str
    order: int  # smallest task index, for a stable topological order
    device: Optional[int] = None
    src: Optional[int] = None
    dst: Optional[int] = None
    size: int = 0
    start_us: Optional[float] = None
    dur_us: float = 0.0
    preds: list[int] = field(default_factory=list)


@dataclass
class Lowered:
    traces: list[Trace]
    compute_nodes: int = 0
    messages: int = 0
    sync_messages: int = 0
    local_transfers: int = 0
    dropped_link_deps: int = 0
    warnings: list[str] = field(default_factory=list)


def _components(tg: TaskGraph) -> list[list[int]]:
    """Upstream: connected groups of same-named Comm tasks (one message segment each)."""
    tasks = tg.tasks
    parent = {t.index: t.index for t in tasks if t.is_comm}

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for t in tasks:
        if not t.is_comm:
            continue
        for s in t.succs:
            if tasks[s].is_comm and tasks[s].name == t.name:
                ra, rb = find(t.index), find(s)
                if ra != rb:
                    parent[max(ra, rb)] = min(ra, rb)
    groups: dict[int, list[int]] = {}
    for i in parent:
        groups.setdefault(find(i), []).append(i)
    return [sorted(g) for g in sorted(groups.values(), key=min)]


def build_items(
    tg: TaskGraph, devices: list[Optional[int]], bytes_per_us: Optional[float], latency_us: float
) -> tuple[list[Item], int]:
    """Items in file order and the number of dropped hop-to-hop links."""
    tasks = tg.tasks
    items: list[Item] = []
    item_of: dict[int, int] = {}
    for t in tasks:
        if not t.is_comm:
            item = Item(len(items), "comp", [t], t.name or t.kind, t.index, device=devices[t.index])
            item.start_us, item.dur_us = t.start_us, t.dur_us
            items.append(item)
            item_of[t.index] = item.index
        elif tg.variant == "legacy":
            item = Item(len(items), "xfer", [t], t.name, t.index, src=t.src, dst=t.dst, size=t.size or 0)
            items.append(item)
            item_of[t.index] = item.index
    if tg.variant == "upstream":
        for members in _components(tg):
            ts = [tasks[i] for i in members]
            first = ts[0]
            srcs = {devices[p] for t in ts for p in t.preds if not tasks[p].is_comm}
            dsts = {devices[s] for t in ts for s in t.succs if not tasks[s].is_comm}
            for what, found in (("producer", srcs), ("consumer", dsts)):
                if not found:
                    raise TraceFormatError(
                        tg.graph.path, f"Comm task {first.key} ({first.name!r}) has no {what} task", line=first.line
                    )
                if len(found) > 1:
                    raise TraceFormatError(
                        tg.graph.path,
                        f"Comm task {first.key} ({first.name!r}) has {what}s on devices {sorted(found)}",
                        line=first.line,
                    )
            start = min(t.start_us or 0.0 for t in ts)
            end = max((t.start_us or 0.0) + t.dur_us for t in ts)
            item = Item(len(items), "xfer", ts, first.name or "Comm", first.index, src=srcs.pop(), dst=dsts.pop())
            item.start_us, item.dur_us = start, end - start
            if bytes_per_us is not None:
                # FlexFlow costs a segment at latency + size / bandwidth on each hop.
                per_hop = max(t.dur_us for t in ts)
                size = (per_hop - latency_us) * bytes_per_us
                if not size < 1 << 63:  # also NaN/inf from extreme --bandwidth/--latency
                    raise TraceFormatError(
                        tg.graph.path, f"Comm task {first.key}: derived message size {size:g} B does not fit 64 bits",
                        line=first.line,
                    )  # fmt: skip
                item.size = max(0, round(size))
            items.append(item)
            for i in members:
                item_of[i] = item.index
    dropped = 0
    for item in items:
        seen: set[int] = set()
        for t in item.tasks:
            for p in t.preds:
                ip = item_of[p]
                if ip == item.index or ip in seen:
                    continue
                if tg.variant == "upstream" and item.kind == "xfer" and items[ip].kind == "xfer":
                    dropped += 1
                    continue
                seen.add(ip)
                item.preds.append(ip)
    return items, dropped


def _topo(items: list[Item], tg: TaskGraph) -> list[int]:
    # items[i].index == i: parents and keys are indexed like items.
    order, stuck = priority_topo_order([it.preds for it in items], [it.order for it in items])
    if stuck:
        t = items[stuck[0]].tasks[0]
        raise TraceFormatError(tg.graph.path, f"dependency cycle through node {t.key}", line=t.line)
    return order


MAX_NPUS = DEFAULT_MAX_RANKS


class _Ranks:
    def __init__(self, count: int) -> None:
        self.nodes: list[list[pb.Node]] = [[] for _ in range(count)]

    def add(self, rank: int, name: str, ntype: int, deps: list[int], **kw) -> int:
        nodes = self.nodes[rank]
        node = make_node(len(nodes), name, ntype, data_deps=sorted(set(deps)), **kw)
        nodes.append(node)
        return node.id


def lower(
    tg: TaskGraph,
    devices: list[Optional[int]],
    *,
    npus: Optional[int] = None,
    bytes_per_us: Optional[float] = None,
    latency_us: float = 0.0,
    metadata: Optional[dict] = None,
    max_npus: int = MAX_NPUS,
) -> Lowered:
    items, dropped = build_items(tg, devices, bytes_per_us, latency_us)
    used = [d for it in items for d in (it.device, it.src, it.dst) if d is not None]
    count = max(used, default=0) + 1
    if count > max_npus:
        # A device number is a claim of the file: one corrupt label must not make us write (or
        # allocate) millions of rank files.
        it = next(it for it in items if count - 1 in (it.device, it.src, it.dst))
        raise TraceFormatError(
            tg.graph.path,
            f"node {it.tasks[0].key} uses device {count - 1}: {count} rank files, over the limit of {max_npus} "
            f"(the tasks use {len(set(used))} distinct devices); raise the limit with --max-npus",
            line=it.tasks[0].line,
        )
    if npus is not None:
        if npus < count:
            raise TraceFormatError(tg.graph.path, f"uses device {count - 1} but --npus is {npus}")
        if npus > max_npus:
            raise InputError(f"--npus {npus} is over the limit of {max_npus} rank files; raise it with --max-npus")
        count = npus
    ranks = _Ranks(count)
    out = Lowered(traces=[], dropped_link_deps=dropped)
    done: dict[int, dict[int, list[int]]] = {}  # item -> device -> node ids marking its completion
    syncs: dict[tuple[int, int], int] = {}
    tag = 0

    def times(item: Item) -> dict:
        return {
            "start_time_micros": round(item.start_us) if item.start_us is not None else 0,
            "duration_micros": round(item.dur_us),
        }

    def message(item_name: str, src: int, dst: int, size: int, deps: list[int], extra: dict) -> tuple[int, int]:
        nonlocal tag
        attrs = {"is_cpu_op": False, "comm_src": src, "comm_dst": dst, "comm_tag": tag, "comm_size": size}
        send = ranks.add(src, item_name, NodeType.COMM_SEND_NODE, deps, attrs=attrs, **extra)
        recv = ranks.add(dst, item_name, NodeType.COMM_RECV_NODE, [], attrs=attrs, **extra)
        tag += 1
        return send, recv

    def need(pred: int, device: int) -> list[int]:
        where = done[pred]
        if device in where:
            return where[device]
        if not where:
            return []
        key = (pred, device)
        if key not in syncs:
            src = min(where)
            # one byte, not zero: ASTRA-sim asserts on a zero-byte message (chunk_size > 0)
            _, recv = message(f"sync after {items[pred].name}", src, device, 1, where[src], {})
            syncs[key] = recv
            out.sync_messages += 1
        return [syncs[key]]

    for i in _topo(items, tg):
        item = items[i]
        if item.kind == "comp":
            d = item.device
            assert d is not None
            deps = [x for p in item.preds for x in need(p, d)]
            attrs = {"is_cpu_op": False, "task_type": item.tasks[0].kind, "dot_node": item.tasks[0].key}
            nid = ranks.add(d, item.name, NodeType.COMP_NODE, deps, attrs=attrs, **times(item))
            done[i] = {d: [nid]}
            out.compute_nodes += 1
            continue
        s, t = item.src, item.dst
        assert s is not None and t is not None
        if s == t:
            merged: dict[int, list[int]] = {}
            for p in item.preds:
                for dev, ids in done[p].items():
                    merged.setdefault(dev, []).extend(ids)
            done[i] = merged
            out.local_transfers += 1
            continue
        deps = [x for p in item.preds for x in need(p, s)]
        send, recv = message(item.name, s, t, item.size, deps, times(item))
        done[i] = {s: [send], t: [recv]}
        out.messages += 1

    meta = metadata or {}
    out.traces = [
        Trace(metadata=make_metadata(**meta, rank=r, num_npus=count), nodes=nodes, rank=r)
        for r, nodes in enumerate(ranks.nodes)
    ]
    return out

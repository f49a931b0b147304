"""Graph-transformation primitives for what-if analysis (after Daydream, ATC'20 §4.4).

A what-if question ("what if the optimizer were fused?", "what if we trained on 4 ranks?") is
answered by editing the dependency graph of a recorded trace and simulating it again. Daydream
found that a handful of primitives model most optimizations: *select* tasks, *scale/set* their
durations, *insert/remove* tasks with their dependencies repaired, and *schedule* (a pluggable
policy, see `chakra.sim.policies`). This module is those primitives over Chakra traces:

- `Graph(trace)` wraps one rank's `Trace` with a child index so edits are O(degree);
- predicates (`by_type`, `by_resource`, `by_name`, `by_annotation`, `by_attr`) combine with
  `&`, `|`, `~` and select nodes (`Graph.select`, or `select(traces, pred, ranks=...)`);
- `scale` / `set_duration` change durations; `insert` / `insert_gpu_task` add nodes (a GPU task
  brings its CPU launch task, as in Daydream's Figure 4); `remove` bridges dependencies;
  `fuse` replaces a set of nodes by one node.

Durations are `duration_micros` (integer µs, as the schema and the simulator read them); scaled
values are rounded to the nearest µs and a positive duration never rounds to 0.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Optional, Union

from chakra.errors import InputError
from chakra.graph import topo_order
from chakra.schema import NodeType, pb
from chakra.schema.attrs import get_attr
from chakra.schema.kinds import RESOURCES, resource_of
from chakra.trace import Trace, make_node


def node_deps(node: pb.Node) -> set[int]:
    return set(node.ctrl_deps).union(node.data_deps)


# ----------------------------------------------------------------------------- predicates


class Pred:
    """A node predicate that composes with `&`, `|` and `~`."""

    def __init__(self, fn: Callable[[pb.Node], bool], text: str = "pred") -> None:
        self.fn = fn
        self.text = text

    def __call__(self, node: pb.Node) -> bool:
        return bool(self.fn(node))

    def __and__(self, other: Callable[[pb.Node], bool]) -> Pred:
        return Pred(lambda n: self.fn(n) and other(n), f"({self.text} & {_text(other)})")

    def __or__(self, other: Callable[[pb.Node], bool]) -> Pred:
        return Pred(lambda n: self.fn(n) or other(n), f"({self.text} | {_text(other)})")

    def __invert__(self) -> Pred:
        return Pred(lambda n: not self.fn(n), f"~{self.text}")

    def __repr__(self) -> str:
        return f"Pred({self.text})"


def _text(p: Any) -> str:
    return p.text if isinstance(p, Pred) else getattr(p, "__name__", "fn")


def by_type(*types: int) -> Pred:
    """Nodes of the given NodeType values."""
    ts = frozenset(int(t) for t in types)
    return Pred(lambda n: n.type in ts, f"type in {sorted(ts)}")


def by_resource(*resources: str) -> Pred:
    """Nodes whose execution thread (see `resource_of`) is one of cpu/gpu/comm/mem/meta."""
    bad = [r for r in resources if r not in RESOURCES]
    if bad:
        raise InputError(f"unknown resource {bad[0]!r}; choose from {', '.join(RESOURCES)}")
    rs = frozenset(resources)
    return Pred(lambda n: resource_of(n) in rs, f"resource in {sorted(rs)}")


def by_name(pattern: str, *, flags: int = 0) -> Pred:
    """Nodes whose name contains a match of the regular expression `pattern`."""
    try:
        rx = re.compile(pattern, flags)
    except re.error as exc:
        raise InputError(f"bad name pattern {pattern!r}: {exc}") from None
    return Pred(lambda n: rx.search(n.name) is not None, f"name~/{pattern}/")


def by_attr(name: str, test: Callable[[Any], bool]) -> Pred:
    """Nodes having attribute `name` whose value passes `test`."""

    def fn(n: pb.Node) -> bool:
        v = get_attr(n, name, None)
        return v is not None and test(v)

    return Pred(fn, f"attr {name}")


def by_ids(ids: Iterable[int]) -> Pred:
    s = frozenset(ids)
    return Pred(lambda n: n.id in s, f"{len(s)} ids")


# ----------------------------------------------------------------------------- the editable graph


@dataclass
class EditLog:
    """What a sequence of edits did (recipes print it)."""

    scaled: int = 0
    inserted: int = 0
    removed: int = 0
    fused: int = 0


class Graph:
    """One rank's trace, editable: nodes by id (in file order) plus a child index.

    Edits mutate the wrapped protobuf nodes; `to_trace()` returns a Trace whose nodes are in a
    dependency-respecting order (new nodes land after their parents).
    """

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.rank = trace.rank
        self.nodes: dict[int, pb.Node] = {}
        for n in trace.nodes:
            if n.id in self.nodes:
                raise InputError(f"{trace.path or 'trace'}: duplicate node id {n.id}")
            self.nodes[n.id] = n
        self.children: dict[int, set[int]] = {i: set() for i in self.nodes}
        for n in trace.nodes:
            for d in node_deps(n):
                if d in self.children and d != n.id:
                    self.children[d].add(n.id)
        self._next_id = max(self.nodes, default=-1) + 1
        self.log = EditLog()

    # -- lookup ------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.nodes)

    def __contains__(self, node_id: int) -> bool:
        return node_id in self.nodes

    def __getitem__(self, node_id: int) -> pb.Node:
        try:
            return self.nodes[node_id]
        except KeyError:
            raise InputError(f"{self.trace.path or 'trace'}: no node with id {node_id}") from None

    def parents(self, node_id: int) -> set[int]:
        return {d for d in node_deps(self[node_id]) if d in self.nodes}

    def select(self, pred: Optional[Callable[[pb.Node], bool]] = None) -> list[pb.Node]:
        """Nodes (in file order) for which `pred` holds; all nodes when pred is None."""
        if pred is None:
            return list(self.nodes.values())
        return [n for n in self.nodes.values() if pred(n)]

    def new_id(self) -> int:
        i = self._next_id
        self._next_id += 1
        return i

    # -- durations ---------------------------------------------------------------------------
    def scale(self, nodes: Iterable[Union[pb.Node, int]], factor: float) -> int:
        """Multiply durations by `factor` (>= 0); returns how many nodes changed."""
        if factor < 0:
            raise InputError(f"scale factor must be >= 0, got {factor}")
        return self._set_durations(nodes, lambda us: scaled_us(us, factor))

    def set_duration(self, nodes: Iterable[Union[pb.Node, int]], duration_us: float) -> int:
        if duration_us < 0:
            raise InputError(f"duration must be >= 0, got {duration_us}")
        fixed = int(round(duration_us))
        return self._set_durations(nodes, lambda _us: fixed)

    def add_duration(self, nodes: Iterable[Union[pb.Node, int]], delta_us: float) -> int:
        """Lengthen (or, negative, shorten down to 0) each node by `delta_us`; returns how many changed."""
        delta = int(round(delta_us))
        return self._set_durations(nodes, lambda us: max(0, us + delta))

    def _set_durations(self, nodes: Iterable[Union[pb.Node, int]], new_us: Callable[[int], int]) -> int:
        """Give each node (or node id) the duration `new_us(old duration)`; returns how many changed."""
        count = 0
        for n in nodes:
            node = self[n] if isinstance(n, int) else n
            node.duration_micros = new_us(node.duration_micros)
            count += 1
        self.log.scaled += count
        return count

    # -- dependency edits --------------------------------------------------------------------
    def add_dep(self, child: int, parent: int, *, data: bool = False) -> None:
        node = self[child]
        self[parent]
        if parent == child or parent in node.ctrl_deps or parent in node.data_deps:
            return
        (node.data_deps if data else node.ctrl_deps).append(parent)
        self.children[parent].add(child)

    def drop_dep(self, child: int, parent: int) -> str:
        """Remove the edge parent -> child; returns which kind it was ('ctrl', 'data', '')."""
        node = self[child]
        kind = ""
        for field, name in ((node.ctrl_deps, "ctrl"), (node.data_deps, "data")):
            if parent in field:
                kept = [d for d in field if d != parent]
                del field[:]
                field.extend(kept)
                kind = kind or name
        if parent in self.children:
            self.children[parent].discard(child)
        return kind

    # -- insert ------------------------------------------------------------------------------
    def insert(
        self,
        name: str,
        node_type: int = NodeType.COMP_NODE,
        *,
        after: Iterable[int] = (),
        before: Iterable[int] = (),
        between: Optional[tuple[int, int]] = None,
        splice: bool = False,
        duration_us: float = 0,
        attrs: Optional[Mapping[str, Any]] = None,
        node_id: Optional[int] = None,
    ) -> pb.Node:
        """Add a node that runs after every `after` node and before every `before` node.

        `between=(a, b)` puts it on the edge a -> b (the direct edge is replaced by a -> new -> b).
        `splice=True` also moves the existing children of the `after` nodes behind the new node,
        which is Daydream's "append into the execution thread": a CPU task inserted into a
        chain delays everything that followed its predecessor.
        """
        after = list(after)
        before = list(before)
        for i in after + before:
            self[i]
        if between is not None:
            a, b = between
            self[a]
            self[b]
            after.append(a)
            before.append(b)
        nid = self.new_id() if node_id is None else node_id
        if nid in self.nodes:
            raise InputError(f"node id {nid} already exists")
        node = make_node(nid, name, node_type, duration_micros=int(round(duration_us)), attrs=dict(attrs or {}))
        self.nodes[nid] = node
        self.children[nid] = set()
        self._next_id = max(self._next_id, nid + 1)
        spliced: set[int] = set()
        if splice:
            for a in after:
                for c in list(self.children[a]):
                    if c == nid:
                        continue
                    kind = self.drop_dep(c, a)
                    self.add_dep(c, nid, data=kind == "data")
                    spliced.add(c)
        if between is not None:
            kind = self.drop_dep(between[1], between[0])
            self.add_dep(between[1], nid, data=kind == "data")
        for a in after:
            self.add_dep(nid, a)
        for b in before:
            self.add_dep(b, nid)
        self.log.inserted += 1
        return node

    def insert_gpu_task(
        self,
        name: str,
        duration_us: float,
        *,
        cpu_after: int,
        launch_us: float,
        gpu_after: Iterable[int] = (),
        before: Iterable[int] = (),
        attrs: Optional[Mapping[str, Any]] = None,
    ) -> tuple[pb.Node, pb.Node]:
        """Insert a GPU kernel together with the CPU task that launches it (Daydream Fig. 4b).

        The launch task is spliced into the CPU chain right after `cpu_after` (so later CPU work
        shifts by `launch_us`), and the kernel depends on the launch and on `gpu_after`.
        Returns (launch node, kernel node).
        """
        launch = self.insert(
            f"launch: {name}",
            NodeType.COMP_NODE,
            after=[cpu_after],
            splice=True,
            duration_us=launch_us,
            attrs={"is_cpu_op": True},
        )
        kattrs = {"is_cpu_op": False}
        kattrs.update(attrs or {})
        kernel = self.insert(
            name,
            NodeType.COMP_NODE,
            after=[launch.id, *gpu_after],
            before=before,
            duration_us=duration_us,
            attrs=kattrs,
        )
        return launch, kernel

    # -- remove ------------------------------------------------------------------------------
    def remove(self, nodes: Iterable[Union[pb.Node, int]], *, bridge: bool = True) -> int:
        """Delete nodes; with `bridge`, each child inherits the removed node's parents.

        The bridged edge keeps the kind (ctrl or data) of the child's edge to the removed node,
        so an order that went through the removed node still holds.
        """
        ids = [n if isinstance(n, int) else n.id for n in nodes]
        for i in ids:
            self[i]
        for i in ids:
            node = self.nodes[i]
            parents = [d for d in node_deps(node) if d in self.nodes and d != i]
            for c in list(self.children[i]):
                if c not in self.nodes:
                    continue
                kind = self.drop_dep(c, i)
                if bridge:
                    for p in parents:
                        self.add_dep(c, p, data=kind == "data")
            for p in parents:
                self.children[p].discard(i)
            del self.nodes[i]
            del self.children[i]
        self.log.removed += len(ids)
        return len(ids)

    # -- fuse --------------------------------------------------------------------------------
    def fuse(
        self,
        nodes: Iterable[Union[pb.Node, int]],
        name: str,
        *,
        duration_us: Optional[float] = None,
        node_type: Optional[int] = None,
        attrs: Optional[Mapping[str, Any]] = None,
    ) -> pb.Node:
        """Replace a set of nodes by one node (the smallest id is kept for it).

        The fused node depends on every parent outside the set and every child outside the set
        depends on it. Duration defaults to the sum of the members; `num_ops` and `tensor_size`
        are summed; type and `is_cpu_op` come from the first member unless given.
        """
        members = sorted({n if isinstance(n, int) else n.id for n in nodes})
        if not members:
            raise InputError(f"fuse {name!r}: no nodes selected")
        group = set(members)
        first = self[members[0]]
        ext_parents: dict[int, str] = {}
        ext_children: dict[int, str] = {}
        total_us = 0
        num_ops = 0
        tensor_size = 0
        for i in members:
            n = self[i]
            total_us += n.duration_micros
            num_ops += int(get_attr(n, "num_ops", 0) or 0)
            tensor_size += int(get_attr(n, "tensor_size", 0) or 0)
            for d in n.data_deps:
                if d not in group and d in self.nodes:
                    ext_parents[d] = "data"
            for d in n.ctrl_deps:
                if d not in group and d in self.nodes:
                    ext_parents.setdefault(d, "ctrl")
            for c in self.children[i]:
                if c not in group:
                    kind = "data" if i in self.nodes[c].data_deps else "ctrl"
                    if ext_children.get(c) != "data":
                        ext_children[c] = kind
        fused_attrs: dict[str, Any] = {}
        cpu = get_attr(first, "is_cpu_op", None)
        if cpu is not None:
            fused_attrs["is_cpu_op"] = bool(cpu)
        if num_ops:
            fused_attrs["num_ops"] = num_ops
        if tensor_size:
            fused_attrs["tensor_size"] = tensor_size
        fused_attrs.update(attrs or {})
        ntype = first.type if node_type is None else node_type
        self.remove(members, bridge=False)
        self.log.removed -= len(members)
        node = make_node(
            members[0],
            name,
            ntype,
            duration_micros=int(round(total_us if duration_us is None else duration_us)),
            start_time_micros=first.start_time_micros,
            attrs=fused_attrs,
        )
        self.nodes[node.id] = node
        self.children[node.id] = set()
        for p, kind in ext_parents.items():
            self.add_dep(node.id, p, data=kind == "data")
        for c, kind in ext_children.items():
            self.add_dep(c, node.id, data=kind == "data")
        self.log.fused += len(members)
        return node

    # -- output ------------------------------------------------------------------------------
    def to_trace(self) -> Trace:
        """A Trace of the edited nodes, parents before children, sharing this graph's messages."""
        nodes = list(self.nodes.values())
        try:
            order = topo_order(nodes)
        except ValueError as exc:
            raise InputError(f"{self.trace.path or 'trace'}: the edit made a cycle: {exc}") from None
        return Trace(metadata=self.trace.metadata, nodes=[nodes[i] for i in order], rank=self.rank, path=None)


def scaled_us(duration_us: int, factor: float) -> int:
    """Round duration*factor to whole µs, keeping a positive duration positive."""
    if duration_us <= 0:
        return 0
    return max(1, int(round(duration_us * factor))) if factor > 0 else 0


# ----------------------------------------------------------------------------- whole trace sets


def graphs(traces: Sequence[Trace]) -> list[Graph]:
    """One Graph per rank (rank = the trace's rank or its position)."""
    out = []
    for i, t in enumerate(traces):
        if t.rank is None:
            t.rank = i
        out.append(Graph(t))
    return out


def select(
    gs: Sequence[Graph], pred: Optional[Callable[[pb.Node], bool]] = None, *, ranks: Optional[Iterable[int]] = None
) -> list[tuple[Graph, pb.Node]]:
    """(graph, node) pairs over the chosen ranks (all when None) for which `pred` holds."""
    want = None if ranks is None else set(ranks)
    return [(g, n) for g in gs if want is None or g.rank in want for n in g.select(pred)]


def by_annotation(graph: Graph, pattern: str) -> Pred:
    """Nodes inside a region whose name matches `pattern` (a layer, `Optimizer.step`, ...).

    Daydream maps tasks to layers by time: a task belongs to a layer when it runs inside the
    layer's [start, end] window. Here a node is inside when it matches itself, or its recorded
    interval lies within the interval of a matching node, or its `fw_parent` attribute names a
    matching node. Needs `start_time_micros` on the nodes for the time rule. A region's window
    uses its `inclusive_dur` attribute when present (converters that split nested operators into
    exclusive durations keep the nested span there).
    """
    rx = re.compile(pattern)
    anchors = [n for n in graph.nodes.values() if rx.search(n.name)]
    anchor_ids = {a.id for a in anchors}
    # Union of the anchors' windows as disjoint intervals (nested regions collapse).
    merged: list[list[int]] = []
    for ws, we in sorted((a.start_time_micros, a.start_time_micros + span_us(a)) for a in anchors):
        if merged and ws <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], we)
        else:
            merged.append([ws, we])
    starts = [m[0] for m in merged]

    def inside(n: pb.Node) -> bool:
        if n.id in anchor_ids or get_attr(n, "fw_parent", None) in anchor_ids:
            return True
        k = bisect.bisect_right(starts, n.start_time_micros) - 1
        return k >= 0 and n.start_time_micros + n.duration_micros <= merged[k][1] and merged[k][1] > merged[k][0]

    return Pred(inside, f"in /{pattern}/")


#: Sort key of nodes in recorded time order: by start, then id (ties keep the trace's order).
TIME_ORDER = attrgetter("start_time_micros", "id")


def span_us(node: pb.Node) -> int:
    """How long a node's region lasts: its `inclusive_dur` attribute if larger than its duration."""
    inc = get_attr(node, "inclusive_dur", None)
    try:
        return max(node.duration_micros, int(inc)) if inc is not None else node.duration_micros
    except (TypeError, ValueError):
        return node.duration_micros

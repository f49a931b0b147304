"""One rank's nodes as columns: one streamed pass, no protobuf object kept per node.

`validate`, `stats` (and whatever else only needs ids, types, durations and dependencies) read a
rank with `scan`: it walks the nodes once (from a file, batch by batch, or from an in-memory
list), keeps ids, types, durations and dependency edges in flat arrays (8 bytes a value) and hands
the few nodes that need a closer look (any node with attributes, any non-compute node) to a
callback while they are alive. The graph algorithms here (topological sort, cycle, critical
path) then run on integer arrays, with the same tie-breaking as `chakra.graph` so results match.

`TraceFile` is a trace whose `nodes` are re-read from disk on each iteration: what the commands
that only stream pass around instead of a fully decoded `Trace`.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union

import numpy as np

from chakra.schema import NodeType, pb
from chakra.trace import Trace

if TYPE_CHECKING:
    from chakra.io import Progress

_GET = attrgetter("id", "type", "duration_micros", "ctrl_deps", "data_deps")
_BATCH = 65536
COMP = int(NodeType.COMP_NODE)


class TraceFile:
    """A `.et` trace read lazily: `metadata` now, `nodes` streamed from disk each time they are walked."""

    def __init__(self, path: Path, rank: Optional[int]) -> None:
        from chakra.io import TraceReader

        self.path = Path(path)
        self.rank = rank
        with TraceReader(self.path) as reader:
            self.metadata = reader.metadata

    @property
    def nodes(self) -> Iterable[pb.Node]:
        return _Stream(self.path)

    def node_batches(self) -> Iterator[Sequence[pb.Node]]:
        from chakra.io import TraceReader

        return TraceReader(self.path)._node_batches()


class _Stream:
    def __init__(self, path: Path) -> None:
        self.path = path

    def __iter__(self) -> Iterator[pb.Node]:
        from chakra.io import TraceReader

        return iter(TraceReader(self.path))


AnyTrace = Union[Trace, TraceFile]


def open_traces(args: Sequence[Any], progress: Optional[Progress] = None) -> list[AnyTrace]:
    """`chakra.io.read_traces` for commands that stream: `.et` files stay on disk (`TraceFile`);
    JSON traces, which cannot be streamed node by node, are read whole."""
    from chakra.io import is_json_file, open_each, rank_from_path, read_trace

    def open_one(path: Path, rank: Optional[int]) -> AnyTrace:
        if is_json_file(path):
            return read_trace(path, rank=rank)
        return TraceFile(path, rank if rank is not None else rank_from_path(path))

    return open_each(args, open_one, progress)


def _batches(trace: AnyTrace) -> Iterator[Sequence[pb.Node]]:
    if isinstance(trace, TraceFile):
        return trace.node_batches()
    nodes = trace.nodes
    return (nodes[k : k + _BATCH] for k in range(0, len(nodes), _BATCH))


@dataclass
class Columns:
    """Per node (by position in the file): id, type, duration (µs); dependency edges as
    (child position, parent id) in file order, ctrl_deps and data_deps apart. `merged` holds, for
    nodes listing both kinds, their union in `chakra.graph`'s order (it decides ties)."""

    ids: np.ndarray
    types: np.ndarray
    dur_us: np.ndarray
    ctrl_child: np.ndarray
    ctrl_parent: np.ndarray
    data_child: np.ndarray
    data_parent: np.ndarray
    merged: dict[int, list[int]]

    def __len__(self) -> int:
        return len(self.ids)


def scan(
    trace: AnyTrace,
    visit: Optional[Callable[[int, pb.Node], None]] = None,
    on_batch: Optional[Callable[[int, Sequence[pb.Node]], None]] = None,
) -> Columns:
    """Walk a rank's nodes once into `Columns`; `visit(position, node)` sees every node that has
    attributes or is not a compute node (the only ones with more to check), while it is alive;
    `on_batch(first position, nodes)` sees every batch, for callers that keep more columns."""
    ids = array("Q")
    types = array("i")  # the proto enum is an int32
    dur = array("Q")
    edges = {"ctrl": (array("q"), array("Q")), "data": (array("q"), array("Q"))}
    merged: dict[int, list[int]] = {}
    pos = 0
    for batch in _batches(trace):
        k = len(batch)
        if not k:
            continue
        bid, btype, bdur, bctrl, bdata = zip(*map(_GET, batch))
        ids.extend(bid)
        types.extend(btype)
        dur.extend(bdur)
        clens = list(map(len, bctrl))
        dlens = list(map(len, bdata))
        for name, lists, lens in (("ctrl", bctrl, clens), ("data", bdata, dlens)):
            if any(lens):
                child, parent = edges[name]
                parent.extend(chain.from_iterable(lists))
                child.frombytes(np.repeat(np.arange(pos, pos + k, dtype=np.int64), lens).tobytes())
        for j in (j for j in range(k) if clens[j] and dlens[j]):
            merged[pos + j] = list(set(bctrl[j]).union(bdata[j]))
        if on_batch is not None:
            on_batch(pos, batch)
        if visit is not None:
            for j in range(k):
                n = batch[j]
                if btype[j] != COMP or n.attr:
                    visit(pos + j, n)
        pos += k
    return Columns(
        np.frombuffer(ids, dtype=np.uint64) if ids else np.zeros(0, np.uint64),
        np.frombuffer(types, dtype=np.int32) if types else np.zeros(0, np.int32),
        np.frombuffer(dur, dtype=np.uint64) if dur else np.zeros(0, np.uint64),
        *(
            np.frombuffer(a, dtype=dt) if a else np.zeros(0, dt)
            for name in ("ctrl", "data")
            for a, dt in zip(edges[name], (np.int64, np.uint64))
        ),
        merged,
    )


# ---------------------------------------------------------------------------------------------
# Graph on columns


def positions(cols: Columns, parent_ids: np.ndarray) -> np.ndarray:
    """Position of each id in `parent_ids` (-1 when absent); a repeated id maps to its last node,
    as `chakra.graph.dependency_lists` does."""
    ids = cols.ids
    n = len(ids)
    if not n or not len(parent_ids):
        return np.full(len(parent_ids), -1, dtype=np.int64)
    if n == 1 or bool(np.all(ids[1:] > ids[:-1])):
        # ids ascending in the file (what writers do): positions are a search, no index needed
        uniq, last = ids, None
    else:
        uniq, first_rev = np.unique(ids[::-1], return_index=True)
        last = (n - 1 - first_rev).astype(np.int64)
        del first_rev
    j = np.searchsorted(uniq, parent_ids)
    j[j >= len(uniq)] = 0
    found = uniq[j] == parent_ids
    if last is not None:
        j = last[j]
    j[~found] = -1
    return j


def parent_lists(cols: Columns) -> tuple[np.ndarray, np.ndarray]:
    """CSR parents by position (ptr, idx) as `chakra.graph.dependency_lists` builds them: data_deps
    then ctrl_deps' union for nodes with both, else the one list given; unknown ids and self
    dependencies dropped."""
    n = len(cols.ids)
    child = np.concatenate([cols.data_child, cols.ctrl_child])
    parent = np.concatenate([cols.data_parent, cols.ctrl_parent])
    if cols.merged:
        both = np.fromiter(cols.merged, dtype=np.int64, count=len(cols.merged))
        keep = ~np.isin(child, both)
        child = np.concatenate([child[keep], np.repeat(both, [len(v) for v in cols.merged.values()])])
        parent = np.concatenate([parent[keep], np.fromiter(chain.from_iterable(cols.merged.values()), dtype=np.uint64)])
    # stable: a node's parents keep their order (data edges come before ctrl ones only for nodes
    # with one kind, so the order within a node is its list order)
    if len(child) > 1 and not bool(np.all(child[1:] >= child[:-1])):
        order = np.argsort(child, kind="stable")
        child, parent = child[order], parent[order]
        del order
    ppos = positions(cols, parent)
    del parent
    keep = (ppos >= 0) & (ppos != child)
    child, ppos = child[keep], ppos[keep]
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(child, minlength=n), out=ptr[1:])
    return ptr, ppos


def kahn(ptr: np.ndarray, parents: np.ndarray) -> tuple[Sequence[int], np.ndarray]:
    """`chakra.graph._kahn` on CSR parents: (order, stuck positions)."""
    n = len(ptr) - 1
    child_of = np.repeat(np.arange(n, dtype=np.int64), np.diff(ptr))
    indeg_np = np.diff(ptr)
    if not len(parents) or bool(np.all(parents < child_of)):
        # every edge points forward in the file: Kahn's stack-order on such a graph is not needed
        # by callers beyond "a valid order", and file order is one; nothing is stuck
        return range(n), np.zeros(0, np.int64)
    by_parent = np.argsort(parents, kind="stable")
    cptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(parents, minlength=n), out=cptr[1:])
    # memoryviews: Python-speed indexing of the numpy buffers without a copy
    children = memoryview(child_of[by_parent])
    cp = memoryview(cptr)
    indeg_np = indeg_np.copy()
    indeg = memoryview(indeg_np)
    stack = [int(i) for i in np.flatnonzero(indeg_np == 0)[::-1]]
    order = array("q")
    pop, push, add = stack.pop, stack.append, order.append
    while stack:
        i = pop()
        add(i)
        for k in range(cp[i], cp[i + 1]):
            c = children[k]
            indeg[c] -= 1
            if indeg[c] == 0:
                push(c)
    if len(order) == n:
        return order, np.zeros(0, np.int64)
    return order, np.flatnonzero(indeg_np > 0)


def find_cycle(cols: Columns) -> Optional[list[int]]:
    """`chakra.graph.find_cycle` on columns: ids of one cycle (first repeated last), or None."""
    ptr, parents = parent_lists(cols)
    _, stuck = kahn(ptr, parents)
    if not len(stuck):
        return None
    inside = np.zeros(len(cols.ids), dtype=bool)
    inside[stuck] = True
    seen: dict[int, int] = {}
    path: list[int] = []
    i = int(stuck[0])
    while i not in seen:
        seen[i] = len(path)
        path.append(i)
        i = next(int(p) for p in parents[ptr[i] : ptr[i + 1]] if inside[p])
    cycle = path[seen[i] :] + [i]
    cycle.reverse()
    return [int(cols.ids[k]) for k in cycle]


def critical_path(cols: Columns, dur_us: Optional[np.ndarray] = None) -> tuple[float, list[int]]:
    """`chakra.graph.critical_path` on columns: (length µs, node ids); ValueError on a cycle."""
    length, path = critical_positions(cols, dur_us)
    return length, cols.ids[np.frombuffer(path, dtype=np.int64)].tolist() if path else []


def critical_positions(cols: Columns, dur_us: Optional[np.ndarray] = None) -> tuple[float, Sequence[int]]:
    """`critical_path` as node positions (an int64 array.array: 8 bytes a node on long paths)."""
    n = len(cols.ids)
    if not n:
        return 0.0, []
    ptr, parents = parent_lists(cols)
    order, stuck = kahn(ptr, parents)
    if len(stuck):
        raise ValueError(f"dependency cycle among nodes {[int(cols.ids[i]) for i in stuck[:10]]}")
    dur = memoryview((cols.dur_us if dur_us is None else dur_us).astype(np.float64))
    fin = np.zeros(n, dtype=np.float64)
    best_np = np.zeros(n, dtype=np.int64)
    finish, best = memoryview(fin), memoryview(best_np)
    pp, par = memoryview(ptr), memoryview(parents)
    for i in order:
        start = 0.0
        bp = -1
        for k in range(pp[i], pp[i + 1]):
            p = par[k]
            f = finish[p]
            if f > start:
                start = f
                bp = p
        finish[i] = start + dur[i]
        best[i] = bp
    end = int(np.argmax(fin))
    path = array("q")
    i = end
    while i != -1:
        path.append(i)
        i = best[i]
    path.reverse()
    return float(fin[end]), path


def asap_starts(cols: Columns) -> Sequence[int]:
    """`chakra.graph.asap_starts` on columns: start (µs) of every node, by position, when each runs
    as soon as its dependencies end. ValueError on a cycle, worded as `chakra.graph.topo_order`."""
    n = len(cols.ids)
    ptr, parents = parent_lists(cols)
    order, stuck = kahn(ptr, parents)
    if len(stuck):
        ids = [int(cols.ids[i]) for i in stuck[:10]]
        raise ValueError(f"dependency cycle among nodes {ids}{' ...' if len(stuck) > 10 else ''}")
    if float(cols.dur_us.sum(dtype=np.float64)) < 2.0**62:
        # no chain can reach 2**63: int64 buffers, 8 bytes a node
        dur = memoryview(cols.dur_us.astype(np.int64))
        start_np = np.zeros(n, dtype=np.int64)
        end_np = np.zeros(n, dtype=np.int64)
        start, end = memoryview(start_np), memoryview(end_np)
    else:
        # Python ints: uint64 durations summed along a long chain must not wrap
        dur = cols.dur_us.tolist()
        start = [0] * n
        end = [0] * n
    pp, par = memoryview(ptr), memoryview(parents)
    for i in order:
        s = 0
        for k in range(pp[i], pp[i + 1]):
            e = end[par[k]]
            if e > s:
                s = e
        start[i] = s
        end[i] = s + dur[i]
    return start

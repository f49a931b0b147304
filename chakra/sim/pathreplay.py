"""A replay of recorded durations, answered as longest paths instead of by the event loop.

With `comm_mode="replay"` the simulator gives every slot class unlimited room and replays every
communication node from its recorded duration, so nothing waits for a resource or for another
rank: each node starts the moment its last dependency ends (a root at 0) and ends its delay later
(`duration_micros x 1000` ns, 0 becoming 1 ns; metadata and invalid nodes take none), and each
rank's schedule is the longest path through its own graph. The converter's fit of the profiler's
cost (converters/pytorch/overhead.py) replays the same traces a few dozen times with other host
durations; `PathReplay` reads a set of traces' structure once and answers each such replay with a
few numpy passes over the nodes plus one Python step per chain (a run of nodes each with one
parent that has one child: a thread's whole timeline is a single chain), to the ns of
`simulate(traces, comm_mode="replay", record_nodes=True)`.

What the replay does not cover, `PathReplay.build` declines (returns None) and the caller runs
the simulator: memory nodes (the memory model times them), a roofline system config, node ids
that repeat, dependencies on absent ids or a cycle (the simulator's errors say which).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from operator import attrgetter
from typing import Any, Optional

import numpy as np

from chakra.schema import NodeType
from chakra.sim.steps import STEP_RE, StepTime, step_time_of_ids
from chakra.trace import Trace

_NO_DELAY = (int(NodeType.METADATA_NODE), int(NodeType.INVALID_NODE))
_MEMORY = (int(NodeType.MEM_LOAD_NODE), int(NodeType.MEM_STORE_NODE))
_KNOWN = frozenset(int(v) for v in NodeType)
_DURATION = attrgetter("duration_micros")


class _Rank:
    """One rank's graph, its rows laid out in a topological order (the file's own, as converters
    write them, when it is one) and cut into chains: runs of rows each of which is the only child
    of the row before it and has no other parent."""

    def __init__(
        self, nodes: list[Any], ids: list[int], types: np.ndarray, order: np.ndarray, parent: np.ndarray,
        child: np.ndarray, durations: Optional[list[int]] = None,
    ) -> None:  # fmt: skip
        """`parent`/`child`: the edges as positions in `order` (parent before child). `durations`:
        the nodes' durations (µs), a list the caller changes between runs, in place of `nodes`."""
        n = len(ids)
        self.n = n
        self.nodes = nodes
        self.durations = durations
        self.row_of = dict(zip(ids, range(n)))
        # rows whose delay follows their duration (everything but metadata / invalid nodes)
        self.timed = ~np.isin(types, _NO_DELAY) & np.isin(types, list(_KNOWN))
        self.order = order  # rows, chain after chain
        indeg = np.bincount(child, minlength=n)
        outdeg = np.bincount(parent, minlength=n)
        only_parent = np.full(n, -1, dtype=np.int64)
        one = indeg[child] == 1
        only_parent[child[one]] = parent[one]
        pos = np.arange(n)
        cont = (only_parent == pos - 1) & (indeg == 1)
        cont[1:] &= outdeg[:-1] == 1
        cont[:1] = False
        self.heads = np.flatnonzero(~cont)  # position of each chain's first row
        self.chain_of_pos = np.cumsum(~cont) - 1
        # every chain head's dependencies: (chain of the parent, position of the parent), by head
        at_head = ~cont[child]
        by_child = np.argsort(child[at_head], kind="stable")
        head_child = child[at_head][by_child]
        self.parent_pos = parent[at_head][by_child]
        self.parent_chain = self.chain_of_pos[self.parent_pos].tolist()
        bounds = np.searchsorted(head_child, self.heads, side="left").tolist()
        self.lo = [*bounds, len(head_child)]
        self.start = np.zeros(n, dtype=np.int64)
        self.end = np.zeros(n, dtype=np.int64)
        self.read: Optional[np.ndarray] = None  # the durations the last run without an override read

    def run(self, override: Optional[tuple[Any, Any]] = None) -> int:
        """Start and end of every row (ns) from the nodes' current durations, or with `override`
        (rows, durations µs) in place of theirs, the other rows as the last run without one read
        them; returns the finish."""
        n = self.n
        if not n:
            return 0
        if override is None or self.read is None:
            if self.durations is not None:
                self.read = np.asarray(self.durations, dtype=np.int64)
            else:
                self.read = np.fromiter(map(_DURATION, self.nodes), dtype=np.int64, count=n)
        dur = self.read
        if override is not None:
            dur = dur.copy()
            dur[np.asarray(override[0], dtype=np.int64)] = override[1]
        delay = np.where(self.timed, np.where(dur > 0, dur * 1000, 1), 0)
        d = delay[self.order]
        cs = np.cumsum(d)
        before = cs - d  # sum of the delays ahead in the whole order, at each position
        base = before[self.heads]  # ... at each chain's head
        # end of a parent = its chain's start + its offset in the chain
        off = (cs[self.parent_pos] - base[self.chain_of_pos[self.parent_pos]]).tolist()
        chain_start = [0] * len(self.heads)
        lo, pc = self.lo, self.parent_chain
        for k in range(len(chain_start)):
            a, b = lo[k], lo[k + 1]
            if a != b:
                chain_start[k] = max([chain_start[pc[j]] + off[j] for j in range(a, b)])
        starts = np.asarray(chain_start, dtype=np.int64)
        end = starts[self.chain_of_pos] + cs - base[self.chain_of_pos]
        self.end[self.order] = end
        self.start[self.order] = end - d
        return int(end.max())


class _Times:
    """One rank's node times as `SimResult.node_times` gives them: id -> (start ns, end ns)."""

    def __init__(self, rank: _Rank) -> None:
        self._rank = rank

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._rank.row_of

    def __getitem__(self, node_id: int) -> tuple[int, int]:
        row = self._rank.row_of[node_id]
        return int(self._rank.start[row]), int(self._rank.end[row])

    def get(self, node_id: int, default: Any = None) -> Any:
        row = self._rank.row_of.get(node_id)
        return default if row is None else (int(self._rank.start[row]), int(self._rank.end[row]))


class _Finish:
    __slots__ = ("finish_ns",)

    def __init__(self, finish_ns: int) -> None:
        self.finish_ns = finish_ns


class PathResult:
    """What the fit reads of a `SimResult`: `ranks[r].finish_ns` and `node_times[r][id]`."""

    def __init__(self, ranks: dict[int, _Finish], node_times: dict[int, _Times]) -> None:
        self.ranks = ranks
        self.node_times = node_times


class PathReplay:
    """`simulate(traces, comm_mode="replay", record_nodes=True)` for traces whose durations
    change between runs (module docstring). Make one with `build`; `run()` reads the nodes'
    durations as they are now."""

    def __init__(
        self, traces: Sequence[Trace], ranks: list[tuple[int, _Rank]], step_ids: Optional[dict[int, list[int]]] = None
    ) -> None:
        self.traces = traces
        self.ranks = ranks
        if step_ids is None:
            step_ids = {r: [i for _, i in sorted(_marks(t))] for (r, _), t in zip(ranks, traces)}
        self.step_ids = step_ids

    @classmethod
    def build(
        cls,
        traces: Sequence[Trace],
        system: Any = None,
        step_ids: Optional[dict[int, list[int]]] = None,
        columns: Optional[Sequence[tuple]] = None,
    ) -> Optional[PathReplay]:
        """The replay of `traces` (ranks by `.rank`, else position), or None where it would not be
        the simulator's (module docstring). `system`: the system config the simulator would use
        (None: the bundled one, which has no roofline). `step_ids`: rank -> its `ProfilerStep#k`
        ids in step order (`chakra.sim.steps.step_node_ids`), when the caller has them; `columns`:
        each trace's node ids and types in node order, likewise, optionally followed by the nodes'
        (data dependencies, control dependencies) and a list of their durations (then the trace
        need hold no nodes: converters/pytorch/columns.py)."""
        if system is not None and getattr(system, "roofline_enabled", False):
            return None
        ranks = []
        for pos, t in enumerate(traces):
            got = _compile(list(t.nodes), *(columns[pos] if columns is not None else ()))
            if got is None:
                return None
            ranks.append((t.rank if t.rank is not None else pos, got))
        if sorted(r for r, _ in ranks) != list(range(len(ranks))):
            return None
        return cls(traces, ranks, step_ids)

    def run(self, overrides: Optional[dict[int, tuple[Any, Any]]] = None) -> PathResult:
        """A replay of the nodes' current durations; `overrides`: rank -> (rows, durations µs)
        to use instead of those rows' (the other rows as the last run without one read them)."""
        overrides = overrides or {}
        finishes = {r: _Finish(rk.run(overrides.get(r))) for r, rk in self.ranks}
        return PathResult(finishes, {r: _Times(rk) for r, rk in self.ranks})

    def step(self, res: PathResult) -> StepTime:
        """`chakra.sim.steps.step_time` of a run, with the step marks found once."""
        return step_time_of_ids(self.step_ids, {r: v.finish_ns for r, v in res.ranks.items()}, res.node_times)


def _marks(trace: Trace) -> list[tuple[int, int]]:
    return [(int(n.name.rsplit("#", 1)[1]), n.id) for n in trace.nodes if STEP_RE.match(n.name)]


def _compile(
    nodes: list[Any],
    ids: Optional[list[int]] = None,
    kinds: Optional[list[int]] = None,
    deps: Optional[tuple[list[Any], list[Any]]] = None,
    durations: Optional[list[int]] = None,
) -> Optional[_Rank]:
    """One rank's chains, or None (memory nodes, repeated ids, absent dependencies, a cycle).
    `ids`, `kinds`: the nodes' ids and types, when the caller has read them already; `deps`
    (their data and their control dependencies, two lists) and `durations`: likewise, with no
    `nodes` (`PathReplay.build`)."""
    n = len(ids) if ids is not None and kinds is not None else len(nodes)
    if ids is None or kinds is None:
        ids, kinds = [x.id for x in nodes], [x.type for x in nodes]
    types = np.asarray(kinds, dtype=np.int64) if n else np.zeros(0, dtype=np.int64)
    if np.isin(types, _MEMORY).any():
        return None
    id_arr = np.asarray(ids, dtype=np.uint64)
    by_id = np.argsort(id_arr, kind="stable")
    sorted_ids = id_arr[by_id]
    if n > 1 and (sorted_ids[1:] == sorted_ids[:-1]).any():
        return None
    # the edges, as rows: a dependency's order within its node does not matter (a max)
    data, ctrl = deps if deps is not None else ([x.data_deps for x in nodes], [x.ctrl_deps for x in nodes])
    counts = np.fromiter(map(len, data), dtype=np.int64, count=n) + np.fromiter(map(len, ctrl), dtype=np.int64, count=n)
    m = int(counts.sum())
    flat = itertools.chain.from_iterable(itertools.chain.from_iterable(zip(data, ctrl)))  # node by node: data, ctrl
    dep_ids = np.fromiter(flat, dtype=np.uint64, count=m)
    child = np.repeat(np.arange(n, dtype=np.int64), counts)
    at = np.searchsorted(sorted_ids, dep_ids)
    if m and (at.max() >= n or (sorted_ids[np.minimum(at, n - 1)] != dep_ids).any()):
        return None  # a dependency on an absent id
    parent = by_id[at].astype(np.int64) if m else np.zeros(0, dtype=np.int64)
    if (parent < child).all():
        order = np.arange(n, dtype=np.int64)  # the file's order is a topological one
        return _Rank(nodes, ids, types, order, parent, child, durations)
    topo = _topological(n, parent.tolist(), child.tolist())
    if topo is None:
        return None  # a cycle
    order = np.asarray(topo, dtype=np.int64)
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    return _Rank(nodes, ids, types, order, pos[parent], pos[child], durations)


def _topological(n: int, parent: list[int], child: list[int]) -> Optional[list[int]]:
    """Rows in a topological order (Kahn's, smallest row first), or None for a cycle."""
    import heapq

    children: list[list[int]] = [[] for _ in range(n)]
    left = [0] * n
    for p, c in zip(parent, child):
        children[p].append(c)
        left[c] += 1
    ready = [r for r in range(n) if not left[r]]
    out = []
    while ready:
        r = heapq.heappop(ready)
        out.append(r)
        for c in children[r]:
            left[c] -= 1
            if not left[c]:
                heapq.heappush(ready, c)
    return out if len(out) == n else None


__all__ = ["PathReplay", "PathResult"]

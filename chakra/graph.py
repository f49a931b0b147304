"""Graph algorithms over one rank's nodes: topological order, cycles, critical path.

All iterative (no recursion), linear in nodes + edges, so they work on millions of nodes.
A dependency on an id absent from the node list is ignored here; `chakra.validate` reports it.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence
from typing import Optional

from chakra.schema import pb

DurationFn = Callable[[pb.Node], float]


def _deps(node: pb.Node) -> Iterable[int]:
    if node.data_deps:
        if node.ctrl_deps:
            return set(node.ctrl_deps).union(node.data_deps)
        return node.data_deps
    return node.ctrl_deps


def dependency_lists(nodes: Sequence[pb.Node]) -> tuple[dict[int, int], list[list[int]]]:
    """(id -> index, parents as index lists) with deps on unknown ids and self-deps dropped."""
    index = {n.id: i for i, n in enumerate(nodes)}
    parents: list[list[int]] = []
    get = index.get
    for i, n in enumerate(nodes):
        ps = []
        for d in _deps(n):
            j = get(d)
            if j is not None and j != i:
                ps.append(j)
        parents.append(ps)
    return index, parents


def topo_order(nodes: Sequence[pb.Node]) -> list[int]:
    """Indices of `nodes` in a dependency-respecting order (Kahn; ties by position).

    Raises ValueError listing some node ids on a cycle when the graph is not a DAG.
    """
    _, parents = dependency_lists(nodes)
    order, cyclic = kahn(parents)
    if cyclic:
        ids = [nodes[i].id for i in cyclic[:10]]
        raise ValueError(f"dependency cycle among nodes {ids}{' ...' if len(cyclic) > 10 else ''}")
    return order


def kahn(parents: Sequence[Sequence[int]]) -> tuple[list[int], list[int]]:
    """Kahn's sort over index lists (`parents[i]`: the items i waits for): (order, stuck), where
    `stuck` lists, by index, the items that can never become ready (they sit on or behind a cycle)."""
    n = len(parents)
    indeg = [len(ps) for ps in parents]
    children: list[list[int]] = [[] for _ in range(n)]
    for i, ps in enumerate(parents):
        for p in ps:
            children[p].append(i)
    stack = [i for i in range(n - 1, -1, -1) if indeg[i] == 0]
    order: list[int] = []
    while stack:
        i = stack.pop()
        order.append(i)
        for c in children[i]:
            indeg[c] -= 1
            if indeg[c] == 0:
                stack.append(c)
    if len(order) == n:
        return order, []
    return order, [i for i in range(n) if indeg[i] > 0]


def asap_starts(nodes: Sequence[pb.Node]) -> list[int]:
    """Start time (µs, by position) of every node if each ran as soon as its dependencies
    finished, with unlimited resources: the dependency-only schedule.

    Raises ValueError on a dependency cycle, like `topo_order`.
    """
    order = topo_order(nodes)
    _, parents = dependency_lists(nodes)
    end = [0] * len(nodes)
    start = [0] * len(nodes)
    for i in order:
        s = max((end[p] for p in parents[i]), default=0)
        start[i] = s
        end[i] = s + nodes[i].duration_micros
    return start


def priority_topo_order(parents: Sequence[Sequence[int]], keys: Sequence) -> tuple[list[int], list[int]]:
    """Kahn's sort where, among ready items, the smallest `keys[i]` (then index) goes first.

    `parents[i]` lists the indices item i depends on. Returns (order, stuck): `stuck` holds the
    indices left on or behind a cycle (empty for a DAG), so callers word their own error.
    """
    n = len(parents)
    indeg = [0] * n
    children: list[list[int]] = [[] for _ in range(n)]
    for i, ps in enumerate(parents):
        for p in ps:
            children[p].append(i)
            indeg[i] += 1
    ready = [(keys[i], i) for i in range(n) if indeg[i] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        _, i = heapq.heappop(ready)
        order.append(i)
        for c in children[i]:
            indeg[c] -= 1
            if indeg[c] == 0:
                heapq.heappush(ready, (keys[c], c))
    return order, ([] if len(order) == n else [i for i in range(n) if indeg[i] > 0])


def find_cycle(nodes: Sequence[pb.Node]) -> Optional[list[int]]:
    """Ids forming one dependency cycle (first node repeated at the end), or None for a DAG."""
    _, parents = dependency_lists(nodes)
    _, stuck = kahn(parents)
    if not stuck:
        return None
    cycle = stuck_cycle(parents, stuck, stuck[0])
    cycle = [*cycle, cycle[0]]
    cycle.reverse()
    return [nodes[k].id for k in cycle]


def stuck_cycle(parents: Sequence[Sequence[int]], stuck: Iterable[int], start: int) -> list[int]:
    """One cycle among the `stuck` items of `kahn`, found from `start`: indices in walk order,
    each waiting for the next (and the last for the first)."""
    stuck_set = set(stuck)
    # Walk parent links inside the stuck set until an item repeats: that walk closes a cycle.
    seen: dict[int, int] = {}
    path: list[int] = []
    i = start
    while i not in seen:
        seen[i] = len(path)
        path.append(i)
        i = next(p for p in parents[i] if p in stuck_set)
    return path[seen[i] :]


def cycle_breaking_edges(nodes: Sequence[pb.Node]) -> list[tuple[int, int]]:
    """(child id, parent id) dependencies whose removal leaves a DAG.

    Inside each strongly connected component (the only place cycles live), every dependency on a
    node with a higher id than its child's is removed: traces are written roughly in execution
    order, so those are the edges pointing backwards, and what remains in the component only goes
    from lower to higher ids, which cannot close a cycle. Linear time (Kahn, then Tarjan on the
    nodes Kahn could not order)."""
    _, parents = dependency_lists(nodes)
    _, stuck = kahn(parents)
    if not stuck:
        return []
    inside = set(stuck)
    comp = _components(
        stuck, [[p for p in parents[i] if p in inside] if i in inside else [] for i in range(len(nodes))]
    )
    removed = []
    for i in stuck:
        for p in parents[i]:
            if p in inside and comp[p] == comp[i] and nodes[p].id > nodes[i].id:
                removed.append((nodes[i].id, nodes[p].id))
    return removed


def _components(roots: list[int], succ: list[list[int]]) -> dict[int, int]:
    """Tarjan's strongly connected components (iterative) of the graph `succ` over `roots`."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    comp: dict[int, int] = {}
    stack: list[int] = []
    on: set[int] = set()
    counter = 0
    for root in roots:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            v, k = work.pop()
            if k == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on.add(v)
            nxt = succ[v]
            while k < len(nxt):
                w = nxt[k]
                k += 1
                if w not in index:
                    work.append((v, k))
                    work.append((w, 0))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                if low[v] == index[v]:
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp[w] = v
                        if w == v:
                            break
                if work:
                    u = work[-1][0]
                    low[u] = min(low[u], low[v])
    return comp


def critical_path(
    nodes: Sequence[pb.Node],
    duration_us: Optional[DurationFn] = None,
) -> tuple[float, list[int]]:
    """Length (µs) and node ids of the longest duration-weighted dependency chain.

    This is the replay time of the rank with unlimited resources. `duration_us` defaults to the
    node's `duration_micros`.
    """
    if not nodes:
        return 0.0, []
    _, parents = dependency_lists(nodes)
    order, cyclic = kahn(parents)
    if cyclic:
        raise ValueError(f"dependency cycle among nodes {[nodes[i].id for i in cyclic[:10]]}")
    dur = [float(duration_us(n)) for n in nodes] if duration_us else [float(n.duration_micros) for n in nodes]
    finish = [0.0] * len(nodes)
    best_parent = [-1] * len(nodes)
    for i in order:
        start = 0.0
        bp = -1
        for p in parents[i]:
            f = finish[p]
            if f > start:
                start = f
                bp = p
        finish[i] = start + dur[i]
        best_parent[i] = bp
    end = max(range(len(nodes)), key=finish.__getitem__)
    path = []
    i = end
    while i != -1:
        path.append(nodes[i].id)
        i = best_parent[i]
    path.reverse()
    return finish[end], path

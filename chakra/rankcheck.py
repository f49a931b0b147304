"""The single-rank checks of `chakra.validate` on columns: one streamed pass per rank.

Per-node checks that need the node itself (its type, attributes) run while the scan holds it;
the checks that need the whole rank (duplicate ids, dependencies on absent nodes, cycles) run
afterwards on the id and edge arrays. Findings reach the report in the order a node-by-node walk
would emit them (duplicates, then per node: its ctrl_deps, data_deps, then its own findings, then
the cycle), so the kept first-N of each kind are the same as with decoded nodes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any, Optional

import numpy as np

from chakra.columns import AnyTrace, Columns, find_cycle, scan
from chakra.schema import pb

NodeCheck = Callable[[pb.Node, Optional[int], Any], None]
OnNode = Callable[[int, pb.Node], None]


class _Buffer:
    """Collects findings with their place in a node-by-node walk; keeps the first `keep` per kind."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.kept: list[tuple[tuple, tuple]] = []  # ((position, part, k), add() arguments)
        self.counts: Counter = Counter()
        self.pos = 0
        self.seq = 0

    def add(self, severity: str, code: str, message: str, rank: Optional[int] = None, node_id: Optional[int] = None):
        self.put((self.pos, 2, self.seq), severity, code, message, rank, node_id)
        self.seq += 1

    def put(self, where: tuple, severity: str, code: str, message: str, rank: Optional[int], node_id: Optional[int]):
        key = (severity, code)
        self.counts[key] += 1
        if self.counts[key] <= self.keep:
            self.kept.append((where, (severity, code, message, rank, node_id)))

    def candidate(self, where: tuple, *args: Any) -> None:
        """A finding found out of walk order: kept for now, counted by the caller."""
        self.kept.append((where, args))

    def flush(self, report: Any) -> None:
        """Into the report in walk order: the first `keep` of each kind, then the rest as counts."""
        shown: Counter = Counter()
        for _where, args in sorted(self.kept, key=lambda kv: kv[0]):
            key = args[:2]
            if shown[key] < self.keep:
                shown[key] += 1
                report.add(*args)
        for key, n in self.counts.items():
            if n > shown[key]:
                report.counts[key] += n - shown[key]


def check_rank_columns(
    trace: AnyTrace, report: Any, node_check: NodeCheck, keep: int, on_node: Optional[OnNode] = None
) -> Optional[Columns]:
    """Duplicate ids, self and dangling dependencies, `node_check` per node, then cycles. Returns the
    columns when the ids are unique and the graph has no cycle (so order-dependent checks can run on
    them without a second read), else None. `on_node(position, node)` sees every node of the pass."""
    rank = trace.rank
    buf = _Buffer(keep)

    def visit(pos: int, node: pb.Node) -> None:
        buf.pos, buf.seq = pos, 0
        node_check(node, rank, buf)
        if on_node is not None:
            on_node(pos, node)

    cols = scan(trace, visit)
    report.nodes += len(cols)
    ids = np.sort(cols.ids)
    dups = np.unique(ids[1:][ids[1:] == ids[:-1]]) if len(ids) > 1 else ids[:0]
    for d in dups.tolist():
        report.add("error", "duplicate-id", f"node id {d} appears more than once", rank, d)

    for part, kind, child, parent in ((0, "ctrl_deps", cols.ctrl_child, cols.ctrl_parent),
                                      (1, "data_deps", cols.data_child, cols.data_parent)):  # fmt: skip
        _dep_findings(buf, cols, part, kind, child, parent, rank)
    buf.flush(report)

    if len(dups):
        return None
    cycle = find_cycle(cols)
    if cycle:
        shown = " -> ".join(map(str, cycle[:12])) + (" ..." if len(cycle) > 12 else "")
        report.add("error", "cycle", f"dependency cycle: {shown}", rank, cycle[0])
        return None
    return cols


def _dep_findings(
    buf: _Buffer, cols: Columns, part: int, kind: str, child: np.ndarray, parent: np.ndarray, rank: Optional[int]
) -> None:
    if not len(child):
        return
    child_ids = cols.ids[child]
    own = parent == child_ids
    missing = ~own & ~np.isin(parent, cols.ids)
    # position of each edge inside its node's list, for the order within a node
    first = np.searchsorted(child, child, side="left")
    for code, mask in (("self-dependency", own), ("dangling-dependency", missing)):
        hits = np.flatnonzero(mask)
        for e in hits[: buf.keep].tolist():
            nid, d = int(child_ids[e]), int(parent[e])
            msg = (
                f"node {nid} lists itself in {kind}"
                if code == "self-dependency"
                else f"node {nid} {kind} names missing node {d}"
            )
            buf.candidate((int(child[e]), part, e - int(first[e])), "error", code, msg, rank, nid)
        if len(hits):
            buf.counts[("error", code)] += len(hits)

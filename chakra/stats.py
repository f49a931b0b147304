"""Per-rank and cross-rank summary figures of a trace set (`chakra stats`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from chakra.columns import AnyTrace, critical_path, scan
from chakra.schema import NodeType, collective_name, node_type_name, pb
from chakra.schema.attrs import attr_value
from chakra.schema.kinds import is_cpu_op

_COMM = (NodeType.COMM_COLL_NODE, NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE)


def _total(values: np.ndarray) -> int:
    """Exact sum of µs durations (Python ints: a uint64 sum could wrap)."""
    if len(values) and int(values.max()) < (1 << 63) // max(len(values), 1):
        return int(values.sum())
    return sum(values.tolist())


def rank_stats(trace: AnyTrace) -> dict[str, Any]:
    """Figures of one rank from one streamed pass: columns for every node, a closer look only at
    the nodes with attributes or of a non-compute type."""
    collectives: dict[str, dict[str, int]] = {}
    p2p: dict[str, dict[str, int]] = {}
    cpu_rows: list[int] = []

    def visit(pos: int, n: pb.Node) -> None:
        t = n.type
        if t == NodeType.COMP_NODE:
            # Absent is_cpu_op means device work, as simulators read it (chakra.schema.kinds).
            if is_cpu_op(n):
                cpu_rows.append(pos)
        elif t in (NodeType.COMM_COLL_NODE, NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE):
            ctype = size = None
            for a in n.attr:
                if a.name == "comm_size":
                    size = attr_value(a)
                elif a.name == "comm_type":
                    ctype = attr_value(a)
            size = int(size or 0)
            if t == NodeType.COMM_COLL_NODE:
                key = collective_name(int(ctype or 0))
                entry = collectives.setdefault(key, {"count": 0, "bytes": 0})
            else:
                entry = p2p.setdefault(node_type_name(t), {"count": 0, "bytes": 0})
            entry["count"] += 1
            entry["bytes"] += size

    cols = scan(trace, visit)
    types, dur = cols.types, cols.dur_us
    kinds, counts = np.unique(types, return_counts=True)
    by_type = dict(zip(kinds.tolist(), counts.tolist()))
    comp = types == NodeType.COMP_NODE
    compute_us = _total(dur[comp])
    cpu_us = _total(dur[np.asarray(cpu_rows, dtype=np.int64)])
    gpu_us = compute_us - cpu_us
    comm_us = _total(dur[np.isin(types, _COMM)])
    try:
        cp_us, cp_nodes = critical_path(cols)
        cp_len = len(cp_nodes)
    except ValueError:
        cp_us, cp_len = None, None
    return {
        "nodes": len(cols),
        "by_type": {node_type_name(t): c for t, c in sorted(by_type.items())},
        "collectives": dict(sorted(collectives.items())),
        "p2p": dict(sorted(p2p.items())),
        "compute_us": compute_us,
        "cpu_compute_us": cpu_us,
        "gpu_compute_us": gpu_us,
        "comm_us": comm_us,
        "critical_path_us": cp_us,
        "critical_path_nodes": cp_len,
    }


def trace_stats(traces: Sequence[AnyTrace]) -> dict[str, Any]:
    """`{"ranks": {"<rank>": {...}}, "summary": {...}}`; ranks are strings as in JSON."""
    ranks = {}
    for i, t in enumerate(traces):
        rank = t.rank if t.rank is not None else i
        ranks[str(rank)] = rank_stats(t)
    summary: dict[str, Any] = {
        "ranks": len(ranks),
        "nodes": sum(r["nodes"] for r in ranks.values()),
        "by_type": {},
        "collectives": {},
        "p2p": {},
        # Sums of node durations over every rank: CPU ops and GPU kernels run at the same time,
        # so these are work done, never a step time (the critical path is the nearest to one).
        "compute_us": sum(r["compute_us"] for r in ranks.values()),
        "cpu_compute_us": sum(r["cpu_compute_us"] for r in ranks.values()),
        "gpu_compute_us": sum(r["gpu_compute_us"] for r in ranks.values()),
        "comm_us": sum(r["comm_us"] for r in ranks.values()),
        "max_critical_path_us": max((r["critical_path_us"] or 0 for r in ranks.values()), default=0),
    }
    for r in ranks.values():
        for k, v in r["by_type"].items():
            summary["by_type"][k] = summary["by_type"].get(k, 0) + v
        for section in ("collectives", "p2p"):
            for k, v in r[section].items():
                e = summary[section].setdefault(k, {"count": 0, "bytes": 0})
                e["count"] += v["count"]
                e["bytes"] += v["bytes"]
    return {"ranks": ranks, "summary": summary}

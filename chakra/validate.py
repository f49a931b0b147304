"""Structural and semantic checks of Chakra traces, single-rank and across ranks.

What a simulator needs to replay a trace: unique ids, dependencies that exist and form a DAG,
comm nodes carrying the attributes ASTRA-sim reads (in the arm it reads), and across ranks:
every member of a process group issuing the same collectives in the same order, and every send
meeting its receive. Findings are counted in full but only the first few of each kind are kept,
so validating a trace with a million broken nodes stays cheap.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, Optional

import numpy as np

from chakra.collective_order import meet_key, order_conflicts
from chakra.columns import Columns, parent_lists
from chakra.columns import kahn as column_kahn
from chakra.commgroups import metadata_groups, parse_pg_list
from chakra.errors import excerpt
from chakra.graph import kahn, stuck_cycle
from chakra.rankcheck import check_rank_columns
from chakra.schema import COMM_NODE_TYPES, MEM_NODE_TYPES, CollectiveType, NodeType, collective_name, pb
from chakra.schema.attrs import CONVENTIONS, FEEDER_READ, SEND_BYTES, as_int, attr_value
from chakra.schema.kinds import MODELLED_COLLECTIVES
from chakra.trace import Trace, rank_set_problem

ERROR = "error"
WARNING = "warning"

#: Collectives whose per-rank size legitimately differs in PyTorch (uneven all-to-all, root-only
#: buffers); a warning unless the simulator's rendezvous meets them (then members must agree).
SIZE_MAY_DIFFER = frozenset(
    {CollectiveType.ALL_TO_ALL, CollectiveType.GATHER, CollectiveType.SCATTER, CollectiveType.BARRIER}
)
KEEP_PER_CODE = 20
PER_PEER = -1  # the size an all-to-all with per-peer sizes compares as
_REFUSED = " (simulate refuses it; `chakra export astra-sim` gives every member the largest)"


@dataclass
class Finding:
    severity: str
    code: str
    message: str
    rank: Optional[int] = None
    node_id: Optional[int] = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)  # (severity, code) -> total count
    ranks: list[Optional[int]] = field(default_factory=list)
    nodes: int = 0

    def add(self, severity: str, code: str, message: str, rank: Optional[int] = None, node_id: Optional[int] = None):
        key = (severity, code)
        self.counts[key] += 1
        if self.counts[key] <= KEEP_PER_CODE:
            self.findings.append(Finding(severity, code, message, rank, node_id))

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == ERROR]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == WARNING]

    @property
    def error_count(self) -> int:
        return sum(c for (sev, _), c in self.counts.items() if sev == ERROR)

    @property
    def warning_count(self) -> int:
        return sum(c for (sev, _), c in self.counts.items() if sev == WARNING)

    @property
    def ok(self) -> bool:
        return self.error_count == 0

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "ranks": self.ranks,
            "nodes": self.nodes,
            "error_count": self.error_count,
            "warning_count": self.warning_count,
            "counts": {f"{sev}:{code}": n for (sev, code), n in sorted(self.counts.items())},
            "findings": [f.to_json() for f in self.findings],
        }


# ---------------------------------------------------------------------------------------------
# Single rank


def _attr_map(node: pb.Node) -> dict[str, pb.AttributeProto]:
    return {a.name: a for a in node.attr}


def _num(attr: Optional[pb.AttributeProto]) -> Optional[int]:
    if attr is None:
        return None
    return as_int(attr_value(attr))


def check_rank(trace: Trace, report: Report) -> None:
    """Ids, dependencies and cycles of one rank on columns (one streamed pass), `_check_node` per node."""
    colls: dict[int, tuple[str, tuple[int, int]]] = {}

    def note_collective(pos: int, n: pb.Node) -> None:
        if n.type == NodeType.COMM_COLL_NODE:
            key = _rendezvous_key(n)
            if key is not None:
                colls[pos] = key

    cols = check_rank_columns(trace, report, _check_node, KEEP_PER_CODE, note_collective)
    if cols is not None:
        check_collective_order(cols, colls, trace.rank, report)


_VALID_TYPES = frozenset(NodeType) - {NodeType.INVALID_NODE}


def _check_node(n: pb.Node, rank: Optional[int], report: Report) -> None:
    nid = n.id
    if n.type not in _VALID_TYPES:
        report.add(ERROR, "bad-node-type", f"node {nid} ({excerpt(n.name)}) has node type {n.type}", rank, nid)
        return
    if not n.attr:
        if n.type in COMM_NODE_TYPES:
            _check_comm(n, {}, rank, report)
        return
    amap = _attr_map(n)
    for name, attr in amap.items():
        expected = CONVENTIONS.get(name)
        if expected is None:
            continue
        found = attr.WhichOneof("value")
        if found != expected:
            severity = ERROR if name in FEEDER_READ else WARNING
            report.add(
                severity,
                "wrong-arm",
                f"node {nid}: attribute {name} is in {found or 'no arm'}, consumers read {expected}",
                rank,
                nid,
            )
    if n.type in COMM_NODE_TYPES:
        _check_comm(n, amap, rank, report)
    elif n.type in MEM_NODE_TYPES and "tensor_size" not in amap:
        report.add(WARNING, "mem-without-size", f"memory node {nid} has no tensor_size", rank, nid)


def _rendezvous_key(n: pb.Node) -> Optional[tuple[str, tuple[int, int]]]:
    """(process group, `meet_key`) of a collective that rendezvous; None for one replayed from its
    duration (a type the simulator does not model, or no size)."""
    amap = _attr_map(n)
    ctype = _num(amap.get("comm_type"))
    if ctype not in MODELLED_COLLECTIVES or "comm_size" not in amap:
        return None
    pg = amap.get("pg_name")
    pg_name = str(attr_value(pg) or "") if pg is not None else ""
    return pg_name, meet_key(ctype, _meet_size(ctype, _num(amap.get("comm_size")) or 0, amap))


def _meet_size(ctype: int, size: int, amap: dict) -> int:
    """The size members must agree on: an all-to-all with per-peer sizes (`comm_send_bytes`) has
    members of different totals by design, so it compares as PER_PEER (-1), as the simulator's
    rendezvous meets it."""
    return PER_PEER if ctype == CollectiveType.ALL_TO_ALL and SEND_BYTES in amap else size


class _CsrParents:
    """Parent positions of node i as a list, from `chakra.columns.parent_lists`' CSR arrays."""

    def __init__(self, ptr: np.ndarray, idx: np.ndarray) -> None:
        self.ptr, self.idx = ptr, idx

    def __len__(self) -> int:
        return len(self.ptr) - 1

    def __getitem__(self, i: int) -> list[int]:
        return self.idx[self.ptr[i] : self.ptr[i + 1]].tolist()


def check_collective_order(
    cols: Columns, colls: dict[int, tuple[str, tuple[int, int]]], rank: Optional[int], report: Report
) -> None:
    """Collectives of one process group that the dependencies leave unordered and that differ.

    `colls`: node position -> (process group, `meet_key`) of the rank's collectives that rendezvous,
    gathered in the same pass that built `cols`. The simulator's rendezvous (and ASTRA-sim) number a
    group's collectives in the order the rank issues them, which is any order its dependencies
    allow; `chakra.collective_order.order_conflicts` is that rule, so a trace this passes cannot
    meet different collectives on different ranks.
    """
    if max(Counter(pg for pg, _ in colls.values()).values(), default=0) < 2:
        return
    ptr, idx = parent_lists(cols)
    order, _stuck = column_kahn(ptr, idx)  # any dependency-respecting order: the rule needs only ancestry
    for pg, a, b in order_conflicts(_CsrParents(ptr, idx), order, colls):
        ida, idb = int(cols.ids[a]), int(cols.ids[b])
        report.add(
            ERROR,
            "collective-order-open",
            f"process group {pg or 'all'!r}: collectives node {ida} ({collective_name(colls[a][1][0])} "
            f"{colls[a][1][1]} B) and node {idb} ({collective_name(colls[b][1][0])} {colls[b][1][1]} B) have "
            "no dependency path between them, so ranks may issue them in different orders and meet "
            "different collectives (make the later depend on the earlier)",
            rank,
            idb,
        )


def _check_comm(n: pb.Node, amap: dict[str, pb.AttributeProto], rank: Optional[int], report: Report) -> None:
    nid = n.id
    if n.type == NodeType.COMM_COLL_NODE:
        ctype = _num(amap.get("comm_type"))
        if ctype is None:
            report.add(ERROR, "comm-missing-attr", f"collective node {nid} has no comm_type", rank, nid)
        elif ctype not in set(CollectiveType):
            report.add(ERROR, "bad-comm-type", f"collective node {nid} has unknown comm_type {ctype}", rank, nid)
    else:
        for name in ("comm_src", "comm_dst", "comm_tag"):
            if name not in amap:
                report.add(ERROR, "comm-missing-attr", f"{NodeType(n.type).name} {nid} has no {name}", rank, nid)
        if rank is not None:
            own = "comm_src" if n.type == NodeType.COMM_SEND_NODE else "comm_dst"
            value = _num(amap.get(own))
            if value is not None and value != rank:
                report.add(
                    ERROR,
                    "p2p-wrong-rank",
                    f"{NodeType(n.type).name} {nid} on rank {rank} has {own}={value}",
                    rank,
                    nid,
                )
    if "comm_size" not in amap:
        ctype = _num(amap.get("comm_type"))
        severity = WARNING if ctype == CollectiveType.BARRIER else ERROR
        report.add(severity, "comm-missing-attr", f"{NodeType(n.type).name} {nid} has no comm_size", rank, nid)
    cpu = amap.get("is_cpu_op")
    if cpu is not None and attr_value(cpu) is True:
        report.add(
            WARNING,
            "comm-on-cpu",
            f"comm node {nid} has is_cpu_op=true (ASTRA-sim rejects comm nodes marked as CPU ops)",
            rank,
            nid,
        )


# ---------------------------------------------------------------------------------------------
# Process groups


def parse_process_groups(metadata_node: pb.Node) -> dict[str, list[int]]:
    """pg_name -> member ranks from a `process_group:init` METADATA node's inputs.values."""
    return parse_pg_list(metadata_node.inputs.values)


def process_groups(trace: Trace) -> dict[str, list[int]]:
    return metadata_groups(trace.nodes)


# ---------------------------------------------------------------------------------------------
# Cross rank


@dataclass
class CommSummary:
    """What the cross-rank rules need from one rank: small enough to ship between processes.

    `colls`: pg_name -> [(comm_type, comm_size, node id)] in node-id order; `sends`/`recvs`:
    (src, dst, tag, size, node id); `groups`: pg_name -> member ranks from METADATA nodes.
    """

    rank: Optional[int]
    colls: dict[str, list[tuple[int, int, int]]] = field(default_factory=dict)
    sends: list[tuple] = field(default_factory=list)
    recvs: list[tuple] = field(default_factory=list)
    groups: dict[str, list[int]] = field(default_factory=dict)


def comm_summary(nodes: Iterable[pb.Node], rank: Optional[int]) -> CommSummary:
    """One pass over a rank's nodes (a list or a streaming reader) keeping only comm records."""
    colls: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    out = CommSummary(rank)
    comm_nodes = []
    for n in nodes:
        if n.type in COMM_NODE_TYPES:
            comm_nodes.append(n)
        elif n.type == NodeType.METADATA_NODE and "process_group:init" in n.name:
            out.groups.update(parse_process_groups(n))
    for n in sorted(comm_nodes, key=lambda n: n.id):
        amap = _attr_map(n)
        size = _num(amap.get("comm_size")) or 0
        if n.type == NodeType.COMM_COLL_NODE:
            pg = amap.get("pg_name")
            pg_name = attr_value(pg) if pg is not None else ""
            ctype = _num(amap.get("comm_type")) or 0
            colls[str(pg_name or "")].append((ctype, _meet_size(ctype, size, amap), n.id))
        else:
            rec = (_num(amap.get("comm_src")), _num(amap.get("comm_dst")), _num(amap.get("comm_tag")), size, n.id)
            (out.sends if n.type == NodeType.COMM_SEND_NODE else out.recvs).append(rec)
    out.colls = dict(colls)
    return out


def check_cross_rank(
    traces: Sequence[Trace], report: Report, file_groups: Optional[dict[str, list[int]]] = None
) -> None:
    if len(traces) < 2:  # nothing to compare: spare a second pass over the nodes
        return
    check_cross_rank_summaries([comm_summary(t.nodes, t.rank) for t in traces], report, file_groups)


def check_cross_rank_summaries(
    summaries: Sequence[CommSummary], report: Report, file_groups: Optional[dict[str, list[int]]] = None
) -> None:
    """The cross-rank rules on per-rank summaries (so ranks can be summarised where they are read)."""

    ranks = [s.rank for s in summaries]
    if len(summaries) < 2 or any(r is None for r in ranks):
        return
    groups: dict[str, list[int]] = {}
    for s in summaries:
        groups.update(s.groups)
    groups.update(file_groups or {})  # the comm-group file wins, as in ASTRA-sim and chakra.sim
    present = set(ranks)
    per_rank = {s.rank: (s.colls, s.sends, s.recvs) for s in summaries}

    # Collective sequences per process group.
    names: set[str] = set()
    for colls, _, _ in per_rank.values():
        names.update(colls)
    for pg in sorted(names):
        if pg == "":
            members = sorted(present)
        elif pg in groups:
            # PyTorch lists the default (world) group with "ranks": [] meaning every rank
            members = [r for r in (groups[pg] or sorted(present)) if r in present]
        else:
            members = sorted(r for r, (colls, _, _) in per_rank.items() if pg in colls)
        if len(members) < 2:
            continue
        label = f"process group {pg!r}" if pg else "the default group"
        ref_rank = members[0]
        ref = per_rank[ref_rank][0].get(pg, [])
        for r in members[1:]:
            seq = per_rank[r][0].get(pg, [])
            if len(seq) != len(ref):
                report.add(
                    ERROR,
                    "collective-count-mismatch",
                    f"{label}: rank {ref_rank} issues {len(ref)} collectives, rank {r} issues {len(seq)}",
                    r,
                )
            for i, ((t0, s0, id0), (t1, s1, id1)) in enumerate(zip(ref, seq)):
                if t0 != t1:
                    report.add(
                        ERROR,
                        "collective-order-mismatch",
                        f"{label}: collective #{i} is {collective_name(t0)} (node {id0}) on rank {ref_rank} "
                        f"but {collective_name(t1)} (node {id1}) on rank {r}",
                        r,
                        id1,
                    )
                    break
                if s0 != s1:
                    # Collectives the simulator's rendezvous meets must agree on `meet_key` (it
                    # refuses them otherwise; ASTRA-sim hangs); replayed ones may differ.
                    met = t0 in MODELLED_COLLECTIVES and meet_key(t0, s0) != meet_key(t1, s1)
                    severity = WARNING if t0 in SIZE_MAY_DIFFER and not met else ERROR
                    report.add(
                        severity,
                        "collective-size-mismatch",
                        f"{label}: collective #{i} ({collective_name(t0)}) is {s0} bytes on rank {ref_rank} "
                        f"(node {id0}) but {s1} bytes on rank {r} (node {id1})" + (_REFUSED if met else ""),
                        r,
                        id1,
                    )

    # Point-to-point: every send meets a receive with the same (src, dst, tag) and size.
    recv_index: dict[tuple, list[tuple]] = defaultdict(list)
    for r, (_, _, recvs) in per_rank.items():
        for src, dst, tag, size, nid in recvs:
            recv_index[(src, dst, tag)].append((size, nid, r))
    for r, (_, sends, _) in per_rank.items():
        for src, dst, tag, size, nid in sends:
            if dst not in present:
                continue
            matches = recv_index.get((src, dst, tag))
            if not matches:
                report.add(
                    ERROR,
                    "unmatched-send",
                    f"send node {nid} on rank {r} ({src}->{dst}, tag {tag}, {size} bytes) has no receive on rank {dst}",
                    r,
                    nid,
                )
                continue
            rsize, rnid, rr = matches.pop(0)
            if rsize != size:
                report.add(
                    ERROR,
                    "p2p-size-mismatch",
                    f"send node {nid} on rank {r} is {size} bytes but its receive (node {rnid}, rank {rr}) is {rsize}",
                    r,
                    nid,
                )
    for (src, _dst, tag), left in recv_index.items():
        for size, nid, r in left:
            if src in present:
                report.add(
                    ERROR,
                    "unmatched-recv",
                    f"receive node {nid} on rank {r} (from {src}, tag {tag}, {size} bytes) has no matching send",
                    r,
                    nid,
                )


def check_deadlock(traces: Sequence[Trace], report: Report) -> None:
    """Report what the simulator would deadlock on: a wait-for cycle across ranks.

    The simulator's rules, as a graph over every node of every rank: a node waits for its parents;
    a receive waits for the send it pairs with (the k-th send and k-th receive of one
    (src, dst, tag), sends being eager); the k-th modelled collective of a process group
    completes only when every member has issued its k-th one (a barrier node waiting for all
    their parents). This is the default (non-replay) communication mode.
    Kahn's algorithm (`chakra.graph.kahn`) then finds the nodes that can never run; walking back
    from one of them along never-ready predecessors yields a cycle, reported when it crosses ranks
    (a cycle inside one rank is already reported by the per-rank check). Unmatched
    sends/receives and collective-count mismatches are reported elsewhere and do not block here.
    """
    where, preds = _wait_for_graph(traces)
    _, stuck = kahn(preds)
    if stuck:
        _report_deadlock(report, where, preds, stuck)


def _wait_for_graph(traces: Sequence[Trace]) -> tuple[list[tuple[int, int, int]], list[list[int]]]:
    """(position -> (rank, node id, type), position -> the positions it waits for) over all ranks;
    collective barriers are extra positions (-1, pg seq, -1)."""
    index: dict[tuple[int, int], int] = {}
    where: list[tuple[int, int, int]] = []
    for t in traces:
        for n in t.nodes:
            key = (t.rank, n.id)
            if key not in index:
                index[key] = len(where)
                where.append((t.rank, n.id, n.type))
    preds: list[list[int]] = [[] for _ in where]
    sends: dict[tuple, list[int]] = defaultdict(list)
    recvs: dict[tuple, list[int]] = defaultdict(list)
    colls: dict[tuple[str, int], list[int]] = defaultdict(list)
    seq: dict[tuple[int, str], int] = defaultdict(int)
    for t in traces:
        r = t.rank
        for n in sorted(t.nodes, key=lambda n: n.id):
            me = index[(r, n.id)]
            if len(preds[me]) == 0:
                preds[me] = [p for d in chain(n.data_deps, n.ctrl_deps) if (p := index.get((r, d))) is not None]
            if n.type in COMM_NODE_TYPES:
                _file_comm(n, r, me, sends, recvs, colls, seq)
    for key, rlist in recvs.items():
        for s_pos, r_pos in zip(sends.get(key, ()), rlist):
            preds[r_pos].append(s_pos)
    for (_name, k), members in colls.items():
        if len(members) < 2:
            continue
        barrier = len(where)
        where.append((-1, k, -1))
        preds.append(sorted({p for m in members for p in preds[m]}))
        for m in members:
            preds[m] = [barrier]
    return where, preds


def _file_comm(
    n: pb.Node,
    r: int,
    me: int,
    sends: dict[tuple, list[int]],
    recvs: dict[tuple, list[int]],
    colls: dict[tuple[str, int], list[int]],
    seq: dict[tuple[int, str], int],
) -> None:
    """File communication node `n` (position `me` on rank `r`) under what it pairs with."""
    amap = _attr_map(n)
    if n.type == NodeType.COMM_COLL_NODE:
        # only the types the simulator models, with a size, rendezvous; it replays
        # the others from their recorded duration without waiting for anyone
        if _num(amap.get("comm_type")) not in MODELLED_COLLECTIVES or "comm_size" not in amap:
            return
        pg = amap.get("pg_name")
        name = str(attr_value(pg) or "") if pg is not None else ""
        k = seq[(r, name)]
        seq[(r, name)] = k + 1
        colls[(name, k)].append(me)
    elif n.type == NodeType.COMM_SEND_NODE:
        sends[(r, _num(amap.get("comm_dst")), _num(amap.get("comm_tag")) or 0)].append(me)
    else:
        recvs[(_num(amap.get("comm_src")), r, _num(amap.get("comm_tag")) or 0)].append(me)


def _report_deadlock(
    report: Report, where: list[tuple[int, int, int]], preds: list[list[int]], stuck: list[int]
) -> None:
    # Walk back from a stuck communication node along stuck predecessors until a node repeats.
    start = next((i for i in stuck if where[i][2] in COMM_NODE_TYPES), stuck[0])
    cycle = [where[j] for j in stuck_cycle(preds, stuck, start) if where[j][0] >= 0]
    ranks = sorted({r for r, _, _ in cycle})
    if len(ranks) < 2:
        return
    steps = [f"rank {r} {_NODE_KIND.get(ty, 'node')} {nid}" for r, nid, ty in cycle[:8]]
    report.add(
        ERROR,
        "deadlock",
        f"cross-rank deadlock: {len(stuck)} node(s) on ranks {ranks[:8]} can never run: "
        + " waits for ".join(steps)
        + (" waits for ..." if len(cycle) > 8 else f" waits for {steps[0]}"),
        cycle[0][0],
        cycle[0][1],
    )


_NODE_KIND = {
    NodeType.COMM_SEND_NODE: "send",
    NodeType.COMM_RECV_NODE: "recv",
    NodeType.COMM_COLL_NODE: "collective",
}


def validate_traces(
    traces: Iterable[Trace], cross_rank: bool = True, groups: Optional[dict[str, list[int]]] = None
) -> Report:
    """Validate each trace, then (with two or more ranks) their agreement with each other.

    `groups`: process groups from a comm-group file (`PREFIX.comm_groups.json`); METADATA nodes of
    the traces are read too."""
    traces = list(traces)
    report = Report(ranks=[t.rank for t in traces])
    problem = rank_set_problem([t.rank for t in traces]) if len(traces) > 1 else None
    if problem:  # as simulate and export refuse it
        report.add("error", "rank-set", problem)
    for t in traces:
        check_rank(t, report)
    if cross_rank:
        check_cross_rank(traces, report, groups)
        if len(traces) > 1 and all(t.rank is not None for t in traces):
            check_deadlock(traces, report)
    return report

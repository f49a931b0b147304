"""BigSim log -> one Chakra trace per simulated processor.

Mapping (docs/bigsim.md has the user's version):

* Each SEB becomes COMP_NODE piece(s) named like the SEB. An SEB that sends messages strictly
  inside its run is split at each distinct send time, so a send leaves at the right offset: piece
  k+1 depends on piece k, and the send depends on the piece that ends at its send time. Pieces
  carry `bigsim_seqno`; the first also the SEB's exact seconds and ids.
* Backward dependencies (same proc) become data deps on the depended SEB's exit node.
* Each message copy (one per destination; broadcasts expand, see routing.py) becomes a
  COMM_SEND_NODE on the sender and a COMM_RECV_NODE on the receiver, placed right before the SEB
  it triggered, which data-depends on it. Tag = msgID (the sender's message sequence number),
  size = msgsize bytes.
* A v6 SEB with an MPI collective (`mpiOp`) is followed by a COMM_COLL_NODE (barrier, all-reduce,
  all-to-all; `comm_size` = mpiSize) that becomes the SEB's exit for later dependents.
* With `serialize=True`, each SEB also gets a ctrl dep on the previous SEB of its proc: the order
  the emulator ran them in, which is a schedule rather than a dependency (docs/input-formats.md §D.8).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Optional

from chakra.converters.bigsim.model import MPI_ALLREDUCE, MPI_ALLTOALL, MPI_BARRIER, MPI_OP_NAMES, BigSimLog, Seb
from chakra.converters.bigsim.routing import Delivery, match_messages
from chakra.converters.bigsim.timeconv import interval_us, seconds_to_us
from chakra.errors import TraceFormatError
from chakra.schema import CollectiveType, NodeType, pb
from chakra.schema.attrs import set_attrs
from chakra.trace import Trace, make_metadata

INT32_MAX = 2**31 - 1

MPI_TO_COLLECTIVE = {
    MPI_BARRIER: CollectiveType.BARRIER,
    MPI_ALLREDUCE: CollectiveType.ALL_REDUCE,
    MPI_ALLTOALL: CollectiveType.ALL_TO_ALL,
}

COMP = int(NodeType.COMP_NODE)
SEND = int(NodeType.COMM_SEND_NODE)
RECV = int(NodeType.COMM_RECV_NODE)
COLL = int(NodeType.COMM_COLL_NODE)


@dataclass
class ConversionSummary:
    """What a conversion produced; `to_json()` is the CLI's `--json` output."""

    source: str
    version: Optional[int]
    procs: int
    workers_per_node: int
    sebs: int = 0
    msg_entries: int = 0
    messages: int = 0  # send/recv pairs (message copies)
    broadcast_entries: int = 0
    collectives: int = 0
    split_sebs: int = 0
    nodes: int = 0
    unmatched_receivers: int = 0
    undelivered: int = 0
    remapped_tags: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _tag_maps(log: BigSimLog) -> tuple[dict[int, dict[int, int]], list[int]]:
    """Per sender, msgID -> comm_tag. Tags are the msgIDs themselves when they all fit int32 >= 0;
    a sender with any other id gets dense tags 0, 1, ... in order of first use (noted)."""
    remap: dict[int, dict[int, int]] = {}
    remapped: list[int] = []
    for proc, sebs in log.timelines.items():
        ids = [m.msg_id for s in sebs for m in s.msgs]
        if all(0 <= i <= INT32_MAX for i in ids):
            continue
        dense: dict[int, int] = {}
        for i in ids:
            dense.setdefault(i, len(dense))
        remap[proc] = dense
        remapped.append(proc)
    return remap, remapped


_I64 = 1 << 63
#: the largest time (s) whose µs still fit the trace's int64 times (with room for a duration)
_MAX_S = 4e12


def _out_of_range(s: Seb) -> str:
    """What of an SEB does not fit the trace's int64 fields (µs times, ids, sizes), or ""."""
    if not (abs(s.start_time) < _MAX_S and s.exec_time < _MAX_S):
        return f"start {s.start_time!r} s / execTime {s.exec_time!r} s out of range"
    if not (math.isfinite(s.recv_time) and abs(s.recv_time) < _MAX_S):
        return f"recvTime {s.recv_time!r} s out of range"
    for what, v in (("ep", s.ep), ("charm ep", s.charm_ep), ("source pe", s.src_pe), ("msgID", s.src_msg_id),
                    ("flag", s.flag), ("MPI size", s.mpi_size), *(("objId", v) for v in s.obj_id)):  # fmt: skip
        if not -_I64 <= v < _I64:
            return f"{what} {v} does not fit 64 bits"
    if s.mpi_op and s.mpi_op not in MPI_TO_COLLECTIVE:
        return f"unknown MPI collective code {s.mpi_op}"
    for m in s.msgs:
        if not (-_I64 <= m.msg_id < _I64 and -_I64 <= m.dst_node < _I64 and -_I64 <= m.tid < _I64
                and m.size < _I64 and -_I64 <= m.group < _I64):  # fmt: skip
            return f"message {m.msg_id} has a field that does not fit 64 bits"
        if not (abs(m.send_time) < _MAX_S and abs(m.recv_time) < _MAX_S):
            return f"message {m.msg_id} has a time out of range"
    return ""


def _check_log(log: BigSimLog) -> None:
    """Reject what would produce a broken graph, naming the file: deps must point backwards."""
    for proc, sebs in log.timelines.items():
        path, off = log.origin.get(proc, (None, None))
        for i, s in enumerate(sebs):
            if not (math.isfinite(s.start_time) and math.isfinite(s.exec_time)) or s.exec_time < 0:
                raise TraceFormatError(
                    path,
                    f"proc {proc} SEB {i} ({s.name}): start {s.start_time!r} s / execTime {s.exec_time!r} s unusable",
                    offset=off,
                )
            bad = _out_of_range(s)
            if bad:
                raise TraceFormatError(path, f"proc {proc} SEB {i} ({s.name}): {bad}", offset=off)
            for d in s.back:
                if not 0 <= d < i:
                    raise TraceFormatError(
                        path,
                        f"proc {proc} SEB {i} ({s.name}): backward dependency on SEB {d}, which is not earlier",
                        offset=off,
                    )
            for m in s.msgs:
                if -100 < m.dst_node < -1:
                    raise TraceFormatError(
                        path, f"proc {proc} SEB {i}: message {m.msg_id} has invalid dstNode {m.dst_node}", offset=off
                    )
                if not (math.isfinite(m.send_time) and math.isfinite(m.recv_time)):
                    raise TraceFormatError(
                        path, f"proc {proc} SEB {i}: message {m.msg_id} has a non-finite time", offset=off
                    )
                if m.size < 0:
                    raise TraceFormatError(
                        path, f"proc {proc} SEB {i}: message {m.msg_id} has negative size {m.size}", offset=off
                    )


class _Plan:
    """The cross-proc part of a conversion: who sends what to whom, and the tags."""

    def __init__(self, log: BigSimLog) -> None:
        _check_log(log)
        self.log = log
        matching = match_messages(log.timelines, log.num_wth, log.total_procs)
        if matching.out_of_range:
            dv = matching.out_of_range[0]
            path, off = log.origin.get(dv.src, (None, None))
            raise TraceFormatError(
                path,
                f"proc {dv.src} SEB {dv.seb}: message {dv.msg.msg_id} goes to node {dv.msg.dst_node} "
                f"core {dv.msg.tid} = proc {dv.dst}, outside the {log.total_procs} procs of the machine",
                offset=off,
            )
        self.matching = matching
        self.sends: dict[tuple[int, int], list[Delivery]] = defaultdict(list)
        self.recvs: dict[int, list[Delivery]] = defaultdict(list)
        for dv in matching.deliveries:
            self.sends[(dv.src, dv.seb)].append(dv)
            self.recvs[dv.dst].append(dv)
        self.tag_remap, self.remapped = _tag_maps(log)

    def tag(self, src: int, msg_id: int) -> int:
        dense = self.tag_remap.get(src)
        return dense[msg_id] if dense is not None else msg_id


def _node(nid: int, name: str, ntype: int, start: int, dur: int, deps: list[int], ctrl: list[int]) -> pb.Node:
    node = pb.Node(id=nid, name=name, type=ntype, start_time_micros=start, duration_micros=dur)
    if deps:
        node.data_deps.extend(deps)
    if ctrl:
        node.ctrl_deps.extend(ctrl)
    return node


def _us(t: float, where: str) -> int:
    try:
        v = seconds_to_us(t)
    except ValueError as exc:
        raise TraceFormatError(None, f"{where}: {exc}") from None
    return max(v, 0)


def _emit_sends(
    nodes: list[pb.Node],
    nid: int,
    plan: _Plan,
    proc: int,
    seb_name: str,
    sends: Iterable[Delivery],
    at_us: int,
    deps: list[int],
    ctrl: list[int],
) -> int:
    """Append one COMM_SEND_NODE per delivery leaving at `at_us`; returns the next free id."""
    for dv in sends:
        m = dv.msg
        node = _node(nid, f"send {seb_name} msg {m.msg_id} to {dv.dst}", SEND, at_us, 0, deps, ctrl)
        set_attrs(
            node,
            {
                "is_cpu_op": False,
                "comm_src": proc,
                "comm_dst": dv.dst,
                "comm_tag": plan.tag(proc, m.msg_id),
                "comm_size": m.size,
                "bigsim_msg_id": m.msg_id,
                "bigsim_send_s": m.send_time,
            },
        )
        nodes.append(node)
        nid += 1
    return nid


def build_proc_nodes(plan: _Plan, proc: int, serialize: bool, summary: ConversionSummary) -> list[pb.Node]:
    """Every node of one proc's trace, in a dependency-respecting order."""
    log = plan.log
    sebs = log.timelines.get(proc, [])
    nodes: list[pb.Node] = []
    nid = 0
    exit_id: list[int] = []
    last_piece: list[int] = []
    # Receives placed before the first SEB they trigger; the rest go at the end.
    recv_before: dict[int, list[Delivery]] = defaultdict(list)
    trailing: list[Delivery] = []
    for dv in plan.recvs.get(proc, ()):
        if dv.targets:
            recv_before[min(dv.targets)].append(dv)
        else:
            trailing.append(dv)
    feeds: dict[int, list[int]] = defaultdict(list)

    def recv_node(dv: Delivery) -> pb.Node:
        m = dv.msg
        src_seb = log.timelines[dv.src][dv.seb]
        arrival = m.recv_time
        if dv.targets:
            t = sebs[min(dv.targets)].recv_time
            if t >= 0:
                arrival = t
        node = _node(nid, f"recv {src_seb.name} msg {m.msg_id} from {dv.src}", RECV, _us(arrival, "recv"), 0, [], [])
        set_attrs(
            node,
            {
                "is_cpu_op": False,
                "comm_src": dv.src,
                "comm_dst": proc,
                "comm_tag": plan.tag(dv.src, m.msg_id),
                "comm_size": m.size,
                "bigsim_msg_id": m.msg_id,
            },
        )
        return node

    for i, s in enumerate(sebs):
        where = f"proc {proc} SEB {i}"
        for dv in recv_before.get(i, ()):
            nodes.append(recv_node(dv))
            for k in dv.targets:
                feeds[k].append(nid)
            nid += 1
        entry: list[int] = []
        seen: set[int] = set()
        for d in s.back:
            e = exit_id[d]
            if e not in seen:
                seen.add(e)
                entry.append(e)
        entry.extend(feeds.pop(i, ()))
        ctrl = [last_piece[i - 1]] if serialize and i else []

        start_us = _us(s.start_time, where)
        dur_us = _us(s.exec_time, where)
        sends = plan.sends.get((proc, i), [])
        offsets = [min(max(interval_us(dv.msg.send_time, s.start_time), 0), dur_us) for dv in sends]
        cuts = sorted({o for o in offsets if 0 < o < dur_us})
        bounds = [0, *cuts, dur_us]
        n_pieces = len(bounds) - 1
        if n_pieces > 1:
            summary.split_sebs += 1
        # sends grouped by the boundary they leave at
        by_bound: dict[int, list[Delivery]] = defaultdict(list)
        for dv, o in zip(sends, offsets):
            by_bound[o].append(dv)

        if dur_us > 0:  # sends at the very start need only what the SEB needs
            nid = _emit_sends(nodes, nid, plan, proc, s.name, by_bound.get(0, ()), start_us, entry, ctrl)
        prev: Optional[int] = None
        for k in range(n_pieces):
            deps = entry if k == 0 else [prev]
            node = _node(
                nid, s.name, COMP, start_us + bounds[k], bounds[k + 1] - bounds[k], deps, ctrl if k == 0 else []
            )
            # Direct adds in the conventional arms (is_cpu_op: bool_val; ours: int64/double):
            # this is the hot loop, and set_attrs' type dispatch costs more than the node itself.
            add = node.attr.add
            add(name="is_cpu_op", bool_val=False)
            add(name="bigsim_seqno", int64_val=i)
            if k == 0:
                add(name="bigsim_ep", int64_val=s.ep)
                add(name="bigsim_charm_ep", int64_val=s.charm_ep)
                add(name="bigsim_start_s", double_val=s.start_time)
                add(name="bigsim_exec_s", double_val=s.exec_time)
                if s.src_pe >= 0:
                    add(name="bigsim_src_pe", int64_val=s.src_pe)
                    add(name="bigsim_msg_id", int64_val=s.src_msg_id)
                    add(name="bigsim_recv_s", double_val=s.recv_time)
                if s.obj_id and any(v != -1 for v in s.obj_id):
                    set_attrs(node, {"bigsim_obj_id": list(s.obj_id)})
                if n_pieces > 1:
                    add(name="bigsim_pieces", int64_val=n_pieces)
                if s.flag:
                    add(name="bigsim_flag", int64_val=s.flag)  # 0x1 STARTEVENT, 0x2 QDEVENT
                if s.thread_resume:
                    add(name="bigsim_thread_resume", bool_val=True)
            else:
                add(name="bigsim_piece", int64_val=k)
            nodes.append(node)
            prev = nid
            nid += 1
            nid = _emit_sends(
                nodes, nid, plan, proc, s.name, by_bound.get(bounds[k + 1], ()), start_us + bounds[k + 1], [prev], []
            )
        assert prev is not None
        last_piece.append(prev)
        exit_node = prev
        if s.mpi_op:
            ctype = MPI_TO_COLLECTIVE.get(s.mpi_op)
            if ctype is None:
                path, off = log.origin.get(proc, (None, None))
                raise TraceFormatError(path, f"{where}: unknown MPI collective code {s.mpi_op}", offset=off)
            node = _node(nid, f"{MPI_OP_NAMES[s.mpi_op]} ({s.name})", COLL, start_us + dur_us, 0, [prev], [])
            attrs = {"is_cpu_op": False, "comm_type": int(ctype), "bigsim_seqno": i}
            if s.mpi_size > 0:
                attrs["comm_size"] = s.mpi_size
            set_attrs(node, attrs)
            nodes.append(node)
            exit_node = nid
            nid += 1
            summary.collectives += 1
        exit_id.append(exit_node)
    for dv in trailing:
        nodes.append(recv_node(dv))
        nid += 1
    return nodes


def plan_conversion(log: BigSimLog) -> tuple[_Plan, ConversionSummary]:
    plan = _Plan(log)
    m = plan.matching
    summary = ConversionSummary(
        source=log.source,
        version=log.version,
        procs=log.total_procs,
        workers_per_node=log.num_wth,
        sebs=log.num_sebs(),
        msg_entries=log.num_msg_entries(),
        messages=len(m.deliveries),
        broadcast_entries=sum(1 for t in log.timelines.values() for s in t for x in s.msgs if x.dst_node < 0),
        unmatched_receivers=len(m.unmatched_receivers),
        undelivered=m.undelivered,
        remapped_tags=plan.remapped,
        notes=list(log.notes),
    )
    if m.unmatched_receivers:
        proc, i = m.unmatched_receivers[0]
        s = log.timelines[proc][i]
        summary.notes.append(
            f"{len(m.unmatched_receivers)} SEBs name a message no log entry sends them "
            f"(first: proc {proc} SEB {i}, from proc {s.src_pe} msgID {s.src_msg_id}); they start without a receive"
        )
    if m.undelivered:
        summary.notes.append(
            f"{m.undelivered} message copies triggered no SEB on their destination; their receives feed nothing"
        )
    if plan.remapped:
        summary.notes.append(f"message ids of procs {plan.remapped} do not fit int32: tags renumbered 0, 1, ...")
    return plan, summary


def metadata_for(log: BigSimLog, proc: int) -> pb.GlobalMetadata:
    return make_metadata(
        bigsim_source=log.source,
        bigsim_version=log.version if log.version is not None else -1,
        bigsim_proc=proc,
        bigsim_procs=log.total_procs,
        bigsim_workers_per_node=log.num_wth,
        bigsim_node=proc // max(1, log.num_wth),
    )


def iter_traces(log: BigSimLog, *, serialize: bool = False) -> Iterator[tuple[Trace, ConversionSummary]]:
    """Yield (trace, running summary) per proc in proc order; the summary is complete at the end."""
    plan, summary = plan_conversion(log)
    for proc in range(log.total_procs):
        nodes = build_proc_nodes(plan, proc, serialize, summary)
        summary.nodes += len(nodes)
        yield Trace(metadata=metadata_for(log, proc), nodes=nodes, rank=proc), summary


def convert_log(log: BigSimLog, *, serialize: bool = False) -> tuple[list[Trace], ConversionSummary]:
    """All traces in memory (tests, small logs); `write` streams them to disk instead."""
    traces = []
    last: Optional[ConversionSummary] = None
    for trace, running in iter_traces(log, serialize=serialize):
        traces.append(trace)
        last = running
    if last is None:
        _, last = plan_conversion(log)
    return traces, last

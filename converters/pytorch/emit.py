"""Items -> Chakra protobuf nodes, written in a dependency-respecting order.

Times: absolute µs on the Kineto clock. Durations are differences of rounded boundaries
(round(end) - round(start)), so a chain of segments sums to exactly its rounded wall time
instead of drifting by up to 0.5 µs per node.
"""

from __future__ import annotations

import heapq

import orjson

from chakra.schema import CollectiveType, NodeType, pb

from .comms import RECV, SEND
from .dag import GAP, IDLE, QUEUE, Item
from .ops import COMM, CPU, GPU, META, Op

_dumps = orjson.dumps


def _us(ns: int) -> int:
    return (ns + 500) // 1000


def _io(target: pb.IOInfo, io: tuple) -> None:
    values, shapes, types = io
    target.values = _dumps(values).decode()
    target.shapes = _dumps(shapes).decode()
    target.types = _dumps(types).decode()


_A = pb.AttributeProto
_CPU_TRUE = _A(name="is_cpu_op", bool_val=True)
_CPU_FALSE = _A(name="is_cpu_op", bool_val=False)


def make_pb(it: Item, with_io: bool) -> pb.Node:
    """One node. Attributes are built with the message constructors (C speed) in the arms
    `chakra.schema.attrs.CONVENTIONS` names; the converter tests check them with the validator."""
    A = _A
    start_us = dur_us = 0
    if it.start is not None:
        start = it.start
        start_us = _us(start)
        if it.end is not None:
            eff = max(start, it.wait_from or start)
            dur_us = max(0, _us(it.end) - _us(eff))
    data = list(dict.fromkeys(it.data)) if it.data else ()
    op = it.op
    if op is None:
        owner = A(name="gap_of" if it.kind != QUEUE else "queue_of", int64_val=it.owner)
        return pb.Node(id=it.id, name=it.kind, type=NodeType.COMP_NODE, ctrl_deps=it.ctrl, data_deps=data,
                       start_time_micros=start_us, duration_micros=dur_us, attr=[_CPU_TRUE, owner])  # fmt: skip
    kind = op.kind
    node_type = NodeType.COMP_NODE
    attrs: list = []
    add = attrs.append
    if kind == COMM and op.comm is not None:
        info = op.comm
        node_type = info.node_type
        add(_CPU_FALSE)
        if info.coll in (SEND, RECV):
            extra = op.extra or {}
            add(A(name="comm_src", int32_val=int(extra.get("comm_src", -1))))
            add(A(name="comm_dst", int32_val=int(extra.get("comm_dst", -1))))
            add(A(name="comm_tag", int32_val=int(info.tag)))
        else:
            add(A(name="comm_type", int64_val=int(info.coll)))
        add(A(name="comm_size", int64_val=int(info.size)))
        add(A(name="pg_name", string_val=info.pg_name))
        if info.dtype:
            add(A(name="dtype", string_val=info.dtype))
        if op.stream >= 0:
            add(A(name="stream", int64_val=op.stream))
    elif kind == META:
        node = pb.Node(id=it.id, name=op.name, type=NodeType.METADATA_NODE, start_time_micros=start_us,
                       attr=[_CPU_TRUE])  # fmt: skip
        if op.inputs and op.inputs[0]:
            text = op.inputs[0][0] if isinstance(op.inputs[0][0], str) else _dumps(op.inputs[0]).decode()
            # ASTRA-sim strips two characters from each end and JSON-decodes the rest.
            node.inputs.values = f"['{text}']"
            node.inputs.types = '["String"]'
            node.attr.append(A(name="process_groups", string_val=text))
        return node
    elif kind in (GPU, COMM):
        add(_CPU_FALSE)
        add(A(name="stream", int64_val=op.stream))
        add(A(name="device", int64_val=op.device))
        if op.launcher is not None:
            add(A(name="launcher", int64_val=op.launcher.id))
    else:
        add(_CPU_TRUE)
    if op.flops:
        add(A(name="num_ops", int64_val=op.flops))
    if op.bytes:
        add(A(name="tensor_size", uint64_val=op.bytes))
    if kind == CPU or (kind == COMM and op.rf_id):
        add(A(name="rf_id", int64_val=op.rf_id))
        add(A(name="tid", int64_val=op.tid))
        if op.seq_id != -1:
            add(A(name="seq_id", int64_val=op.seq_id))
        if op.scope:
            add(A(name="scope", int64_val=op.scope))
        if op.fw_parent:
            add(A(name="fw_parent", int64_val=op.fw_parent))
        if op.fw_tid:
            add(A(name="fw_tid", int64_val=op.fw_tid))
        if op.op_schema:
            add(A(name="op_schema", string_val=op.op_schema))
        extra = op.extra
        if extra:
            for k in ("kernel_backend", "kernel_file"):
                if extra.get(k):
                    add(A(name=k, string_val=extra[k]))
    if op.ts is not None and op.end is not None and op.end > op.ts:
        add(A(name="inclusive_dur", int64_val=_us(op.end) - _us(op.ts)))
    node = pb.Node(id=it.id, name=op.name, type=node_type, ctrl_deps=it.ctrl, data_deps=data,
                   start_time_micros=start_us, duration_micros=dur_us, attr=attrs)  # fmt: skip
    if with_io:
        if op.io is not None:
            ins, outs = op.io
            if ins:
                node.inputs.values, node.inputs.shapes, node.inputs.types = ins
            if outs:
                node.outputs.values, node.outputs.shapes, node.outputs.types = outs
        else:
            if op.inputs:
                _io(node.inputs, op.inputs)
            if op.outputs:
                _io(node.outputs, op.outputs)
    return node


def ordered(items: list[Item]) -> list[Item]:
    """Topological order (every dependency before its dependents), earliest start first.

    Sorting by (start, id) is nearly always already topological (dependencies start earlier);
    that is checked in one pass, and only a violation pays for the general Kahn sort.
    """
    fast = sorted(items, key=lambda it: (it.start if it.start is not None else 0, it.id))
    pos = {it.id: i for i, it in enumerate(fast)}
    if all(pos.get(d, -1) < i for i, it in enumerate(fast) for d in (*it.ctrl, *it.data)):
        return fast
    del fast, pos
    by_id = {it.id: i for i, it in enumerate(items)}
    n = len(items)
    indeg = [0] * n
    children: list[list[int]] = [[] for _ in range(n)]
    for i, it in enumerate(items):
        for d in set(it.ctrl) | set(it.data):
            j = by_id.get(d)
            if j is not None:
                children[j].append(i)
                indeg[i] += 1
    key = [(it.start if it.start is not None else 0, it.id) for it in items]
    heap = [(key[i], i) for i in range(n) if indeg[i] == 0]
    heapq.heapify(heap)
    out = []
    while heap:
        _, i = heapq.heappop(heap)
        out.append(items[i])
        for c in children[i]:
            indeg[c] -= 1
            if indeg[c] == 0:
                heapq.heappush(heap, (key[c], c))
    if len(out) != n:
        raise CycleError([items[i].id for i in range(n) if indeg[i] > 0][:10])
    return out


class CycleError(Exception):
    def __init__(self, ids: list[int]) -> None:
        super().__init__(f"dependency cycle among nodes {ids}")
        self.ids = ids


def coll_label(op: Op) -> str:
    coll = op.comm.coll
    return coll if isinstance(coll, str) else CollectiveType(coll).name


__all__ = ["make_pb", "ordered", "CycleError", "GAP", "IDLE", "QUEUE"]

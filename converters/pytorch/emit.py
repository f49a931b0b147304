"""Items -> Chakra protobuf nodes, written in a dependency-respecting order.

Times: absolute µs on the Kineto clock. Durations are differences of rounded boundaries
(round(end) - round(start)), so a chain of segments sums to exactly its rounded wall time
instead of drifting by up to 0.5 µs per node.
"""

from __future__ import annotations

from collections import Counter
from operator import attrgetter
from typing import TYPE_CHECKING, Optional

import orjson

from chakra.converters.pytorch.comms import RECV, SEND
from chakra.converters.pytorch.dag import GAP, IDLE, QUEUE, Item
from chakra.converters.pytorch.ops import COMM, CPU, META, Op
from chakra.converters.pytorch.wire import (
    _LOW14,
    _SMALL,
    DUR_FIELDS,
    NODE_ATTR,
    NODE_CTRL,
    NODE_DATA,
    NODE_DUR,
    NODE_ID,
    NODE_INPUTS,
    NODE_NAME,
    NODE_OUTPUTS,
    NODE_START,
    NODE_TYPE,
    AttrEncoder,
    HighBits,
    io_info,
    length_delimited,
    packed,
    prefixed,
    varint,
    varint_table,
)
from chakra.graph import priority_topo_order
from chakra.schema import NodeType
from chakra.schema.attrs import RECV_BYTES, SEND_BYTES, make_attr

if TYPE_CHECKING:
    from chakra.converters.pytorch.columns import RankColumns

_dumps = orjson.dumps


def _us(ns: int) -> int:
    return (ns + 500) // 1000


def io_field(tag: bytes, io: Optional[tuple]) -> bytes:
    """The framed `inputs`/`outputs` field of (values, shapes, types) parsed lists, or b"" for None.

    Called for every ET op, so the common case (every part shorter than 16 KiB) is one join.
    """
    if io is None:
        return b""
    values, shapes, types = _dumps(io[0]), _dumps(io[1]), _dumps(io[2])
    a, b, c = len(values), len(shapes), len(types)
    if a + b + c < 16000:
        body = b"".join((b"\x0a", _SMALL[a], values, b"\x12", _SMALL[b], shapes, b"\x1a", _SMALL[c], types))
        return tag + _SMALL[len(body)] + body
    return length_delimited(tag, io_info(values, shapes, types))


def io_fields(ins: Optional[tuple], outs: Optional[tuple]) -> bytes:
    """`io_field(NODE_INPUTS, ins) + io_field(NODE_OUTPUTS, outs)` in one call (the loader's, per ET
    op): the usual node (both parts, each under 16 KiB of text) is framed in one join."""
    if ins is None or outs is None:
        return io_field(NODE_INPUTS, ins) + io_field(NODE_OUTPUTS, outs)
    a, b, c = _dumps(ins[0]), _dumps(ins[1]), _dumps(ins[2])
    d, e, f = _dumps(outs[0]), _dumps(outs[1]), _dumps(outs[2])
    la, lb, lc, ld, le, lf = len(a), len(b), len(c), len(d), len(e), len(f)
    if la + lb + lc < 16000 and ld + le + lf < 16000:
        # each IOInfo body: three tags, three lengths (one byte below 128, else two), three texts
        n_in = la + lb + lc + 6 + (la > 127) + (lb > 127) + (lc > 127)
        n_out = ld + le + lf + 6 + (ld > 127) + (le > 127) + (lf > 127)
        small = _SMALL
        return b"".join((NODE_INPUTS, small[n_in], b"\x0a", small[la], a, b"\x12", small[lb], b, b"\x1a", small[lc], c,
                         NODE_OUTPUTS, small[n_out], b"\x0a", small[ld], d, b"\x12", small[le], e, b"\x1a", small[lf],
                         f))  # fmt: skip
    return io_field(NODE_INPUTS, ins) + io_field(NODE_OUTPUTS, outs)


def _attr(name: str, arm: str) -> AttrEncoder:
    return AttrEncoder(name, arm)


# One encoder per attribute the converter writes, in the arm `chakra.schema.attrs.CONVENTIONS` names.
_CPU_TRUE = _attr("is_cpu_op", "bool_val")[True]
_CPU_FALSE = _attr("is_cpu_op", "bool_val")[False]
_GAP_OF = _attr("gap_of", "int64_val")
_QUEUE_OF = _attr("queue_of", "int64_val")
_COMM_SRC = _attr("comm_src", "int32_val")
_COMM_DST = _attr("comm_dst", "int32_val")
_COMM_TAG = _attr("comm_tag", "int32_val")
_COMM_TYPE = _attr("comm_type", "int64_val")
_COMM_SIZE = _attr("comm_size", "int64_val")
_PG_NAME = _attr("pg_name", "string_val")
_DTYPE = _attr("dtype", "string_val")
_STREAM = _attr("stream", "int64_val")
_DEVICE = _attr("device", "int64_val")
_LAUNCHER = _attr("launcher", "int64_val")
_NUM_OPS = _attr("num_ops", "int64_val")
_TENSOR_SIZE = _attr("tensor_size", "uint64_val")
_RF_ID = _attr("rf_id", "int64_val")
_TID = _attr("tid", "int64_val")
_SEQ_ID = _attr("seq_id", "int64_val")
_SCOPE = _attr("scope", "int64_val")
_FW_PARENT = _attr("fw_parent", "int64_val")
_FW_TID = _attr("fw_tid", "int64_val")
_OP_SCHEMA = _attr("op_schema", "string_val")
_EXTRA_STRINGS = (("kernel_backend", _attr("kernel_backend", "string_val")),
                  ("kernel_file", _attr("kernel_file", "string_val")))  # fmt: skip
_INCLUSIVE_DUR = _attr("inclusive_dur", "int64_val")
_PROCESS_GROUPS = _attr("process_groups", "string_val")
_TYPE = {int(t): NODE_TYPE + varint(int(t)) for t in NodeType}
#: What the overhead pass reads back from the serialized nodes (overhead._Facts): the is_cpu_op
#: entries as written, and a gap_of entry's bytes up to its value (name + int64_val tag).
CPU_TRUE_ENTRY, CPU_FALSE_ENTRY, GAP_OF_PREFIX = _CPU_TRUE, _CPU_FALSE, _GAP_OF.prefix
# Plain ints: hashing an IntEnum member runs Python code (Enum.__hash__), too slow per node.
_COMP = int(NodeType.COMP_NODE)
_META = int(NodeType.METADATA_NODE)
_NO_TIME = 1 << 63
# Prefixes joined ahead of time (each saves a concatenation per node): gap/queue tails up to the
# owner's varint (by its length), ctrl_deps up to its single varint, start tag + low 14 bits,
# duration tag + small value.
_GAP_TAILS = [_CPU_TRUE + head for head in _GAP_OF.heads]
_QUEUE_TAILS = [_CPU_TRUE + head for head in _QUEUE_OF.heads]
_GPU_QUEUE_TAILS = [_CPU_FALSE + head for head in _QUEUE_OF.heads]
_CTRL_HEADS = [NODE_CTRL + _SMALL[k] for k in range(11)]
_START_LOW14 = prefixed(NODE_START, _LOW14)
_DUR_SMALL = DUR_FIELDS


class NodeEncoder:
    """Items -> serialised `pb.Node` messages (see `wire`), counting node types and the time span.

    `encode_batch` runs once per node of the trace, so its loop is written for speed: fields 1-7
    (id, name, type, dependencies, times) are encoded inline with local lookups; byte strings that
    repeat (names, attribute entries) are cached; ids below `id_limit` come from a varint table.
    """

    def __init__(self, with_io: bool, id_limit: int = 0, columns: Optional[RankColumns] = None) -> None:
        """`id_limit`: node ids are below it (ids, rf_ids and dependencies then encode by lookup).
        `columns`: record every node there (columns.RankColumns) instead of returning its bytes."""
        self.with_io = with_io
        self.columns = columns
        self.types: Counter = Counter()
        self._t_lo = _NO_TIME
        self.t_hi = 0
        self._names: dict[str, bytes] = {}
        self._ids = varint_table(min(id_limit, 1 << 21))
        self._high = HighBits()

    @property
    def t_lo(self) -> Optional[int]:
        """Earliest start (µs) of a timed node, None when no node has a time."""
        return self._t_lo if self._t_lo != _NO_TIME else None

    def encode(self, it: Item) -> bytes:
        """One node, serialised."""
        return self.encode_batch([it])[0]

    def encode_batch(self, items: list[Item]) -> list[bytes]:
        """Serialised nodes. Durations are differences of rounded boundaries (module docstring)."""
        out: list[bytes] = []
        emit = out.append
        ids, names, high, types = self._ids, self._names, self._high, self.types
        n_ids = len(ids)
        with_io = self.with_io
        t_lo, t_hi = self._t_lo, self.t_hi
        cols = self.columns
        if cols is not None:  # the columns instead of messages (see RankColumns)
            add_id, add_name, add_type, add_dur, add_cpu, add_gap_of, add_ctrl, add_data, add_pre, add_post = (
                cols.appenders()
            )
        cpu, gap_of = True, 0
        for it in items:
            op = it.op
            if op is None:
                name, node_type = it.kind, _COMP
                owner = it.owner
                v = ids[owner] if 0 <= owner < n_ids else varint(owner)
                if name != QUEUE:
                    tails = _GAP_TAILS
                    cpu, gap_of = True, owner
                else:
                    tails = _GPU_QUEUE_TAILS if it.on_gpu else _QUEUE_TAILS
                    cpu, gap_of = not it.on_gpu, 0
                tail = tails[len(v)] + v
            elif op.kind == META:
                self._t_lo, self.t_hi = t_lo, t_hi
                meta = self._meta(it, op)
                if cols is None:
                    emit(meta)
                else:
                    add_id(it.id)
                    add_name(op.name)
                    add_type(_META)
                    add_dur(0)
                    add_cpu(True)
                    add_gap_of(0)
                    add_ctrl(())
                    add_data(())
                    add_pre(meta)
                    add_post(b"")
                t_lo, t_hi = self._t_lo, self.t_hi
                continue
            else:
                name = op.name
                node_type, tail = _op_attrs(op, ids, n_ids)
                if cols is not None:
                    cpu, gap_of = op.kind == CPU, 0
                    if name[:13] == "ProfilerStep#":
                        timed_step = op.ts is not None and op.end is not None and op.end > op.ts
                        cols.add_step(name, (op.end + 500) // 1000 - (op.ts + 500) // 1000 if timed_step else None)
                if with_io:
                    io = op.io
                    if io is None:
                        io = io_field(NODE_INPUTS, op.inputs) + io_field(NODE_OUTPUTS, op.outputs)
                    tail = io + tail
            types[node_type] += 1
            # id, name, type
            name_field = names.get(name)
            if name_field is None:
                name_field = names[name] = length_delimited(NODE_NAME, name.encode()) if name else b""
            node_id = it.id
            if node_id:
                head = NODE_ID + (ids[node_id] if node_id < n_ids else varint(node_id)) + name_field + _TYPE[node_type]
            else:
                head = name_field + _TYPE[node_type]
            # ctrl_deps, data_deps (packed; nearly always one ctrl dependency and no data one)
            ctrl = it.ctrl
            if ctrl:
                if len(ctrl) == 1:
                    v = ctrl[0]
                    v = ids[v] if 0 <= v < n_ids else varint(v)
                    head += _CTRL_HEADS[len(v)] + v
                else:
                    head += packed(NODE_CTRL, ctrl)
            data = it.data
            if data:
                head += packed(NODE_DATA, dict.fromkeys(data) if len(data) > 1 else data)
            # start_time_micros, duration_micros
            start = it.start
            if start is not None:
                # A segment blocked on a wait keeps only its time after the wake-up (`wait_from`): that
                # is its start, so start + duration is its end and its wait edge points backwards in time.
                wait_from = it.wait_from
                if wait_from and wait_from > start:
                    start = wait_from
                start_us = (start + 500) // 1000
                dur_us = 0
                end = it.end
                if end is not None:
                    dur_us = (end + 500) // 1000 - start_us
                    if dur_us < 0:
                        dur_us = 0
                if start_us:
                    # Timestamps are big (~2**50 µs): low 14 bits by table, the slowly changing rest cached.
                    if start_us >= 16384:
                        head += _START_LOW14[start_us & 16383] + high[start_us >> 14]
                    else:
                        head += NODE_START + _SMALL[start_us]
                    if start_us < t_lo:
                        t_lo = start_us
                    if start_us + dur_us > t_hi:
                        t_hi = start_us + dur_us
                if dur_us and cols is None:  # the columns add it when they write (it may change)
                    head += _DUR_SMALL[dur_us] if dur_us < 16384 else NODE_DUR + varint(dur_us)
            else:
                dur_us = 0
            if cols is None:
                emit(head + tail)
            else:
                add_id(node_id)
                add_name(name)
                add_type(node_type)
                add_dur(dur_us)
                add_cpu(cpu)
                add_gap_of(gap_of)
                add_ctrl(ctrl)
                # the data dependencies as written (and read back): the first of each id, in order
                add_data(data if len(data) < 2 else list(dict.fromkeys(data)))
                add_pre(head)
                add_post(tail)
        self._t_lo, self.t_hi = t_lo, t_hi
        return out

    def _meta(self, it: Item, op: Op) -> bytes:
        """`## process_group:init ##`: the process groups as ASTRA-sim reads them, plus an attribute.

        No dependencies and no duration, only the start time."""
        start_us = _us(it.start) if it.start is not None else 0
        self.types[_META] += 1
        node = NODE_ID + varint(it.id) if it.id else b""
        node += (length_delimited(NODE_NAME, op.name.encode()) if op.name else b"") + _TYPE[_META]
        if start_us:
            node += NODE_START + varint(start_us)
            self._t_lo = min(self._t_lo, start_us)
            self.t_hi = max(self.t_hi, start_us)
        if not (op.inputs and op.inputs[0]):
            return node + _CPU_TRUE
        text = op.inputs[0][0] if isinstance(op.inputs[0][0], str) else _dumps(op.inputs[0]).decode()
        # ASTRA-sim strips two characters from each end and JSON-decodes the rest.
        inputs = length_delimited(NODE_INPUTS, io_info(f"['{text}']".encode(), b"", b'["String"]'))
        return node + inputs + _CPU_TRUE + _PROCESS_GROUPS.encode(text)


def _op_attrs(op: Op, ids: list[bytes], n_ids: int) -> tuple[int, bytes]:
    """(node type, the serialised attr entries) of an op node (not META); `ids` as in NodeEncoder."""
    kind = op.kind
    if kind == CPU:
        parts = [_CPU_TRUE]
        node_type = _COMP
    elif kind == COMM and op.comm is not None:
        node_type = int(op.comm.node_type)
        parts = _comm_attrs(op)
    else:  # GPU work, and comm executors without comm info
        node_type = _COMP
        parts = [_CPU_FALSE, _STREAM[op.stream], _DEVICE[op.device]]
        if op.launcher is not None:
            parts.append(_LAUNCHER.encode(op.launcher.id))
    add = parts.append
    if op.flops:
        add(_NUM_OPS[op.flops])
    if op.bytes:
        add(_TENSOR_SIZE[op.bytes])
    if kind == CPU or (kind == COMM and op.rf_id):
        v = op.rf_id
        v = ids[v] if 0 <= v < n_ids else varint(v)
        add(_RF_ID.heads[len(v)] + v)
        add(_TID[op.tid])
        v = op.seq_id
        if v != -1:
            v = ids[v] if 0 <= v < n_ids else varint(v)
            add(_SEQ_ID.heads[len(v)] + v)
        if op.scope:
            add(_SCOPE[op.scope])
        if op.fw_parent:
            add(_FW_PARENT.encode(op.fw_parent))
        if op.fw_tid:
            add(_FW_TID[op.fw_tid])
        if op.op_schema:
            add(_OP_SCHEMA[op.op_schema])
        extra = op.extra
        if extra:
            for k, enc in _EXTRA_STRINGS:
                if extra.get(k):
                    add(enc[extra[k]])
    ts, end = op.ts, op.end
    if ts is not None and end is not None and end > ts:
        add(_INCLUSIVE_DUR[(end + 500) // 1000 - (ts + 500) // 1000])
    return node_type, b"".join(parts)


def _int_list_attr(name: str, values: tuple[int, ...]) -> bytes:
    """A framed int64_list attribute (rare: only all-to-alls with splits carry one)."""
    return length_delimited(NODE_ATTR, make_attr(name, list(values)).SerializeToString())


def _comm_attrs(op: Op) -> list[bytes]:
    """Attributes of a comm node: type or peers, size, process group, dtype, stream."""
    info = op.comm
    parts = [_CPU_FALSE]
    add = parts.append
    if info.coll in (SEND, RECV):
        extra = op.extra or {}
        add(_COMM_SRC[int(extra.get("comm_src", -1))])
        add(_COMM_DST[int(extra.get("comm_dst", -1))])
        add(_COMM_TAG[int(info.tag)])
    else:
        add(_COMM_TYPE[int(info.coll)])
    add(_COMM_SIZE[int(info.size)])
    add(_PG_NAME[info.pg_name])
    if info.dtype:
        add(_DTYPE[info.dtype])
    if info.send_splits:
        add(_int_list_attr(SEND_BYTES, info.send_splits))
        add(_int_list_attr(RECV_BYTES, info.recv_splits))
    if op.stream >= 0:
        add(_STREAM[op.stream])
    return parts


def ordered(items: list[Item], edges_in_order: bool = False) -> list[Item]:
    """Topological order (every dependency before its dependents), earliest start first.

    Sorting by (start, id) is nearly always already topological (dependencies start earlier).
    `edges_in_order` says the builder saw every edge respect that order (`Builder.edges_in_order`),
    else it is checked in one pass; only a violation pays for the general Kahn sort.
    """
    if None in map(_START, items):
        fast = sorted(items, key=lambda it: (it.start if it.start is not None else 0, it.id))
    else:  # the same order from two stable sorts on plain ints, much cheaper than tuple keys
        fast = sorted(items, key=_ID)
        fast.sort(key=_START)
    if edges_in_order or _is_topological(fast):
        return fast
    del fast
    get = {it.id: i for i, it in enumerate(items)}.get
    parents = [[j for j in map(get, set(it.ctrl) | set(it.data)) if j is not None] for it in items]
    keys = [(it.start if it.start is not None else 0, it.id) for it in items]
    order, stuck = priority_topo_order(parents, keys)
    if stuck:
        raise CycleError([items[i].id for i in stuck][:10])
    return [items[i] for i in order]


_START = attrgetter("start")
_START_ID = attrgetter("start", "id")


def _is_topological(items: list[Item]) -> bool:
    """Every dependency (present in `items`) comes before its dependent."""
    get = dict(zip(map(_ID, items), range(len(items)))).get
    for i, it in enumerate(items):
        for d in it.ctrl:
            if get(d, -1) >= i:
                return False
        if it.data:
            for d in it.data:
                if get(d, -1) >= i:
                    return False
    return True


_ID = attrgetter("id")


class CycleError(Exception):
    def __init__(self, ids: list[int]) -> None:
        super().__init__(f"dependency cycle among nodes {ids}")
        self.ids = ids


__all__ = ["NodeEncoder", "io_field", "io_fields", "ordered", "CycleError", "GAP", "IDLE", "QUEUE"]

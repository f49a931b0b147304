"""A compact, columnar index of one rank's trace: what a feeder (and the simulator) needs per node.

Why columns: a feeder for a 10,000,000-node trace cannot keep 10M protobuf messages (or 10M Python
dicts) alive. One pass over the file records, per node, its id, type, duration, the byte range of
its payload and its dependency edges in flat `array`s (8 bytes per value, no Python object per
node); numpy then sorts ids, maps dependency ids to row numbers and builds a CSR child list in
bulk. Rows are numbered in ascending node-id order, so "smallest ready id" is "smallest ready row".

With `attrs=True` (the simulator's mode) the pass also reads the attributes the simulator needs:
dense columns for `is_cpu_op`, `num_ops`, `tensor_size` (every node may have them), and a sparse
dict for the few nodes that carry communication/memory/metadata fields.
"""

from __future__ import annotations

import math
import os
import tempfile
from array import array
from collections.abc import Iterable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from itertools import accumulate, chain
from operator import attrgetter
from pathlib import Path
from typing import Any, Optional

import numpy as np
from google.protobuf.message import DecodeError

from chakra.errors import TraceFormatError
from chakra.files import create_temp, remove_stale_temps
from chakra.io import decompress_to
from chakra.schema import pb, whole
from chakra.schema.attrs import SIMULATOR_ATTRS, SPLIT_ATTRS, as_int
from chakra.schema.attrs import attr_value as _attr_value

#: attributes kept in the sparse per-node dict (comm, memory and metadata nodes only).
SPARSE_ATTRS = frozenset({*SIMULATOR_ATTRS, *SPLIT_ATTRS, "tensor_loc"})  # tensor_loc: a string or a number
_SPARSE_TYPES = frozenset({0, 1, 2, 3, 5, 6, 7})  # everything but COMP keeps its attrs sparse
MEMO_LIMIT = 1 << 18  # distinct serialized nodes remembered across files (then it starts afresh)
_GET_SIM = attrgetter("id", "type", "duration_micros", "data_deps", "ctrl_deps")
_GET_DEPS = attrgetter("id", "type", "data_deps", "ctrl_deps")
# `is_cpu_op` in its conventional bool_val arm, as serialized: name (field 1), bool_val (field 27).
_CPU_TRUE = b"\n\tis_cpu_op\xd8\x01\x01"
_CPU_FALSE = b"\n\tis_cpu_op\xd8\x01\x00"
# A zero `num_ops` / `tensor_size` as whole attributes (Node field 10, its length, the name, then
# int64_val 0 or uint64_val 0 and nothing else): what converters write for a kernel of unknown work.
_ZERO_WORK = {
    b"num_ops": (b"R\x0b\n\x07num_opsH\x00", b"R\x0b\n\x07num_opsh\x00"),
    b"tensor_size": (b"R\x0f\n\x0btensor_sizeH\x00", b"R\x0f\n\x0btensor_sizeh\x00"),
}
# a node's bytes ending in both (its last attributes, as the exporter writes compute nodes)
_ZERO_WORK_TAILS = tuple(a + b for a in _ZERO_WORK[b"num_ops"] for b in _ZERO_WORK[b"tensor_size"])


@dataclass
class NodeTable:
    """Columns of one rank's nodes, rows in ascending id order.

    `child_ptr`/`child_idx` form a CSR list of children (deduplicated over data and ctrl deps),
    `dep_count[i]` is the number of distinct parents of row i.
    """

    path: Optional[Path]
    ids: np.ndarray
    types: np.ndarray
    dur_us: Optional[np.ndarray]
    start_us: Optional[np.ndarray]
    dep_count: np.ndarray
    child_ptr: np.ndarray
    child_idx: np.ndarray
    payload_off: Optional[np.ndarray] = None
    payload_len: Optional[np.ndarray] = None
    file_pos: Optional[np.ndarray] = None  # row -> position in the source; None: the same (ids ascending)
    is_cpu: Optional[np.ndarray] = None
    num_ops: Optional[np.ndarray] = None
    tensor_size: Optional[np.ndarray] = None
    sparse: dict[int, dict[str, Any]] = field(default_factory=dict)  # row -> {attr: value}
    names: Optional[list[str]] = None
    metadata_inputs: list[str] = field(default_factory=list)  # inputs.values of METADATA nodes
    #: with missing_deps="drop": how many edges named absent nodes, and the first as "child -> parent"
    dropped_deps: int = 0
    first_dropped: str = ""

    def __len__(self) -> int:
        return len(self.ids)

    def row_of(self, node_id: int) -> int:
        """Row of a node id, or -1."""
        i = int(np.searchsorted(self.ids, node_id))
        if i < len(self.ids) and self.ids[i] == node_id:
            return i
        return -1


def _no_work(raw: bytes) -> bool:
    """Whether every `num_ops` and `tensor_size` in these bytes is a whole zero attribute (or there
    is none): each occurrence of the name must lie in one of the patterns, which hold it once, so
    equal counts leave no other place for it; the pattern's leading tag and one-byte length pin it
    to an attribute of exactly that name and value."""
    for name, patterns in _ZERO_WORK.items():
        c = raw.count(name)
        if c and c != sum(map(raw.count, patterns)):
            return False
    return True


def _cpu_flag_from_bytes(raw: bytes) -> Optional[int]:
    """is_cpu_op of a compute node read from its serialized bytes, when they settle it (num_ops
    and tensor_size absent or zero, at most one conventional is_cpu_op): 1, 0, or None to decode it.

    Zero work is read from the node's last bytes: with each name once in the node, a real
    attribute of that name can only be the one in the tail (see `_no_work`), and a name that is
    no attribute's leaves the value at its default, zero."""
    if (b"num_ops" in raw or b"tensor_size" in raw) and not (
        raw.endswith(_ZERO_WORK_TAILS) and raw.count(b"num_ops") == 1 and raw.count(b"tensor_size") == 1
    ):
        return None
    c = raw.count(b"is_cpu_op")
    if c == 0:
        return 0
    if c == 1 and _CPU_TRUE in raw:
        return 1
    if c == 1 and _CPU_FALSE in raw:
        return 0
    return None


class _Builder:
    """Accumulates columns during the single pass; `finish` turns them into a NodeTable."""

    def __init__(self, path: Optional[Path], attrs: bool, names: bool, memo: Optional[dict] = None) -> None:
        self.path = path
        self.attrs = attrs
        # serialized node -> its decoded attribute columns, shared by the files of one job: SPMD
        # ranks repeat most nodes byte for byte, and attribute decoding is the costly part
        self.memo = memo
        self.ids = array("q")
        self.types = array("b")
        # Durations only for the simulator (attrs); a plain feeder does not need them.
        self.dur: Optional[array] = array("q") if attrs else None
        self.start: Optional[array] = None  # start_time_micros: not needed by feeder or simulator
        self.off = array("q")
        self.plen = array("i")
        self.edge_child = array("i")
        self.edge_parent = array("q")
        self.is_cpu = array("b") if attrs else None
        self.num_ops = array("q") if attrs else None
        self.tensor_size = array("q") if attrs else None
        self.sparse: dict[int, dict[str, Any]] = {}
        self.names: Optional[list[str]] = [] if names else None
        self.metadata_inputs: list[str] = []

    def add_batch(
        self,
        nodes: Any,
        pos: int,
        offsets: Optional[list[int]] = None,
        framed: Optional[list] = None,
        blob: Optional[bytes] = None,
    ) -> None:
        """Index a run of nodes that start at source position `pos`.

        Scalar columns are filled by list comprehensions (C-level loops). With `framed` (the
        serialized messages, length prefix included) attributes are only decoded for nodes whose
        bytes mention an interesting name, and the common `is_cpu_op` bool is read from the bytes.
        """
        try:
            self._add_batch(nodes, pos, offsets, framed, blob)
        except OverflowError:
            # uint64 ids, durations or dependencies past int64: name the first such node
            _raise_out_of_range(self.path, nodes)
            raise

    def _add_batch(
        self,
        nodes: Any,
        pos: int,
        offsets: Optional[list[int]],
        framed: Optional[list],
        blob: Optional[bytes],
    ) -> None:
        k = len(nodes)
        if not k:
            return
        if self.dur is not None:
            ids, types, dur, data_deps, ctrl_deps = zip(*map(_GET_SIM, nodes))
            self.dur.extend(dur)
        else:
            ids, types, data_deps, ctrl_deps = zip(*map(_GET_DEPS, nodes))
        self.ids.extend(ids)
        before = len(self.types)
        try:
            self.types.extend(types)
        except OverflowError:  # an out-of-range enum value: keep the row, type unknown (0)
            del self.types[before:]
            self.types.extend([t if -128 <= t < 128 else 0 for t in types])
        if framed is not None and offsets is not None:
            self.off.extend(offsets)
            self.plen.extend(map(len, framed))
        else:
            self.off.extend([-1] * k)
            self.plen.extend([0] * k)
        for field_deps in (data_deps, ctrl_deps):
            lens = list(map(len, field_deps))
            if any(lens):
                self.edge_parent.extend(chain.from_iterable(map(whole, field_deps)))
                self.edge_child.frombytes(np.repeat(np.arange(pos, pos + k, dtype=np.int32), lens).tobytes())
        if self.names is not None:
            self.names.extend([n.name for n in nodes])
        if self.attrs:
            self._add_attrs(nodes, types, pos, framed, blob)

    def _add_attrs(
        self, nodes: Any, types: Sequence[int], pos: int, framed: Optional[list], blob: Optional[bytes]
    ) -> None:
        """The simulator's columns (is_cpu_op, num_ops, tensor_size) and the sparse attributes of
        comm/mem nodes, decoding only the nodes whose bytes can hold one."""
        k = len(nodes)
        is_cpu = [0] * k
        num_ops = [0] * k
        tsize = [0] * k
        sparse = self.sparse
        rows: Any = range(k)
        if blob is not None and framed is not None and blob.count(b"is_cpu_op") == blob.count(_CPU_FALSE):
            # Every is_cpu_op in the batch is a conventional `false`: a compute node needs no
            # attribute decoding unless its num_ops or tensor_size may be other than zero (read
            # from its bytes as in `_cpu_flag_from_bytes`); the other node types are looked at.
            if _no_work(blob):
                rows = [j for j, t in enumerate(types) if t != 4]
            else:
                tails = _ZERO_WORK_TAILS
                rows = [
                    j
                    for j, t in enumerate(types)
                    if t != 4
                    or not (
                        ((f := framed[j]).endswith(tails) and f.count(b"num_ops") == 1 and f.count(b"tensor_size") == 1)
                        or (b"num_ops" not in f and b"tensor_size" not in f)
                    )
                ]
        memo = self.memo if framed is not None else None
        if memo is not None and len(memo) > MEMO_LIMIT:
            memo.clear()
        for j in rows:
            n = nodes[j]
            ntype = types[j]
            if ntype == 1:
                self._note_metadata(n)
            if framed is not None:
                if ntype == 4:
                    cpu = _cpu_flag_from_bytes(framed[j])
                    if cpu is not None:  # the bytes told all there is to know
                        is_cpu[j] = cpu
                        continue
                if memo is not None:
                    hit = memo.get(framed[j])
                    if hit is not None:
                        is_cpu[j], num_ops[j], tsize[j], got = hit
                        if got is not None and ntype in _SPARSE_TYPES:
                            sparse[pos + j] = got
                        continue
            elif not n.attr:
                continue
            found: dict[str, Any] = {}
            for attr in n.attr[:]:
                name = attr.name
                if name in SPARSE_ATTRS:
                    found[name] = _attr_value(attr)
            if not found:
                if memo is not None:
                    memo[framed[j]] = (0, 0, 0, None)  # type: ignore[index]
                continue
            check_attr_values(self.path, n, found)
            v = found.get("is_cpu_op")
            is_cpu[j] = 1 if v and not isinstance(v, (list, str, bytes)) else 0
            num_ops[j] = as_int(found.get("num_ops"), 0)
            tsize[j] = as_int(found.get("tensor_size"), 0)
            if ntype in _SPARSE_TYPES:
                sparse[pos + j] = found
            if memo is not None:
                memo[framed[j]] = (is_cpu[j], num_ops[j], tsize[j], found)  # type: ignore[index]
        self.is_cpu.extend(is_cpu)
        self.num_ops.extend(num_ops)
        self.tensor_size.extend(tsize)

    def _note_metadata(self, n: Any) -> None:
        self.metadata_inputs.extend(metadata_texts(n))

    def finish(self, missing_deps: str = "error") -> NodeTable:
        """Columns in ascending-id order and the CSR child lists, built with bulk numpy operations.

        Memory matters here (10M-node traces): ids already ascending in file order (the usual
        case) skip every reordering copy, intermediates are dropped as soon as possible, and edges
        are not deduplicated: a parent listed twice (data and ctrl) simply counts twice in the
        child's dependency count and appears twice in its child list, which releases it correctly.
        """
        n = len(self.ids)
        ids = np.frombuffer(self.ids, dtype=np.int64) if n else np.zeros(0, np.int64)
        identity = bool(n < 2 or (ids[1:] > ids[:-1]).all())
        order: Optional[np.ndarray] = None
        if identity:
            sorted_ids = ids
        else:
            order = np.argsort(ids, kind="stable")
            sorted_ids = ids[order]
            dup = np.nonzero(sorted_ids[1:] == sorted_ids[:-1])[0]
            if len(dup):
                shown = ", ".join(str(int(sorted_ids[i])) for i in dup[:5])
                raise TraceFormatError(self.path, f"duplicate node id(s): {shown}")

        def col(arr: Optional[array], dtype: Any) -> Optional[np.ndarray]:
            if arr is None:
                return None
            a = np.frombuffer(arr, dtype=dtype) if len(arr) else np.zeros(0, dtype)
            return a if order is None else np.ascontiguousarray(a[order])

        m = len(self.edge_child)
        dropped, first_dropped = 0, ""
        if m:
            pos = np.frombuffer(self.edge_child, dtype=np.int32)
            if order is None:
                child_rows = pos
            else:
                row_of_pos = np.empty(n, dtype=np.int32)
                row_of_pos[order] = np.arange(n, dtype=np.int32)
                child_rows = row_of_pos[pos]
                del row_of_pos
            del pos
            parent_ids = np.frombuffer(self.edge_parent, dtype=np.int64)
            prow = np.searchsorted(sorted_ids, parent_ids)
            np.minimum(prow, max(n - 1, 0), out=prow)
            ok = sorted_ids[prow] == parent_ids if n else np.zeros(m, bool)
            if not ok.all():
                bad = np.nonzero(~ok)[0]
                if missing_deps == "error":
                    pairs = ", ".join(
                        f"node {int(sorted_ids[child_rows[i]])} -> missing {int(parent_ids[i])}" for i in bad[:5]
                    )
                    more = f" (and {len(bad) - 5} more)" if len(bad) > 5 else ""
                    raise TraceFormatError(self.path, f"dependency on a node that does not exist: {pairs}{more}")
                dropped = len(bad)
                first_dropped = f"node {int(sorted_ids[child_rows[bad[0]]])} -> missing {int(parent_ids[bad[0]])}"
                child_rows = child_rows[ok]
                prow = prow[ok]
            del ok, parent_ids
            self_dep = np.nonzero(child_rows == prow)[0]
            if len(self_dep):
                raise TraceFormatError(self.path, f"node {int(sorted_ids[prow[self_dep[0]]])} depends on itself")
            counts = np.bincount(child_rows, minlength=n).astype(np.int32)
            prow = prow.astype(np.int32)
            # children of a parent in ascending row (= id) order; rows are file order when ids ascend
            by_parent = np.argsort(prow, kind="stable") if order is None else np.lexsort((child_rows, prow))
            child_idx = np.ascontiguousarray(child_rows[by_parent], dtype=np.int32)
            del by_parent, child_rows
            child_ptr = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(np.bincount(prow, minlength=n), out=child_ptr[1:])
            del prow
        else:
            counts = np.zeros(n, dtype=np.int32)
            child_idx = np.zeros(0, dtype=np.int32)
            child_ptr = np.zeros(n + 1, dtype=np.int64)
        if order is None:
            sparse = dict(self.sparse)
            names = self.names
        else:
            row_of = np.empty(n, dtype=np.int64)
            row_of[order] = np.arange(n, dtype=np.int64)
            sparse = {int(row_of[p]): v for p, v in self.sparse.items()}
            names = [self.names[i] for i in order.tolist()] if self.names is not None else None
        return NodeTable(
            path=self.path,
            ids=sorted_ids,
            types=col(self.types, np.int8),
            dur_us=col(self.dur, np.int64),
            start_us=col(self.start, np.int64),
            dep_count=counts,
            child_ptr=child_ptr,
            child_idx=child_idx,
            payload_off=col(self.off, np.int64),
            payload_len=col(self.plen, np.int32),
            file_pos=order if order is not None else None,
            is_cpu=col(self.is_cpu, np.int8),
            num_ops=col(self.num_ops, np.int64),
            tensor_size=col(self.tensor_size, np.int64),
            sparse=sparse,
            names=names,
            metadata_inputs=self.metadata_inputs,
            dropped_deps=dropped,
            first_dropped=first_dropped,
        )


def metadata_texts(n: Any) -> list[str]:
    """A METADATA node's process-group text (inputs, or a process_groups attribute)."""
    out = [n.inputs.values] if n.HasField("inputs") and n.inputs.values else []
    out.extend(a.string_val for a in n.attr if a.name == "process_groups" and a.WhichOneof("value") == "string_val")
    return out


_INT64 = (-(1 << 63), (1 << 63) - 1)


def check_attr_values(path: Optional[Path], node: Any, found: dict[str, Any]) -> None:
    """Refuse attribute values the simulator cannot use as numbers: NaN, infinities, > int64."""
    for name, v in found.items():
        t = type(v)
        if t is float:
            if not math.isfinite(v):
                raise TraceFormatError(path, f"node {node.id}: attribute {name!r} is {v}, expected a finite number")
        elif t is int and not _INT64[0] <= v <= _INT64[1]:
            raise TraceFormatError(path, f"node {node.id}: attribute {name!r} = {v} is out of the int64 range")
        elif t is list and v and type(v[0]) is float and not all(map(math.isfinite, v)):
            raise TraceFormatError(path, f"node {node.id}: attribute {name!r} holds a NaN or infinity")


def _raise_out_of_range(path: Optional[Path], nodes: Any) -> None:
    limit = _INT64[1]
    for n in nodes:
        for name in ("id", "duration_micros", "start_time_micros"):
            v = getattr(n, name)
            if v > limit:
                raise TraceFormatError(path, f"node {n.id}: {name} {v} is out of range (at most {limit})")
        for name in ("data_deps", "ctrl_deps"):
            big = [d for d in getattr(n, name) if d > limit]
            if big:
                raise TraceFormatError(path, f"node {n.id}: {name} names id {big[0]}, out of range (at most {limit})")


def table_from_nodes(
    nodes: Iterable[pb.Node],
    *,
    path: Optional[Path] = None,
    attrs: bool = True,
    names: bool = False,
    missing_deps: str = "error",
) -> NodeTable:
    """Index nodes already in memory (an in-memory Trace or a JSON-form file)."""
    b = _Builder(path, attrs, names)
    nodes = nodes if isinstance(nodes, list) else list(nodes)
    b.add_batch(nodes, 0)
    return b.finish(missing_deps)


def table_from_et(
    path: Path,
    *,
    attrs: bool = True,
    names: bool = False,
    missing_deps: str = "error",
    source: Optional[Path] = None,
    memo: Optional[dict] = None,
) -> tuple[pb.GlobalMetadata, NodeTable]:
    """One streaming pass over a plain `.et` file; payloads stay on disk (offsets recorded).

    `source`: the file to name in errors when `path` is a decompressed temporary copy of it.
    `memo`: a dict shared by the files of one job (see `_Builder`), or None.
    """
    from chakra.io import open_binary

    with open_binary(path) as stream:
        return _table_from_stream(source or path, stream, attrs, names, missing_deps, memo)


def table_from_messages(
    path: Path,
    messages: list[bytes],
    *,
    attrs: bool = True,
    names: bool = False,
    missing_deps: str = "error",
    memo: Optional[dict] = None,
) -> tuple[pb.GlobalMetadata, NodeTable]:
    """`table_from_et` of a plain `.et` file already read and framed into its messages,
    GlobalMetadata first (`chakra.feeder.reading.file_messages`): the bytes are not read or framed
    a second time."""
    return _table_from_batches(path, _message_batches(messages), attrs, names, missing_deps, memo)


def _message_batches(messages: list[bytes]) -> Any:
    """(index, offset, messages) runs of 1,024, as `iter_payload_batches` yields them."""
    offset = 0
    for i in range(0, len(messages), 1024):
        batch = messages[i : i + 1024]
        yield i, offset, batch
        offset += sum(map(len, batch))


def _table_from_stream(
    path: Path, stream: Any, attrs: bool, names: bool, missing_deps: str, memo: Optional[dict] = None
) -> tuple[pb.GlobalMetadata, NodeTable]:
    from chakra.io import iter_payload_batches

    return _table_from_batches(path, iter_payload_batches(path, stream), attrs, names, missing_deps, memo)


def _table_from_batches(
    path: Path, batches: Any, attrs: bool, names: bool, missing_deps: str, memo: Optional[dict] = None
) -> tuple[pb.GlobalMetadata, NodeTable]:
    from chakra.io import NodeBatch, _prefix_size

    b = _Builder(path, attrs, names, memo)
    metadata = pb.GlobalMetadata()
    parse = NodeBatch.FromString
    pos = 0
    first = True
    for index, offset, batch in batches:
        if first:
            head = batch[0]
            try:
                metadata.ParseFromString(head[_prefix_size(head) :])
            except DecodeError as exc:
                raise TraceFormatError(
                    path, f"not a Chakra trace: cannot decode GlobalMetadata ({exc})", index=0, offset=0
                ) from None
            offset += len(head)
            index += 1
            batch = batch[1:]
            first = False
            if not batch:
                continue
        blob = b"\x0a" + b"\x0a".join(batch)
        try:
            nodes = parse(blob).nodes
        except DecodeError:
            _find_corrupt(path, batch, index, offset)
        offsets = list(accumulate((len(f) for f in batch[:-1]), initial=offset))
        b.add_batch(nodes, pos, offsets, batch, blob)
        pos += len(batch)
    if first:
        raise TraceFormatError(path, "empty file: expected a GlobalMetadata message", index=0, offset=0)
    return metadata, b.finish(missing_deps)


def _find_corrupt(path: Path, batch: list, index: int, offset: int) -> None:
    from chakra.io import _prefix_size

    for framed in batch:
        try:
            pb.Node.FromString(framed[_prefix_size(framed) :])
        except DecodeError as exc:
            raise TraceFormatError(path, f"corrupt Node message ({exc})", index=index, offset=offset) from None
        index += 1
        offset += len(framed)
    raise TraceFormatError(path, "corrupt Node message", index=index, offset=offset)


def gunzip_to_temp(path: Path) -> Path:
    """Decompress a `.et.gz` to a temp file so payloads can be re-read by offset (gzip cannot seek).

    Uses chakra.compression (corrupt data and bombs are refused naming `path`); on any failure the
    temp file is removed before the error propagates.
    """
    # A recognisable name (chakra.files): a run killed before removing it leaves a file the next
    # one can prove stale and remove.
    anchor = Path(tempfile.gettempdir()) / "chakra-feeder.et"
    remove_stale_temps(anchor)
    fd, tmp = create_temp(anchor)
    try:
        with open(fd, "wb") as dst:
            decompress_to(path, dst)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return Path(tmp)


class _Grow:
    """A numpy column that grows to fit the rows put in it (an `array.array` viewed by numpy could
    not grow)."""

    def __init__(self, dtype: Any) -> None:
        self.a = np.zeros(1024, dtype)
        self.n = 0  # appended so far (`extend`)

    def fit(self, size: int) -> None:
        if size > len(self.a):
            grown = np.zeros(max(size, 2 * len(self.a)), self.a.dtype)
            grown[: len(self.a)] = self.a
            self.a = grown

    def put(self, rows: Any, values: Any) -> None:
        if len(rows):
            self.fit(int(rows.max()) + 1)
            self.a[rows] = values

    def extend(self, values: Any) -> None:
        v = np.asarray(values)
        self.fit(self.n + len(v))
        self.a[self.n : self.n + len(v)] = v
        self.n += len(v)


_GET_DEP_LISTS = attrgetter("data_deps", "ctrl_deps")


class DistinctColumns:
    """The simulator's columns of a job's distinct node messages (`chakra.sim.loading.NodeStore`),
    one row each, read from protobuf once: `table` then gathers one rank's `NodeTable` from the rows
    its nodes repeat with numpy. The ranks of a real job differ in durations but repeat most nodes
    byte for byte (1,024 synthesized ranks: 86,761 distinct messages for 2.16 M nodes)."""

    def __init__(self) -> None:
        self.ids = _Grow(np.int64)
        self.types = _Grow(np.int8)
        self.dur = _Grow(np.int64)
        self.is_cpu = _Grow(np.int8)
        self.num_ops = _Grow(np.int64)
        self.tensor_size = _Grow(np.int64)
        self.plen = _Grow(np.int32)
        self.has_sparse = _Grow(np.bool_)
        self.done = _Grow(np.bool_)  # rows read so far (only those some rank's table needed)
        self.sparse: dict[int, dict[str, Any]] = {}
        self.names: dict[int, str] = {}
        # data then control dependencies: per row the length and start of its run in `values`
        self.deps = [(_Grow(np.int64), _Grow(np.int64), _Grow(np.int64)) for _ in range(2)]

    def missing(self, rows: Any) -> Any:
        """Those of `rows` not read yet, once each, ascending."""
        self.done.fit(int(rows.max()) + 1 if len(rows) else 0)
        # sorted, then the first of each run: np.unique's own path imports numpy.ma (~6 ms of a
        # small simulation's start-up) to ask whether a plain array is masked
        fresh = np.sort(rows[~self.done.a[rows]])
        return fresh[np.concatenate(([True], fresh[1:] != fresh[:-1]))] if len(fresh) else fresh

    def add(self, path: Optional[Path], rows: Any, nodes: Sequence[Any], framed: list[bytes]) -> None:
        """Read distinct rows (decoded `nodes`, their framed messages `framed`): `_Builder`'s reading,
        so their errors (out-of-range values, NaN attributes) name `path`, the file that brought them."""
        b = _Builder(path, True, True)
        for i in range(0, len(nodes), 1024):
            batch = framed[i : i + 1024]
            offsets = list(accumulate(map(len, batch[:-1]), initial=0))
            b.add_batch(nodes[i : i + 1024], i, offsets, batch, b"\x0a" + b"\x0a".join(batch))
        self.ids.put(rows, np.frombuffer(b.ids, np.int64))
        self.types.put(rows, np.frombuffer(b.types, np.int8))
        self.dur.put(rows, np.frombuffer(b.dur, np.int64))  # type: ignore[arg-type]
        self.is_cpu.put(rows, np.frombuffer(b.is_cpu, np.int8))  # type: ignore[arg-type]
        self.num_ops.put(rows, np.frombuffer(b.num_ops, np.int64))  # type: ignore[arg-type]
        self.tensor_size.put(rows, np.frombuffer(b.tensor_size, np.int64))  # type: ignore[arg-type]
        self.plen.put(rows, np.frombuffer(b.plen, np.int32))
        at = np.fromiter(b.sparse, np.int64, len(b.sparse))
        self.has_sparse.fit(len(self.ids.a))
        self.has_sparse.put(rows[at], True)
        self.sparse.update(zip(rows[at].tolist(), b.sparse.values()))
        self.names.update(zip(rows.tolist(), b.names or ()))
        for lists, (lens, starts, values) in zip(zip(*map(_GET_DEP_LISTS, nodes)), self.deps):
            run = np.fromiter(map(len, lists), np.int64, len(lists))
            starts.put(rows, values.n + np.cumsum(run) - run)
            lens.put(rows, run)
            values.extend(np.fromiter(chain.from_iterable(map(whole, lists)), np.int64, int(run.sum())))
        self.done.put(rows, True)

    def table(
        self, path: Optional[Path], rows: Any, head: int, names: bool, missing_deps: str, node_of: Any
    ) -> NodeTable:
        """`table_from_messages` of a rank file whose nodes repeat these `rows` (file order) after a
        GlobalMetadata message of `head` bytes, gathered: the same columns, edges in the same order
        (the 1,024-message batches `_message_batches` reads: data then control dependencies of each),
        so the same table. `node_of(row)`: the decoded node (METADATA nodes' process-group text)."""
        b = _Builder(path, True, names)
        k = len(rows)
        b.ids = self.ids.a[rows]  # type: ignore[assignment]
        b.types = self.types.a[rows]  # type: ignore[assignment]
        b.dur = self.dur.a[rows]  # type: ignore[assignment]
        b.is_cpu = self.is_cpu.a[rows]  # type: ignore[assignment]
        b.num_ops = self.num_ops.a[rows]  # type: ignore[assignment]
        b.tensor_size = self.tensor_size.a[rows]  # type: ignore[assignment]
        plen = self.plen.a[rows]
        b.plen = plen  # type: ignore[assignment]
        b.off = head + np.cumsum(plen, dtype=np.int64) - plen  # type: ignore[assignment]
        at = np.flatnonzero(self.has_sparse.a[rows])
        b.sparse = dict(zip(at.tolist(), map(self.sparse.__getitem__, rows[at].tolist())))
        if names:
            b.names = list(map(self.names.__getitem__, rows.tolist()))
        for row in rows[b.types == 1].tolist():  # type: ignore[comparison-overlap]
            b.metadata_inputs.extend(metadata_texts(node_of(row)))
        children, parents, keys = [], [], []
        for kind, (all_lens, all_starts, values) in enumerate(self.deps):
            lens = all_lens.a[rows]
            total = int(lens.sum())
            if not total:
                continue
            pos = np.repeat(np.arange(k, dtype=np.int32), lens)
            parents.append(values.a[np.repeat(all_starts.a[rows] - (np.cumsum(lens) - lens), lens) + np.arange(total)])
            children.append(pos)
            keys.append((pos + 1) // 1024 * 2 + kind)  # the batch (GlobalMetadata first), then the kind
        if children:
            order = np.argsort(np.concatenate(keys), kind="stable")
            b.edge_child = np.concatenate(children)[order]  # type: ignore[assignment]
            b.edge_parent = np.concatenate(parents)[order]  # type: ignore[assignment]
        return b.finish(missing_deps)

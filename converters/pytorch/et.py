"""Loading PyTorch Execution Traces of every schema version into `Op` records.

Inputs may be plain JSON, gzip, or members of a (gzipped) tar archive. Layouts: 1.0.1 is flat
(`parent`, `inputs` as a plain list, `input_shapes`, ...); 1.0.2 and later nest `inputs`/`outputs`
objects and put `rf_id` etc. in an `attrs` list (looked up by name, never by position; see
docs/input-formats.md §A). A trace whose observer never finished (no closing `]}`) is repaired by
cutting at the last complete node, and the repair is reported.
"""

from __future__ import annotations

import io
import mmap
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import Annotated, Any, Optional, Union

import msgspec
import orjson

from chakra.compression import gunzip_bytes
from chakra.converters.jsonchunks import drain, parse_json, split_document
from chakra.converters.pytorch.emit import io_fields
from chakra.converters.pytorch.ops import CPU, META, PG_INIT_MARK, ROOT_NAMES, Op
from chakra.converters.pytorch.roofline import MODELLED, fill_roofline
from chakra.errors import TraceFormatError, excerpt
from chakra.io import input_file_errors

KNOWN_BASE_VERSIONS = ("1.0.1", "1.0.2", "1.0.3", "1.0.4", "1.1.0", "1.1.1")
KNOWN_CHAKRA_SUFFIXES = ("0.0.4", "1.0.0")
_SCHEMA_RE = re.compile(r"^(\d+\.\d+\.\d+)(?:-chakra\.(\d+\.\d+\.\d+))?$")


@dataclass
class ETFile:
    """One rank's Execution Trace, normalised."""

    path: str
    schema: str
    pid: int
    time: str
    start_ts: int
    finish_ts: int
    ops: dict[int, Op]
    roots: int = 0
    pg_init: list[Op] = field(default_factory=list)
    repaired: bool = False
    size_bytes: int = 0


def read_input_bytes(path: Path) -> list[tuple[str, Any]]:
    """(display name, raw bytes) of every JSON document in `path` (a tar yields one per member).

    A big plain file comes back memory-mapped (an `mmap`, read like bytes): parsing then reads the
    page cache directly instead of a 100 MB copy that the kernel must first zero-fill.
    """
    with input_file_errors(path):
        if path.stat().st_size >= _MAP_MIN:
            with open(path, "rb") as f:
                mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            if mapped[:2] != b"\x1f\x8b" and not is_tar(mapped[:512]):
                return [(str(path), mapped)]
            mapped.close()
        raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = _gunzip(str(path), raw)
    if is_tar(raw):
        return _tar_members(path, raw)
    return [(str(path), raw)]


_MAP_MIN = 1 << 20  # smaller files are read: nothing to gain


def _gunzip(name: str, raw: bytes) -> bytes:
    # the core's helper: corrupt data is a TraceFormatError, and a decompression bomb is refused
    return gunzip_bytes(raw, name)


def is_tar(raw: bytes) -> bool:
    return len(raw) > 262 and raw[257:262] == b"ustar"


def _tar_members(path: Path, raw: bytes) -> list[tuple[str, bytes]]:
    import tarfile  # only for tar input: not on every conversion's start-up

    out = []
    try:
        with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as tar:
            for member in tar:
                base = member.name.rsplit("/", 1)[-1]
                # Skip macOS AppleDouble files ("._x.json") and anything that is not a JSON document.
                if not member.isfile() or base.startswith("._") or not base.endswith((".json", ".json.gz")):
                    continue
                f = tar.extractfile(member)
                if f is None:
                    continue
                data = f.read()
                if data[:2] == b"\x1f\x8b":
                    data = _gunzip(f"{path}:{member.name}", data)
                out.append((f"{path}:{member.name}", data))
    except tarfile.TarError as exc:
        raise TraceFormatError(path, f"corrupt tar archive ({exc})") from None
    if not out:
        raise TraceFormatError(path, "tar archive holds no .json trace")
    return out


def check_schema(name: str, schema: Any) -> str:
    if not isinstance(schema, str):
        raise TraceFormatError(name, "not a PyTorch Execution Trace: no 'schema' string")
    m = _SCHEMA_RE.match(schema)
    if not m or m.group(1) not in KNOWN_BASE_VERSIONS or (m.group(2) and m.group(2) not in KNOWN_CHAKRA_SUFFIXES):
        known = ", ".join(KNOWN_BASE_VERSIONS)
        raise TraceFormatError(
            name, f"ET schema {schema!r} was never seen (known: {known}, optionally -chakra.0.0.4/1.0.0)"
        )
    return schema


def load_et(name: str, raw: bytes, keep_io: bool = True) -> ETFile:
    """Parse one ET document into Ops (roots dropped, process_group:init kept as META).

    Big documents are decoded a few nodes at a time into typed records (see `chunked`), so the
    whole JSON tree never exists at once; anything unusual falls back to one whole-document parse
    (which also repairs an unterminated trace).
    """
    split = split_document(raw, b"nodes", b"id")
    if split is not None:
        schema = check_schema(name, split.header.get("schema"))
        if schema.startswith("1.0.1"):
            split = split_document(raw, b"nodes", b"name")
        if split is not None:
            convert = _flat_op
            if not schema.startswith("1.0.1"):
                split.decode_with(_DECODE_NODES, _DECODE_NODE)
                convert = _record_op
            try:
                et = _build(name, schema, split.header, split, keep_io, len(raw), convert)
            # RecursionError: nesting too deep for the typed decoder; the whole parse reports it
            except (orjson.JSONDecodeError, ValueError, UnicodeDecodeError, RecursionError):
                et = None
            if et is not None:
                et.finish_ts = header_int(name, split.tail, "finish_ts")
                return et
    doc, repaired = parse_json(name, raw, repair_key=b'"nodes"')
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), list):
        raise TraceFormatError(name, "not a PyTorch Execution Trace: no 'nodes' list")
    schema = check_schema(name, doc.get("schema"))
    nodes = doc.pop("nodes")
    et = _build(
        name, schema, doc, drain(nodes), keep_io, len(raw), _flat_op if schema.startswith("1.0.1") else _nested_op
    )
    et.finish_ts = header_int(name, doc, "finish_ts")
    et.repaired = repaired
    return et


def header_int(name: str, doc: dict, key: str) -> int:
    """A top-level integer (pid, start/finish time): 0 when absent, an error when not 0 .. 2**63-1."""
    v = doc.get(key) or 0
    if type(v) is not int or not 0 <= v < _MAX_ID:
        raise TraceFormatError(name, f"'{key}' must be an integer from 0 to 2**63-1, not {excerpt(v, 40)}")
    return v


def _build(
    name: str, schema: str, header: dict, nodes: Any, keep_io: bool, size: int, convert: Callable[[Any, bool], Op]
) -> ETFile:
    ops: dict[int, Op] = {}
    roots = 0
    pg_init: list[Op] = []
    for index, node in enumerate(nodes):
        try:
            op = convert(node, keep_io)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            # the checks' own ValueErrors say what is wrong; anything else is named by its type
            why = str(exc) if type(exc) is ValueError else f"malformed ({type(exc).__name__}: {exc})"
            raise TraceFormatError(name, f"node #{index}: {why}") from None
        roles = _ROLES.get(op.name)
        if roles is None:
            roles = _roles(op.name)
        if roles & _ROOT:
            roots += 1
            continue
        if op.id in ops:
            raise TraceFormatError(name, f"node #{index}: duplicate node id {op.id}")
        if roles & _PG_INIT:
            op.kind = META
            pg_init.append(op)
        ops[op.id] = op
    return ETFile(
        path=name,
        schema=schema,
        pid=header_int(name, header, "pid"),
        time=str(header.get("time") or ""),
        start_ts=header_int(name, header, "start_ts"),
        finish_ts=0,
        ops=ops,
        roots=roots,
        pg_init=pg_init,
        size_bytes=size,
    )


#: ops whose parsed inputs/outputs later steps read (comm metadata, tensor matching, process groups,
#: the group name a functional collective passes)
_KEEP_PARSED = ("c10d::", "gloo:", "nccl:", "record_param_comms", "##", "_c10d_functional", "c10d_functional")


def _finish(op: Op, ins: Optional[tuple], outs: Optional[tuple], keep_io: bool) -> None:
    """Roofline numbers now; then keep parsed IO only where needed, else its serialised node fields (or nothing)."""
    op.inputs, op.outputs = ins, outs
    name = op.name
    roles = _roles(name)
    if roles & _ROOFLINE:
        fill_roofline(op)
    if keep_io:
        op.io = io_fields(ins, outs)
    if roles & _KEEP:
        _check_io(ins)
        _check_io(outs)
    else:
        op.inputs = op.outputs = None


_ROOFLINE, _KEEP, _ROOT, _PG_INIT = 1, 2, 4, 8
_ROLES: dict[str, int] = {}


def _roles(name: str) -> int:
    """What an op name implies, as bits (cached per name; a trace has a few hundred names):
    _ROOFLINE (modelled aten op), _KEEP (parsed IO read later), _ROOT (thread/process root node),
    _PG_INIT (process-group metadata)."""
    roles = _ROLES.get(name)
    if roles is None:
        roles = (
            (_ROOFLINE if name.startswith("aten::") and name[6:] in MODELLED else 0)
            | (_KEEP if name.startswith(_KEEP_PARSED) or PG_INIT_MARK in name else 0)
            | (_ROOT if name in ROOT_NAMES else 0)
            | (_PG_INIT if PG_INIT_MARK in name else 0)
        )
        if len(_ROLES) < 1 << 16:
            _ROLES[name] = roles
    return roles


#: node ids and the integer attributes are written as int64/uint64: 0 .. 2**63 - 1
_MAX_ID = 1 << 63
#: types of the ET attributes later steps read beyond the ones `_set_attrs` pops
_EXTRA_TYPES = {"kernel_backend": str, "kernel_file": str, "collective_name": str, "pg_name": str, "dtype": str,
                "in_msg_nelems": int, "out_msg_nelems": int, "comm_src": int, "comm_dst": int}  # fmt: skip


def _node_ids(node_id: Any, parent: Any) -> tuple[int, int]:
    """A dict node's id and parent, checked as the typed record checks them."""
    if isinstance(parent, list):  # defensive: some writers emit a list
        parent = parent[0] if parent else 0
    parent = parent or 0
    for what, v in (("id", node_id), ("parent", parent)):
        if type(v) is not int or not 0 <= v < _MAX_ID:
            raise ValueError(f"{what} must be an integer from 0 to 2**63-1, not {excerpt(v, 40)}")
    return node_id, parent


def _nested_op(node: dict, keep_io: bool = True) -> Op:
    node_id, parent = _node_ids(node["id"], node.get("ctrl_deps", 0))
    name = node["name"]
    if type(name) is not str:
        raise ValueError(f"name must be a string, not {excerpt(name, 40)}")
    op = Op(node_id, name, parent, CPU)
    attrs = node.get("attrs")
    if attrs:
        _set_attrs(op, {a["name"]: a.get("value") for a in attrs})
    i = node.get("inputs")
    o = node.get("outputs")
    _finish(
        op,
        (i.get("values") or [], i.get("shapes") or [], i.get("types") or []) if i else None,
        (o.get("values") or [], o.get("shapes") or [], o.get("types") or []) if o else None,
        keep_io,
    )
    return op


def _set_attrs(op: Op, by_name: dict) -> None:
    """The known attributes are popped off the node's name -> value dict (cheaper than an if/elif
    chain per attribute); what is left, when set, is the op's `extra`."""
    pop = by_name.pop
    _set_known(op, pop("rf_id", None), pop("tid", None), pop("seq_id", None), pop("scope", None),
               pop("fw_parent", None), pop("fw_tid", None), pop("op_schema", None))  # fmt: skip
    if by_name:
        extra = {k: v for k, v in by_name.items() if v != "" and v is not None}
        for k in _EXTRA_TYPES.keys() & extra.keys():
            if type(extra[k]) is not _EXTRA_TYPES[k]:
                raise ValueError(f"attr {k!r} must be {_EXTRA_TYPES[k].__name__}, not {excerpt(extra[k], 40)}")
        op.extra = extra or None
    else:
        op.extra = None


def _set_known(
    op: Op, rf_id: Any, tid: Any, seq_id: Any, scope: Any, fw_parent: Any, fw_tid: Any, op_schema: Any
) -> None:
    """The attributes every node carries, as found (None when absent), checked and set on `op`."""
    op.rf_id = rf_id = rf_id or 0
    op.tid = tid = tid or 0
    op.seq_id = seq_id = seq_id if seq_id is not None else -1
    op.scope = scope = scope or 0
    op.fw_parent = fw_parent = fw_parent or 0
    op.fw_tid = fw_tid = fw_tid or 0
    op.op_schema = op_schema = op_schema or ""
    # One expression (this runs for every node): exact types first, so the ranges compare ints.
    if not (
        type(rf_id) is int and type(tid) is int and type(seq_id) is int and type(scope) is int
        and type(fw_parent) is int and type(fw_tid) is int and type(op_schema) is str
        and 0 <= rf_id < _MAX_ID and 0 <= tid < _MAX_ID and -1 <= seq_id < _MAX_ID and 0 <= scope < _MAX_ID
        and 0 <= fw_parent < _MAX_ID and 0 <= fw_tid < _MAX_ID
    ):  # fmt: skip
        _check_attrs(rf_id=rf_id, tid=tid, seq_id=seq_id, scope=scope, fw_parent=fw_parent, fw_tid=fw_tid,
                     op_schema=op_schema)  # fmt: skip


def _check_io(io: Optional[tuple]) -> None:
    """The (values, shapes, types) that later steps read of comm and process-group ops: three lists,
    the types strings, and tensors ([id, storage, offset, numel, itemsize, device]) with int ids."""
    if io is None:
        return
    values, shapes, types = io
    if type(values) is not list or type(shapes) is not list or type(types) is not list:
        raise ValueError("inputs/outputs: values, shapes and types must be lists")
    if not all(type(t) is str for t in types):
        raise ValueError("inputs/outputs: every type must be a string")
    stack = [(v, 1) for v in values]
    while stack:
        v, depth = stack.pop()
        if type(v) is list:
            if len(v) == 6 and isinstance(v[0], int) and isinstance(v[5], str):  # a tensor
                if not all(type(x) is int for x in v[1:5]):
                    raise ValueError(f"inputs/outputs: tensor {excerpt(v, 60)} has non-integer fields")
            elif depth >= _MAX_IO_DEPTH:  # later steps walk these lists recursively
                raise ValueError(f"inputs/outputs: values nested deeper than {_MAX_IO_DEPTH} levels")
            else:
                stack.extend((x, depth + 1) for x in v)


#: real values nest a few levels (lists of tensor lists); anything deeper is corrupt
_MAX_IO_DEPTH = 32


def _check_attrs(**values: Any) -> None:
    """Say which attribute `_set_attrs` found wrong (the slow path, for the error message)."""
    for k, v in values.items():
        if k == "op_schema":
            if type(v) is not str:
                raise ValueError(f"attr 'op_schema' must be a string, not {excerpt(v, 40)}")
        elif type(v) is not int or not (-1 if k == "seq_id" else 0) <= v < _MAX_ID:
            low = -1 if k == "seq_id" else 0
            raise ValueError(f"attr {k!r} must be an integer from {low} to 2**63-1, not {excerpt(v, 40)}")


# Typed decoding of nested (1.0.2+) ET nodes for big documents: msgspec builds these records
# straight from the JSON text and skips the fields nobody reads (attribute "type", tensor strides,
# ...), which makes parsing ~25% cheaper than generic dicts. Every field that is not certain to
# have one type is `Any`, so the values are exactly what orjson would give; a node that does not
# fit (say, an unexpected key in `inputs`) fails validation and the document is parsed whole.
# The records are trees decoded from JSON, never part of a reference cycle: `gc=False` keeps them
# out of the cyclic GC's bookkeeping (cheaper to make and free, 1.5M of them per 100 MB).


class _NodeAttr(msgspec.Struct, gc=False):
    name: str
    value: Any = None


class _NodeIO(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    values: Any = msgspec.UNSET
    shapes: Any = msgspec.UNSET
    types: Any = msgspec.UNSET
    strides: msgspec.Raw = msgspec.UNSET  # kept as text, never decoded: not used


_ID = Annotated[int, msgspec.Meta(ge=0, le=_MAX_ID - 1)]


class _NodeRecord(msgspec.Struct, gc=False):
    id: _ID
    name: str
    ctrl_deps: Union[_ID, list[_ID], None] = 0
    inputs: Optional[_NodeIO] = None
    outputs: Optional[_NodeIO] = None
    attrs: Optional[list[_NodeAttr]] = None


_UNSET = msgspec.UNSET
_ATTR_NAME = attrgetter("name")
_ATTR_VALUE = attrgetter("value")
#: the attributes PyTorch's observer (2.x) writes on every node, in its order
_USUAL_ATTRS = ("rf_id", "fw_parent", "seq_id", "scope", "tid", "fw_tid", "op_schema", "kernel_backend",
                "kernel_file", "tensor_range")  # fmt: skip
_DECODE_NODES = msgspec.json.Decoder(list[_NodeRecord]).decode
_DECODE_NODE = msgspec.json.Decoder(_NodeRecord).decode


def _record_op(node: _NodeRecord, keep_io: bool = True) -> Op:
    """`_nested_op` for a typed record (same result as for the same node as a dict).

    This runs for every node of a big trace, so the usual case is inlined: `_set_known` where
    every attribute has its usual type and range, and each `inputs`/`outputs` record read by
    `_io_of` as `_nested_op` reads them from a dict."""
    parent = node.ctrl_deps
    if isinstance(parent, list):
        parent = parent[0] if parent else 0
    name = node.name
    op = Op(node.id, name, parent or 0, CPU)
    attrs = node.attrs
    if attrs:
        # The observer writes the same attributes in the same order on every node: then their
        # values are unpacked by position, with no name -> value dict (the others take that path).
        if tuple(map(_ATTR_NAME, attrs)) == _USUAL_ATTRS:
            rf_id, fw_parent, seq_id, scope, tid, fw_tid, op_schema, backend, file, t_range = map(_ATTR_VALUE, attrs)
            if backend == "" and file == "" and t_range == "":
                if (
                    type(rf_id) is int and type(tid) is int and type(seq_id) is int and type(scope) is int
                    and type(fw_parent) is int and type(fw_tid) is int and type(op_schema) is str
                    and 0 <= rf_id < _MAX_ID and 0 <= tid < _MAX_ID and -1 <= seq_id < _MAX_ID
                    and 0 <= scope < _MAX_ID and 0 <= fw_parent < _MAX_ID and 0 <= fw_tid < _MAX_ID
                ):  # fmt: skip
                    op.rf_id, op.tid, op.seq_id, op.scope = rf_id, tid, seq_id, scope
                    op.fw_parent, op.fw_tid, op.op_schema = fw_parent, fw_tid, op_schema
                else:  # absent (null) values, or a value to refuse
                    _set_known(op, rf_id, tid, seq_id, scope, fw_parent, fw_tid, op_schema)
            else:
                _set_attrs(op, {a.name: a.value for a in attrs})
        else:
            _set_attrs(op, {a.name: a.value for a in attrs})
    ins = _io_of(node.inputs)
    outs = _io_of(node.outputs)
    # `_finish`, inlined
    roles = _ROLES.get(name)
    if roles is None:
        roles = _roles(name)
    if roles & _ROOFLINE:
        op.inputs, op.outputs = ins, outs
        fill_roofline(op)
    if keep_io:
        op.io = io_fields(ins, outs)
    if roles & _KEEP:
        _check_io(ins)
        _check_io(outs)
        op.inputs, op.outputs = ins, outs
    else:
        op.inputs = op.outputs = None
    return op


def _io_of(record: Optional[_NodeIO]) -> Optional[tuple]:
    """An inputs/outputs record as `_nested_op` reads the same dict: None for an absent or empty
    (`{}`: every field unset) one, else (values, shapes, types), a missing or null list as []
    (msgspec.UNSET is falsy, so `or []` covers an absent list as it covers a null one)."""
    if record is None or (
        record.values is _UNSET and record.shapes is _UNSET and record.types is _UNSET and record.strides is _UNSET
    ):
        return None
    return (record.values or [], record.shapes or [], record.types or [])


def _flat_op(node: dict, keep_io: bool = True) -> Op:
    node_id, parent = _node_ids(node["id"], node.get("parent"))
    name = node["name"]
    if type(name) is not str:
        raise ValueError(f"name must be a string, not {excerpt(name, 40)}")
    op = Op(node_id, name, parent, CPU)
    # the same attributes as a nested node's, as top-level keys
    _set_attrs(op, {k: node.get(k) for k in _FLAT_ATTRS})
    _finish(
        op,
        (node.get("inputs") or [], node.get("input_shapes") or [], node.get("input_types") or []),
        (node.get("outputs") or [], node.get("output_shapes") or [], node.get("output_types") or []),
        keep_io,
    )
    return op


_FLAT_ATTRS = ("rf_id", "tid", "seq_id", "scope", "fw_parent", "fw_tid", "op_schema")


def sniff_et_head(head: bytes) -> bool:
    """True when a document head looks like an ET: an object whose keys include schema and nodes."""
    h = head.lstrip()
    return h[:1] == b"{" and b'"schema"' in h[:4096] and (b'"nodes"' in h or b'"pid"' in h[:4096])

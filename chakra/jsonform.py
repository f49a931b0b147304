"""The lossless JSON form of a rank's trace, and the official JSON form the C++ feeder reads.

Our form (documented by `chakra/schema/trace.schema.json`) is one JSON document::

    {"format": "chakra-et-json/1", "rank": 0,
     "metadata": {"version": "0.0.4", "attr": [...]},
     "nodes": [
       {"id": 0, "name": "...", "type": "COMP_NODE", "data_deps": [..],
        "attr": [{"name": "is_cpu_op", "bool_val": true}]},
       ...
     ]}

Each node sits on its own line so the file diffs and greps well. Field names are the proto field
names; a field at its proto3 default is omitted, a present-but-empty submessage is written as
`{}` (it is on the wire), so `.et -> JSON -> .et` reproduces the original bytes. Integers are JSON
integers (uint64 up to 2^64-1 survive; orjson reads and writes them exactly), bytes are base64,
non-finite floats the strings "NaN"/"Infinity"/"-Infinity". Unknown protobuf fields (a newer
schema's) are kept as base64 in `_unknown`.

The reader converts dicts straight to messages (fast path) and, on any shape error, runs the JSON
Schema to report exactly where the document is wrong.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Iterator
from functools import lru_cache
from importlib import resources
from typing import Annotated, Any, Optional, Union

import msgspec
import orjson

from chakra.compression import PathLike
from chakra.errors import TraceFormatError, excerpt
from chakra.schema import NodeType, pb
from chakra.schema.attrs import ALL_ARMS
from chakra.trace import Trace

FORMAT = "chakra-et-json/1"
_FLOAT_ARMS = frozenset({"double_val", "float_val"})
_FLOAT_LISTS = frozenset({"double_list", "float_list"})
_BYTES_ARMS = frozenset({"bytes_val"})
_ARMS = frozenset(ALL_ARMS)
_TYPE_NAMES = {t.value: t.name for t in NodeType}
_TYPE_VALUES = {t.name: t.value for t in NodeType}
_NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


@lru_cache(maxsize=1)
def json_schema() -> dict[str, Any]:
    text = resources.files("chakra.schema").joinpath("trace.schema.json").read_bytes()
    return orjson.loads(text)


# ---------------------------------------------------------------------------------------------
# message -> dict


def _float_out(v: float) -> Any:
    if math.isfinite(v):
        return v
    return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")


def _unknown_bytes(msg: Any) -> Optional[bytes]:
    """Serialized unknown fields of `msg` (fields of a newer schema), or None."""
    try:
        from google.protobuf.unknown_fields import UnknownFieldSet
    except ImportError:  # pragma: no cover - runtimes before 4.24
        return None
    if len(UnknownFieldSet(msg)) == 0:
        return None
    copy = type(msg)()
    copy.CopyFrom(msg)
    for fd in copy.DESCRIPTOR.fields:
        copy.ClearField(fd.name)
    return copy.SerializeToString()


def attr_to_dict(attr: pb.AttributeProto) -> dict[str, Any]:
    d: dict[str, Any] = {"name": attr.name}
    if attr.doc_string:
        d["doc_string"] = attr.doc_string
    arm = attr.WhichOneof("value")
    if arm is not None:
        value = getattr(attr, arm)
        if arm.endswith("_list"):
            values = list(value.values)
            if arm in _FLOAT_LISTS:
                values = [_float_out(v) for v in values]
            elif arm == "bytes_list":
                values = [base64.b64encode(v).decode() for v in values]
            d[arm] = values
        elif arm in _FLOAT_ARMS:
            d[arm] = _float_out(value)
        elif arm in _BYTES_ARMS:
            d[arm] = base64.b64encode(value).decode()
        else:
            d[arm] = value
    return d


def node_to_dict(node: pb.Node) -> dict[str, Any]:
    d: dict[str, Any] = {}
    if node.id:
        d["id"] = node.id
    if node.name:
        d["name"] = node.name
    if node.type:
        d["type"] = _TYPE_NAMES.get(node.type, node.type)
    if node.ctrl_deps:
        d["ctrl_deps"] = list(node.ctrl_deps)
    if node.data_deps:
        d["data_deps"] = list(node.data_deps)
    if node.start_time_micros:
        d["start_time_micros"] = node.start_time_micros
    if node.duration_micros:
        d["duration_micros"] = node.duration_micros
    for field in ("inputs", "outputs"):
        if node.HasField(field):
            io = getattr(node, field)
            d[field] = {k: v for k in ("values", "shapes", "types") if (v := getattr(io, k))}
    if node.attr:
        d["attr"] = [attr_to_dict(a) for a in node.attr]
    unknown = _unknown_bytes(node)
    if unknown:
        d["_unknown"] = base64.b64encode(unknown).decode()
    return d


def metadata_to_dict(md: pb.GlobalMetadata) -> dict[str, Any]:
    d: dict[str, Any] = {}
    if md.version:
        d["version"] = md.version
    if md.attr:
        d["attr"] = [attr_to_dict(a) for a in md.attr]
    unknown = _unknown_bytes(md)
    if unknown:
        d["_unknown"] = base64.b64encode(unknown).decode()
    return d


# ---------------------------------------------------------------------------------------------
# dict -> message


class _Shape(ValueError):
    """Raised by the fast path; the reader then asks the JSON Schema where the document is wrong."""


def _float_in(v: Any) -> float:
    if isinstance(v, str):
        try:
            return _NONFINITE[v]
        except KeyError:
            raise _Shape(f"bad float {excerpt(v)}") from None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise _Shape(f"bad float {excerpt(v)}")
    return float(v)


def fill_attr_from_dict(attr: pb.AttributeProto, d: dict[str, Any]) -> None:
    arms = [k for k in d if k not in ("name", "doc_string", "_unknown")]
    if len(arms) > 1:
        raise _Shape(f"attribute {excerpt(d.get('name'))} sets several value arms: {arms}")
    for key in arms:
        if key not in _ARMS:
            raise _Shape(f"unknown attribute field {excerpt(key)}")
    attr.name = d["name"]
    if "doc_string" in d:
        attr.doc_string = d["doc_string"]
    for arm in arms:
        value = d[arm]
        if arm.endswith("_list"):
            target = getattr(attr, arm)
            target.SetInParent()
            if arm in _FLOAT_LISTS:
                value = [_float_in(v) for v in value]
            elif arm == "bytes_list":
                value = [base64.b64decode(v, validate=True) for v in value]
            target.values.extend(value)
        elif arm in _FLOAT_ARMS:
            setattr(attr, arm, _float_in(value))
        elif arm in _BYTES_ARMS:
            setattr(attr, arm, base64.b64decode(value, validate=True))
        else:
            setattr(attr, arm, value)
    if "_unknown" in d:
        attr.MergeFromString(base64.b64decode(d["_unknown"], validate=True))


_NODE_KEYS = frozenset(
    {
        "id",
        "name",
        "type",
        "ctrl_deps",
        "data_deps",
        "start_time_micros",
        "duration_micros",
        "inputs",
        "outputs",
        "attr",
        "_unknown",
    }
)


def node_from_dict(d: dict[str, Any]) -> pb.Node:
    if not isinstance(d, dict):
        raise _Shape("node is not an object")
    extra = d.keys() - _NODE_KEYS
    if extra:
        raise _Shape(f"unknown node fields {sorted(extra)}")
    node = pb.Node()
    if "id" in d:
        node.id = d["id"]
    if "name" in d:
        node.name = d["name"]
    t = d.get("type")
    if t is not None:
        node.type = _TYPE_VALUES[t] if isinstance(t, str) else t
    if "ctrl_deps" in d:
        node.ctrl_deps.extend(d["ctrl_deps"])
    if "data_deps" in d:
        node.data_deps.extend(d["data_deps"])
    if "start_time_micros" in d:
        node.start_time_micros = d["start_time_micros"]
    if "duration_micros" in d:
        node.duration_micros = d["duration_micros"]
    for field in ("inputs", "outputs"):
        if field in d:
            io = getattr(node, field)
            io.SetInParent()
            for k, v in d[field].items():
                setattr(io, k, v)
    for a in d.get("attr", ()):
        fill_attr_from_dict(node.attr.add(), a)
    if "_unknown" in d:
        node.MergeFromString(base64.b64decode(d["_unknown"], validate=True))
    return node


def metadata_from_dict(d: dict[str, Any]) -> pb.GlobalMetadata:
    md = pb.GlobalMetadata()
    if "version" in d:
        md.version = d["version"]
    for a in d.get("attr", ()):
        fill_attr_from_dict(md.attr.add(), a)
    if "_unknown" in d:
        md.MergeFromString(base64.b64decode(d["_unknown"], validate=True))
    return md


# ---------------------------------------------------------------------------------------------
# documents


def trace_to_document(trace: Trace) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "rank": trace.rank,
        "metadata": metadata_to_dict(trace.metadata),
        "nodes": [node_to_dict(n) for n in trace.nodes],
    }


def json_trace_chunks(trace: Trace) -> Iterator[bytes]:
    """Our JSON form of `trace` in pieces, one node per line (`chakra.io.write_json_trace` writes them)."""
    head = orjson.dumps({"format": FORMAT, "rank": trace.rank, "metadata": metadata_to_dict(trace.metadata)})
    yield head[:-1] + b',\n"nodes":[\n'
    parts: list[bytes] = []
    for i, node in enumerate(trace.nodes):
        parts.append((b",\n" if i else b"") + orjson.dumps(node_to_dict(node)))
        if len(parts) >= 4096:
            yield b"".join(parts)
            parts.clear()
    yield b"".join(parts) + b"\n]}\n"


def _schema_error(path: PathLike, doc: Any) -> Optional[str]:
    import jsonschema

    validator = jsonschema.Draft202012Validator(json_schema())
    try:
        error = jsonschema.exceptions.best_match(validator.iter_errors(doc))
    except RecursionError:
        return "(nested too deeply)"
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "(document)"
    return f"at {where}: {error.message}"


def document_to_trace(doc: Any, path: PathLike) -> Trace:
    """Build a Trace from a parsed JSON document of either form."""
    if isinstance(doc, dict) and doc.get("format") == FORMAT:
        return _ours_to_trace(doc, path)
    if isinstance(doc, dict) and "workload_graph" in doc:
        return official_to_trace(doc, path)
    if isinstance(doc, dict) and "format" in doc:
        raise TraceFormatError(
            path, f"unsupported JSON trace format {excerpt(doc['format'])} (expected {excerpt(FORMAT)})"
        )
    raise TraceFormatError(
        path,
        f'not a Chakra JSON trace: expected an object with "format": "{FORMAT}" '
        'or the official form with "workload_graph"',
    )


def _ours_to_trace(doc: dict[str, Any], path: PathLike) -> Trace:
    envelope = {k: v for k, v in doc.items() if k != "nodes"}
    envelope["nodes"] = []
    problem = _schema_error(path, envelope)
    if problem:
        raise TraceFormatError(path, f"invalid Chakra JSON trace {problem}")
    nodes_in = doc.get("nodes")
    if not isinstance(nodes_in, list):
        raise TraceFormatError(path, "invalid Chakra JSON trace at nodes: not an array")
    try:
        metadata = metadata_from_dict(doc["metadata"])
        nodes = []
        for i, d in enumerate(nodes_in):
            try:
                nodes.append(node_from_dict(d))
            except (_Shape, TypeError, ValueError, KeyError, AttributeError, OverflowError) as exc:
                problem = _schema_error(path, {**envelope, "nodes": [d]})
                if problem:
                    problem = problem.replace("at nodes/0", f"at nodes/{i}", 1)
                raise TraceFormatError(path, f"invalid Chakra JSON trace {problem or f'at nodes/{i}: {exc}'}") from None
    except (_Shape, TypeError, ValueError, KeyError, AttributeError, OverflowError) as exc:
        raise TraceFormatError(path, f"invalid Chakra JSON trace metadata: {exc}") from None
    rank = doc.get("rank")
    return Trace(metadata=metadata, nodes=nodes, rank=rank if isinstance(rank, int) else None)


_OFFICIAL_INT_ATTRS = {
    "tensor_size": "tensor_size",
    "comm_type": "comm_type",
    "comm_priority": "comm_priority",
    "comm_size": "comm_size",
    "comm_src": "comm_src",
    "comm_dst": "comm_dst",
    "comm_tag": "comm_tag",
    "num_ops": "num_ops",
}


_U64 = Annotated[int, msgspec.Meta(ge=0)]  # msgspec itself refuses ints past 2^64-1
_I64 = Annotated[int, msgspec.Meta(ge=-(1 << 63), le=(1 << 63) - 1)]


class OfficialNode(msgspec.Struct, rename={"id": "Id", "name": "Name", "node_type": "NodeType", "ctrl": "ctrlDeps"}):
    """One `workload_graph` item of the official JSON form, typed at the boundary: a wrong type,
    a negative or out-of-range id becomes one error with its JSON path, not a TypeError later."""

    id: _U64
    name: str = ""
    node_type: Annotated[int, msgspec.Meta(ge=0, le=(1 << 31) - 1)] = 0
    runtime: Union[_U64, Annotated[float, msgspec.Meta(ge=0, le=1.8e19)], None] = None
    data_deps: Optional[list[_U64]] = None
    ctrl: Optional[list[_U64]] = None
    is_cpu_op: Union[bool, int, None] = None
    tensor_size: Optional[_U64] = None
    comm_type: Optional[_I64] = None
    comm_priority: Optional[_I64] = None
    comm_size: Optional[_I64] = None
    comm_src: Optional[Annotated[int, msgspec.Meta(ge=-(1 << 31), le=(1 << 31) - 1)]] = None
    comm_dst: Optional[Annotated[int, msgspec.Meta(ge=-(1 << 31), le=(1 << 31) - 1)]] = None
    comm_tag: Optional[Annotated[int, msgspec.Meta(ge=-(1 << 31), le=(1 << 31) - 1)]] = None
    num_ops: Optional[_I64] = None


def official_to_trace(doc: dict[str, Any], path: PathLike) -> Trace:
    """The official C++ feeder's JSON form (`{"workload_graph": [...]}`, keys Id/Name/NodeType/...).

    `runtime` is the duration in µs. The official reader ignores `ctrlDeps`; we keep those that
    name a node of the file and drop the rest (the sample's point at host nodes not included),
    recording how many were dropped in the metadata attribute `dropped_ctrl_deps`.
    """
    from chakra.schema.attrs import set_attr, set_attrs
    from chakra.trace import make_metadata

    graph = doc["workload_graph"]
    if not isinstance(graph, list):
        raise TraceFormatError(path, "official JSON trace: workload_graph is not an array")
    try:
        items = msgspec.convert(graph, list[OfficialNode])
    except msgspec.ValidationError as exc:
        raise TraceFormatError(path, f"official JSON trace: {_msgspec_where(exc, 'workload_graph')}") from None
    ids = {item.id for item in items}
    metadata = make_metadata(schema="official-json")
    for key, value in doc.items():
        if key != "workload_graph" and isinstance(value, (str, int, float, bool)):
            if isinstance(value, int) and not -(1 << 63) <= value < (1 << 64):
                raise TraceFormatError(path, f"official JSON trace: {key!r} is out of the 64-bit range")
            set_attr(metadata, key, value)
    nodes = []
    dropped = 0
    for i, item in enumerate(items):
        try:
            node = pb.Node(id=item.id, name=item.name, type=item.node_type)
            node.duration_micros = int(item.runtime or 0)
            node.data_deps.extend(item.data_deps or ())
            for d in item.ctrl or ():
                if d in ids:
                    node.ctrl_deps.append(d)
                else:
                    dropped += 1
            attrs: dict[str, Any] = {}
            if item.is_cpu_op is not None:
                attrs["is_cpu_op"] = bool(item.is_cpu_op)
            for key in _OFFICIAL_INT_ATTRS.values():
                value = getattr(item, key)
                if value is not None:
                    attrs[key] = value
            set_attrs(node, attrs)
        except (ValueError, OverflowError) as exc:  # uint64 fields past 2^64-1 (msgspec does not bound them)
            raise TraceFormatError(path, f"official JSON trace: workload_graph[{i}]: {exc}") from None
        nodes.append(node)
    if dropped:
        set_attr(metadata, "dropped_ctrl_deps", dropped)
    return Trace(metadata=metadata, nodes=nodes)


def _msgspec_where(exc: msgspec.ValidationError, root: str) -> str:
    """msgspec says "Expected `int`, got `str` - at `$[3].Id`"; name the place from `root`."""
    text = str(exc)
    return text.replace("`$", f"`{root}", 1)


def parse_json_trace(data: bytes, path: PathLike) -> Trace:
    """A trace from the bytes of a JSON-form file (ours or the official one); `path` names it in errors."""
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        # orjson reports "line L column C (char N)"; keep its position in the one-line message.
        raise TraceFormatError(path, f"not valid JSON: {exc}", offset=getattr(exc, "pos", None)) from None
    return document_to_trace(doc, path)

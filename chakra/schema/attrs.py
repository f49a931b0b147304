"""Conventional attributes: the names simulators read and the oneof arm each must be written in.

The proto defines none of these names; they are the de-facto contract with ASTRA-sim and the
official ETFeeder, which read exactly one arm per name and silently get 0 from any other arm
(docs/chakra-format.md §1.3). So writers always go through `set_attr`, which uses the conventional
arm; readers go through `get_attr`, which accepts any arm (other producers are not so careful).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, Optional, Union

from chakra.schema import et_def_pb2 as pb

Message = Union[pb.Node, pb.GlobalMetadata]

#: The attributes simulators act on (ASTRA-sim, the official feeder): name -> the arm they read.
SIMULATOR_ATTRS: dict[str, str] = {
    "is_cpu_op": "bool_val",
    "num_ops": "int64_val",
    "tensor_size": "uint64_val",
    "comm_type": "int64_val",
    "comm_size": "int64_val",
    "comm_src": "int32_val",
    "comm_dst": "int32_val",
    "comm_tag": "int32_val",
    "comm_priority": "int32_val",
    "pg_name": "string_val",
    "involved_dim": "bool_list",
}

#: All-to-all with per-peer sizes (docs/moe.md): bytes sent to / received from each member of the
#: collective's process group, in group-rank order, as `int64_list`. The official feeder and
#: ASTRA-sim read neither (they see an all-to-all of `comm_size`).
SEND_BYTES = "comm_send_bytes"
RECV_BYTES = "comm_recv_bytes"
SPLIT_ATTRS: dict[str, str] = {SEND_BYTES: "int64_list", RECV_BYTES: "int64_list"}

#: What the PyTorch converters copy from the Execution Trace, in the official converter's arms.
PYTORCH_ATTRS: dict[str, str] = {
    "rf_id": "int64_val",
    "fw_parent": "int64_val",
    "seq_id": "int64_val",
    "scope": "int64_val",
    "tid": "int64_val",
    "fw_tid": "int64_val",
    "op_schema": "string_val",
    "stream": "int64_val",
}

#: name -> the oneof arm consumers read: every conventional attribute.
CONVENTIONS: dict[str, str] = {**SIMULATOR_ATTRS, **PYTORCH_ATTRS, **SPLIT_ATTRS}

#: The attributes the official ETFeeder reads from exactly one scalar arm (any other arm silently
#: reads as 0): the simulator attributes that hold one number.
FEEDER_READ = frozenset(name for name, arm in SIMULATOR_ATTRS.items() if arm.endswith("_val") and arm != "string_val")

SCALAR_ARMS = (
    "double_val",
    "float_val",
    "int32_val",
    "int64_val",
    "uint32_val",
    "uint64_val",
    "sint32_val",
    "sint64_val",
    "fixed32_val",
    "fixed64_val",
    "sfixed32_val",
    "sfixed64_val",
    "bool_val",
    "string_val",
    "bytes_val",
)
LIST_ARMS = tuple(a.replace("_val", "_list") for a in SCALAR_ARMS)
ALL_ARMS = SCALAR_ARMS + LIST_ARMS
NUMERIC_ARMS = frozenset(a for a in SCALAR_ARMS if a not in ("string_val", "bytes_val"))
INT_ARMS = frozenset(NUMERIC_ARMS - {"double_val", "float_val", "bool_val"})

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_UINT64_MAX = 2**64 - 1


def as_int(value: Any, default: Any = None) -> Any:
    """An attribute value as an int: numbers (bools included) are truncated, anything else (None,
    strings, lists, NaN or infinity) gives `default`. Strings are not parsed, as the official
    feeder reads them as 0 too."""
    if isinstance(value, (bool, int)):
        return int(value)
    if isinstance(value, float) and math.isfinite(value):
        return int(value)
    return default


def infer_arm(value: Any) -> str:
    """The arm an unconventional attribute gets from its Python type."""
    if isinstance(value, bool):
        return "bool_val"
    if isinstance(value, int):
        return "uint64_val" if value > _INT64[1] else "int64_val"
    if isinstance(value, float):
        return "double_val"
    if isinstance(value, str):
        return "string_val"
    if isinstance(value, (bytes, bytearray)):
        return "bytes_val"
    if isinstance(value, (list, tuple)):
        items = list(value)
        if all(isinstance(v, bool) for v in items) and items:
            return "bool_list"
        if all(isinstance(v, int) and not isinstance(v, bool) for v in items):
            return "uint64_list" if any(v > _INT64[1] for v in items) else "int64_list"
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in items):
            return "double_list"
        if all(isinstance(v, str) for v in items):
            return "string_list"
        if all(isinstance(v, (bytes, bytearray)) for v in items):
            return "bytes_list"
    raise TypeError(f"cannot store {type(value).__name__} value {value!r} in a Chakra attribute")


def fill_attr(attr: pb.AttributeProto, value: Any, arm: str) -> None:
    """Store `value` in `attr` under `arm`, checking ranges so nothing is silently truncated."""
    if arm.endswith("_list"):
        getattr(attr, arm).values.extend(value)
        return
    if arm in INT_ARMS:
        if arm in ("int32_val", "sint32_val", "sfixed32_val") and not _INT32[0] <= value <= _INT32[1]:
            raise ValueError(f"attribute {attr.name!r}: {value} does not fit {arm}")
        if arm in ("uint32_val", "fixed32_val") and not 0 <= value < 2**32:
            raise ValueError(f"attribute {attr.name!r}: {value} does not fit {arm}")
        if arm in ("uint64_val", "fixed64_val") and not 0 <= value <= _UINT64_MAX:
            raise ValueError(f"attribute {attr.name!r}: {value} does not fit {arm}")
        value = int(value)
    elif arm == "bool_val":
        value = bool(value)
    setattr(attr, arm, value)


def make_attr(name: str, value: Any, arm: Optional[str] = None) -> pb.AttributeProto:
    """A new AttributeProto in the conventional arm for `name` (or `arm`, or inferred)."""
    attr = pb.AttributeProto(name=name)
    fill_attr(attr, value, arm or CONVENTIONS.get(name) or infer_arm(value))
    return attr


def set_attr(msg: Message, name: str, value: Any, arm: Optional[str] = None) -> None:
    """Set (replace) attribute `name` on a Node or GlobalMetadata."""
    arm = arm or CONVENTIONS.get(name) or infer_arm(value)
    for attr in msg.attr:
        if attr.name == name:
            attr.ClearField(attr.WhichOneof("value") or "name")
            attr.name = name
            fill_attr(attr, value, arm)
            return
    fill_attr(msg.attr.add(name=name), value, arm)


def set_attrs(msg: Message, values: Mapping[str, Any]) -> None:
    """Append several attributes at once; assumes they are not present yet (converters' fast path)."""
    add = msg.attr.add
    for name, value in values.items():
        if value is None:
            continue
        fill_attr(add(name=name), value, CONVENTIONS.get(name) or infer_arm(value))


def attr_value(attr: pb.AttributeProto) -> Any:
    """Python value of an AttributeProto, whatever its arm (lists come back as lists)."""
    return _arm_value(attr, attr.WhichOneof("value"))


def _arm_value(attr: pb.AttributeProto, arm: Optional[str]) -> Any:
    """`attr_value` for an attribute whose set arm is known (`WhichOneof` asked once)."""
    if arm is None:
        return None
    value = getattr(attr, arm)
    if arm.endswith("_list"):
        return value.values[:]
    return value


def get_attr(msg: Message, name: str, default: Any = None) -> Any:
    """Value of attribute `name` from any arm, or `default` when absent or empty."""
    for attr in msg.attr[:]:  # a list in one call (see chakra.schema.whole)
        if attr.name == name:
            value = attr_value(attr)
            return default if value is None else value
    return default


def get_int(msg: Message, name: str, default: int = 0) -> int:
    """Integer value of a numeric attribute in any arm (bool and float arms included)."""
    value = get_attr(msg, name)
    if value is None or isinstance(value, (list, str, bytes)):
        return default
    return int(value)


def attrs_dict(msg: Message) -> dict[str, Any]:
    return {attr.name: attr_value(attr) for attr in msg.attr[:]}


def misplaced_attrs(msg: Message) -> Iterable[tuple[str, str, str]]:
    """(name, arm found, arm expected) for conventional attributes written in another arm."""
    return read_attrs(msg)[1]


def read_attrs(msg: Message) -> tuple[dict[str, Any], list[tuple[str, str, str]]]:
    """One pass over a message's attributes: {name: value} (the first of a name, as `get_attr`
    reads it) and `misplaced_attrs`."""
    values: dict[str, Any] = {}
    misplaced: list[tuple[str, str, str]] = []
    for attr in msg.attr[:]:
        name = attr.name
        arm = attr.WhichOneof("value")  # once per attribute, for both answers
        expected = CONVENTIONS.get(name)
        if expected is not None and arm != expected:
            misplaced.append((name, arm or "none", expected))
        if name not in values:
            values[name] = _arm_value(attr, arm)
    return values, misplaced


def read_attr_bytes(
    attrs: Iterable[bytes], memo: dict[bytes, tuple[str, Any, Optional[tuple[str, str, str]]]]
) -> tuple[dict[str, Any], list[tuple[str, str, str]]]:
    """`read_attrs` of a node given as its attributes' serialized bytes (an `AttributeProto` each,
    in the node's order), each distinct attribute decoded once: `memo` (bytes -> name, value, its
    `misplaced_attrs` entry) is shared by the nodes read so. Values are shared too: not to be changed."""
    values: dict[str, Any] = {}
    misplaced: list[tuple[str, str, str]] = []
    for raw in attrs:
        got = memo.get(raw)
        if got is None:
            attr = pb.AttributeProto.FromString(raw)
            name = attr.name
            arm = attr.WhichOneof("value")
            expected = CONVENTIONS.get(name)
            wrong = (name, arm or "none", expected) if expected is not None and arm != expected else None
            got = memo[raw] = (name, _arm_value(attr, arm), wrong)
        name, value, wrong = got
        if wrong is not None:
            misplaced.append(wrong)
        if name not in values:
            values[name] = value
    return values, misplaced

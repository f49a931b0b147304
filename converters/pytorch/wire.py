"""A minimal protobuf wire encoder for the Chakra messages this converter writes (Node, IOInfo, AttributeProto).

Why not the protobuf classes: with upb, every `AttributeProto` is a Python object that `Node(attr=[...])`
then deep-copies, which made building nodes cost ~9 µs each, more than parsing the JSON they came
from. Here a node is a concatenation of byte strings, most of them cached (attribute names with
their tags, node names, constant attributes), and the serialised node goes straight to the file.

The bytes are exactly what `pb.Node(...).SerializeToString()` gives for the same content (fields in
field-number order, proto3 defaults left out, packed repeated ints, oneof arms always written even
when zero, negative int32/int64 as ten-byte two's-complement varints): every sample's conversion
was compared byte for byte with the earlier protobuf-built output, and any reader (`chakra.io`,
the converter tests, `chakra validate`) parses them with the protobuf classes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from chakra.io import encode_varint as _slow_varint

_MASK64 = (1 << 64) - 1


def _two_byte_table(high: range) -> list[bytes]:
    """[bytes(((i & 0x7F) | 0x80, high[i >> 7])) for i in range(16384)], cut from one buffer by one
    C-level `re.findall` (every two bytes): no Python-level step per entry (the tables are made at
    every start-up)."""
    buf = bytearray(1 << 15)
    buf[0::2] = bytes(range(0x80, 0x100)) * 128
    buf[1::2] = b"".join(bytes((h,)) * 128 for h in high)
    return _PAIRS.findall(bytes(buf))


_PAIRS = re.compile(b"..", re.DOTALL)
_ONE_BYTE = bytes(range(128))
#: varint of 0 .. 16383, and the two leading (continued) bytes of any value by its low 14 bits
_SMALL = list(map(_ONE_BYTE.__getitem__, map(slice, range(128), range(1, 129)))) + _two_byte_table(range(128))[128:]
_LOW14 = _two_byte_table(range(0x80, 0x100))


def prefixed(prefix: bytes, entries: list[bytes]) -> list[bytes]:
    """[prefix + e for e in entries] for entries of one length (a start-up table), cut from one
    joined buffer in C instead of one concatenation per entry."""
    if not entries:
        return []
    size = len(prefix) + len(entries[0])
    return re.findall(b"." * size, prefix + prefix.join(entries), re.DOTALL)


def varint(value: int) -> bytes:
    """Base-128 varint of an unsigned (or, as protobuf does for int32/int64, negative) integer.

    Values are split into 14-bit groups looked up in two tables, so a 50-bit timestamp costs
    four list lookups instead of a Python loop over seven bytes.
    """
    if 0 <= value < 16384:
        return _SMALL[value]
    if value < 0:
        return _slow_varint(value & _MASK64)
    if value < 1 << 28:
        return _LOW14[value & 0x3FFF] + _SMALL[value >> 14]
    if value < 1 << 42:
        return _LOW14[value & 0x3FFF] + _LOW14[(value >> 14) & 0x3FFF] + _SMALL[value >> 28]
    if value < 1 << 56:
        return _LOW14[value & 0x3FFF] + _LOW14[(value >> 14) & 0x3FFF] + _LOW14[(value >> 28) & 0x3FFF] + _SMALL[
            value >> 42
        ]  # fmt: skip
    return _slow_varint(value)


def varint_table(n: int) -> list[bytes]:
    """Varints of 0 .. n-1 (n up to 2**28), for encoders that look ids up instead of calling `varint`."""
    if n <= 16384:
        return _SMALL[:n]
    rest = [low + high for high in _SMALL[1 : ((n - 1) >> 14) + 1] for low in _LOW14]
    return _SMALL + rest[: n - 16384]


class HighBits(dict):
    """varint(value >> 14), cached: with `_LOW14` it encodes big values (µs timestamps) in two lookups."""

    def __missing__(self, high: int) -> bytes:
        out = self[high] = varint(high)
        return out


def length_delimited(tag: bytes, payload: bytes) -> bytes:
    """tag + length + payload (a string, bytes, sub-message or packed field)."""
    n = len(payload)
    return tag + (_SMALL[n] if n < 16384 else _slow_varint(n)) + payload


def packed(tag: bytes, values: Iterable[int]) -> bytes:
    """A packed repeated varint field; empty input gives no bytes (proto3 omits empty lists)."""
    payload = b"".join(map(varint, values))
    return length_delimited(tag, payload) if payload else b""


# ---------------------------------------------------------------------------------------------
# Field tags: (field number << 3) | wire type, as varints

# Node
NODE_ID = b"\x08"
NODE_NAME = b"\x12"
NODE_TYPE = b"\x18"
NODE_CTRL = b"\x22"
NODE_DATA = b"\x2a"
NODE_START = b"\x30"
NODE_DUR = b"\x38"
NODE_INPUTS = b"\x42"
NODE_OUTPUTS = b"\x4a"
NODE_ATTR = b"\x52"

#: the framed duration field (tag + varint) of 0 .. 16383 µs: 1-byte varints below 128, 2-byte above
DUR_FIELDS = prefixed(NODE_DUR, _SMALL[:128]) + prefixed(NODE_DUR, _SMALL[128:])

# IOInfo
_IO_TAGS = (b"\x0a", b"\x12", b"\x1a")

# AttributeProto value arms by name (field numbers 7, 9, 13, 27, 29)
_ARM_TAGS = {
    "int32_val": b"\x38",
    "int64_val": b"\x48",
    "uint64_val": b"\x68",
    "bool_val": b"\xd8\x01",
    "string_val": b"\xea\x01",
}


def io_info(values: bytes, shapes: bytes, types: bytes) -> bytes:
    """An IOInfo message body from UTF-8 texts (empty ones are left out)."""
    return b"".join(length_delimited(tag, s) for tag, s in zip(_IO_TAGS, (values, shapes, types)) if s)


class AttrEncoder(dict):
    """Framed `attr` entries (field 10 of Node) of one attribute name in one value arm.

    `enc[value]` gives the entry, cached: most attributes (tid, scope, is_cpu_op, durations,
    FLOPs of repeated layers) take few distinct values, and a hit is one C-level dict lookup.
    `enc.encode(value)` skips the cache, for attributes that are unique per node (ids).
    """

    __slots__ = ("prefix", "arm", "heads")

    def __init__(self, name: str, arm: str) -> None:
        super().__init__()
        self.arm = arm
        self.prefix = length_delimited(b"\x0a", name.encode()) + _ARM_TAGS[arm]
        #: for varint arms: the entry up to the value, by the value's varint length (0 .. 10)
        self.heads = [NODE_ATTR + _SMALL[len(self.prefix) + k] + self.prefix for k in range(11)]

    def __missing__(self, value: Any) -> bytes:
        out = self.encode(value)
        if len(self) < 65536:
            self[value] = out
        return out

    def encode(self, value: Any) -> bytes:
        """The framed entry: attr tag + length + (name + arm tag + value)."""
        arm = self.arm
        if arm == "string_val":
            return length_delimited(NODE_ATTR, self.prefix + length_delimited(b"", str(value).encode()))
        if arm == "bool_val":
            return length_delimited(NODE_ATTR, self.prefix + (b"\x01" if value else b"\x00"))
        v = varint(int(value))
        return self.heads[len(v)] + v


__all__ = [
    "DUR_FIELDS",
    "prefixed",
    "varint",
    "varint_table",
    "HighBits",
    "length_delimited",
    "packed",
    "io_info",
    "AttrEncoder",
]

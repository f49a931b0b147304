"""Binary layout of BigSim logs: the machineInfo header and the field lists of each log version.

PUP writes every field in the writer's native size and byte order, untagged and unaligned, after
a 16-byte `PUP::machineInfo` that describes them (docs/input-formats.md §D.2). So the record layout is not a
constant: it is built here from the header (sizes, byte order) and the log version (which fields
exist). Shared by the reader and the writer so both always agree.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any, Callable

from chakra.converters.bigsim.model import MachineInfo

MAGIC = bytes((0x10, 0xEA, 0xBD, 0xF9))
HEADER_SIZE = 16
NAME_LEN = 20  # BGLOG_NAMELEN

_SIGNED = {1: "b", 2: "h", 4: "i", 8: "q"}
_UNSIGNED = {1: "B", 2: "H", 4: "I", 8: "Q"}
_FLOAT = {4: "f", 8: "d"}


class LayoutError(ValueError):
    """The header describes sizes this reader cannot decode (e.g. 16-byte doubles)."""


def parse_machine_info(data: bytes) -> MachineInfo:
    """Decode the 16 header bytes; raises ValueError on a wrong magic number."""
    if len(data) < HEADER_SIZE:
        raise ValueError(f"file is {len(data)} bytes, shorter than the 16-byte machineInfo header")
    if data[:4] != MAGIC:
        raise ValueError(f"not a BigSim/PUP log: magic is {data[:4].hex(' ')}, expected {MAGIC.hex(' ')}")
    version = data[4]
    if version == 0:
        # intBytes[4], intFormat, floatBytes, doubleBytes, floatFormat, boolBytes, pointerBytes|pad, pad
        int_bytes = tuple(data[5:9])
        rest = data[9:15]
    else:
        # intBytes[5] (adds int128), then the same six bytes, no padding
        int_bytes = tuple(data[5:10])
        rest = data[10:16]
    int_format, float_bytes, double_bytes, float_format, bool_bytes, pointer_bytes = rest
    return MachineInfo(
        version=version,
        int_bytes=int_bytes,
        little_endian=int_format == 1,
        float_bytes=float_bytes,
        double_bytes=double_bytes,
        float_little_endian=float_format == 1,
        bool_bytes=bool_bytes,
        pointer_bytes=pointer_bytes,
    )


def encode_machine_info(m: MachineInfo) -> bytes:
    """The 16 header bytes for `m` (the writer's side of `parse_machine_info`)."""
    int_format = 1 if m.little_endian else 0
    float_format = 1 if m.float_little_endian else 0
    if m.version == 0:
        body = bytes(m.int_bytes[:4]) + bytes((int_format, m.float_bytes, m.double_bytes, float_format))
        body += bytes((m.bool_bytes, m.pointer_bytes, 0))
    else:
        ints = tuple(m.int_bytes) + (16,) * (5 - len(m.int_bytes))
        body = bytes(ints[:5]) + bytes((int_format, m.float_bytes, m.double_bytes, float_format))
        body += bytes((m.bool_bytes, m.pointer_bytes))
    out = MAGIC + bytes((m.version,)) + body
    assert len(out) == HEADER_SIZE
    return out


# Field kinds: C types as PUP's xlater sizes them.
INT, SHORT, USHORT, UINT, DOUBLE, CHAR, NAME = "int", "short", "ushort", "uint", "double", "char", "name"


def _code(kind: str, m: MachineInfo) -> tuple[str, str]:
    """(struct code, byte-order prefix) of one field kind on machine `m`."""
    int_order = "<" if m.little_endian else ">"
    try:
        if kind == INT:
            return _SIGNED[m.int_bytes[2]], int_order
        if kind == UINT:
            return _UNSIGNED[m.int_bytes[2]], int_order
        if kind == SHORT:
            return _SIGNED[m.int_bytes[1]], int_order
        if kind == USHORT:
            return _UNSIGNED[m.int_bytes[1]], int_order
        if kind == DOUBLE:
            return _FLOAT[m.double_bytes], "<" if m.float_little_endian else ">"
    except KeyError as exc:
        raise LayoutError(
            f"machineInfo declares a {exc.args[0]}-byte {kind}, which this reader cannot decode"
        ) from None
    if kind == CHAR:
        return "b", int_order
    if kind == NAME:
        return f"{NAME_LEN}s", int_order
    raise AssertionError(kind)


class Record:
    """A fixed sequence of fields: `size` bytes, `unpack_from(buf, off)`, `pack(*values)`.

    One compiled `struct.Struct` when ints and doubles share a byte order (every real log); a
    field-by-field fallback when the header declares them different.
    """

    def __init__(self, kinds: Sequence[str], m: MachineInfo) -> None:
        codes = [_code(k, m) for k in kinds]
        orders = {o for c, o in codes if c not in ("b", f"{NAME_LEN}s")}
        self.kinds = tuple(kinds)
        if len(orders) <= 1:
            order = orders.pop() if orders else "<"
            st = struct.Struct(order + "".join(c for c, _ in codes))
            self.size = st.size
            self.unpack_from: Callable[[Any, int], tuple] = st.unpack_from
            self.pack: Callable[..., bytes] = st.pack
            self.iter_unpack = st.iter_unpack
            self.uniform = True
        else:
            parts = [struct.Struct(o + c) for c, o in codes]
            self.size = sum(p.size for p in parts)
            self.uniform = False

            def unpack_from(buf: Any, off: int = 0) -> tuple:
                out = []
                for p in parts:
                    out.append(p.unpack_from(buf, off)[0])
                    off += p.size
                return tuple(out)

            def pack(*values: Any) -> bytes:
                return b"".join(p.pack(v) for p, v in zip(parts, values))

            def iter_unpack(buf: Any):
                for off in range(0, len(buf), self.size):
                    yield unpack_from(buf, off)

            self.unpack_from = unpack_from
            self.pack = pack
            self.iter_unpack = iter_unpack


class VersionLayout:
    """Every record shape a log of `version` written on machine `m` uses."""

    def __init__(self, version: int, m: MachineInfo) -> None:
        self.version = version
        self.machine = m
        self.int = Record([INT], m)
        self.double = Record([DOUBLE], m)
        self.char = Record([CHAR], m)
        self.int_order = "<" if m.little_endian else ">"
        self.int_code = _code(INT, m)[0]
        # BgTimeLog::pupCommon, up to and including nMsgs.
        kinds = [INT, INT, INT, INT]  # ep, seqno, msgId.pe, msgId.msgID
        if version >= 6:
            kinds += [USHORT, UINT]  # mpiOp, mpiSize
        if version >= 4:
            kinds += [SHORT]  # charm_ep
        kinds += [DOUBLE] * 5  # recvTime, effRecvTime, startTime, execTime, endTime
        kinds += [CHAR, NAME]  # flag, name[20]
        self.obj_id_len = 4 if version >= 3 else 3 if version == 2 else 0
        kinds += [INT] * self.obj_id_len
        kinds += [INT]  # nMsgs
        self.seb = Record(kinds, m)
        # BgMsgEntry::pup: msgID, dstNode, sendTime, recvTime, tID, msgsize[, group]
        self.msg = Record([INT, INT, DOUBLE, DOUBLE, SHORT, INT] + ([INT] if version > 0 else []), m)

    def ints(self, n: int) -> struct.Struct:
        """A struct for `n` consecutive ints (dependency lists, offset tables)."""
        return struct.Struct(f"{self.int_order}{n}{self.int_code}")

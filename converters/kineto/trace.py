"""Loading a Kineto (PyTorch profiler) Chrome trace into typed event lists with integer-ns times.

Two time styles exist (docs/input-formats.md §B.2): new files write float µs relative to
`baseTimeNanoseconds`; old ones write integer epoch µs. Both become absolute integer ns here,
so every later step compares plain ints. Negative tids (Kineto sign-flips) are kept as-is: they
are only used as thread keys.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Annotated, Any, Optional, Union

import msgspec
import orjson

from chakra.converters.jsonchunks import drain, parse_json, split_document
from chakra.errors import TraceFormatError, excerpt

CPU_CATS = frozenset({"cpu_op", "user_annotation"})
GPU_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
RUNTIME_CATS = frozenset({"cuda_runtime", "cuda_driver", "xpu_runtime", "privateuse1_runtime", "mtia_runtime"})
SYNC_CATS = frozenset({"cuda_sync", "xpu_sync"})


@dataclass
class KEvent:
    """One complete ('X') Kineto event."""

    __slots__ = ("cat", "name", "ts", "end", "pid", "tid", "args")
    cat: str
    name: str
    ts: int
    end: int
    pid: Any
    tid: Any
    args: dict


@dataclass
class KinetoFile:
    path: str
    cpu: list[KEvent] = field(default_factory=list)
    gpu: list[KEvent] = field(default_factory=list)
    runtime: list[KEvent] = field(default_factory=list)
    sync: list[KEvent] = field(default_factory=list)
    distributed: dict = field(default_factory=dict)
    rank: Optional[int] = None
    pid: Optional[int] = None
    thread_names: dict = field(default_factory=dict)
    new_style: bool = False
    size_bytes: int = 0
    repaired: bool = False


#: Kineto args later steps read; the rest (Input Dims, Concrete Inputs, ...) is dropped to save memory.
KEEP_ARGS = frozenset(
    {"External id", "Record function id", "correlation", "stream", "device", "Sequence number", "Collective name",
     "In msg nelems", "Out msg nelems", "dtype", "Process Group Name", "Process Group Ranks", "Group size",
     "Src Rank", "Dst Rank", "cuda_sync_kind", "wait_on_stream", "queued"}
)  # fmt: skip


def load_kineto(name: str, raw: bytes) -> KinetoFile:
    """Parse a Kineto trace (a few events at a time into typed records when it is big, see `chunked`)."""
    split = split_document(raw, b"traceEvents", b"ph")
    if split is not None:
        split.decode_with(_DECODE_EVENTS, _DECODE_EVENT)
        header = split.header
        if "baseTimeNanoseconds" not in header:
            # Older traces write it after the events, but every event's time needs it: peek at the
            # end of the document now, and check it against the parsed tail afterwards.
            m = _BASE_AT_END.search(raw, max(0, len(raw) - 4096))
            if m is not None:
                header = {**header, "baseTimeNanoseconds": int(m.group(1))}
        try:
            kf = _build_records(name, header, split, len(raw))
            whole = {**split.header, **split.tail}
            if whole.get("baseTimeNanoseconds") != header.get("baseTimeNanoseconds"):
                raise ValueError("baseTimeNanoseconds guessed wrong")
            _set_distributed(kf, split.tail)
            return kf
        # RecursionError: nesting too deep for the typed decoder; the whole parse reports it
        except (orjson.JSONDecodeError, ValueError, UnicodeDecodeError, RecursionError):
            pass
    doc, repaired = parse_json(name, raw, repair_key=b'"traceEvents"')
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise TraceFormatError(name, "not a Kineto/PyTorch profiler trace: no 'traceEvents' list")
    events = doc.pop("traceEvents")
    kf = _build_records(name, doc, _as_records(name, drain(events)), len(raw))
    kf.repaired = repaired
    return kf


def _as_records(name: str, events: Any) -> Any:
    """The parsed events as typed records: one wrong type or out-of-range value anywhere stops the
    load with the event's index and field (the same check the big-trace decoder makes)."""
    convert = msgspec.convert
    for index, e in enumerate(events):
        try:
            yield convert(e, _KRecord)
        except msgspec.ValidationError as exc:
            raise TraceFormatError(name, f"traceEvents[{index}]: {_where(exc)}") from None


def _where(exc: msgspec.ValidationError) -> str:
    """msgspec's message with its `$` root made readable (`... - at `$.args.stream``)."""
    return str(exc).replace("`$", "`event")


#: times are written as int64 ns: anything from 0 to 2**63 - 1 (year 2262)
_MAX_NS = 1 << 63

_BASE_AT_END = re.compile(rb'"baseTimeNanoseconds"\s*:\s*(\d+)\s*[,}]')


class _Distributed(msgspec.Struct):
    """The `distributedInfo` fields later steps read (the rest is kept as it is)."""

    rank: Optional[Annotated[int, msgspec.Meta(ge=0, lt=1 << 31)]] = None
    world_size: Optional[Annotated[int, msgspec.Meta(ge=0, lt=1 << 31)]] = None
    pg_config: Any = None  # checked with the ET's process groups (`convert._process_groups`)


def _set_distributed(kf: KinetoFile, doc: dict) -> None:
    dist = doc.get("distributedInfo")
    if isinstance(dist, dict):
        try:
            info = msgspec.convert(dist, _Distributed)
        except msgspec.ValidationError as exc:
            raise TraceFormatError(kf.path, f"distributedInfo: {exc}") from None
        kf.distributed = dist
        kf.rank = info.rank


def _new_file(name: str, header: dict, size: int) -> tuple[KinetoFile, int, dict[str, list]]:
    """The KinetoFile both builders fill, its time base (ns; 0 for old-style traces) and the event
    list each category goes to."""
    base = header.get("baseTimeNanoseconds")
    if base is not None and (type(base) is not int or not 0 <= base < _MAX_NS):
        raise TraceFormatError(
            name, f"baseTimeNanoseconds must be an integer from 0 to 2**63-1, not {excerpt(base, 40)}"
        )
    kf = KinetoFile(path=name, new_style=base is not None, size_bytes=size)
    _set_distributed(kf, header)
    by_cat = {cat: target for cats, target in ((CPU_CATS, kf.cpu), (GPU_CATS, kf.gpu), (RUNTIME_CATS, kf.runtime),
                                               (SYNC_CATS, kf.sync)) for cat in cats}  # fmt: skip
    return kf, base or 0, by_cat


def _set_pid(kf: KinetoFile) -> None:
    """The process that ran the most host ops (the first seen wins a tie)."""
    if kf.cpu:
        pids = Counter(map(attrgetter("pid"), kf.cpu))
        kf.pid = max(pids, key=pids.__getitem__)


# Typed decoding of the events: msgspec builds these records straight from the JSON text (big
# traces, see `chunked`) or from the parsed document (`_as_records`), skipping what nobody reads
# (above all the per-op "Input Dims", "Concrete Inputs", ... args), about twice as cheap as generic
# dicts. The types are the boundary check: an id that is a list, a time that is a string, a
# negative correlation id fails here, with its place, instead of deep in linking or emission.
# A big trace whose events do not fit is parsed whole, and `_as_records` then names the event.

_U64 = Annotated[int, msgspec.Meta(ge=0, le=(1 << 63) - 1)]
_I64 = Annotated[int, msgspec.Meta(ge=-(1 << 63), le=(1 << 63) - 1)]
_NUM = Union[int, float]  # range-checked after scaling to ns (`_build_records`)
#: type of each kept arg (ids are never negative; stream/device may be -1)
_ARG_TYPES = {"External id": _U64, "Record function id": _U64, "correlation": _U64, "Sequence number": _I64,
              "stream": _I64, "device": _I64, "Collective name": str, "In msg nelems": _U64,
              "Out msg nelems": _U64, "dtype": str, "Process Group Name": str, "Process Group Ranks": Any,
              "Group size": _U64, "Src Rank": _I64, "Dst Rank": _I64, "cuda_sync_kind": str,
              "wait_on_stream": _I64, "queued": _I64}  # fmt: skip
assert set(_ARG_TYPES) == KEEP_ARGS

_KArgs = msgspec.defstruct(
    "_KArgs",
    [(f"arg{i}", _ARG_TYPES[key], msgspec.field(name=key, default=msgspec.UNSET))
     for i, key in enumerate(sorted(KEEP_ARGS))]
    + [("thread_name", Any, msgspec.field(name="name", default=msgspec.UNSET))],  # checked where read (M events)
    gc=False,
)  # fmt: skip


class _KRecord(msgspec.Struct, gc=False):
    ph: Optional[str] = None
    cat: Optional[str] = None
    name: str = ""
    ts: _NUM = msgspec.UNSET  # type: ignore[assignment]
    dur: Optional[_NUM] = 0
    pid: Union[int, str, None] = None
    tid: Union[int, str, None] = None
    args: Optional[_KArgs] = None  # type: ignore[valid-type]


_DECODE_EVENTS = msgspec.json.Decoder(list[_KRecord]).decode
_DECODE_EVENT = msgspec.json.Decoder(_KRecord).decode


def _build_records(name: str, header: dict, events: Any, size: int) -> KinetoFile:
    kf, base, by_cat = _new_file(name, header, size)
    to_dict = msgspec.to_builtins  # a record's args -> dict of the args present (C-level)
    for index, e in enumerate(events):
        ph = e.ph
        if ph != "X":
            if ph == "M" and e.name == "thread_name":
                tname = (to_dict(e.args) if e.args is not None else {}).get("name", "")
                kf.thread_names[e.tid] = tname if isinstance(tname, str) else str(tname)
            continue
        target = by_cat.get(e.cat)
        if target is None:
            continue
        ts = e.ts
        if ts is msgspec.UNSET:
            raise TraceFormatError(name, f"traceEvents[{index}]: no numeric ts/dur ('ts')")
        try:
            dur = e.dur or 0
            if base:
                t0 = base + round(ts * 1000)
                t1 = base + round((ts + dur) * 1000)
            else:
                t0 = round(ts * 1000)
                t1 = t0 + round(dur * 1000)
        except (TypeError, ValueError, OverflowError) as exc:
            raise TraceFormatError(name, f"traceEvents[{index}]: no numeric ts/dur ({exc})") from None
        if not 0 <= t0 < _MAX_NS or t1 >= _MAX_NS:
            raise TraceFormatError(name, f"traceEvents[{index}]: time out of range (ts={ts!r} µs, dur={dur!r} µs)")
        args = e.args
        if args is None:
            args = {}
        else:
            args = to_dict(args)
            if "name" in args:  # read for thread names only, not kept (not in KEEP_ARGS)
                del args["name"]
        target.append(KEvent(e.cat, e.name, t0, t1 if t1 > t0 else t0, e.pid, e.tid, args))
    _set_pid(kf)
    return kf


def sniff_kineto_head(head: bytes) -> bool:
    h = head.lstrip()
    return h[:1] == b"{" and (
        b'"traceEvents"' in h or b'"schemaVersion"' in h[:256] or b'"deviceProperties"' in h[:512]
    )

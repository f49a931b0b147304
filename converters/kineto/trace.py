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
from typing import Any, Optional

import msgspec
import orjson

from chakra.converters.pytorch.chunked import split_document
from chakra.converters.pytorch.et import _drain, parse_json
from chakra.errors import TraceFormatError

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
        except (orjson.JSONDecodeError, ValueError, UnicodeDecodeError):
            pass
    doc, repaired = parse_json(name, raw, repair_key=b'"traceEvents"')
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise TraceFormatError(name, "not a Kineto/PyTorch profiler trace: no 'traceEvents' list")
    events = doc.pop("traceEvents")
    kf = _build(name, doc, _drain(events), len(raw))
    kf.repaired = repaired
    return kf


_BASE_AT_END = re.compile(rb'"baseTimeNanoseconds"\s*:\s*(\d+)\s*[,}]')


def _set_distributed(kf: KinetoFile, doc: dict) -> None:
    dist = doc.get("distributedInfo")
    if isinstance(dist, dict):
        kf.distributed = dist
        if isinstance(dist.get("rank"), int):
            kf.rank = dist["rank"]


def _new_file(name: str, header: dict, size: int) -> tuple[KinetoFile, int, dict[str, list]]:
    """The KinetoFile both builders fill, its time base (ns; 0 for old-style traces) and the event
    list each category goes to."""
    base = header.get("baseTimeNanoseconds")
    kf = KinetoFile(path=name, new_style=base is not None, size_bytes=size)
    _set_distributed(kf, header)
    by_cat = {cat: target for cats, target in ((CPU_CATS, kf.cpu), (GPU_CATS, kf.gpu), (RUNTIME_CATS, kf.runtime),
                                               (SYNC_CATS, kf.sync)) for cat in cats}  # fmt: skip
    return kf, int(base or 0), by_cat


def _build(name: str, header: dict, events: Any, size: int) -> KinetoFile:
    kf, base, by_cat = _new_file(name, header, size)
    keep = KEEP_ARGS
    for index, e in enumerate(events):
        try:
            ph = e.get("ph")
        except AttributeError:
            raise TraceFormatError(name, f"traceEvents[{index}] is not an object") from None
        if ph != "X":
            if ph == "M" and e.get("name") == "thread_name":
                kf.thread_names[e.get("tid")] = (e.get("args") or {}).get("name", "")
            continue
        target = by_cat.get(e.get("cat"))
        if target is None:
            continue
        try:
            ts = e["ts"]
            dur = e.get("dur", 0) or 0
            if base:
                t0 = base + round(ts * 1000)
                t1 = base + round((ts + dur) * 1000)
            else:
                t0 = round(ts * 1000)
                t1 = t0 + round(dur * 1000)
        except (KeyError, TypeError) as exc:
            raise TraceFormatError(name, f"traceEvents[{index}]: no numeric ts/dur ({exc})") from None
        args = e.get("args")
        args = {k: v for k, v in args.items() if k in keep} if args else {}
        target.append(KEvent(e["cat"], e.get("name", ""), t0, t1 if t1 > t0 else t0, e.get("pid"), e.get("tid"), args))
    _set_pid(kf)
    return kf


def _set_pid(kf: KinetoFile) -> None:
    """The process that ran the most host ops (the first seen wins a tie)."""
    if kf.cpu:
        pids = Counter(map(attrgetter("pid"), kf.cpu))
        kf.pid = max(pids, key=pids.__getitem__)


# Typed decoding of the events of big traces: msgspec builds these records straight from the
# JSON text and skips what nobody reads (above all the per-op "Input Dims", "Concrete Inputs",
# ... args), about twice as cheap as generic dicts. Values are `Any`, exactly what orjson gives;
# an event that does not fit (not an object, args not an object) fails validation and the
# document is parsed whole. `_build_records` is `_build` for these records.

_KArgs = msgspec.defstruct(
    "_KArgs",
    [(f"arg{i}", Any, msgspec.field(name=key, default=msgspec.UNSET)) for i, key in enumerate(sorted(KEEP_ARGS))]
    + [("thread_name", Any, msgspec.field(name="name", default=msgspec.UNSET))],
    gc=False,
)


class _KRecord(msgspec.Struct, gc=False):
    ph: Any = None
    cat: Any = None
    name: Any = ""
    ts: Any = msgspec.UNSET
    dur: Any = 0
    pid: Any = None
    tid: Any = None
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
                kf.thread_names[e.tid] = (to_dict(e.args) if e.args is not None else {}).get("name", "")
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
        except TypeError as exc:
            raise TraceFormatError(name, f"traceEvents[{index}]: no numeric ts/dur ({exc})") from None
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

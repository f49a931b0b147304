"""Loading a Kineto (PyTorch profiler) Chrome trace into typed event lists with integer-ns times.

Two time styles exist (input-formats.md §B.2): new files write float µs relative to
`baseTimeNanoseconds`; old ones write integer epoch µs. Both become absolute integer ns here,
so every later step compares plain ints. Negative tids (Kineto sign-flips) are kept as-is: they
are only used as thread keys.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import orjson

from chakra.errors import TraceFormatError

from .chunked import split_document
from .et import _drain, parse_json

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
    """Parse a Kineto trace (event by event when it is big, see `chunked`)."""
    split = split_document(raw, b"traceEvents", b"ph")
    if split is not None:
        try:
            kf = _build(name, split.header, split, len(raw))
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


def _set_distributed(kf: KinetoFile, doc: dict) -> None:
    dist = doc.get("distributedInfo")
    if isinstance(dist, dict):
        kf.distributed = dist
        if isinstance(dist.get("rank"), int):
            kf.rank = dist["rank"]


def _build(name: str, header: dict, events: Any, size: int) -> KinetoFile:
    base = header.get("baseTimeNanoseconds")
    kf = KinetoFile(path=name, new_style=base is not None, size_bytes=size)
    base = int(base or 0)
    _set_distributed(kf, header)
    cpu, gpu, runtime, sync = kf.cpu, kf.gpu, kf.runtime, kf.sync
    pids: dict[Any, int] = {}
    keep = KEEP_ARGS
    for index, e in enumerate(events):
        if not isinstance(e, dict):
            raise TraceFormatError(name, f"traceEvents[{index}] is not an object")
        ph = e.get("ph")
        if ph != "X":
            if ph == "M" and e.get("name") == "thread_name":
                kf.thread_names[e.get("tid")] = (e.get("args") or {}).get("name", "")
            continue
        cat = e.get("cat")
        if cat in CPU_CATS:
            target = cpu
        elif cat in GPU_CATS:
            target = gpu
        elif cat in RUNTIME_CATS:
            target = runtime
        elif cat in SYNC_CATS:
            target = sync
        else:
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
        args = e.get("args") or {}
        args = {k: v for k, v in args.items() if k in keep}
        ev = KEvent(cat, e.get("name", ""), t0, max(t1, t0), e.get("pid"), e.get("tid"), args)
        target.append(ev)
        if target is cpu:
            pids[ev.pid] = pids.get(ev.pid, 0) + 1
    if pids:
        kf.pid = max(pids, key=pids.__getitem__)
    return kf


def sniff_kineto_head(head: bytes) -> bool:
    h = head.lstrip()
    return h[:1] == b"{" and (
        b'"traceEvents"' in h or b'"schemaVersion"' in h[:256] or b'"deviceProperties"' in h[:512]
    )

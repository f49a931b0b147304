"""The official linked host + device trace ("ET+", `chakra_trace_link` output) read as an ET + Kineto pair.

An ET+ is the host ET with Kineto's figures written into its nodes and one node added per GPU
activity (docs/pytorch.md, "ET+ input"):

- current `chakra_trace_link` (mlcommons/chakra `src/trace_link`): every id renumbered, matched
  host nodes gain `ts`, `inclusive_dur` (Kineto's `ts`/`dur`, µs), `exclusive_dur`,
  `inter_thread_dep`; a GPU node is a copy of its launcher with `cat` (kernel, gpu_memcpy),
  `name`, `ts`, `inclusive_dur`, `stream`, and `ctrl_deps` = the launcher's id;
- older `trace_link.py` (the et_plus files of PARAM's days): `dur` instead of `inclusive_dur`,
  `parent` instead of `ctrl_deps`, GPU nodes without `stream`.

Rather than a second converter, the file is split back into what it was made from: the host
nodes become an ET (the usual reader checks them) and the figures become the Kineto events the
linker would have read (`Record function id` = the node's `rf_id`; a GPU event's `External id`
names its launcher), so the result goes through the same linking, comm mapping and timeline.

What the ET+ lost stays lost: Kineto's base time (times start from the trace's own µs clock),
the launch calls, Kineto's thread ids (the ET's `tid` stands for them; a gloo executor, which the
ET gives the issuing thread's tid, goes on a thread of its own, as gloo's pool runs it), the
memsets (the official linker keeps kernels and memcpys only), and the span of `ProfilerStep#N`
(the official linker skips it: it is taken from its children).
"""

from __future__ import annotations

from typing import Any, Optional

import orjson

from chakra.converters.jsonchunks import parse_json
from chakra.converters.kineto.trace import GPU_CATS, KEvent, KinetoFile
from chakra.converters.pytorch.et import ETFile, load_et
from chakra.errors import TraceFormatError

#: Keys the linker adds to a host node: any of them marks a document as ET+.
_LINKED_KEYS = (b'"inclusive_dur":', b'"exclusive_dur":', b'"inter_thread_dep":')
_MAX_NS = (1 << 63) - 1
_EXECUTORS = ("gloo:",)


def is_etplus(raw: Any) -> bool:
    """Whether an ET document carries linked figures (new keys, or the older `"ph"` GPU copies / `"dur"`)."""
    if raw.find(b'dur":') < 0:  # a plain ET, nearly always: one scan rules out three of the four keys
        return raw.find(b'"inter_thread_dep":') >= 0
    if any(raw.find(k) >= 0 for k in _LINKED_KEYS):
        return True
    # older et_plus: host nodes gained "dur" and "ts"; a plain ET has neither key on its nodes
    return raw.find(b'"dur":') >= 0 and raw.find(b'"ts":') >= 0


def load_etplus(name: str, raw: Any, keep_io: bool = True) -> tuple[ETFile, KinetoFile]:
    """(host ET, Kineto events) of one ET+ document."""
    doc, repaired = parse_json(name, raw, repair_key=b'"nodes"')
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), list):
        raise TraceFormatError(name, "not a linked Execution Trace (ET+): no 'nodes' list")
    nodes = doc["nodes"]
    host, gpu = [], []
    for index, n in enumerate(nodes):
        if not isinstance(n, dict):
            raise TraceFormatError(name, f"node #{index}: expected an object, got {type(n).__name__}")
        (gpu if n.get("cat") in GPU_CATS else host).append((index, n))
    pid = doc.get("pid") if type(doc.get("pid")) is int else 0
    kf = KinetoFile(path=name, pid=pid, size_bytes=len(raw), repaired=repaired)
    by_id: dict[int, dict] = {}
    spans: dict[int, tuple[int, int]] = {}
    for index, n in host:
        span = _span(name, index, n)
        node_id = n.get("id")
        if type(node_id) is int:
            by_id[node_id] = n
            if span is not None:
                spans[node_id] = span
    _children_spans(host, spans)
    threads = _threads(host, spans)
    for _, n in host:
        node_id = n.get("id")
        span = spans.get(node_id) if type(node_id) is int else None
        rf_id = _attr(n, "rf_id")
        if span is None or type(rf_id) is not int or rf_id <= 0:
            continue
        args = {"Record function id": rf_id, "External id": node_id}
        kf.cpu.append(KEvent("cpu_op", str(n.get("name")), span[0], span[1], pid, threads[node_id], args))
    for index, n in gpu:
        span = _span(name, index, n)
        launcher = _parent(n)
        if span is None:
            continue
        stream = n.get("stream") if type(n.get("stream")) is int else 0
        args = {"stream": stream, "External id": launcher} if launcher is not None else {"stream": stream}
        kf.gpu.append(KEvent(str(n["cat"]), str(n.get("name")), span[0], span[1], pid, stream, args))
    doc["nodes"] = [n for _, n in host]
    et = load_et(name, orjson.dumps(doc), keep_io=keep_io)
    et.size_bytes = len(raw)
    et.repaired = repaired
    return et, kf


def _attr(n: dict, key: str) -> Any:
    attrs = n.get("attrs")
    if isinstance(attrs, list):
        for a in attrs:
            if isinstance(a, dict) and a.get("name") == key:
                return a.get("value")
    return n.get(key)  # the flat (1.0.1) layout


def _parent(n: dict) -> Optional[int]:
    p = n.get("ctrl_deps", n.get("parent"))
    if isinstance(p, list):
        p = p[0] if p else None
    return p if type(p) is int else None


def _span(name: str, index: int, n: dict) -> Optional[tuple[int, int]]:
    """(start, end) ns of a linked node, as the Kineto reader rounds them; None when not linked."""
    ts = n.get("ts")
    dur = n.get("inclusive_dur", n.get("dur"))
    if ts is None or dur is None:
        return None
    if type(ts) not in (int, float) or type(dur) not in (int, float):
        raise TraceFormatError(name, f"node #{index}: 'ts' and the duration must be numbers (µs)")
    t0, t1 = round(ts * 1000), round((ts + dur) * 1000)
    if not 0 <= t0 < _MAX_NS or not 0 <= t1 < _MAX_NS:
        raise TraceFormatError(name, f"node #{index}: time out of range (ts={ts!r} µs, dur={dur!r} µs)")
    return t0, max(t0, t1)


def _children_spans(host: list[tuple[int, dict]], spans: dict[int, tuple[int, int]]) -> None:
    """An unlinked node with linked children (`ProfilerStep#N`, which the official linker skips)
    spans them: from the first child's start to the last one's end."""
    kids: dict[int, list[int]] = {}
    for _, n in host:
        p, i = _parent(n), n.get("id")
        if p is not None and type(i) is int and p != i:
            kids.setdefault(p, []).append(i)
    for _, n in host:
        i = n.get("id")
        if type(i) is not int or i in spans or not str(n.get("name", "")).startswith("ProfilerStep#"):
            continue
        inner = [spans[k] for k in kids.get(i, ()) if k in spans]
        if inner:
            spans[i] = (min(s for s, _ in inner), max(e for _, e in inner))


def _threads(host: list[tuple[int, dict]], spans: dict[int, tuple[int, int]]) -> dict[int, int]:
    """A thread key per timed host node: its ET `tid` (x 1000), except for gloo executors. The ET
    gives an executor the tid of the thread that issued it, but gloo runs it on a run-loop thread
    of its own: each executor takes the first extra thread of that tid (tid x 1000 + k) whose last
    executor has ended, as work queued to gloo's pool is picked up by a free thread."""
    tid: dict[int, int] = {}
    executor: set[int] = set()
    for _, n in host:
        i = n.get("id")
        if type(i) is int:
            t = _attr(n, "tid")
            tid[i] = t if type(t) is int else 0
            if str(n.get("name", "")).startswith(_EXECUTORS):
                executor.add(i)
    out: dict[int, int] = {}
    lanes: dict[int, list[int]] = {}  # ET tid -> end of the last executor on each extra thread
    for i in sorted(spans, key=lambda k: (spans[k][0], -spans[k][1], k)):
        if i not in executor:
            out[i] = tid[i] * 1000
            continue
        s, e = spans[i]
        ends = lanes.setdefault(tid[i], [])
        k = next((k for k, end in enumerate(ends) if end <= s), len(ends))
        if k == len(ends):
            ends.append(e)
        ends[k] = e
        out[i] = tid[i] * 1000 + 1 + k
    return out

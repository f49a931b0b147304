"""Daydream's kernel-level dependency graph (ATC'20 §4.2), built in one pass over time-ordered events.

Tasks: CUDA API calls (CPU, per thread), kernels / memcpys / memsets (GPU, per stream), and the CPU
time between API calls of a thread ("gap" nodes, so replay reproduces the measured timeline).
NVTX ranges do not become nodes: they name the layer of the calls they enclose (and of the GPU work
those calls launch). NCCL kernels become COMM_COLL_NODEs.

Dependencies (all in `data_deps`, the list ASTRA-sim's feeder resolves), counted by kind:
  thread  consecutive CPU tasks of one thread (through the gap node between them)
  stream  consecutive GPU tasks of one stream (+ the legacy default stream's implicit ordering)
  launch  API call -> the GPU task with its correlation id (scoped by process)
  sync    GPU work -> the API call that waited for it: device/context sync (all streams), stream
          sync (that stream), event sync (the work recorded before the event), blocking copies
          (the copy itself); cudaStreamWaitEvent makes the next task of the waiting stream depend
          on the recorded work (GPU -> GPU)
  comm    consecutive NCCL kernels of one communicator
  engine  consecutive host<->device copies of one device's copy engine (they cannot overlap)

A blocking call's node keeps its measured start but its duration is what remains after the work
it waited for finished (the waiting itself is the dependency), with the wall time in
`wall_duration_us`. Events arrive in start order; a node whose dependencies are not yet known (a
sync call waits for work that starts later) is held until the input passes its end time, so
nodes are written in a topological order and memory stays bounded by work in flight.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Optional

from chakra.converters.daydream import nccl
from chakra.converters.daydream.ranks import RankPlan
from chakra.converters.daydream.schema import split_global_id, strip_version
from chakra.converters.daydream.source import K_API, K_KERNEL, K_MEMCPY, K_MEMSET, K_NVTX
from chakra.io import Progress
from chakra.schema import NodeType, pb
from chakra.schema.attrs import CONVENTIONS, set_attrs

DEP_KINDS = ("thread", "stream", "launch", "sync", "comm", "engine")
COPY_KINDS = {
    0: "Unknown",
    1: "HtoD",
    2: "DtoH",
    3: "HtoA",
    4: "AtoH",
    5: "AtoA",
    6: "AtoD",
    7: "DtoA",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
    11: "UVM HtoD",
    12: "UVM DtoH",
    13: "UVM DtoD",
}
MEM_KINDS = {0: "pageable", 1: "pinned", 2: "device", 3: "array", 4: "managed", 5: "device static", 6: "managed static"}
_ENGINE_IN = (1, 3, 6)  # copies into the device (HtoD, HtoA, AtoD... AtoD is on-device but uses the engine)
_ENGINE_OUT = (2, 4, 7)
SYNC_DEVICE_APIS = frozenset({"cudaDeviceSynchronize", "cudaThreadSynchronize", "cuCtxSynchronize"})
SYNC_STREAM_APIS = frozenset({"cudaStreamSynchronize", "cuStreamSynchronize"})
SYNC_EVENT_APIS = frozenset({"cudaEventSynchronize", "cuEventSynchronize"})
SYNC_EVENT, SYNC_WAIT, SYNC_STREAM, SYNC_CONTEXT = 1, 2, 3, 4  # ENUM_CUPTI_SYNC_TYPE
LEGACY_NULL, BLOCKING = 3, 1  # ENUM_CUPTI_STREAM_TYPE
_MAX_PENDING = 1_000_000  # launches whose GPU task has not shown up yet (dropped oldest beyond this)
_MAX_EVENTS = 16_384  # event records remembered for later syncs/waits (LRU)
_MAX_OPEN_MARKERS = 64


#: arm of each attribute written per node on the hot path (conventional names keep their conventional arm)
_ARM = {
    "correlation_id": "int64_val",
    "layer": "string_val",
    "tensor_size": CONVENTIONS["tensor_size"],
    "copy_kind": "string_val",
    "src_kind": "string_val",
    "dst_kind": "string_val",
    "value": "int64_val",
}


def _template(attrs: dict[str, Any]) -> pb.Node:
    """A node holding the attributes every node of one thread/stream shares; copied per node (C speed)."""
    node = pb.Node()
    set_attrs(node, attrs)
    return node


def _node(tmpl: pb.Node, nid: int, name: str, ntype: int, deps, duration: int, start: int) -> pb.Node:
    node = pb.Node()
    node.CopyFrom(tmpl)
    node.id = nid
    node.name = name
    node.type = ntype
    node.duration_micros = duration
    node.start_time_micros = start
    if deps:
        node.data_deps.extend(deps)
    return node


def _add(node: pb.Node, name: str, value: Any) -> None:
    attr = node.attr.add()
    attr.name = name
    setattr(attr, _ARM[name], value)


_GPU_KIND = {K_KERNEL: "kernel", K_MEMCPY: "memcpy", K_MEMSET: "memset"}


def _api_info(name: str) -> tuple[str, bool, bool]:
    """(name, launches GPU work, is a memory copy) for an API name without its version suffix."""
    low = name.lower()
    is_copy = "memcpy" in low
    return name, "launch" in low or is_copy or "memset" in low, is_copy


def _us(ns: int) -> int:
    """ns -> µs, rounded; durations are differences of rounded instants so chains add up exactly."""
    return (ns + 500) // 1000


@dataclass
class Options:
    gaps: bool = True
    copy_engine_order: bool = True


@dataclass
class RankState:
    rank: int
    sink: Callable[[pb.Node], None]
    next_id: int = 0
    origin_us: Optional[int] = None
    first_ns: Optional[int] = None
    last_ns: int = 0
    nodes: int = 0
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def new_id(self) -> int:
        nid = self.next_id
        self.next_id += 1
        return nid


class ThreadState:
    __slots__ = ("rank", "tid", "pid", "last_id", "last_end", "pred_id", "pred_end", "nvtx", "nccl", "tmpl")

    def __init__(self, rank: RankState, gtid: int) -> None:
        self.rank = rank
        self.pid, self.tid = split_global_id(gtid)
        self.tmpl = {
            kind: _template({"is_cpu_op": True, "kind": kind, "tid": self.tid, "pid": self.pid})
            for kind in ("runtime", "driver", "gap")
        }
        self.last_id: Optional[int] = None  # latest-ending CPU node of the thread
        self.last_end = 0
        self.pred_id: Optional[int] = None  # what the latest node hangs from (for calls nested in it)
        self.pred_end = 0
        self.nvtx: list[tuple[int, str]] = []  # open NVTX ranges: (end ns, name), innermost last
        self.nccl: list[tuple[str, Optional[int], Optional[str]]] = []  # NCCL API ranges not yet matched to a kernel


class StreamState:
    __slots__ = ("rank", "key", "flag", "last_id", "last_end", "last_corr", "markers", "tmpl")

    def __init__(self, rank: RankState, key: tuple, flag: int) -> None:
        self.rank = rank
        self.key = key
        self.flag = flag
        gpid, dev, sid = key
        common = {"is_cpu_op": False, "stream": sid, "device": dev, "pid": split_global_id(gpid)[0]}
        self.tmpl = {kind: _template({**common, "kind": kind}) for kind in ("kernel", "memcpy", "memset")}
        self.last_id: Optional[int] = None
        self.last_end = 0
        self.last_corr = -1
        self.markers: list[Marker] = []  # open event records on this stream (capture not final yet)


class Marker:
    """What a cudaEventRecord captured: per stream, the last task launched before it (id, end µs)."""

    __slots__ = ("corr", "captured")

    def __init__(self, corr: int) -> None:
        self.corr = corr
        self.captured: dict[tuple, tuple[int, int]] = {}


class Held:
    """A CPU node whose dependencies are completed later (sync calls and maybe-blocking copies)."""

    __slots__ = ("node_id", "thread", "gtid", "start", "end", "corr", "name", "attrs", "deps", "waits", "mode")

    def __init__(self, node_id: int, thread: ThreadState, gtid: int, start: int, end: int, corr: int, name: str):
        self.node_id = node_id
        self.thread = thread
        self.gtid = gtid
        self.start = start
        self.end = end
        self.corr = corr
        self.name = name
        self.attrs: dict[str, Any] = {}
        self.deps: list[tuple[int, str]] = []
        self.waits: dict[tuple, tuple[int, int]] = {}  # stream key -> (node id, end µs) waited for
        self.mode: Optional[tuple] = None  # ("device", dev|None) / ("stream", sid) / ("event", Marker) / ("copy",)


class Builder:
    """Consumes event tuples (see source.py) and emits nodes to per-rank sinks."""

    def __init__(
        self,
        plan: RankPlan,
        sinks: list[Callable[[pb.Node], None]],
        *,
        strings: Callable[[Optional[int]], str],
        stream_flags: dict[tuple[int, int], int],
        engines: dict[int, int],
        options: Options,
        rank_offset: int = 0,
    ) -> None:
        self.plan = plan
        self.ranks = [RankState(rank_offset + i, sink) for i, sink in enumerate(sinks)]
        self.strings = strings
        self.flags = stream_flags
        self.engines = engines
        self.opt = options
        self.threads: dict[int, ThreadState] = {}
        self.streams: dict[tuple, StreamState] = {}
        self.streams_of: dict[tuple[int, int], list[StreamState]] = defaultdict(list)  # (gpid, dev) -> streams
        self.launches: OrderedDict[tuple[int, int], tuple] = OrderedDict()
        self.held_heap: list[tuple[int, int, Held]] = []
        self.held_syncs: dict[int, list[Held]] = defaultdict(list)  # gpid -> held sync calls
        self.events: OrderedDict[tuple, Marker] = OrderedDict()
        self.null_markers: dict[int, list[Marker]] = defaultdict(list)  # gpid -> records on the legacy stream
        self.stream_markers: dict[tuple[int, int], list[Marker]] = defaultdict(list)  # (gpid, sid) -> records
        self.stream_waits: dict[tuple[int, int], list[tuple[int, Marker]]] = defaultdict(list)
        self.comm_last: dict[tuple, int] = {}
        self.engine_last: dict[tuple, tuple[int, int]] = {}
        self.api_names: dict[Optional[int], str] = {}
        self.warnings: dict[str, int] = defaultdict(int)
        self.rows = 0
        self._seq = 0

    # ---------------------------------------------------------------- driver

    def run(self, events: Iterable[tuple], progress: Optional[Progress] = None) -> None:
        heap = self.held_heap
        for ev in events:
            start = ev[0]
            while heap and heap[0][0] <= start:
                self._release(heapq.heappop(heap)[2])
            kind = ev[2]
            if kind == K_API:
                self._api(ev)
            elif kind == K_NVTX:
                self._nvtx(ev)
            else:
                self._gpu(ev)
            self.rows += 1
            if progress is not None and not self.rows & 0xFFFF:
                progress(self.rows, 0)
        while heap:
            self._release(heapq.heappop(heap)[2])
        if progress is not None:
            progress(self.rows, 0)

    # ---------------------------------------------------------------- helpers

    def _emit(self, rank: RankState, node: pb.Node, start_ns: int, end_ns: int) -> None:
        rank.sink(node)
        rank.nodes += 1
        if rank.first_ns is None or start_ns < rank.first_ns:
            rank.first_ns = start_ns
        if end_ns > rank.last_ns:
            rank.last_ns = end_ns

    def _origin(self, rank: RankState, start_ns: int) -> int:
        if rank.origin_us is None:
            rank.origin_us = _us(start_ns)
        return rank.origin_us

    def _thread(self, gtid: int) -> ThreadState:
        th = self.threads.get(gtid)
        if th is None:
            rank_index = self.plan.thread_rank.get(gtid, 0)
            th = self.threads[gtid] = ThreadState(self.ranks[rank_index], gtid)
        return th

    def _stream(self, rank: RankState, gpid: int, dev: int, sid: int) -> StreamState:
        key = (gpid, dev, sid)
        st = self.streams.get(key)
        if st is None:
            flag = self.flags.get((split_global_id(gpid)[0], sid), 0)
            st = self.streams[key] = StreamState(rank, key, flag)
            self.streams_of[(gpid, dev)].append(st)
            # event records made before this stream ran anything still capture its earlier-launched work
            st.markers.extend(self.stream_markers.pop((gpid, sid), ()))
            if flag == BLOCKING:
                st.markers.extend(self.null_markers.get(gpid, ()))
        return st

    def _thread_dep(self, th: ThreadState, start_us: int, start_ns: int) -> Optional[int]:
        """Thread-order dependency of a new CPU task, inserting the gap node before it."""
        rank = th.rank
        origin = self._origin(rank, start_ns)
        if th.last_id is None:
            dep, base = None, origin
        elif start_us >= th.last_end:
            dep, base = th.last_id, th.last_end
        else:  # nested in (or overlapping) the previous call: hang from what that one hangs from
            dep, base = th.pred_id, th.pred_end
        gap = start_us - base
        if gap > 0 and self.opt.gaps:
            gid = rank.new_id()
            node = _node(
                th.tmpl["gap"], gid, "cpu_gap", NodeType.COMP_NODE, (dep,) if dep is not None else (), gap, base
            )
            if dep is not None:
                rank.counts["thread"] += 1
            self._emit(rank, node, base * 1000, start_us * 1000)
            rank.counts["gap_nodes"] += 1
            dep = gid
        return dep

    def _set_last(self, th: ThreadState, node_id: int, pred: Optional[int], start_us: int, end_us: int) -> None:
        if th.last_id is None or end_us >= th.last_end:
            th.last_id, th.last_end = node_id, end_us
            th.pred_id, th.pred_end = pred, start_us

    def _layer(self, th: ThreadState, start: int) -> Optional[str]:
        stack = th.nvtx
        while stack and stack[-1][0] <= start:
            stack.pop()
        return stack[-1][1] if stack else None

    # ---------------------------------------------------------------- NVTX

    def _nvtx(self, ev: tuple) -> None:
        start, _, _, end, gtid, name, json_text, int_value = ev
        if gtid is None or name is None:
            return
        th = self.threads.get(gtid)
        if th is None:
            if gtid not in self.plan.thread_rank:
                return  # a thread that never calls CUDA: its ranges name nothing
            th = self._thread(gtid)
        stack = th.nvtx
        while stack and stack[-1][0] <= start:
            stack.pop()
        stack.append((end, name))
        op = nccl.nvtx_op(name)
        if op is not None:
            size, comm = nccl.payload_of(json_text, int_value)
            th.nccl.append((op, size, comm))
            if len(th.nccl) > 4096:
                del th.nccl[:2048]

    # ---------------------------------------------------------------- CPU

    def _api(self, ev: tuple) -> None:
        (start, _, _, end, gtid, corr, name_id, event_class, sync_type, sync_stream, _sync_event, sync_event_sync,
         ev_stream, _ev_ctx, ev_id, ev_sync) = ev  # fmt: skip
        if gtid is None:
            gtid = 0
        th = self._thread(gtid)
        rank = th.rank
        info = self.api_names.get(name_id)
        if info is None:
            info = self.api_names[name_id] = _api_info(strip_version(self.strings(name_id)))
        name, launches, is_copy = info
        s_us, e_us = _us(start), _us(end)
        dep = self._thread_dep(th, s_us, start)
        nid = rank.new_id()
        self._set_last(th, nid, dep, s_us, e_us)
        kind = "driver" if event_class == 1 else "runtime"
        rank.counts[kind] += 1
        layer = self._layer(th, start) if th.nvtx else None
        gpid = (gtid >> 24) << 24
        corr_key = corr if corr is not None else -1

        if ev_stream is not None:  # cudaEventRecord: remember what the event captures
            self._record_event(rank, gpid, corr_key, ev_stream, ev_id, ev_sync)

        mode = self._sync_mode(name, sync_type, sync_stream, sync_event_sync, _sync_event, gpid, th)
        if sync_type == SYNC_WAIT and sync_stream is not None:
            marker = self._find_event(gpid, sync_event_sync, _sync_event)
            if marker is not None:
                self.stream_waits[(gpid, sync_stream)].append((corr_key, marker))
        if mode is None and not is_copy:
            node = _node(
                th.tmpl[kind], nid, name, NodeType.COMP_NODE, (dep,) if dep is not None else (), e_us - s_us, s_us
            )
            if corr is not None:
                _add(node, "correlation_id", corr)
            if layer is not None:
                _add(node, "layer", layer)
            if dep is not None:
                rank.counts["thread"] += 1
            self._emit(rank, node, start, end)
            held = None
        else:
            held = Held(nid, th, gtid, start, end, corr_key, name)
            held.attrs = {"kind": kind, "corr": corr, "layer": layer}
            if dep is not None:
                held.deps.append((dep, "thread"))
            held.mode = mode if mode is not None else ("copy",)
            if mode is not None:
                self._init_sync(held, gpid, rank)
            self._seq += 1
            heapq.heappush(self.held_heap, (end, self._seq, held))
        if launches and corr is not None:
            self.launches[(gpid, corr)] = (nid, rank, th, layer, held, dep)
            if len(self.launches) > _MAX_PENDING:
                self.launches.popitem(last=False)
                self.warnings["launches never matched by GPU work (dropped)"] += 1

    def _sync_mode(self, name, sync_type, sync_stream, ev_sync, ev_id, gpid, th) -> Optional[tuple]:
        dev = self._thread_device(th)
        if sync_type == SYNC_CONTEXT or (sync_type is None and name in SYNC_DEVICE_APIS):
            return ("device", dev)
        if sync_type == SYNC_STREAM or name in SYNC_STREAM_APIS:
            if sync_stream is not None and sync_stream != 0xFFFFFFFF:
                return ("stream", sync_stream)
            self.warnings["stream syncs without a stream (treated as device syncs)"] += 1
            return ("device", dev)
        if sync_type == SYNC_EVENT or name in SYNC_EVENT_APIS:
            marker = self._find_event(gpid, ev_sync, ev_id)
            if marker is not None:
                return ("event", marker)
            self.warnings["event syncs whose event record is not in the report (treated as device syncs)"] += 1
            return ("device", dev)
        if name in SYNC_DEVICE_APIS:
            return ("device", dev)
        return None

    def _thread_device(self, th: ThreadState) -> Optional[int]:
        if self.plan.per != "device":
            return None
        return self.plan.keys[th.rank.rank - self.ranks[0].rank]

    def _init_sync(self, held: Held, gpid: int, rank: RankState) -> None:
        mode = held.mode
        assert mode is not None
        if mode[0] == "event":
            return  # read from the marker when released
        for st in self._sync_streams(held, gpid):
            if st.last_id is not None and st.last_corr < held.corr:
                held.waits[st.key] = (st.last_id, st.last_end)
        self.held_syncs[gpid].append(held)

    def _sync_streams(self, held: Held, gpid: int) -> list[StreamState]:
        mode = held.mode
        assert mode is not None
        if mode[0] == "stream":
            return self._streams_with_id(gpid, mode[1])
        out = []
        for (g, dev), streams in self.streams_of.items():
            if g == gpid and (mode[1] is None or dev == mode[1]):
                out.extend(streams)
        return out

    def _streams_with_id(self, gpid: int, sid: int) -> list[StreamState]:
        return [st for (g, _dev), streams in self.streams_of.items() if g == gpid for st in streams if st.key[2] == sid]

    def _sync_matches(self, held: Held, st: StreamState) -> bool:
        mode = held.mode
        assert mode is not None
        if mode[0] == "stream":
            return st.key[2] == mode[1]
        if mode[0] == "device":
            return mode[1] is None or st.key[1] == mode[1]
        return False

    def _release(self, held: Held) -> None:
        """Write a held CPU node now that everything it waited for has been seen."""
        th = held.thread
        rank = th.rank
        mode = held.mode
        assert mode is not None
        deps = list(held.deps)
        wall = _us(held.end) - _us(held.start)
        waited_end = 0
        if mode[0] == "event":
            waits = mode[1].captured
            sync_kind = "event"
        else:
            waits = held.waits
            sync_kind = mode[0]
            if mode[0] != "copy":
                lst = self.held_syncs.get((held.gtid >> 24) << 24)
                if lst is not None and held in lst:
                    lst.remove(held)
        for key, (wid, wend) in waits.items():
            st = self.streams.get(key)
            if st is None or st.rank is rank:
                deps.append((wid, "sync"))
                waited_end = max(waited_end, wend)
            else:
                self.warnings["sync edges across ranks (dropped)"] += 1
        s_us, e_us = _us(held.start), _us(held.end)
        info = held.attrs
        attrs: dict[str, Any] = {}
        if info["corr"] is not None:
            attrs["correlation_id"] = info["corr"]
        if info["layer"] is not None:
            attrs["layer"] = info["layer"]
        duration = e_us - s_us
        if waits:
            attrs["sync"] = sync_kind
            attrs["wall_duration_us"] = wall
            duration = max(0, e_us - max(s_us, waited_end))
        elif mode[0] != "copy":
            attrs["sync"] = sync_kind
        ids = _dep_ids(rank, deps)
        node = _node(th.tmpl[info["kind"]], held.node_id, held.name, NodeType.COMP_NODE, ids, duration, s_us)
        set_attrs(node, attrs)
        held.mode = ("done",)
        self._emit(rank, node, held.start, held.end)

    # ---------------------------------------------------------------- events

    def _record_event(self, rank: RankState, gpid: int, corr: int, sid: int, ev_id, ev_sync) -> None:
        marker = Marker(corr)
        streams = self._streams_with_id(gpid, sid)
        if self.flags.get((split_global_id(gpid)[0], sid)) == LEGACY_NULL:
            # the legacy default stream waits for all blocking streams: the event covers their work too
            for (g, _dev), sts in self.streams_of.items():
                if g == gpid:
                    streams.extend(st for st in sts if st.flag == BLOCKING)
            # and a blocking stream whose first task has not shown up yet joins when it does
            nulls = self.null_markers[gpid]
            nulls.append(marker)
            if len(nulls) > _MAX_OPEN_MARKERS:
                del nulls[0]
        else:
            self.stream_markers[(gpid, sid)].append(marker)  # the stream may have no task yet
        for st in {id(st): st for st in streams}.values():
            if st.last_id is not None and st.last_corr < corr:
                marker.captured[st.key] = (st.last_id, st.last_end)
            st.markers.append(marker)
            if len(st.markers) > _MAX_OPEN_MARKERS:
                del st.markers[0]
        for key in ((gpid, "sync", ev_sync), (gpid, "id", ev_id)):
            if key[2] is not None:
                self.events[key] = marker
                self.events.move_to_end(key)
        while len(self.events) > _MAX_EVENTS:
            self.events.popitem(last=False)

    def _find_event(self, gpid: int, ev_sync, ev_id) -> Optional[Marker]:
        if ev_sync is not None and ev_sync != 0xFFFFFFFF:
            m = self.events.get((gpid, "sync", ev_sync))
            if m is not None:
                return m
        if ev_id is not None and ev_id != 0xFFFFFFFF:
            return self.events.get((gpid, "id", ev_id))
        return None

    # ---------------------------------------------------------------- GPU

    def _gpu(self, ev: tuple) -> None:
        start, _, kind, end, gpid, dev, _ctx, sid, corr, name_id, nbytes, a, b, c = ev
        if gpid is None:
            gpid = 0
        rank = self.ranks[self.plan.gpu_rank(gpid, dev)]
        self._origin(rank, start)
        st = self._stream(rank, gpid, dev, sid)
        corr_key = corr if corr is not None else -1
        s_us, e_us = _us(start), _us(end)
        nid = rank.new_id()
        deps: list[tuple[int, str]] = []
        attrs: dict[str, Any] = {}  # rare extras (NCCL), written through set_attrs
        extra: list[tuple[str, Any]] = []  # per-node attributes on the hot path
        if corr is not None:
            extra.append(("correlation_id", corr))
        launch = self._launch_deps(rank, st, ev, nid, e_us, deps, extra)
        name, node_type = self._gpu_task(rank, ev, nid, launch, deps, attrs, extra)
        self._stream_deps(rank, st, gpid, dev, sid, corr_key, deps)
        ids = _dep_ids(rank, deps)
        node = _node(st.tmpl[_GPU_KIND[kind]], nid, name, node_type, ids, e_us - s_us, s_us)
        for attr_name, value in extra:
            _add(node, attr_name, value)
        if attrs:
            set_attrs(node, attrs)
        self._emit(rank, node, start, end)
        self._after_gpu(st, gpid, nid, e_us, corr_key)

    def _launch_deps(
        self, rank: Any, st: Any, ev: tuple, nid: int, e_us: float, deps: list, extra: list
    ) -> Optional[tuple]:
        """The launch edge from the API call with this task's correlation id (a blocking copy
        instead hangs from the call's predecessor, the call waiting for it); returns the launch."""
        _, _, kind, end, gpid, _dev, _ctx, _sid, corr, _name_id, _nbytes, a, _b, c = ev
        if gpid is None:
            gpid = 0
        launch = self.launches.pop((gpid, corr), None) if corr is not None else None
        layer = None
        if launch is not None:
            api_id, api_rank, _th, layer, held, api_dep = launch
            if held is not None and held.mode == ("copy",) and kind == K_MEMCPY and self._blocking(held, end, a, c):
                # a blocking copy: the call waits for the copy, so the copy hangs from the call's predecessor
                if api_dep is not None and api_rank is rank:
                    deps.append((api_dep, "launch"))
                held.waits[st.key] = (nid, e_us)
                held.mode = ("copy",)
            else:
                if held is not None and held.mode == ("copy",):
                    self._release_now(held)
                if api_rank is rank:
                    deps.append((api_id, "launch"))
                else:
                    self.warnings["launch edges across ranks (dropped)"] += 1
        elif corr is not None and corr > 0:
            self.warnings["GPU tasks without their launching API call"] += 1
        if layer is not None:
            extra.append(("layer", layer))
        return launch

    def _gpu_task(
        self, rank: Any, ev: tuple, nid: int, launch: Optional[tuple], deps: list, attrs: dict, extra: list
    ) -> tuple[str, int]:
        """(name, node type) of a kernel, copy or memset, with its attributes and engine order."""
        start, _, kind, end, gpid, dev, _ctx, sid, _corr, name_id, nbytes, a, b, c = ev
        if gpid is None:
            gpid = 0
        node_type = NodeType.COMP_NODE
        if kind == K_KERNEL:
            name = self.strings(name_id)
            rank.counts["kernel"] += 1
            op = nccl.nccl_op(name)
            if op is not None:
                node_type = self._nccl(rank, attrs, deps, op, launch, gpid, dev, sid, nid)
        elif kind == K_MEMCPY:
            ck = COPY_KINDS.get(a, str(a))
            name = f"memcpy {ck}"
            rank.counts["memcpy"] += 1
            extra.append(("tensor_size", int(nbytes or 0)))
            extra.append(("copy_kind", ck))
            if b is not None:
                extra.append(("src_kind", MEM_KINDS.get(b, str(b))))
            if c is not None:
                extra.append(("dst_kind", MEM_KINDS.get(c, str(c))))
            if self.opt.copy_engine_order:
                self._engine_dep(rank, deps, dev, a, nid, start, end)
        else:
            name = "memset"
            rank.counts["memset"] += 1
            extra.append(("tensor_size", int(nbytes or 0)))
            if a is not None:
                extra.append(("value", int(a)))
        return name, node_type

    def _stream_deps(self, rank: Any, st: Any, gpid: int, dev: Any, sid: Any, corr_key: int, deps: list) -> None:
        """Stream order (+ the legacy default stream's implicit barrier with blocking streams) and
        the cudaStreamWaitEvent edges of this stream."""
        if st.last_id is not None:
            deps.append((st.last_id, "stream"))
        if st.flag in (LEGACY_NULL, BLOCKING):
            want = BLOCKING if st.flag == LEGACY_NULL else LEGACY_NULL
            for other in self.streams_of[(gpid, dev)]:
                if other is not st and other.flag == want and other.last_id is not None and other.last_corr < corr_key:
                    deps.append((other.last_id, "stream"))
        waits = self.stream_waits.get((gpid, sid))
        if waits:
            keep = []
            for wcorr, marker in waits:
                if wcorr < corr_key:
                    for key, (wid, _) in marker.captured.items():
                        if self.streams[key].rank is rank:
                            deps.append((wid, "sync"))
                else:
                    keep.append((wcorr, marker))
            if keep:
                self.stream_waits[(gpid, sid)] = keep
            else:
                del self.stream_waits[(gpid, sid)]

    def _after_gpu(self, st: Any, gpid: int, nid: int, e_us: float, corr_key: int) -> None:
        """Update the stream's state, its open event markers and the syncs held for it."""
        st.last_id, st.last_end, st.last_corr = nid, e_us, corr_key
        if st.markers:
            keep_m = []
            for m in st.markers:
                if corr_key < m.corr:
                    m.captured[st.key] = (nid, e_us)
                    keep_m.append(m)
            st.markers = keep_m
        syncs = self.held_syncs.get(gpid)
        if syncs:
            for h in syncs:
                if corr_key < h.corr and self._sync_matches(h, st):
                    h.waits[st.key] = (nid, e_us)

    def _release_now(self, held: Held) -> None:
        """A maybe-blocking copy call turned out not to block: write it now (its GPU task follows)."""
        for i, item in enumerate(self.held_heap):
            if item[2] is held:
                self.held_heap[i] = self.held_heap[-1]
                self.held_heap.pop()
                heapq.heapify(self.held_heap)
                break
        self._release(held)

    @staticmethod
    def _blocking(held: Held, copy_end: int, copy_kind: Optional[int], dst_kind: Optional[int]) -> bool:
        """The call returned after its copy finished and is of a kind that waits (sync API, DtoH to pageable)."""
        if copy_end > held.end:
            return False
        if "Async" not in held.name:
            return True
        return copy_kind == 2 and dst_kind == 0

    def _engine_dep(self, rank: RankState, deps: list, dev: int, copy_kind, nid: int, start: int, end: int) -> None:
        if copy_kind in _ENGINE_IN:
            direction = "in"
        elif copy_kind in _ENGINE_OUT:
            direction = "out"
        else:
            return
        if self.engines.get(dev, 2) <= 1:
            direction = "any"  # a single copy engine serves both directions
        key = (rank.rank, dev, direction)
        prev = self.engine_last.get(key)
        if prev is not None and prev[1] <= start:
            deps.append((prev[0], "engine"))
        if prev is None or end >= prev[1]:
            self.engine_last[key] = (nid, end)

    def _nccl(self, rank, attrs, deps, op, launch, gpid, dev, sid, nid) -> int:
        size = None
        comm = None
        api_op = None
        if launch is not None:
            th = launch[2]
            if th.nccl:
                pending = th.nccl
                sizes = [p[1] for p in pending if p[1] is not None]
                size = sum(sizes) if sizes else None
                comm = next((p[2] for p in pending if p[2] is not None), None)
                api_op = pending[-1][0]
                th.nccl = []
        ctype = nccl.collective_of(op)
        if ctype is None and op == "Generic" and api_op is not None:
            ctype = nccl.collective_of(api_op)
        attrs["nccl_op"] = op if op != "Generic" or api_op is None else api_op
        if ctype is None:
            if nccl.is_p2p(op) or nccl.is_p2p(api_op):
                self.warnings["NCCL point-to-point kernels kept as compute (peers are not in the report)"] += 1
            else:
                self.warnings["NCCL kernels of unknown collective type kept as compute"] += 1
            return NodeType.COMP_NODE
        if size is None:
            self.warnings["NCCL collectives without a message size in the report (comm_size 0)"] += 1
            size = 0
        attrs["comm_type"] = int(ctype)
        attrs["comm_size"] = int(size)
        key = ("comm", gpid, comm) if comm is not None else ("stream", gpid, dev, sid)
        attrs["pg_name"] = str(comm) if comm is not None else f"stream{sid}"
        prev = self.comm_last.get(key)
        if prev is not None:
            deps.append((prev, "comm"))
        self.comm_last[key] = nid
        rank.counts["collectives"] += 1
        return NodeType.COMM_COLL_NODE


def _dep_ids(rank: Any, deps: Iterable[tuple[int, str]]) -> list[int]:
    """The distinct dependency ids in order, each counted once by its kind in the rank's summary."""
    seen: set[int] = set()
    ids = []
    for d, kind in deps:
        if d not in seen:
            seen.add(d)
            ids.append(d)
            rank.counts[kind] += 1
    return ids

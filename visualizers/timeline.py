"""Timelines for Perfetto / chrome://tracing from simulator logs or from traces with start times.

The official `chakra_timeline_visualizer` writes milliseconds into the µs fields, chooses tracks by
substrings of node names (so PyTorch names such as `aten::mm` are rejected), needs `--num_npus`
and breaks on names with commas. Here:

- a log (`simlog` formats) is streamed line by line: memory stays bounded by the number of ops in
  flight, and a million records convert in seconds;
- timestamps are µs (`ts = time_ns / 1000`), `displayTimeUnit` is ns;
- tracks come from the node *type* (looked up in `--trace PREFIX`, or the type ASTRA-sim prints),
  falling back to the name only when nothing else is known;
- a trace with recorded start times (`PREFIX`) gives the same layout without a simulator.

>>> timeline_from_log("run.log.csv", "run.json", trace_args=["run/trace"])      # doctest: +SKIP
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Optional, Union

from chakra.errors import InputError, TraceFormatError
from chakra.graph import asap_starts
from chakra.io import atomic_output
from chakra.schema import collective_name, node_type_name, pb
from chakra.schema.kinds import COLL, GPU, MEM, RECV, SEND, kind_of
from chakra.simlog import iter_records
from chakra.trace import Trace
from chakra.visualizers.chrome_trace import ChromeTraceWriter, lane_tid
from chakra.visualizers.kinds import COMPUTE, KIND_TRACK, RESOURCE_TID, node_facts
from chakra.visualizers.recorded import earliest_start, has_tracks, layout_rank, write_ranks

PathLike = Union[str, Path]

# Name-only classification, for logs with no trace and no type column.
_COMM_RE = re.compile(
    r"COMM_(SEND|RECV|COLL)|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|broadcast|barrier|nccl|gloo"
    r"|\bsend\b|\brecv\b|collective",
    re.IGNORECASE,
)
_SEND_RE = re.compile(r"COMM_SEND|\bsend\b|isend", re.IGNORECASE)
_RECV_RE = re.compile(r"COMM_RECV|\brecv\b|irecv", re.IGNORECASE)
_MEM_RE = re.compile(r"MEM_(LOAD|STORE)|memcpy|memset|\bload\b|\bstore\b", re.IGNORECASE)
COMPUTE_UNKNOWN = "compute"


_NAME_KIND_CACHE: dict[str, str] = {}


def classify_name(name: str) -> str:
    """Kind from the name alone (the last resort): comm, memory or compute (memoised: names repeat)."""
    kind = _NAME_KIND_CACHE.get(name)
    if kind is None:
        if len(_NAME_KIND_CACHE) > 100_000:
            _NAME_KIND_CACHE.clear()
        kind = _NAME_KIND_CACHE[name] = _classify_name(name)
    return kind


def _classify_name(name: str) -> str:
    if _COMM_RE.search(name):
        if _SEND_RE.search(name):
            return SEND
        if _RECV_RE.search(name):
            return RECV
        return COLL
    if _MEM_RE.search(name):
        return MEM
    return COMPUTE_UNKNOWN


def _resource(kind: str) -> str:
    return KIND_TRACK.get(kind, "compute")


@dataclass
class NodeInfo:
    """What the timeline shows about a node from its trace (kept small: one per node of a log run)."""

    kind: str
    args: dict[str, Any]
    deps: tuple[int, ...] = ()


def node_info(node: pb.Node, with_deps: bool = False) -> NodeInfo:
    facts = node_facts(node)
    kind = kind_of(node.type, facts.get("is_cpu_op"))
    args: dict[str, Any] = {"node_id": node.id, "type": node_type_name(node.type)}
    if "is_cpu_op" in facts:
        args["is_cpu_op"] = bool(facts["is_cpu_op"])
    ctype = facts.get("comm_type")
    if kind == COLL and isinstance(ctype, (int, float)):
        args["comm_type"] = collective_name(int(ctype))
    for key in ("comm_size", "tensor_size", "num_ops", "comm_src", "comm_dst", "comm_tag", "pg_name"):
        value = facts.get(key)
        if value is not None and value != "":
            args[key] = value
    if node.duration_micros:
        args["recorded_duration_us"] = node.duration_micros
    deps = tuple(set(node.data_deps).union(node.ctrl_deps)) if with_deps else ()
    return NodeInfo(kind, args, deps)


def catalog(traces: Sequence[Trace], with_deps: bool) -> dict[int, dict[int, NodeInfo]]:
    """rank -> node id -> NodeInfo."""
    out: dict[int, dict[int, NodeInfo]] = {}
    for pos, trace in enumerate(traces):
        rank = trace.rank if trace.rank is not None else pos
        out[rank] = {n.id: node_info(n, with_deps) for n in trace.nodes}
    return out


@dataclass
class TimelineResult:
    output: Optional[Path]
    processes: int
    complete_events: int
    flow_events: int
    span_us: float
    source: str
    warnings: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {
            "output": str(self.output) if self.output else None,
            "source": self.source,
            "processes": self.processes,
            "complete_events": self.complete_events,
            "flow_events": self.flow_events,
            "span_us": self.span_us,
            "warnings": self.warnings,
        }


class _Sink:
    """An output file written atomically, or stdout fed from a spooled temporary copy at the end."""

    def __init__(self, output: Optional[PathLike]) -> None:
        self.output = Path(output) if output is not None else None

    def __enter__(self) -> IO[bytes]:
        if self.output is not None:
            self._ctx = atomic_output(self.output, "wb")
            return self._ctx.__enter__()
        self._tmp = tempfile.SpooledTemporaryFile(max_size=64 << 20)
        return self._tmp  # type: ignore[return-value]

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self.output is not None:
            self._ctx.__exit__(exc_type, exc, tb)
            return
        try:
            if exc_type is None:
                self._tmp.seek(0)
                shutil.copyfileobj(self._tmp, sys.stdout.buffer)
                sys.stdout.flush()
        finally:
            self._tmp.close()


#: An issued, not yet called back op of `timeline_from_log`: (issue time ns, lane list, lane,
#: tid, kind, args, issue line, name). A plain tuple because one is made per log record; the
#: fields read outside the record loop go through these indices.
_OP_LINE = 6


def timeline_from_log(
    log: PathLike,
    output: Optional[PathLike] = None,
    *,
    traces: Optional[Sequence[Trace]] = None,
    flows: bool = False,
    recorded: bool = True,
) -> TimelineResult:
    """Convert a simulator log (chakra CSV or ASTRA-sim lines) to Chrome trace JSON.

    With `recorded` and traces that carry start times, each rank's recorded timeline is drawn
    right under its simulated one (process `rank N · recorded`), both starting at 0.

    `traces` (one per NPU, rank = NPU) give node types, sizes and dependencies; without them the
    kind comes from the log's type column (ASTRA-sim) or the node name. `flows` draws dependency
    arrows and needs `traces`.
    """
    log = Path(log)
    if flows and not traces:
        raise InputError("dependency arrows (--flows) need the trace: add --trace PREFIX")
    info = catalog(traces, flows) if traces else None
    compare = bool(recorded and traces and earliest_start(traces) is not None)
    # Hot loop: one issue and one callback per op, so lanes and the event batch are handled inline
    # (a method call per record is a measurable share of a million-op conversion).
    busy_of: dict[tuple[int, str], list[int]] = {}  # (npu, resource) -> open ops per lane (0/1)
    open_ops: dict[tuple[int, int], tuple[int, list[int], int, int, str, dict[str, Any], int, str]] = {}
    done: dict[tuple[int, int], tuple[int, float]] = {}
    warnings: list[str] = []
    t_min: Optional[int] = None
    t_max = 0
    flow_id = 0
    name_only = 0
    completed = 0
    seen_npus: set[int] = set()
    resource_of = KIND_TRACK
    name_cache = _NAME_KIND_CACHE
    with _Sink(output) as out:
        w = ChromeTraceWriter(out)
        batch = w.batch
        batch_limit = w.batch_limit
        for event, npu, t, nid, rec_name, rec_type, rec_line in iter_records(log):
            key = (npu, nid)
            if event == "issue":
                if key in open_ops:
                    prev = open_ops[key][_OP_LINE]
                    msg = f"node {nid} issued again on NPU {npu} while still running (issued at line {prev})"
                    raise TraceFormatError(log, msg, line=rec_line)
                if info is not None:
                    rank_info = info.get(npu)
                    if rank_info is None:
                        msg = f"NPU {npu} has no trace (ranks given: {sorted(info)})"
                        raise TraceFormatError(log, msg, line=rec_line)
                    ni = rank_info.get(nid)
                    if ni is None:
                        msg = f"unknown node id {nid}: not in the trace of rank {npu}"
                        raise TraceFormatError(log, msg, line=rec_line)
                    kind, args = ni.kind, dict(ni.args)
                elif rec_type is not None:
                    kind = kind_of(rec_type, None)
                    if kind == GPU:
                        kind = COMPUTE_UNKNOWN  # the log does not say CPU or GPU
                    args = {"node_id": nid, "type": node_type_name(rec_type)}
                else:
                    kind = name_cache.get(rec_name) or classify_name(rec_name)
                    args = {"node_id": nid, "classified_by": "name"}
                    name_only += 1
                if npu not in seen_npus:
                    seen_npus.add(npu)
                    w.process(npu, f"NPU {npu}", 2 * npu if compare else None)
                resource = resource_of.get(kind, COMPUTE)
                busy = busy_of.get((npu, resource))
                if busy is None:
                    busy = busy_of[(npu, resource)] = []
                for lane, n in enumerate(busy):
                    if not n:
                        busy[lane] = 1
                        break
                else:
                    lane = len(busy)
                    busy.append(1)
                    w.thread(npu, resource, lane)
                tid = RESOURCE_TID[resource] + 3 * lane
                open_ops[key] = (t, busy, lane, tid, kind, args, rec_line, rec_name)
                if t_min is None or t < t_min:
                    t_min = t
                continue
            # callback
            op = open_ops.pop(key, None)
            if op is None:
                if info is not None and nid not in info.get(npu, {}):
                    raise TraceFormatError(log, f"unknown node id {nid} in a callback on NPU {npu}", line=rec_line)
                raise TraceFormatError(
                    log,
                    f"callback for node {nid} on NPU {npu} before its issue (never issued, or called back twice)",
                    line=rec_line,
                )
            t0, busy, lane, tid, kind, args, _, name = op
            if t < t0:
                raise TraceFormatError(
                    log, f"callback for node {nid} on NPU {npu} at {t} ns is before its issue at {t0} ns", line=rec_line
                )
            busy[lane] = 0
            ts = t0 / 1000
            batch.append(
                {
                    "name": name,
                    "cat": kind,
                    "ph": "X",
                    "pid": npu,
                    "tid": tid,
                    "ts": ts,
                    "dur": (t - t0) / 1000,
                    "args": args,
                }
            )
            completed += 1
            if len(batch) >= batch_limit:
                w.flush()
            if t > t_max:
                t_max = t
            if flows:
                assert info is not None
                for d in info[npu][nid].deps:
                    src = done.get((npu, d))
                    if src is not None:
                        flow_id += 1
                        w.flow(flow_id, (npu, src[0], src[1]), (npu, tid, ts))
                done[key] = (tid, ts)
        w.events += completed
        w.complete_events += completed
        if open_ops:
            (npu, nid), op = next(iter(open_ops.items()))
            warnings.append(
                f"{len(open_ops)} node(s) issued but never called back, e.g. node {nid} on NPU {npu} "
                f"(line {op[_OP_LINE]})"
            )
        if name_only:
            warnings.append(
                f"{name_only} op(s) placed on tracks by their names only; add --trace PREFIX for node types and sizes"
            )
        span = (t_max - (t_min or 0)) / 1000 if w.complete_events else 0.0
        extra = recorded_beside(w, traces, warnings) if compare and traces else {}
        return _close(w, output, str(log), "simulator ns / 1000", span, warnings, extra)


def timeline_from_traces(
    traces: Sequence[Trace],
    output: Optional[PathLike] = None,
    *,
    flows: bool = False,
) -> TimelineResult:
    """The recorded timeline of every rank (start_time_micros + duration_micros), one process per rank.

    A rank whose nodes carry no start times at all is laid out by dependencies and durations
    (as soon as possible, unbounded resources), and a warning says so.
    """
    if has_tracks(traces):
        return _profiler_timeline(traces, output, flows)
    warnings: list[str] = []
    lanes_made: set[tuple[int, str, int]] = set()
    flow_id = 0
    t_min: Optional[float] = None
    t_max = 0.0
    with _Sink(output) as out:
        w = ChromeTraceWriter(out)
        for pos, trace in enumerate(traces):
            rank = trace.rank if trace.rank is not None else pos
            nodes = trace.nodes
            w.process(rank, f"rank {rank}")
            if not nodes:
                continue
            if len(nodes) > 1 and not any(n.start_time_micros for n in nodes):
                try:
                    starts = asap_starts(nodes)
                except ValueError as exc:
                    raise InputError(f"cannot lay out the trace by dependencies: {exc}") from None
                if any(n.duration_micros for n in nodes):
                    warnings.append(
                        f"rank {rank}: no start times recorded; laid out by dependencies and durations "
                        "(unbounded resources). Simulate it for a modelled timeline: chakra simulate ... --log"
                    )
                else:
                    warnings.append(
                        f"rank {rank}: the trace records neither start times nor durations (e.g. converted "
                        "from an Execution Trace without its Kineto trace): every event is at 0 µs"
                    )
            else:
                starts = [float(n.start_time_micros) for n in nodes]
            order = sorted(range(len(nodes)), key=lambda i: (starts[i], nodes[i].duration_micros))
            # Interval partitioning per resource: ops sorted by start reuse the lowest lane free at that time.
            running: dict[str, list[tuple[float, int]]] = {}
            placed: dict[int, tuple[int, float]] = {}
            for i in order:
                n = nodes[i]
                ni = node_info(n)
                resource = _resource(ni.kind)
                s = starts[i]
                e = s + n.duration_micros
                busy = running.setdefault(resource, [])
                lane = next((j for j, (end, _) in enumerate(busy) if end <= s), None)
                if lane is None:
                    lane = len(busy)
                    busy.append((e, lane))
                else:
                    busy[lane] = (e, lane)
                key = (rank, resource, lane)
                if key not in lanes_made:
                    lanes_made.add(key)
                    w.thread(rank, resource, lane)
                tid = lane_tid(resource, lane)
                w.complete(n.name, ni.kind, rank, tid, s, float(n.duration_micros), ni.args)
                t_min = s if t_min is None else min(t_min, s)
                t_max = max(t_max, e)
                if flows:
                    placed[n.id] = (tid, s)
            if flows:
                for n in nodes:
                    dst = placed[n.id]
                    for d in sorted(set(n.data_deps).union(n.ctrl_deps)):
                        src = placed.get(d)
                        if src is not None and d != n.id:
                            flow_id += 1
                            w.flow(flow_id, (rank, src[0], src[1]), (rank, dst[0], dst[1]))
        span = t_max - (t_min or 0.0)
        source = ", ".join(str(t.path) for t in traces if t.path is not None)
        return _close(w, output, source, "trace start_time_micros / duration_micros", span, warnings)


def _node_args(node: pb.Node) -> tuple[str, dict[str, Any]]:
    ni = node_info(node)
    return ni.kind, ni.args


def _ranked(traces: Sequence[Trace], shift: float) -> list[tuple[int, Trace, Any]]:
    return [(t.rank if t.rank is not None else pos, t, layout_rank(t, shift)) for pos, t in enumerate(traces)]


def _layout_notes(ranked: list[tuple[int, Trace, Any]], warnings: list[str]) -> dict[str, Any]:
    skipped = sum(r[2].skipped for r in ranked)
    overlapped = sum(r[2].overlapped for r in ranked)
    if overlapped:
        warnings.append(
            f"{overlapped} slice(s) overlap another on their thread or stream without nesting; "
            "they are on the extra tracks named '#2', '#3'"
        )
    return {"filler_nodes_not_drawn": skipped, "slices_on_extra_tracks": overlapped}


def _profiler_timeline(traces: Sequence[Trace], output: Optional[PathLike], flows: bool) -> TimelineResult:
    """Traces with host threads / GPU streams: the profiler layout of `recorded`."""
    warnings: list[str] = []
    ranked = _ranked(traces, 0.0)
    with _Sink(output) as out:
        w = ChromeTraceWriter(out)
        counts, t_min, t_max = write_ranks(w, ranked, _node_args)
        if flows:
            _dependency_flows(w, ranked)
        notes = _layout_notes(ranked, warnings)
        notes.update(launch_flows=counts.launch, message_flows=counts.p2p, collective_flows=counts.collective)
        span = t_max - t_min if w.complete_events else 0.0
        source = ", ".join(str(t.path) for t in traces if t.path is not None)
        return _close(w, output, source, "trace start_time_micros, host ops inclusive", span, warnings, notes)


def _dependency_flows(w: ChromeTraceWriter, ranked: list[tuple[int, Trace, Any]], pid_of: Any = None) -> None:
    """--flows: one arrow per dependency between drawn slices (gaps and queues are not drawn)."""
    pid_of = pid_of or (lambda r: r)
    flow_id = w.flow_events // 2 + 1_000_000_000
    for rank, trace, layout in ranked:
        pid = pid_of(rank)
        slices = layout.slices
        for n in trace.nodes:
            dst = slices.get(n.id)
            if dst is None:
                continue
            for d in sorted(set(n.data_deps).union(n.ctrl_deps)):
                src = slices.get(d)
                if src is not None and d != n.id:
                    flow_id += 1
                    w.flow(flow_id, (pid, src.tid, src.start), (pid, dst.tid, dst.start))


def recorded_beside(w: ChromeTraceWriter, traces: Sequence[Trace], warnings: list[str]) -> dict[str, Any]:
    """The recorded timeline of `traces` next to a simulated one: process `rank N · recorded` right
    after `NPU N`, its times shifted so that the earliest recorded start is 0 like the simulation's."""
    t0 = earliest_start(traces)
    if t0 is None:
        return {}
    ranked = _ranked(traces, float(t0))
    counts, _, _ = write_ranks(
        w,
        ranked,
        _node_args,
        pid_of=lambda r: RECORDED_PID + r,
        label="rank {rank} · recorded",
        sort_of=lambda r: 2 * r + 1,
    )
    notes = _layout_notes(ranked, warnings)
    notes.update(recorded_shift_us=t0, recorded_pid_offset=RECORDED_PID)
    return notes


#: Process ids of the recorded ranks shown beside a simulated run (pid = this + rank).
RECORDED_PID = 100_000


def _close(
    w: ChromeTraceWriter,
    output: Any,
    source: str,
    unit: str,
    span: float,
    warnings: list[str],
    extra: Optional[dict[str, Any]] = None,
) -> TimelineResult:
    """Write the trailer (what the times mean) and return the summary both timeline sources share."""
    w.close(
        {
            "source": source,
            "generator": "chakra timeline",
            "time_unit": f"ts and dur in microseconds ({unit})",
            "processes": w.processes,
            "span_us": span,
            **(extra or {}),
        }
    )
    return TimelineResult(
        output=Path(output) if output is not None else None,
        processes=w.processes,
        complete_events=w.complete_events,
        flow_events=w.flow_events,
        span_us=span,
        source=source,
        warnings=warnings,
    )

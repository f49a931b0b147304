"""The recorded timeline of traces, laid out like the profilers users know (Kineto in Perfetto).

- one process per rank;
- one named track per host thread (`tid`: "CPU thread 1"), per GPU stream (`stream`: "GPU stream
  7") and one for communication run outside a stream ("communication");
- host operators nested by their call stack: a host slice lasts its inclusive time
  (`inclusive_dur`), so its callees sit inside it on the same track. The converter's filler nodes
  (`gap`: time between an operator's children, `queue`: a launch waiting for its stream) are not
  drawn: their time is the parent's or the stream's idle time;
- flow arrows from each kernel's launching operator (`launcher`) to the kernel, from the start of
  each send to the end of the receive it matches (FIFO on src, dst, tag) and from the first rank's
  instance of each collective (the k-th of its process group) to the other ranks' instances.

Perfetto's JSON importer drops slices that overlap without nesting on one track, so every track
keeps a stack: a slice that would cross the end of the slice open before it goes to an extra
track of the same name (`#2`), which is drawn under it, and nothing is lost. Traces without
threads or streams (e.g. from the official converter) use the memory / compute / communication
resources of the Chakra paper instead.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from chakra.schema import NodeType, pb
from chakra.schema.attrs import attr_value
from chakra.trace import Trace
from chakra.visualizers.chrome_trace import ChromeTraceWriter

_FACTS = frozenset({"tid", "stream", "launcher", "gap_of", "queue_of", "inclusive_dur", "is_cpu_op", "profiled_dur_us"})
_COMM_TYPES = frozenset({int(NodeType.COMM_COLL_NODE), int(NodeType.COMM_SEND_NODE), int(NodeType.COMM_RECV_NODE)})
#: Track order inside a process: host threads, then GPU streams, then communication, then resources.
_GROUP_ORDER = {"thread": 0, "stream": 1, "comm": 2, "resource": 3}


def has_tracks(traces: Sequence[Trace]) -> bool:
    """True when the traces record host threads or GPU streams (our PyTorch, Nsight, CUPTI converters)."""
    for trace in traces:
        for n in trace.nodes:
            for a in n.attr:
                if a.name in ("tid", "stream"):
                    return True
    return False


class Slice:
    """One drawn node: its start and length (µs), track, launcher and the thread id it got."""

    __slots__ = ("node", "start", "dur", "track", "launcher", "tid")

    def __init__(self, node: pb.Node, start: float, dur: float, track: tuple[str, int], launcher: Any) -> None:
        self.node, self.start, self.dur, self.track, self.launcher = node, start, dur, track, launcher
        self.tid = 0


@dataclass
class RankLayout:
    """The slices of one rank with their thread ids, and the named tracks they use."""

    slices: dict[int, Slice]
    tracks: dict[int, tuple[str, int]] = field(default_factory=dict)  # tid -> (name, sort index)
    skipped: int = 0
    overlapped: int = 0


def _track_of(n: pb.Node, f: dict[str, Any]) -> tuple[str, int]:
    if n.type in _COMM_TYPES:
        stream = f.get("stream")
        return ("stream", stream) if isinstance(stream, int) and stream >= 0 else ("comm", 0)
    if f.get("is_cpu_op") is False:
        stream = f.get("stream")
        return ("stream", stream) if isinstance(stream, int) else ("stream", -1)
    tid = f.get("tid")
    return ("thread", tid) if isinstance(tid, int) else ("thread", -1)


def _track_name(track: tuple[str, int], extra: int) -> str:
    kind, value = track
    if kind == "thread":
        base = f"CPU thread {value}" if value >= 0 else "CPU"
    elif kind == "stream":
        base = f"GPU stream {value}" if value >= 0 else "GPU"
    else:
        base = "communication"
    return base if extra == 0 else f"{base} #{extra + 1}"


def layout_rank(trace: Trace, shift: float = 0.0) -> RankLayout:
    """Tracks and nesting of one rank's recorded slices (start times shifted by `-shift` µs)."""
    out: dict[int, Slice] = {}
    skipped = 0
    for n in trace.nodes:
        f = {a.name: attr_value(a) for a in n.attr if a.name in _FACTS}
        if "gap_of" in f or "queue_of" in f:
            skipped += 1
            continue
        # recorded start times go with recorded durations: a node whose profiler cost the converter
        # removed keeps what was recorded in profiled_dur_us
        profiled = f.get("profiled_dur_us")
        dur = float(profiled) if isinstance(profiled, (int, float)) else float(n.duration_micros)
        incl = f.get("inclusive_dur")
        if isinstance(incl, int) and incl > dur:
            dur = float(incl)
        out[n.id] = Slice(n, n.start_time_micros - shift, dur, _track_of(n, f), f.get("launcher"))
    by_track: dict[tuple[str, int], list[Slice]] = defaultdict(list)
    for s in out.values():
        by_track[s.track].append(s)
    layout = RankLayout(out, skipped=skipped)
    next_tid = 1
    ordered_tracks = sorted(by_track, key=lambda t: (_GROUP_ORDER[t[0]], t[1]))
    for track in ordered_tracks:
        items = by_track[track]
        items.sort(key=lambda s: (s.start, -s.dur, s.node.id))
        stacks: list[list[float]] = []  # per extra track: ends of the open slices
        tids: list[int] = []
        for s in items:
            end = s.start + s.dur
            for k, stack in enumerate(stacks):
                while stack and stack[-1] <= s.start:
                    stack.pop()
                if not stack or end <= stack[-1]:
                    stack.append(end)
                    s.tid = tids[k]
                    if k:
                        layout.overlapped += 1
                    break
            else:
                stacks.append([end])
                tids.append(next_tid)
                layout.tracks[next_tid] = (_track_name(track, len(stacks) - 1), next_tid)
                s.tid = next_tid
                next_tid += 1
                if len(stacks) > 1:
                    layout.overlapped += 1
    return layout


@dataclass
class FlowCounts:
    launch: int = 0
    p2p: int = 0
    collective: int = 0


def write_ranks(
    w: ChromeTraceWriter,
    ranked: Sequence[tuple[int, Trace, RankLayout]],
    node_args: Any,
    pid_of: Any = None,
    label: str = "rank {rank}",
    sort_of: Any = None,
) -> tuple[FlowCounts, float, float]:
    """Write the slices of every rank, their launch flows and the flows between ranks.

    `node_args(node)` gives a slice's (kind, args); `pid_of(rank)` its process id. Returns the
    flow counts and the earliest start and latest end written.
    """
    pid_of = pid_of or (lambda r: r)
    sort_of = sort_of or (lambda r: r)
    counts = FlowCounts()
    t_min, t_max = float("inf"), 0.0
    flow_id = w.flow_events // 2
    for rank, _trace, layout in ranked:
        pid = pid_of(rank)
        w.process(pid, label.format(rank=rank), sort_of(rank))
        for tid, (name, order) in sorted(layout.tracks.items()):
            w.named_thread(pid, tid, name, order)
        items = sorted(layout.slices.values(), key=lambda s: (s.tid, s.start, -s.dur))
        for s in items:
            kind, args = node_args(s.node)
            w.complete(s.node.name, kind, pid, s.tid, s.start, s.dur, args)
            t_min = min(t_min, s.start)
            t_max = max(t_max, s.start + s.dur)
        for s in items:
            launcher = s.launcher
            if isinstance(launcher, int) and launcher in layout.slices:
                src = layout.slices[launcher]
                flow_id += 1
                counts.launch += 1
                w.flow(flow_id, (pid, src.tid, src.start), (pid, s.tid, s.start), name="launch", cat="launch")
    # Messages: FIFO per (src, dst, tag); collectives: the k-th of each process group on every rank.
    sends: dict[tuple[int, int, int], deque] = defaultdict(deque)
    recvs: dict[tuple[int, int, int], deque] = defaultdict(deque)
    colls: dict[tuple[str, int], list[tuple[int, Slice]]] = defaultdict(list)
    for rank, trace, layout in ranked:
        ordinal: dict[str, int] = defaultdict(int)
        for n in trace.nodes:
            if n.type not in _COMM_TYPES:
                continue
            s = layout.slices.get(n.id)
            attrs = {a.name: attr_value(a) for a in n.attr if a.name.startswith(("comm_", "pg_name"))}
            if n.type == NodeType.COMM_COLL_NODE:
                pg = str(attrs.get("pg_name") or "")
                k = ordinal[pg]
                ordinal[pg] += 1
                if s is not None:
                    colls[(pg, k)].append((rank, s))
                continue
            src, dst, tag = attrs.get("comm_src"), attrs.get("comm_dst"), attrs.get("comm_tag", 0)
            if isinstance(src, int) and isinstance(dst, int) and s is not None:
                queue = sends if n.type == NodeType.COMM_SEND_NODE else recvs
                queue[(src, dst, int(tag or 0))].append((rank, s))
    for key, sq in sends.items():
        rq = recvs.get(key)
        while sq and rq:
            (sr, ss), (rr, rs) = sq.popleft(), rq.popleft()
            flow_id += 1
            counts.p2p += 1
            # The arrow ends where the receive completes (the message is there), just inside its slice.
            arrive = rs.start + rs.dur - min(rs.dur / 2, 1.0)
            w.flow(flow_id, (pid_of(sr), ss.tid, ss.start), (pid_of(rr), rs.tid, arrive), name="message", cat="p2p")
    for (_pg, _k), members in colls.items():
        if len(members) < 2:
            continue
        members.sort(key=lambda m: m[0])
        r0, s0 = members[0]
        for r, s in members[1:]:
            flow_id += 1
            counts.collective += 1
            w.flow(
                flow_id,
                (pid_of(r0), s0.tid, s0.start),
                (pid_of(r), s.tid, s.start),
                name="collective",
                cat="collective",
            )
    return counts, t_min, t_max


def earliest_start(traces: Sequence[Trace]) -> Optional[int]:
    starts = [n.start_time_micros for t in traces for n in t.nodes if n.start_time_micros]
    return min(starts) if starts else None

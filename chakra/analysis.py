"""Trace analysis: time breakdowns, critical paths and per-operator-class diffs (after HTA).

Three views of where time goes, each per rank:

- **breakdown**: from a schedule (simulated node times, or the recorded `start_time_micros`), the
  union of CPU, GPU (device compute) and communication intervals split into CPU-only, GPU-only,
  CPU+GPU overlapped, communication overlapped with compute, exposed communication and idle
  (Daydream §6.2 uses the first three; HTA reports the comm/compute overlap);
- **critical path**: the longest dependency chain (`chakra.graph.critical_path`, unlimited
  resources) or, given a schedule, the chain of nodes that actually delayed the end, following
  dependencies and the resource each node waited for;
- **operator classes**: count and total duration per class of operator name, and `diff_classes`
  between two traces or two simulation logs.

Simulation logs are the simulator's timeline log (`issue|callback,<npu>,<time_ns>,<id>,<name>`).
All times here are integer ns unless a field says `_us`.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import chain
from operator import attrgetter
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

from chakra.columns import (
    AnyTrace,
    Columns,
    TraceFile,
    asap_starts,
    critical_positions,
    parent_lists,
    positions,
    scan,
)
from chakra.errors import InputError, TraceFormatError
from chakra.io import read_trace
from chakra.schema import NodeType, collective_name, pb
from chakra.schema.attrs import get_attr
from chakra.schema.kinds import KIND_RESOURCE, KINDS, RESOURCES, is_cpu_op, kind_codes, resource_of
from chakra.simlog import iter_records, looks_like_log
from chakra.trace import Trace

Intervals = tuple[np.ndarray, np.ndarray]

# ----------------------------------------------------------------------------- operator classes

_PREFIXES = re.compile(r"^(autograd::engine::evaluate_function:\s*|launch:\s*)")
_SUFFIX_NUM = re.compile(r"(#\d+|_\d+|\s+\d+)$")


def op_class(node_or_name: Union[pb.Node, str]) -> str:
    """A short class for an operator: the name without call-site noise.

    Collectives become `COMM_COLL:<collective>`; other names lose the autograd wrapper, template
    and argument lists (`<...>`, `(...)`), and a trailing step or instance number (`#3`, `_12`).
    """
    if isinstance(node_or_name, pb.Node):
        n = node_or_name
        if n.type == NodeType.COMM_COLL_NODE:
            ct = get_attr(n, "comm_type", None)
            return f"COMM_COLL:{collective_name(int(ct)) if ct is not None else '?'}"
        if n.type in (NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE):
            return "COMM_SEND" if n.type == NodeType.COMM_SEND_NODE else "COMM_RECV"
        return _name_class(n.name)
    return _name_class(node_or_name)


@lru_cache(maxsize=65536)
def _name_class(name: str) -> str:
    """op_class of a plain name (cached: traces repeat a few hundred names millions of times)."""
    name = _PREFIXES.sub("", name.strip())
    for stop in ("<", "("):
        k = name.find(stop)
        if k > 0:
            name = name[:k]
    name = _SUFFIX_NUM.sub("", name.strip())
    name = " ".join(name.split())
    return name[:80] or "<unnamed>"


@dataclass
class ClassStat:
    count: int = 0
    total_ns: int = 0


def classes_of_traces(traces: Sequence[Trace]) -> dict[str, ClassStat]:
    """Count and summed recorded duration (ns) per operator class over every rank."""
    out: dict[str, ClassStat] = {}
    for t in traces:
        for n in t.nodes:
            if n.type == NodeType.METADATA_NODE:
                continue
            c = op_class(n)
            s = out.get(c)
            if s is None:
                s = out[c] = ClassStat()
            s.count += 1
            s.total_ns += n.duration_micros * 1000
    return out


def classes_of_log(log: SimLog) -> dict[str, ClassStat]:
    out: dict[str, ClassStat] = {}
    for _rank, nodes in log.nodes.items():
        for name, start, end in nodes.values():
            s = out.setdefault(op_class(name), ClassStat())
            s.count += 1
            s.total_ns += end - start
    return out


def diff_classes(a: Mapping[str, ClassStat], b: Mapping[str, ClassStat]) -> list[dict[str, Any]]:
    """Rows per class present in either side: counts, totals (ns), delta (b - a), sorted by |delta|."""
    rows = []
    for name in set(a) | set(b):
        sa, sb = a.get(name, ClassStat()), b.get(name, ClassStat())
        delta = sb.total_ns - sa.total_ns
        rows.append(
            {
                "class": name,
                "count_a": sa.count,
                "count_b": sb.count,
                "total_a_ns": sa.total_ns,
                "total_b_ns": sb.total_ns,
                "delta_ns": delta,
                "delta_pct": (100.0 * delta / sa.total_ns) if sa.total_ns else None,
            }
        )
    rows.sort(key=lambda r: (-abs(r["delta_ns"]), -abs(r["count_b"] - r["count_a"]), r["class"]))
    return rows


# ----------------------------------------------------------------------------- simulation logs


@dataclass
class SimLog:
    """Per-rank node intervals read from a simulator timeline log: nodes[rank][id] = (name, start, end)."""

    path: Path
    nodes: dict[int, dict[int, tuple[str, int, int]]] = field(default_factory=dict)

    @property
    def finish_ns(self) -> dict[int, int]:
        return {r: max((e for _, _, e in ns.values()), default=0) for r, ns in self.nodes.items()}


def is_sim_log(path: Path) -> bool:
    """A simulator log: our CSV log or ASTRA-sim's output with workload trace lines (cheap sniff)."""
    return looks_like_log(path)


def read_sim_log(path: Union[str, Path]) -> SimLog:
    """Node intervals from a simulator log, in either spelling `chakra.simlog` reads."""
    path = Path(path)
    log = SimLog(path)
    open_: dict[tuple[int, int], tuple[str, int]] = {}
    for event, rank, t, nid, name, _ntype, lineno in iter_records(path):
        if event == "issue":
            open_[(rank, nid)] = (name, t)
        else:
            got = open_.pop((rank, nid), None)
            if got is None:
                raise TraceFormatError(path, f"callback for node {nid} on npu {rank} without an issue", line=lineno)
            log.nodes.setdefault(rank, {})[nid] = (got[0] or name, got[1], t)
    if not log.nodes:
        raise TraceFormatError(path, "no completed nodes in the timeline log")
    return log


# ----------------------------------------------------------------------------- breakdown


def _cover(bounds: np.ndarray, iv: Intervals) -> np.ndarray:
    """Boolean per segment [bounds[k], bounds[k+1]): covered by any interval."""
    starts, ends = iv
    diff = np.zeros(len(bounds) + 1, dtype=np.int64)
    if len(starts):
        np.add.at(diff, np.searchsorted(bounds, starts), 1)
        np.add.at(diff, np.searchsorted(bounds, ends), -1)
    return np.cumsum(diff)[: len(bounds) - 1] > 0


def breakdown(resources: Mapping[str, Intervals], finish_ns: Optional[int] = None) -> dict[str, int]:
    """Split [0, finish] by which resources are busy.

    `resources` maps cpu/gpu/comm/mem to (starts, ends) arrays in ns. Returns ns for cpu_only,
    gpu_only, cpu_gpu_overlap, compute (cpu or gpu), comm, comm_overlapped, exposed_comm (comm
    while no compute runs), mem, idle (nothing runs) and step (= finish).
    """
    ivs = {k: resources.get(k, (np.zeros(0, np.int64), np.zeros(0, np.int64))) for k in ("cpu", "gpu", "comm", "mem")}
    pts = [np.asarray(v, dtype=np.int64) for s, e in ivs.values() for v in (s, e)]
    end = int(max((int(p.max()) for p in pts if len(p)), default=0))
    finish = end if finish_ns is None else max(int(finish_ns), end)
    bounds = np.unique(np.concatenate(pts + [np.array([0, finish], dtype=np.int64)]))
    seg = np.diff(bounds)
    cov = {k: _cover(bounds, v) for k, v in ivs.items()}
    cpu, gpu, comm, mem = cov["cpu"], cov["gpu"], cov["comm"], cov["mem"]
    compute = cpu | gpu

    def total(mask: np.ndarray) -> int:
        return int(seg[mask].sum())

    return {
        "step": finish,
        "cpu_only": total(cpu & ~gpu),
        "gpu_only": total(gpu & ~cpu),
        "cpu_gpu_overlap": total(cpu & gpu),
        "compute": total(compute),
        "comm": total(comm),
        "comm_overlapped": total(comm & compute),
        "exposed_comm": total(comm & ~compute),
        "mem": total(mem),
        "idle": total(~(compute | comm | mem)),
    }


def resource_intervals(trace: Trace, times: Mapping[int, tuple[int, int]]) -> dict[str, Intervals]:
    """Group a rank's node intervals (ns) by resource (cpu/gpu/comm/mem); meta nodes are left out."""
    groups: dict[str, tuple[list[int], list[int]]] = {}
    for n in trace.nodes:
        se = times.get(n.id)
        if se is None or se[1] <= se[0]:
            continue
        r = resource_of(n)
        if r == "meta":
            continue
        s, e = groups.setdefault(r, ([], []))
        s.append(se[0])
        e.append(se[1])
    return {k: (np.asarray(s, dtype=np.int64), np.asarray(e, dtype=np.int64)) for k, (s, e) in groups.items()}


# ----------------------------------------------------------------------------- a rank as columns

_NAME = attrgetter("name")
_START = attrgetter("start_time_micros")
#: resource index (into RESOURCES) of each kind index (into KINDS)
_KIND_RES = np.array([RESOURCES.index(KIND_RESOURCE[k]) for k in KINDS], dtype=np.int8)
_META = RESOURCES.index("meta")


#: The largest schedule analyze computes, in ns (int64 with headroom for sums of starts and ends).
_MAX_SCHEDULE_NS = float(1 << 62)


@dataclass
class RankData:
    """What the analysis needs of one rank, by node position, in one streamed pass: the graph
    columns, recorded starts (µs), the resource each node runs on, names as one UTF-8 blob (read
    back only for nodes a report shows) and the classes of communication nodes."""

    path: Optional[Path]
    rank: int
    cols: Columns
    start_us: np.ndarray
    res: np.ndarray
    name_blob: bytes
    name_off: np.ndarray
    comm_class: dict[int, str]

    @classmethod
    def read(cls, trace: AnyTrace, rank: int) -> RankData:
        blob = bytearray()
        lens = array("q")
        starts = array("q")
        cpu: list[int] = []
        comm: dict[int, str] = {}

        def on_batch(pos: int, batch: Sequence[pb.Node]) -> None:
            enc = [s.encode() for s in map(_NAME, batch)]
            blob.extend(b"".join(enc))
            lens.extend(map(len, enc))
            starts.extend(map(_START, batch))

        def visit(pos: int, n: pb.Node) -> None:
            t = n.type
            if t == NodeType.COMP_NODE:
                if is_cpu_op(n):
                    cpu.append(pos)
            elif t in (NodeType.COMM_COLL_NODE, NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE):
                comm[pos] = op_class(n)

        cols = scan(trace, visit, on_batch)
        total_us = float(cols.dur_us.sum(dtype=np.float64)) if len(cols) else 0.0
        if total_us * 1000 >= _MAX_SCHEDULE_NS:  # schedules are int64 ns: refuse, never wrap around
            raise TraceFormatError(
                trace.path or f"rank {rank}",
                f"the node durations add up to {total_us:.3g} µs, more than a schedule in 64-bit ns "
                "can hold (about 146 years): not a recorded step (corrupt duration_micros?)",
            )
        is_cpu = np.zeros(len(cols), dtype=np.int8)
        is_cpu[cpu] = 1
        off = np.zeros(len(cols) + 1, dtype=np.int64)
        np.cumsum(np.frombuffer(lens, dtype=np.int64) if lens else np.zeros(0, np.int64), out=off[1:])
        return cls(
            Path(trace.path) if trace.path else None,
            rank,
            cols,
            np.frombuffer(starts, dtype=np.int64) if starts else np.zeros(0, np.int64),
            _KIND_RES[kind_codes(cols.types, is_cpu)],
            bytes(blob),
            off,
            comm,
        )

    def name(self, pos: int) -> str:
        return self.name_blob[self.name_off[pos] : self.name_off[pos + 1]].decode()

    def op_class(self, pos: int) -> str:
        c = self.comm_class.get(pos)
        return c if c is not None else _name_class(self.name(pos))


@dataclass
class Times:
    """A rank's schedule by node id: start and end (ns) of the node ids in `ids`."""

    ids: np.ndarray
    start: np.ndarray
    end: np.ndarray

    @classmethod
    def from_dict(cls, times: Mapping[int, tuple[int, int]]) -> Times:
        n = len(times)
        return cls(
            np.fromiter(times.keys(), dtype=np.uint64, count=n),
            np.fromiter((v[0] for v in times.values()), dtype=np.int64, count=n),
            np.fromiter((v[1] for v in times.values()), dtype=np.int64, count=n),
        )

    def by_position(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(start, end, scheduled) per node position; an id given twice keeps its last times, as a
        dict built from the pairs would."""
        n = len(ids)
        if not len(self.ids) or not n:
            z = np.zeros(n, dtype=np.int64)
            return z, z.copy(), np.zeros(n, dtype=bool)
        if len(self.ids) == n and bool(np.all(ids[1:] > ids[:-1])) and np.array_equal(self.ids, ids):
            # the schedule lists the rank's own unique ids in file order (asap, the simulator)
            return self.start, self.end, np.ones(n, dtype=bool)
        uniq, first_rev = np.unique(self.ids[::-1], return_index=True)
        src = len(self.ids) - 1 - first_rev
        j = np.searchsorted(uniq, ids)
        j[j >= len(uniq)] = 0
        has = uniq[j] == ids
        k = src[j]
        return np.where(has, self.start[k], 0), np.where(has, self.end[k], 0), has


def _schedule(rd: RankData, times: Union[Times, Mapping[int, tuple[int, int]]]):
    t = times if isinstance(times, Times) else Times.from_dict(times)
    return t.by_position(rd.cols.ids)


# ----------------------------------------------------------------------------- critical paths


def _dependency_path(rd: RankData, s: np.ndarray, e: np.ndarray, has: np.ndarray) -> tuple[int, list[int]]:
    """(length ns, positions) of the longest dependency chain, weighted by the scheduled
    durations (a collective's cost exists only after simulation), else the recorded ones."""
    dur = np.where(has, (e - s) / 1000.0, rd.cols.dur_us.astype(np.float64))
    try:
        length_us, path = critical_positions(rd.cols, dur)
    except ValueError as exc:
        raise InputError(f"{rd.path or 'trace'}: {exc}") from None
    return int(round(length_us * 1000)), path


def _schedule_path(rd: RankData, s: np.ndarray, e: np.ndarray, has: np.ndarray) -> Sequence[int]:
    """Positions of the chain of nodes that delayed the last one to finish (see
    `schedule_critical_path`)."""
    cols = rd.cols
    n = len(cols)
    if n:
        # a repeated id stands for its last node, as a dict of nodes by id keeps it
        has = has & (positions(cols, cols.ids) == np.arange(n))
    sel = np.flatnonzero(has)
    if not len(sel):
        return []
    ids = cols.ids
    # the node that ran before each one on its resource: sort by (resource, start, end, id)
    order = sel[np.lexsort((ids[sel], e[sel], s[sel], rd.res[sel]))]
    prev_np = np.full(n, -1, dtype=np.int64)
    same = rd.res[order[1:]] == rd.res[order[:-1]]
    prev_np[order[1:][same]] = order[:-1][same]
    last = sel[e[sel] == e[sel].max()]
    cur = int(last[np.argmin(ids[last])])
    ptr, parents = parent_lists(cols)
    # memoryviews and a visited bitmap: a path can be the whole rank, no Python object per node
    pp, par, prev = memoryview(ptr), memoryview(parents), memoryview(prev_np)
    hv, sv, ev, idv = memoryview(has), memoryview(s), memoryview(e), memoryview(ids)
    seen = bytearray(n)
    path = array("q", [cur])
    seen[cur] = 1
    while True:
        start = sv[cur]
        best = -1
        for c in chain(par[pp[cur] : pp[cur + 1]], (prev[cur],)):
            if c < 0 or not hv[c] or ev[c] > start or seen[c]:
                continue
            if best < 0 or ev[c] > ev[best] or (ev[c] == ev[best] and idv[c] < idv[best]):
                best = c
        if best < 0:
            break
        cur = best
        path.append(cur)
        seen[cur] = 1
    path.reverse()
    return path


def _first_order_totals(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per distinct key (in order of first appearance among ties): (key, total, first index),
    sorted by total, largest first."""
    uniq, first, inv = np.unique(keys, return_index=True, return_inverse=True)
    tot = np.zeros(len(uniq), dtype=np.int64)
    np.add.at(tot, inv.reshape(-1), values)
    order = np.lexsort((first, -tot))
    return uniq[order], tot[order], first[order]


def _shares(rd: RankData, path: Sequence[int], s: np.ndarray, e: np.ndarray, has: np.ndarray) -> dict:
    """Time on a path (positions) by operator class and by resource, and the top nodes."""
    p = np.frombuffer(path, dtype=np.int64) if isinstance(path, array) and len(path) else np.asarray(path, np.int64)
    d = np.where(has[p], e[p] - s[p], rd.cols.dur_us[p].astype(np.int64) * 1000)
    total = int(d.sum())
    # classes grouped by their hash: only the top ones are ever spelled out
    hashes = np.fromiter((hash(rd.op_class(i)) for i in path), dtype=np.int64, count=len(path))
    _, ctot, cfirst = _first_order_totals(hashes, d) if len(p) else (None, np.zeros(0, np.int64), None)
    rkeys, rtot, _ = _first_order_totals(rd.res[p], d) if len(p) else ([], [], None)
    top = np.argsort(-d, kind="stable")[:10]
    return {
        "nodes": len(p),
        "busy_ns": total,
        "by_resource": {RESOURCES[int(k)]: int(v) for k, v in zip(rkeys, rtot)},
        "by_class": [
            {"class": rd.op_class(path[int(f)]), "ns": int(v), "share": int(v) / total if total else 0.0}
            for v, f in zip(ctot[:15], cfirst[:15] if cfirst is not None else [])
        ],
        "top_nodes": [
            {
                "id": int(rd.cols.ids[p[k]]),
                "name": rd.name(int(p[k]))[:80],
                "ns": int(d[k]),
                "share": int(d[k]) / total if total else 0.0,
            }
            for k in top
        ],
    }


def _intervals(rd: RankData, s: np.ndarray, e: np.ndarray, has: np.ndarray) -> dict[str, Intervals]:
    ok = has & (e > s) & (rd.res != _META)
    return {r: (s[m], e[m]) for k, r in enumerate(RESOURCES) if k != _META and (m := ok & (rd.res == k)).any()}


def schedule_critical_path(trace: Trace, times: Mapping[int, tuple[int, int]]) -> list[int]:
    """The chain of nodes (ids) that delayed the last one to finish, in a given schedule.

    Walking back from the last node: its predecessor is, among its dependencies and the node that
    ran before it on the same resource, the one that finished last (at most its start). Gaps
    where nothing explains the start (waiting on another rank) end at the latest candidate.
    """
    rd = RankData.read(trace, trace.rank or 0)
    return [int(rd.cols.ids[i]) for i in _schedule_path(rd, *_schedule(rd, times))]


# ----------------------------------------------------------------------------- whole report


def analyze_rank(rd: RankData, times: Union[Times, Mapping[int, tuple[int, int]]]) -> dict[str, Any]:
    """One rank's breakdown, dependency critical path and schedule path."""
    s, e, has = _schedule(rd, times)
    bd = breakdown(_intervals(rd, s, e, has))
    dep_len, dep_path = _dependency_path(rd, s, e, has)
    sched_path = _schedule_path(rd, s, e, has)
    return {
        "nodes": len(rd.cols),
        "breakdown": bd,
        "overlap_pct": (100.0 * bd["comm_overlapped"] / bd["comm"]) if bd["comm"] else None,
        "critical_path": {"length_ns": dep_len, **_shares(rd, dep_path, s, e, has)},
        "schedule_path": _shares(rd, sched_path, s, e, has),
    }


def read_ranks(traces: Sequence[AnyTrace]) -> list[RankData]:
    return [RankData.read(t, t.rank if t.rank is not None else pos) for pos, t in enumerate(traces)]


def analyze_ranks(
    ranks: Sequence[RankData], times: Optional[Mapping[int, Any]] = None, *, source: str = "simulated"
) -> dict[str, Any]:
    """Per-rank breakdown and critical paths; `times[rank]` a `Times` or {node id: (start, end)}
    in ns, None for the recorded timestamps. With several ranks, `stragglers` too."""
    report: dict[str, Any] = {"schedule": source if times is not None else "recorded", "units": "ns", "ranks": {}}
    for rd in ranks:
        report["ranks"][rd.rank] = analyze_rank(rd, times[rd.rank] if times is not None else recorded_times(rd))
    if len(report["ranks"]) > 1:
        report["stragglers"] = stragglers(report["ranks"])
    return report


#: A rank is named a straggler when it finishes, or computes, later/longer than the median rank
#: by more than this share of the median rank's step.
STRAGGLER_SHARE = 0.05


def stragglers(ranks: Mapping[Any, dict[str, Any]], share: float = STRAGGLER_SHARE) -> dict[str, Any]:
    """The ranks that finish late, or hold the others up, and why, against the median rank.

    Each rank's step splits into compute (CPU or GPU busy) and wait (the rest: exposed
    communication and idle, i.e. waiting on collectives, peers and dependencies). A rank whose
    finish or compute exceeds the median rank's by more than `share` of the median step is a
    straggler; its cause is `compute` when its compute exceeds the median by more than its
    wait does (it is slow itself, and the ranks it shares collectives with wait for it),
    `waiting` otherwise (it is held up by collectives or peers). `ranks` is `analyze_ranks`'s
    per-rank dict (breakdowns in ns)."""
    figures = {
        r: (v["breakdown"]["step"], v["breakdown"]["compute"], v["breakdown"]["step"] - v["breakdown"]["compute"])
        for r, v in ranks.items()
    }
    step, compute, wait = (float(np.median([f[i] for f in figures.values()])) for i in range(3))
    tolerance = share * step
    per_rank: dict[Any, dict[str, Any]] = {}
    named = []
    for r, (finish, busy, waited) in figures.items():
        row = {
            "finish_ns": finish,
            "late_ns": finish - step,
            "compute_ns": busy,
            "compute_excess_ns": busy - compute,
            "wait_ns": waited,
            "wait_excess_ns": waited - wait,
            "cause": None,
        }
        if row["late_ns"] > tolerance or row["compute_excess_ns"] > tolerance:
            row["cause"] = "compute" if row["compute_excess_ns"] >= row["wait_excess_ns"] else "waiting"
            named.append(r)
        per_rank[r] = row
    named.sort(key=lambda r: -max(per_rank[r]["late_ns"], per_rank[r]["compute_excess_ns"]))
    return {
        "threshold_share": share,
        "median": {"finish_ns": step, "compute_ns": compute, "wait_ns": wait},
        "stragglers": named,
        "ranks": per_rank,
    }


def analyze_traces(
    traces: Sequence[AnyTrace],
    times: Optional[Mapping[int, Any]] = None,
    *,
    source: str = "simulated",
) -> dict[str, Any]:
    """`analyze_ranks` of traces: `times[rank][node_id] = (start_ns, end_ns)`; None means the
    recorded timestamps."""
    return analyze_ranks(read_ranks(traces), times, source=source)


def analyze_log(log: SimLog) -> dict[str, Any]:
    """What a timeline log alone can tell: per-rank finish and busy time, top operator classes."""
    ranks = {}
    for r, nodes in sorted(log.nodes.items()):
        s = np.array([v[1] for v in nodes.values()], dtype=np.int64)
        e = np.array([v[2] for v in nodes.values()], dtype=np.int64)
        bounds = np.unique(np.concatenate([s, e, [0]]))
        busy = int(np.diff(bounds)[_cover(bounds, (s, e))].sum())
        finish = int(e.max()) if len(e) else 0
        ranks[r] = {"nodes": len(nodes), "finish_ns": finish, "busy_ns": busy, "idle_ns": finish - busy}
    classes = classes_of_log(log)
    top = sorted(classes.items(), key=lambda kv: -kv[1].total_ns)[:15]
    return {
        "schedule": "log",
        "units": "ns",
        "ranks": ranks,
        "classes": [{"class": c, "count": s.count, "total_ns": s.total_ns} for c, s in top],
    }


# ----------------------------------------------------------------------------- schedules


def recorded_times(rd: RankData) -> Times:
    """Node intervals (ns) from the recorded `start_time_micros`, shifted so the rank starts at 0;
    metadata nodes have none."""
    real = np.flatnonzero(rd.cols.types != NodeType.METADATA_NODE)
    if not len(real):
        return Times(np.zeros(0, np.uint64), np.zeros(0, np.int64), np.zeros(0, np.int64))
    st = rd.start_us[real]
    s = (st - st.min()) * 1000
    return Times(rd.cols.ids[real], s, s + rd.cols.dur_us[real].astype(np.int64) * 1000)


def has_recorded_times(rd: RankData) -> bool:
    return bool(rd.start_us.any())


def asap_times(rd: RankData) -> Times:
    """Earliest start of every node with unlimited resources (ns): the dependency-only schedule."""
    try:
        starts = asap_starts(rd.cols)
    except ValueError as exc:
        raise InputError(f"{rd.path or 'trace'}: {exc}") from None
    s = np.asarray(starts, dtype=np.int64)
    return Times(rd.cols.ids, s * 1000, (s + rd.cols.dur_us.astype(np.int64)) * 1000)


SCHEDULES = ("auto", "simulate", "recorded", "asap")


def schedule_ranks(
    traces: Sequence[AnyTrace],
    ranks: Sequence[RankData],
    mode: str = "auto",
    *,
    network: Any = None,
    system: Any = None,
) -> tuple[dict[int, Times], str, Optional[str]]:
    """Node intervals per rank and where they came from: (times, source, note).

    `simulate` runs `chakra.sim.simulate`; `recorded` uses `start_time_micros`; `asap` is the
    dependency-only schedule. `auto` simulates and, when the traces cannot be simulated (say a
    collective without comm_type), falls back to recorded times if any, else asap; `note` says why.
    """
    from chakra.errors import ChakraError

    if mode not in SCHEDULES:
        raise InputError(f"--schedule must be one of {', '.join(SCHEDULES)}, not {mode!r}")
    for pos, t in enumerate(traces):
        if t.rank is None:
            t.rank = pos
    note = None
    if mode in ("auto", "simulate"):
        # files the simulator indexes itself, in its columnar table; decoded traces as they are
        if all(isinstance(t, TraceFile) for t in traces):
            sources: list[Any] = [t.path for t in traces]
        else:
            sources = [t if isinstance(t, Trace) else read_trace(t.path, rank=t.rank) for t in traces]
        try:
            return _simulated_times(sources, network, system), "simulated", None
        except ChakraError as exc:
            if mode == "simulate":
                raise
            note = f"not simulated ({exc}); "
    if mode == "recorded" or (mode == "auto" and all(has_recorded_times(r) for r in ranks)):
        rec = {r.rank: recorded_times(r) for r in ranks}
        return rec, "recorded", (note + "using recorded times") if note else None
    return {r.rank: asap_times(r) for r in ranks}, "asap", (note or "") + "using the dependency-only schedule"


def _simulated_times(sources: Sequence[Any], network: Any, system: Any) -> dict[int, Times]:
    """`chakra.sim.simulate`'s node times as arrays, taken from its rank engines: its public
    result spells every node's times out as a dict of tuples (about 200 bytes a node), which
    costs more than the whole analysis. The steps are `simulate`'s own, with default options."""
    from chakra.sim import api
    from chakra.sim.nogc import without_gc

    @without_gc
    def run() -> dict[int, Times]:
        opts = api.SimOptions()
        setup = api._prepare(sources, network, system, None, opts)
        engines = api._compile(setup, opts)
        api._run(engines, api._Models(setup, opts, api._resolve_policy(opts.policy)), opts)
        return {
            e.rank: Times(
                np.asarray(e.ids, dtype=np.uint64),
                np.frombuffer(e.start, dtype=np.int64),
                np.frombuffer(e.end, dtype=np.int64),
            )
            for e in engines
        }

    return run()

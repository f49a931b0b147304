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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

from chakra.columns import asap_starts, critical_path, scan
from chakra.errors import InputError, TraceFormatError
from chakra.schema import NodeType, collective_name, pb
from chakra.schema.attrs import get_attr
from chakra.schema.kinds import resource_of
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


def recorded_times(trace: Trace) -> dict[int, tuple[int, int]]:
    """Node intervals (ns) from the recorded `start_time_micros`, shifted so the rank starts at 0."""
    nodes = [n for n in trace.nodes if n.type != NodeType.METADATA_NODE]
    if not nodes:
        return {}
    t0 = min(n.start_time_micros for n in nodes)
    out = {}
    for n in nodes:
        s = (n.start_time_micros - t0) * 1000
        out[n.id] = (s, s + n.duration_micros * 1000)
    return out


def has_recorded_times(trace: Trace) -> bool:
    return any(n.start_time_micros for n in trace.nodes)


# ----------------------------------------------------------------------------- critical paths


def dependency_critical_path(
    trace: Trace, times: Optional[Mapping[int, tuple[int, int]]] = None
) -> tuple[int, list[int]]:
    """(length ns, node ids) of the longest duration-weighted dependency chain.

    Durations are the scheduled ones when `times` is given (a collective's cost exists only
    after simulation), else the recorded `duration_micros`.
    """
    cols = scan(trace)
    dur = None
    if times is not None:

        def fn(n: pb.Node) -> float:
            se = times.get(n.id)
            return (se[1] - se[0]) / 1000.0 if se is not None else float(n.duration_micros)

        dur = np.fromiter(map(fn, trace.nodes), dtype=np.float64, count=len(cols))
    try:
        length_us, ids = critical_path(cols, dur)
    except ValueError as exc:
        raise InputError(f"{trace.path or 'trace'}: {exc}") from None
    return int(round(length_us * 1000)), ids


def schedule_critical_path(trace: Trace, times: Mapping[int, tuple[int, int]]) -> list[int]:
    """The chain of nodes that delayed the last one to finish, in a given schedule.

    Walking back from the last node: its predecessor is, among its dependencies and the node that
    ran before it on the same resource, the one that finished last (at most its start). Gaps
    where nothing explains the start (waiting on another rank) end at the latest candidate.
    """
    nodes = {n.id: n for n in trace.nodes if n.id in times}
    if not nodes:
        return []
    by_res: dict[str, list[tuple[int, int, int]]] = {}
    for i, n in nodes.items():
        s, e = times[i]
        by_res.setdefault(resource_of(n), []).append((s, e, i))
    prev_on_res: dict[int, int] = {}
    for lst in by_res.values():
        lst.sort()
        for k in range(1, len(lst)):
            prev_on_res[lst[k][2]] = lst[k - 1][2]
    cur = max(nodes, key=lambda i: (times[i][1], -i))
    path = [cur]
    seen = {cur}
    while True:
        s = times[cur][0]
        cands = [d for d in set(nodes[cur].ctrl_deps).union(nodes[cur].data_deps) if d in nodes]
        p = prev_on_res.get(cur)
        if p is not None:
            cands.append(p)
        cands = [c for c in cands if times[c][1] <= s and c not in seen]
        if not cands:
            break
        cur = max(cands, key=lambda c: (times[c][1], -c))
        path.append(cur)
        seen.add(cur)
    path.reverse()
    return path


def path_shares(trace: Trace, ids: Iterable[int], times: Optional[Mapping[int, tuple[int, int]]] = None) -> dict:
    """Time on a path by operator class and by resource, and the top nodes by time share."""
    by_id = trace.by_id()
    rows = []
    total = 0
    for i in ids:
        n = by_id[i]
        d = (times[i][1] - times[i][0]) if times is not None and i in times else n.duration_micros * 1000
        total += d
        rows.append((d, n))
    classes: dict[str, int] = {}
    res: dict[str, int] = {}
    for d, n in rows:
        c, r = op_class(n), resource_of(n)
        classes[c] = classes.get(c, 0) + d
        res[r] = res.get(r, 0) + d
    top = sorted(rows, key=lambda r: -r[0])[:10]
    return {
        "nodes": len(rows),
        "busy_ns": total,
        "by_resource": dict(sorted(res.items(), key=lambda kv: -kv[1])),
        "by_class": [
            {"class": c, "ns": v, "share": v / total if total else 0.0}
            for c, v in sorted(classes.items(), key=lambda kv: -kv[1])[:15]
        ],
        "top_nodes": [{"id": n.id, "name": n.name[:80], "ns": d, "share": d / total if total else 0.0} for d, n in top],
    }


# ----------------------------------------------------------------------------- whole report


def analyze_traces(
    traces: Sequence[Trace],
    times: Optional[Mapping[int, Mapping[int, tuple[int, int]]]] = None,
    *,
    source: str = "simulated",
) -> dict[str, Any]:
    """Per-rank breakdown and critical paths for traces with a schedule.

    `times[rank][node_id] = (start_ns, end_ns)`; None means the recorded timestamps.
    """
    report: dict[str, Any] = {"schedule": source if times is not None else "recorded", "units": "ns", "ranks": {}}
    for pos, t in enumerate(traces):
        rank = t.rank if t.rank is not None else pos
        tt = times[rank] if times is not None else recorded_times(t)
        bd = breakdown(resource_intervals(t, tt))
        dep_len, dep_ids = dependency_critical_path(t, tt)
        sched_ids = schedule_critical_path(t, tt)
        report["ranks"][rank] = {
            "nodes": len(t.nodes),
            "breakdown": bd,
            "overlap_pct": (100.0 * bd["comm_overlapped"] / bd["comm"]) if bd["comm"] else None,
            "critical_path": {"length_ns": dep_len, **path_shares(t, dep_ids, tt)},
            "schedule_path": path_shares(t, sched_ids, tt),
        }
    return report


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


def asap_times(trace: Trace) -> dict[int, tuple[int, int]]:
    """Earliest start of every node with unlimited resources (ns): the dependency-only schedule."""
    nodes = trace.nodes
    try:
        starts = asap_starts(scan(trace))
    except ValueError as exc:
        raise InputError(f"{trace.path or 'trace'}: {exc}") from None
    return {n.id: (s * 1000, (s + n.duration_micros) * 1000) for n, s in zip(nodes, starts)}


SCHEDULES = ("auto", "simulate", "recorded", "asap")


def schedule_traces(
    traces: Sequence[Trace],
    mode: str = "auto",
    *,
    network: Any = None,
    system: Any = None,
) -> tuple[dict[int, dict[int, tuple[int, int]]], str, Optional[str]]:
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
        from chakra.sim import simulate

        try:
            res = simulate(list(traces), network, system, record_nodes=True)
            return dict(res.node_times or {}), "simulated", None
        except ChakraError as exc:
            if mode == "simulate":
                raise
            note = f"not simulated ({exc}); "
    if mode == "recorded" or (mode == "auto" and all(has_recorded_times(t) for t in traces)):
        rec = {t.rank: recorded_times(t) for t in traces}
        return rec, "recorded", (note + "using recorded times") if note else None
    return {t.rank: asap_times(t) for t in traces}, "asap", (note or "") + "using the dependency-only schedule"

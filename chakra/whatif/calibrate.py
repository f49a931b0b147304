"""Fit the simulator to a measured run: network bandwidth and latency per dimension, then a compute scale.

A converted real trace keeps what was measured: every compute node's duration and every
collective's duration (the Kineto span of the collective on that rank), with the start times of
all of them. Calibration takes three steps:

1. **Collectives.** One collective is the k-th one of a process group on each of its members; its
   measured time is the *shortest* of the members' durations: the member that arrived last did not
   wait for anyone, so its span is the transfer itself (the others include waiting for peers).
2. **Network.** The simulator's time for an isolated collective is affine in each dimension's
   latency L_d and inverse bandwidth 1/B_d (chunking and ring steps are fixed by the shape; the
   endpoint delay and reductions add a constant). Probing each dimension once per collective shape
   gives the coefficients; least squares on relative error (every collective counts alike, small or
   large) gives L_d >= 0 and B_d > 0. A dimension no collective crosses keeps its value.
3. **Compute.** With the fitted network the whole job is simulated; what is left between the
   simulated and the measured step (the slowest rank's span, first node start to last node end) is
   put on compute: one factor on every COMP node's duration, found by the secant method.

`calibrate()` returns everything as a plain dict (`calibration.md` documents the fields);
`write_outputs()` writes the fitted network YAML, the system JSON it goes with, and the dict.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np
import orjson

from chakra.errors import InputError
from chakra.io import atomic_output
from chakra.schema import NodeType, collective_name
from chakra.schema.attrs import get_attr
from chakra.schema.kinds import MODELLED_COLLECTIVES
from chakra.sim.config import NetworkConfig, SystemConfig, default_network, default_system
from chakra.trace import Trace
from chakra.whatif.recipes import clone, write_network_yaml
from chakra.whatif.transforms import TIME_ORDER, scaled_us

MAX_BANDWIDTH = 1e6  # GB/s: a dimension whose times do not depend on bytes gets this, not infinity
STEP_TOLERANCE = 0.005  # the compute fit stops when the simulated step is this close (relative)


@dataclasses.dataclass
class Measured:
    """One collective of the run: the k-th collective of process group `pg`."""

    pg: str
    seq: int
    ctype: int
    size: int
    members: tuple[int, ...]
    durations_ns: dict[int, int]  # member -> its recorded duration
    nodes: dict[int, int]  # member -> node id

    @property
    def measured_ns(self) -> int:
        return min(self.durations_ns.values())


def rank_span_ns(trace: Trace) -> int:
    """The measured step of one rank: first recorded start to last recorded end (ns)."""
    timed = [n for n in trace.nodes if n.start_time_micros or n.duration_micros]
    if not timed:
        return 0
    start = min(n.start_time_micros for n in timed)
    end = max(n.start_time_micros + n.duration_micros for n in timed)
    return int(end - start) * 1000


def measured_collectives(traces: Sequence[Trace], groups: dict[str, list[int]]) -> list[Measured]:
    """Every collective the simulator models, matched across ranks by (group, position)."""
    found: dict[tuple[str, int], Measured] = {}
    for t in traces:
        rank = int(t.rank)
        coll = [n for n in t.nodes if n.type == NodeType.COMM_COLL_NODE]
        coll.sort(key=TIME_ORDER)
        seq: dict[str, int] = defaultdict(int)
        for n in coll:
            ctype, size = get_attr(n, "comm_type"), get_attr(n, "comm_size")
            if ctype is None or size is None:
                continue
            pg = str(get_attr(n, "pg_name") or "")
            k = seq[pg]
            seq[pg] += 1
            if int(ctype) not in MODELLED_COLLECTIVES or int(size) <= 0:
                continue
            m = found.get((pg, k))
            if m is None:
                m = found[(pg, k)] = Measured(pg, k, int(ctype), int(size), (), {}, {})
            m.durations_ns[rank] = int(n.duration_micros) * 1000
            m.nodes[rank] = int(n.id)
    world = len(traces)
    out = []
    for m in found.values():
        listed = groups.get(m.pg)
        m.members = tuple(listed) if listed else tuple(sorted(m.durations_ns))
        if len(m.members) < 2 or set(m.durations_ns) != set(m.members) or max(m.members) >= world:
            continue  # a collective some member did not record, or alone: nothing to fit on
        if m.measured_ns <= 0:
            continue
        out.append(m)
    out.sort(key=lambda m: (m.pg, m.seq))
    return out


def model_ns(net: NetworkConfig, system: SystemConfig, m: Measured, congestion: str) -> int:
    """The simulator's time for collective `m` alone, every member issuing at 0 (the slowest member's end)."""
    from chakra.sim.collective_run import CollectiveRunner
    from chakra.sim.network import Network

    runner = CollectiveRunner(Network(net, aware=congestion == "aware"), system, topology=net)
    return max(runner.finish(m.ctype, m.size, m.members, None, [0] * len(m.members)))


def _with(net: NetworkConfig, bandwidth: Sequence[float], latency: Sequence[float]) -> NetworkConfig:
    return dataclasses.replace(net, bandwidth=[float(b) for b in bandwidth], latency=[float(x) for x in latency])


def fit_network(
    net: NetworkConfig, system: SystemConfig, colls: Sequence[Measured], congestion: str
) -> tuple[NetworkConfig, list[int]]:
    """(fitted network, dimensions fitted): least squares on relative error over the collectives."""
    dims = net.dims
    shapes: dict[tuple, list[Measured]] = defaultdict(list)
    for m in colls:
        shapes[(m.ctype, m.size, m.members)].append(m)
    lat0 = [max(float(x), 100.0) for x in net.latency]
    inv0 = [1.0 / float(b) for b in net.bandwidth]  # 1 / (GB/s)
    base = _with(net, [1 / x for x in inv0], lat0)
    rows, consts, targets = [], [], []
    for ms in shapes.values():
        t0 = model_ns(base, system, ms[0], congestion)
        coef = np.zeros(2 * dims)
        for d in range(dims):
            lat = list(lat0)
            lat[d] = 2 * lat0[d]
            coef[d] = (model_ns(_with(net, [1 / x for x in inv0], lat), system, ms[0], congestion) - t0) / lat0[d]
            inv = list(inv0)
            inv[d] = 2 * inv0[d]
            coef[dims + d] = (model_ns(_with(net, [1 / x for x in inv], lat0), system, ms[0], congestion) - t0) / inv0[
                d
            ]
        c = t0 - coef[:dims] @ np.array(lat0) - coef[dims:] @ np.array(inv0)
        for m in ms:
            rows.append(coef)
            consts.append(c)
            targets.append(m.measured_ns)
    a = np.array(rows)
    y = np.array(targets, dtype=float) - np.array(consts)
    w = 1.0 / np.array(targets, dtype=float)
    free = [j for j in range(2 * dims) if np.any(a[:, j] > 0)]
    x = np.array(lat0 + inv0)
    # non-negative least squares by elimination: a variable the fit drives below 0 is pinned at 0
    while free:
        fixed = [j for j in range(2 * dims) if j not in free]
        rhs = (y - a[:, fixed] @ x[fixed]) * w
        sol, *_ = np.linalg.lstsq(a[:, free] * w[:, None], rhs, rcond=None)
        if np.all(sol >= 0):
            x[free] = sol
            break
        worst = free[int(np.argmin(sol))]
        x[worst] = 0.0
        free.remove(worst)
    fitted = sorted({j % dims for j in range(2 * dims) if np.any(a[:, j] > 0)})
    lat = [float(x[d]) if d in fitted else float(net.latency[d]) for d in range(dims)]
    bw = [
        (min(1.0 / x[dims + d], MAX_BANDWIDTH) if x[dims + d] > 0 else MAX_BANDWIDTH)
        if d in fitted
        else net.bandwidth[d]
        for d in range(dims)
    ]
    return _with(net, bw, lat), fitted


def scaled_traces(traces: Sequence[Trace], scale: float) -> list[Trace]:
    """Copies with every COMP node's duration times `scale` (whole µs, as the trace stores them)."""
    out = clone(traces)
    if scale != 1.0:
        for t in out:
            for n in t.nodes:
                if n.type == NodeType.COMP_NODE:
                    n.duration_micros = scaled_us(n.duration_micros, scale)
    return out


def calibrate(
    traces: Sequence[Trace],
    network: Optional[NetworkConfig] = None,
    system: Optional[SystemConfig] = None,
    *,
    groups: Optional[dict[str, list[int]]] = None,
    congestion: str = "aware",
    progress: Optional[Callable[[str], None]] = None,
) -> dict[str, Any]:
    """Fit the network and compute scale to the measured durations of `traces` (one per rank)."""
    from chakra.sim import simulate

    say = progress or (lambda _msg: None)
    traces = sorted(traces, key=lambda t: int(t.rank))
    if any(get_attr(t.metadata, "profiler_overhead", None) for t in traces):
        # The measured run is the profiled one (its recorded spans): fit to the recorded durations,
        # not to the untraced ones the converter made (docs/pytorch.md, "The profiler's cost").
        from chakra.converters.pytorch.overhead import restore_profiled

        traces = clone(traces)
        restore_profiled(traces)
    n = len(traces)
    if n < 2:
        raise InputError("calibration needs the traces of at least 2 ranks")
    groups = dict(groups or {})
    net = network if network is not None else default_network(n)
    system = system if system is not None else default_system()
    measured_rank = {int(t.rank): rank_span_ns(t) for t in traces}
    if not any(measured_rank.values()):
        raise InputError(
            f"{traces[0].path or 'trace'}: no recorded start times or durations: calibration needs a converted real run"
        )
    colls = measured_collectives(traces, groups)
    if not colls:
        raise InputError(
            f"{traces[0].path or 'trace'}: no collective with a recorded duration on every member: nothing to fit"
        )
    say(f"fitting the network to {len(colls)} collectives")
    before_coll = {id(m): model_ns(net, system, m, congestion) for m in colls}
    fitted_net, dims = fit_network(net, system, colls, congestion)
    after_coll = {id(m): model_ns(fitted_net, system, m, congestion) for m in colls}

    def run(net_cfg: NetworkConfig, scale: float) -> Any:
        return simulate(scaled_traces(traces, scale), net_cfg, system, comm_groups=groups, congestion=congestion)

    say("simulating the job before calibration")
    before = run(net, 1.0)
    measured_step = max(measured_rank.values())
    # the compute scale: secant on the step error, from 1 (the durations as recorded)
    say("fitting the compute scale")
    s_prev, r_prev = 1.0, run(fitted_net, 1.0)
    tries = [(1.0, r_prev.finish_ns)]
    s, result = s_prev, r_prev
    if abs(r_prev.finish_ns - measured_step) > STEP_TOLERANCE * measured_step:
        slow = max(r_prev.ranks.values(), key=lambda r: r.finish_ns)
        s = max(0.05, 1.0 + (measured_step - r_prev.finish_ns) / max(slow.compute_ns, 1))
        for _ in range(8):
            result = run(fitted_net, s)
            tries.append((s, result.finish_ns))
            err = result.finish_ns - measured_step
            if abs(err) <= STEP_TOLERANCE * measured_step:
                break
            slope = (result.finish_ns - r_prev.finish_ns) / (s - s_prev) if s != s_prev else 0.0
            s_prev, r_prev = s, result
            s = max(0.05, s - err / slope) if slope > 0 else s * measured_step / max(result.finish_ns, 1)
        best = min(tries, key=lambda p: abs(p[1] - measured_step))
        if best[0] != s:
            s = best[0]
            result = run(fitted_net, s)

    def rel(sim: float, meas: float) -> Optional[float]:
        return (sim - meas) / meas if meas else None

    coll_rows = []
    for m in colls:
        rank0 = m.members[0]
        coll_rows.append(
            {
                "collective": f"{collective_name(m.ctype)} #{m.seq} on group {m.pg or 'all'}",
                "type": collective_name(m.ctype),
                "bytes": m.size,
                "members": len(m.members),
                "node": m.nodes[rank0],
                "measured_ns": m.measured_ns,
                "before_ns": before_coll[id(m)],
                "after_ns": after_coll[id(m)],
                "error_before": rel(before_coll[id(m)], m.measured_ns),
                "error_after": rel(after_coll[id(m)], m.measured_ns),
            }
        )
    rank_rows = [
        {
            "rank": r,
            "measured_ns": measured_rank[r],
            "before_ns": before.ranks[r].finish_ns,
            "after_ns": result.ranks[r].finish_ns,
            "error_before": rel(before.ranks[r].finish_ns, measured_rank[r]),
            "error_after": rel(result.ranks[r].finish_ns, measured_rank[r]),
        }
        for r in sorted(measured_rank)
    ]
    errs_b = [abs(x["error_before"]) for x in coll_rows]
    errs_a = [abs(x["error_after"]) for x in coll_rows]
    return {
        "ranks": n,
        "congestion": congestion,
        "measured_step": "the slowest rank's recorded span: first node start to last node end "
        "(the profiled run: a converted recording is fitted with its recorded durations)",
        "network": {
            "topology": list(fitted_net.topology),
            "npus_count": [int(c) for c in fitted_net.npus_count],
            "bandwidth_GBps": list(fitted_net.bandwidth),
            "latency_ns": list(fitted_net.latency),
            "before": {"bandwidth_GBps": list(net.bandwidth), "latency_ns": list(net.latency)},
            "fitted_dimensions": dims,
        },
        "compute_scale": s,
        "compute_scale_tries": [{"scale": a, "step_ns": b} for a, b in tries],
        "step": {
            "measured_ns": measured_step,
            "before_ns": before.finish_ns,
            "after_ns": result.finish_ns,
            "error_before": rel(before.finish_ns, measured_step),
            "error_after": rel(result.finish_ns, measured_step),
        },
        "per_rank": rank_rows,
        "collectives": coll_rows,
        "collective_error": {
            "median_before": float(np.median(errs_b)),
            "median_after": float(np.median(errs_a)),
        },
        "units": "ns",
    }


def write_outputs(out: str, report: dict[str, Any], system_source: Optional[Path]) -> list[Path]:
    """OUT.network.yml (fitted), OUT.system.json (the system config used) and OUT.calibration.json,
    each through a temp file renamed into place."""
    net = report["network"]
    cfg = NetworkConfig(net["topology"], net["npus_count"], net["bandwidth_GBps"], net["latency_ns"])
    step = report["step"]
    comment = (
        f"written by chakra calibrate: step {step['measured_ns']:,} ns measured, {step['after_ns']:,} ns simulated "
        f"with compute x{report['compute_scale']:.4g}"
    )
    paths = [Path(f"{out}.network.yml"), Path(f"{out}.system.json"), Path(f"{out}.calibration.json")]
    write_network_yaml(paths[0], cfg, comment)
    src = system_source if system_source is not None else None
    if src is None:
        from chakra.sim.config import bundled_config_dir

        src = bundled_config_dir() / "system.json"
    data = src.read_bytes()
    with atomic_output(paths[1], "wb") as f:
        f.write(data)
    with atomic_output(paths[2], "wb") as f:
        f.write(orjson.dumps(report, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
    return paths

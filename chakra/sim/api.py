"""`simulate()`: the public entry point of the reference simulator, and its result type."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Optional, Union

import numpy as np

from chakra.commgroups import groups_beside, read_comm_groups
from chakra.errors import ConfigError, InputError
from chakra.io import atomic_output, expand_trace_args
from chakra.sim.collective_run import CollectiveRunner, OverlapsEarlierTraffic
from chakra.sim.compiler import K_COLL, K_CPU, K_GPU, K_MEM, K_RECV, K_REPLAY, K_SEND, RankEngine
from chakra.sim.config import (
    MemoryConfig,
    NetworkConfig,
    SystemConfig,
    default_network,
    default_system,
    load_memory,
    load_network,
    load_system,
)
from chakra.sim.core import SimDeadlock
from chakra.sim.engine import Simulation
from chakra.sim.fold import FoldRefused, find_fold
from chakra.sim.groups import GroupTable
from chakra.sim.memory import MemoryModel as BuiltinMemory
from chakra.sim.models import CollectiveModel, MemoryModel, NetworkModel
from chakra.sim.network import Network
from chakra.sim.nogc import without_gc
from chakra.trace import Trace, rank_set_problem

PathLike = Union[str, os.PathLike]


@dataclass
class RankResult:
    """Per-rank figures, all integer ns. See docs/simulator.md for the exact definitions."""

    finish_ns: int
    compute_ns: int
    comm_ns: int
    exposed_comm_ns: int
    idle_ns: int
    mem_ns: int = 0
    nodes: int = 0

    def __getitem__(self, key: str) -> int:
        return getattr(self, key)


_RANK_FIELDS = tuple(f.name for f in fields(RankResult))


@dataclass
class SimResult:
    ranks: dict[int, RankResult]
    finish_ns: int
    node_times: Optional[dict[int, dict[int, tuple[int, int]]]] = None
    settings: dict[str, Any] = field(default_factory=dict)
    events: int = 0
    wall_s: float = 0.0
    # One line per situation where the real ASTRA-sim would abort, hang or stop a rank early,
    # saying what it would do; the answer above is still ours.
    warnings: list[str] = field(default_factory=list)
    # Bytes, busy time and utilization per dimension and link over time (`traffic=True`; the
    # shape is `chakra.sim.traffic.TrafficRecorder.summary`'s).
    traffic: Optional[dict[str, Any]] = None

    def to_json(self) -> dict[str, Any]:
        """`{"ranks": {"<rank>": {...}}, "finish_ns": max, "settings": {...}, "events": n}`."""
        out = {
            # the fields by name (plain ints): `asdict`'s deep copy was ~7 ms at 1,024 ranks
            "ranks": {str(r): {f: getattr(v, f) for f in _RANK_FIELDS} for r, v in sorted(self.ranks.items())},
            "finish_ns": self.finish_ns,
            "units": "ns",
            "settings": self.settings,
            "events": self.events,
            "warnings": self.warnings,
        }
        if self.traffic is not None:
            out["traffic"] = self.traffic
        return out


def _union(starts: np.ndarray, ends: np.ndarray) -> int:
    """Total length covered by intervals [start, end)."""
    if len(starts) == 0:
        return 0
    order = np.argsort(starts, kind="stable")
    s = starts[order]
    e = np.maximum.accumulate(ends[order])
    prev = np.empty_like(e)
    prev[0] = s[0]
    prev[1:] = e[:-1]
    return int(np.clip(e - np.maximum(s, prev), 0, None).sum())


BREAKDOWNS = ("overlap", "astra-sim")
BREAKDOWN_TEXT = {
    "overlap": "exposed comm = time covered by communication and not by compute (overlap-aware)",
    "astra-sim": "exposed comm = finish - sum of GPU compute durations (ASTRA-sim's definition)",
}


def rank_stats(e: RankEngine, astra_breakdown: bool) -> RankResult:
    kind = np.frombuffer(e.kind, dtype=np.int8)
    s = np.frombuffer(e.start, dtype=np.int64)
    en = np.frombuffer(e.end, dtype=np.int64)
    finish = int(en.max()) if e.n else 0
    comp = (kind == K_GPU) | (kind == K_CPU)
    comm = (kind == K_COLL) | (kind == K_SEND) | (kind == K_RECV) | (kind == K_REPLAY)
    mem = kind == K_MEM
    compute_ns = _union(s[comp], en[comp])
    comm_ns = _union(s[comm], en[comm])
    both = comp | comm
    busy_all = _union(s[both | mem], en[both | mem])
    if astra_breakdown:
        exposed = finish - e.gpu_sum  # ASTRA-sim: finish - sum of GPU compute durations (astra-sim#302)
    else:
        exposed = _union(s[both], en[both]) - compute_ns
    return RankResult(
        finish_ns=finish,
        compute_ns=compute_ns,
        comm_ns=comm_ns,
        exposed_comm_ns=max(0, int(exposed)),
        idle_ns=finish - busy_all,
        mem_ns=_union(s[mem], en[mem]),
        nodes=e.n,
    )


def _csv_field(text: str) -> str:
    if any(c in text for c in ',"\n\r'):
        return '"' + text.replace('"', '""') + '"'
    return text


class _LogWriter:
    """Buffered writer of `issue|callback,<npu>,<time_ns>,<node_id>,<node_name>` lines."""

    def __init__(self, f: Any) -> None:
        self.f = f
        self.buf: list[str] = []

    def __call__(self, ev: tuple) -> None:
        self.buf.append(f"{ev[0]},{ev[1]},{ev[2]},{ev[3]},{_csv_field(ev[4])}\n")
        if len(self.buf) >= 65536:
            self.flush()

    def flush(self) -> None:
        if self.buf:
            self.f.write("".join(self.buf).encode())
            self.buf.clear()

    def restart(self) -> None:
        """Drop everything written so far (the simulation starts again)."""
        self.buf.clear()
        self.f.seek(0)
        self.f.truncate()


def _resolve_policy(policy: Union[str, Callable, None]) -> Optional[Callable]:
    if policy is None or policy == "id":
        return None
    if callable(policy):
        return policy
    try:
        from chakra.sim import policies  # written by the what-if engineer (issue 9)
    except ImportError:
        policies = None
    getter = getattr(policies, "get_policy", None) if policies else None
    if getter is None:
        raise ConfigError(f"unknown scheduling policy {policy!r} (built in: 'id'; or pass a callable)")
    return getter(policy)


def rank_sources(traces: Union[Sequence[Trace], PathLike, Sequence[PathLike]]) -> list[tuple[int, Any]]:
    """(rank, Trace or path) per rank, sorted by rank; ranks must be 0..N-1."""
    if isinstance(traces, (str, os.PathLike)):
        traces = [traces]
    items = list(traces)
    out: list[tuple[int, Any]] = []
    if items and all(isinstance(t, Trace) for t in items):
        out = [(t.rank if t.rank is not None else i, t) for i, t in enumerate(items)]
    else:
        pairs = expand_trace_args([Path(p) for p in items])  # type: ignore[arg-type]
        out = [(rank if rank is not None else i, path) for i, (rank, path) in enumerate(pairs)]
    problem = rank_set_problem([r for r, _ in out])
    if problem:
        raise InputError(problem)
    out.sort(key=lambda x: x[0])
    return out


@dataclass(frozen=True)
class SimOptions:
    """How to simulate, checked when made (bad values raise ConfigError): `simulate()`'s options.

    The command line, `chakra whatif` and sweeps build one and pass it as `options=`; library
    callers may also pass the same names as keywords to `simulate()`. Their meaning is in
    `simulate`'s docstring.
    """

    comm_groups: Union[dict[str, list[int]], PathLike, None] = None
    congestion: str = "aware"
    comm_mode: str = "model"
    policy: Union[str, Callable[[list[int], int], int]] = "id"
    record_nodes: bool = False
    log_path: Optional[PathLike] = None
    compat: bool = True
    breakdown: str = "overlap"
    rendezvous_protocol: bool = False
    injection_scale: Optional[float] = None
    comm_scale: float = 1.0
    num_queues_per_dim: int = 1
    slots: Optional[dict[str, int]] = None
    progress: Optional[Callable[[int, int], None]] = None
    missing_deps: str = "error"
    network_model: Optional[NetworkModel] = None
    collective_model: Optional[CollectiveModel] = None
    memory_model: Optional[MemoryModel] = None
    traffic: bool = False
    traffic_bins: int = 40
    fold: bool = True
    framed: Any = None  # chakra.sim.loading.FramedFiles: rank files already read (by the ASTRA-sim checks)

    def __post_init__(self) -> None:
        if self.traffic and not 1 <= self.traffic_bins <= 10_000:
            raise ConfigError(f"traffic bins must be 1 to 10000, not {self.traffic_bins!r}")
        if self.traffic and self.network_model is not None and not isinstance(self.network_model, Network):
            raise ConfigError("traffic is recorded on the built-in network model only")
        if self.breakdown not in BREAKDOWNS:
            raise ConfigError(f"breakdown must be one of {', '.join(BREAKDOWNS)}, not {self.breakdown!r}")
        if self.congestion not in ("aware", "unaware"):
            raise ConfigError(f"--congestion must be aware or unaware, not {self.congestion!r}")
        if self.comm_mode not in ("model", "replay"):
            raise ConfigError(f"--comm must be model or replay, not {self.comm_mode!r}")
        if self.injection_scale is not None and not self.injection_scale > 0:
            raise ConfigError(f"injection scale must be > 0, not {self.injection_scale!r}")
        for key in self.slots or {}:
            if key not in ("cpu", "gpu", "comm"):
                raise ConfigError(f"unknown resource class {key!r} in slots (use cpu, gpu, comm)")

    def slot_caps(self) -> dict[str, int]:
        """Ops in flight per rank and class: 1 each when modelling communication, else unlimited (0)."""
        caps = {"cpu": 1, "gpu": 1, "comm": 1} if self.comm_mode == "model" else {"cpu": 0, "gpu": 0, "comm": 0}
        caps.update({key: int(value) for key, value in (self.slots or {}).items()})
        return caps


@dataclass
class _Setup:
    """What `_prepare` read and checked: the ranks' sources and the configs they run on."""

    traces: Any
    sources: list[tuple[int, Any]]
    net: NetworkConfig
    system: SystemConfig
    memory: MemoryConfig
    groups: GroupTable
    caps: dict[str, int]
    warnings: list[str]

    @property
    def n(self) -> int:
        return len(self.sources)


@without_gc
def simulate(
    traces: Union[Sequence[Trace], PathLike, Sequence[PathLike]],
    network: Union[NetworkConfig, PathLike, None] = None,
    system: Union[SystemConfig, PathLike, None] = None,
    memory: Union[MemoryConfig, PathLike, None] = None,
    options: Optional[SimOptions] = None,
    **fields: Any,
) -> SimResult:
    """Simulate every rank's trace on the analytical network; see docs/simulator.md.

    `traces`: a list of `Trace` (rank = `.rank` or list position), a PREFIX (`PREFIX.<rank>.et`),
    or trace paths. `network`/`system`/`memory`: dataclasses or ASTRA-sim config paths (network
    None = default_network(ranks), as export writes; system None = the bundled regression config;
    memory None = NO_MEMORY_EXPANSION). `congestion`: "aware" | "unaware". `comm_mode`: "model" |
    "replay" (comm nodes take their recorded duration). `policy`: "id" (smallest ready id first,
    as ASTRA-sim) or `f(ready_node_ids, rank) -> node id`. `compat=True` follows ASTRA-sim's known
    quirks (subgroup ring delay, METADATA nodes in the comm slot); False gives the corrected
    model. `breakdown`: "overlap" (default: exposed comm = time covered by communication and not
    by compute) or "astra-sim" (finish - sum of GPU compute durations, ASTRA-sim's printout).
    `rendezvous_protocol`: every message waits for an 8 KiB handshake from its receiver (ASTRA-sim's
    `--rendezvous-protocol=true`). `injection_scale`: multiplies endpoint-delay (ASTRA-sim's
    `--injection-scale`; default: the system config's `injection_scale`, 1). `comm_scale`: ASTRA-sim's
    `--comm-scale`, accepted for parity: ASTRA-sim 2.x stores it and never uses it, and neither do we.
    `num_queues_per_dim`: ASTRA-sim's `--num-queues-per-dim` (queues per network dimension).
    `network_model`, `collective_model`, `memory_model`: replacements for the built-in models
    (interfaces in `chakra.sim.models`; the configs still give the rank count and system keys).
    `slots`: ops in flight per rank and class,
    `{"cpu": 1, "gpu": 1, "comm": 1}` by default with `comm_mode="model"` (ASTRA-sim), unlimited
    (0) for every class with `comm_mode="replay"` (the measured schedule overlaps ops of different
    threads and streams; the trace's dependencies carry their order). `comm_groups` None: the
    `PREFIX.comm_groups.json` beside trace files, when there is one. `missing_deps`: "error" or
    "drop" (ignore dependencies on node ids absent from a trace). `traffic`: record bytes, busy
    time and utilization per dimension and link in `traffic_bins` time bins (`SimResult.traffic`;
    every collective then runs on the shared clock, see `chakra.sim.traffic`). `fold` (default
    True): where the ranks are copies of one slice (data-parallel replicas), run that slice with
    each event standing for its copies, whenever that is exact to the ns (`chakra.sim.fold`);
    False always runs every rank (the answers are the same).
    """
    t0 = time.perf_counter()
    opts = SimOptions(**fields) if options is None else dataclasses.replace(options, **fields)
    policy = _resolve_policy(opts.policy)
    setup = _prepare(traces, network, system, memory, opts)
    engines = _compile(setup, opts)
    models = _Models(setup, opts, policy)
    sim = _run(engines, models, opts)
    return _collect(setup, engines, models, sim, opts, time.perf_counter() - t0)


def _prepare(traces: Any, network: Any, system: Any, memory: Any, opts: SimOptions) -> _Setup:
    """Find the ranks, load and check the configs, and settle the process groups."""
    sources = rank_sources(traces)
    n = len(sources)
    if n == 0:
        raise InputError("no traces to simulate")
    net_cfg = load_network(network) if network is not None else default_network(n)
    if net_cfg.total_npus != n:
        raise ConfigError(
            f"{net_cfg.path or '<network>'}: npus_count {net_cfg.npus_count} gives {net_cfg.total_npus} NPUs "
            f"but there are {n} rank traces"
        )
    sys_cfg = load_system(system) if system is not None else default_system()
    if opts.injection_scale is not None:
        sys_cfg = dataclasses.replace(sys_cfg, injection_scale=float(opts.injection_scale))
    mem_cfg = load_memory(memory)
    comm_groups = opts.comm_groups
    if comm_groups is None:
        found = groups_beside([traces] if isinstance(traces, (str, os.PathLike, Trace)) else list(traces))
        # a subset of a job's rank files: groups naming absent ranks cannot be used, so they are
        # left out (a collective naming one still fails, as an unknown group)
        comm_groups = {k: v for k, v in found.items() if all(0 <= r < n for r in v)}
    if isinstance(comm_groups, (str, os.PathLike)):
        comm_groups = read_comm_groups(comm_groups)
    groups = GroupTable(n, comm_groups)
    # Only about a network the user named, in the mode that runs it: the default network is ours,
    # and a replay of recorded durations sends nothing over one.
    warnings = network_warnings(net_cfg, opts.congestion) if network is not None and opts.comm_mode == "model" else []
    return _Setup(traces, sources, net_cfg, sys_cfg, mem_cfg, groups, opts.slot_caps(), warnings)


def _compile(setup: _Setup, opts: SimOptions) -> list[RankEngine]:
    """One engine per rank, one rank at a time: index, compile, drop the index. Byte-identical
    rank files (SPMD traces) are indexed once and share the compiled read-only arrays; files that
    differ from an earlier one in a few communication attributes only share them too, with their
    own communication rows (`chakra.sim.twins`)."""
    from chakra.sim.loading import RankLoader

    caps = setup.caps
    loader = RankLoader(
        system=setup.system, comm_mode=opts.comm_mode, compat=opts.compat, names=opts.log_path is not None,
        slots=(caps["cpu"], caps["gpu"], caps["comm"]), missing_deps=opts.missing_deps, groups=setup.groups,
        warnings=setup.warnings, ranks=setup.n, framed=opts.framed,
    )  # fmt: skip
    engines: list[RankEngine] = []
    for rank, src in setup.sources:
        engines.append(loader.load(rank, src))
        if opts.progress is not None:
            opts.progress(len(engines), setup.n)
    resolved: dict[int, dict] = {}
    for engine in engines:
        engine.resolve_groups(setup.groups, resolved)
    _check_per_node_custom(setup.system, engines)
    return engines


def _check_per_node_custom(system: Any, engines: list[RankEngine]) -> None:
    """A per-node custom algorithm is simulated only where it is the direct all-to-all of a node's
    own per-peer byte lists (what the export writes); anything else would be silently wrong."""
    mapped = getattr(system, "per_node_custom", None)
    if not mapped:
        return
    for engine in engines:
        for row in engine.info:
            nid = int(engine.ids[row])
            if nid in mapped and row not in engine.peers:
                raise ConfigError(
                    f"per-node-custom-implementation names node {nid} of rank {engine.rank}, which is not an "
                    "all-to-all with per-peer sizes; only those are simulated (as the direct algorithm "
                    "`chakra export astra-sim` writes for them)"
                )


class _Models:
    """The network, collective and memory models of one run (the caller's, else the built-in ones)."""

    def __init__(self, setup: _Setup, opts: SimOptions, policy: Optional[Callable]) -> None:
        self.setup = setup
        self.opts = opts
        self.policy = policy
        aware = opts.congestion == "aware"
        self.network = opts.network_model if opts.network_model is not None else Network(setup.net, aware=aware)
        self.collectives: Any = None
        self.memory: Any = None
        self.fresh()

    def fresh(self) -> None:
        """New collective and memory models (unless the caller gave them), for a first or a repeated run."""
        setup, opts = self.setup, self.opts
        if opts.collective_model is not None:
            self.collectives = opts.collective_model
        else:
            self.collectives = CollectiveRunner(
                self.network,  # type: ignore[arg-type]
                setup.system,
                compat=opts.compat,
                rendezvous=opts.rendezvous_protocol,
                topology=setup.net,
                queues_per_dim=opts.num_queues_per_dim,
            )
        if opts.memory_model is not None:
            self.memory = opts.memory_model
        else:
            self.memory = BuiltinMemory(setup.memory, setup.system, setup.n, compat=opts.compat)


def _run(engines: list[RankEngine], models: _Models, opts: SimOptions) -> Simulation:
    """Run every rank, writing the log (atomically) when asked."""
    if opts.log_path is None:
        return _run_all(engines, models, None)
    with atomic_output(opts.log_path, "wb") as f:
        writer = _LogWriter(f)
        sim = _run_all(engines, models, writer)
        writer.flush()
        if sim.messenger.traffic is not None:
            finish = max((max(e.end) if e.n else 0 for e in engines), default=0)
            f.write(sim.messenger.traffic.log_lines(finish).encode())
    return sim


def _run_all(engines: list[RankEngine], models: _Models, log: Optional[_LogWriter]) -> Simulation:
    def attempt(live: Optional[bool], fold: Any = None) -> Simulation:
        traffic = None
        if models.opts.traffic:
            from chakra.sim.traffic import TrafficRecorder  # only a run that records traffic loads it

            traffic = TrafficRecorder(models.network, models.opts.traffic_bins)
        sim = Simulation(engines, models.network, models.collectives, models.memory, policy=models.policy, log=log,
                         live=live, traffic=traffic, fold=fold)  # fmt: skip
        sim.run()
        return sim

    # Replica ranks (data-parallel copies of one slice): one slice runs, each entry standing for
    # its copies (chakra/sim/fold.py), unless the run shows it cannot stand for the full one.
    fold = None
    if log is None and not models.opts.traffic and models.policy is None and models.opts.fold:
        fold = find_fold(engines, models.network, models.collectives)
    if fold is not None:
        try:
            return attempt(None, fold)
        except (FoldRefused, SimDeadlock):  # (a fold needs the unaware network: no overlaps)
            for e in engines:
                e._reset()
            models.fresh()
    try:
        return attempt(None)
    except (OverlapsEarlierTraffic, SimDeadlock) as exc:
        # A collective on the aware network would share links with an earlier one still in
        # flight, or an isolated collective waits for members that wait for it (one that runs
        # on some dimensions only needs its line's peers, not every member): start again with
        # every collective and message on the one clock (exact).
        stuck = exc if isinstance(exc, SimDeadlock) else None
        for e in engines:
            e._reset()
        models.fresh()
        if log is not None:
            log.restart()
        if stuck is None:
            return attempt(True)
        try:
            return attempt(True)
        except SimDeadlock:
            raise stuck from None


def _collect(
    setup: _Setup, engines: list[RankEngine], models: _Models, sim: Simulation, opts: SimOptions, wall_s: float
) -> SimResult:
    """Per-rank figures, node times when asked, the settings used and every warning, once each."""
    warnings = setup.warnings
    for w in (
        [x for e in engines for x in e.warnings]
        + sim.warnings
        + list(getattr(models.collectives, "warnings", []))
        + list(getattr(models.memory, "warnings", []))
    ):
        if w not in warnings:
            warnings.append(w)
    astra = opts.breakdown == "astra-sim"
    ranks = {}
    seen: dict[tuple, RankResult] = {}  # ranks with the same nodes and the same times: one computation
    for e in engines:
        key = (e.kind, e.start.tobytes(), e.end.tobytes(), e.gpu_sum)
        got = seen.get(key)
        if got is None:
            got = seen[key] = rank_stats(e, astra)
        ranks[e.rank] = dataclasses.replace(got)

    node_times = None
    if opts.record_nodes:
        node_times = {}
        for e in engines:
            ids = e.ids.tolist()
            node_times[e.rank] = dict(zip(ids, zip(e.start.tolist(), e.end.tolist())))
    net_cfg = setup.net
    settings = {
        "congestion": opts.congestion,
        "comm_mode": opts.comm_mode,
        "compat": "astra-sim" if opts.compat else "corrected",
        "breakdown": opts.breakdown,
        "breakdown_definition": BREAKDOWN_TEXT[opts.breakdown],
        "network": {
            "topology": net_cfg.topology,
            "npus_count": net_cfg.npus_count,
            "bandwidth_GBps": net_cfg.bandwidth,
            "latency_ns": net_cfg.latency,
        },
        "replayed_collectives": sum(e.replayed for e in engines),
        "slots": setup.caps,
        "rendezvous_protocol": opts.rendezvous_protocol,
        "injection_scale": setup.system.injection_scale,
        "num_queues_per_dim": opts.num_queues_per_dim,
        # replica ranks folded (chakra/sim/fold.py): rank m ran as copy (m // stride) % copies
        "fold": {"copies": sim.fold.copies, "stride": sim.fold.stride} if sim.fold is not None else None,
    }
    finish = max((r.finish_ns for r in ranks.values()), default=0)
    recorder = sim.messenger.traffic
    return SimResult(
        traffic=recorder.summary(finish) if recorder is not None else None,
        ranks=ranks,
        finish_ns=finish,
        node_times=node_times,
        settings=settings,
        events=sim.events,
        wall_s=wall_s,
        warnings=warnings,
    )


def network_warnings(net: NetworkConfig, congestion: str) -> list[str]:
    """Networks the real ASTRA-sim binaries refuse (we simulate them anyway)."""
    out = []
    if net.total_npus == 1:
        out.append("a 1-NPU network: ASTRA-sim rejects it and does not run")
    if congestion == "aware" and net.dims > 1:
        out.append(
            "a multi-dimensional network on the congestion-aware backend: ASTRA-sim's aware binary rejects it; "
            "here every dimension gets its own links"
        )
    if congestion == "aware" and any(t == "Ring" and int(c) == 2 for t, c in zip(net.topology, net.npus_count)):
        out.append(
            "a Ring of 2 NPUs on the congestion-aware backend: ASTRA-sim asserts and aborts (FullyConnected of 2 works)"
        )
    return out

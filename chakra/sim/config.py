"""ASTRA-sim's configuration files, read as ASTRA-sim reads them, into dataclasses callers may edit.

- network: the analytical backend's YAML (`topology`, `npus_count`, `bandwidth` GB/s with GB = 2^30,
  `latency` ns), one entry per dimension (docs/astra-sim.md §2.3);
- system: the JSON of `Sys::initialize_sys` (docs/astra-sim.md §2.2): scheduling policy, chunking, endpoint delay,
  per-dimension collective algorithms, roofline and local-memory bandwidth;
- memory: the remote-memory JSON of astra-memory-analytical (docs/astra-sim.md §2.4), plus the hierarchical pool and
  in-switch collective parameters of the ASTRA-sim 2.0 paper (our keys, documented in
  docs/simulator.md).

Every problem is a `ConfigError` naming the file and the key, so the CLI prints one line.
"""

from __future__ import annotations

import copy
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

from chakra.configfile import load_config, load_mapping
from chakra.errors import ConfigError, excerpt

PathLike = Union[str, os.PathLike]
TOPOLOGIES = ("Ring", "FullyConnected", "Switch")
ALGORITHMS = ("ring", "direct", "halvingDoubling", "doubleBinaryTree", "oneRing", "oneDirect", "oneHalvingDoubling")
GIB = 1 << 30
MAX_SPLITS = 1 << 16  # chunks per collective: each is simulated, so more is only memory


@dataclass
class NetworkConfig:
    """Multi-dimensional analytical network. Dimension 0 is the fastest-varying rank digit."""

    topology: list[str]
    npus_count: list[int]
    bandwidth: list[float]  # GB/s per link per direction, GB = 2^30 bytes
    latency: list[float]  # ns per link
    path: Optional[Path] = None

    @property
    def dims(self) -> int:
        return len(self.topology)

    @property
    def total_npus(self) -> int:
        return math.prod(self.npus_count)

    def bytes_per_ns(self, dim: int) -> float:
        return self.bandwidth[dim] * GIB / 1e9

    def scaled(self, bandwidth: float = 1.0, latency: float = 1.0) -> NetworkConfig:
        """A copy with every bandwidth and latency multiplied (what-if helper)."""
        out = copy.deepcopy(self)
        out.bandwidth = [b * bandwidth for b in out.bandwidth]
        out.latency = [x * latency for x in out.latency]
        return out

    def validate(self) -> None:
        where = str(self.path or "<network>")
        lens = {len(self.topology), len(self.npus_count), len(self.bandwidth), len(self.latency)}
        if len(lens) != 1:
            raise ConfigError(
                f"{where}: topology, npus_count, bandwidth and latency must have one entry per dimension "
                f"(got {len(self.topology)}, {len(self.npus_count)}, {len(self.bandwidth)}, {len(self.latency)})"
            )
        if not self.topology:
            raise ConfigError(f"{where}: no dimensions (empty topology list)")
        for d, topo in enumerate(self.topology):
            if topo not in TOPOLOGIES:
                raise ConfigError(
                    f"{where}: unknown topology {topo!r} in dimension {d} (use Ring, FullyConnected, Switch)"
                )
            if int(self.npus_count[d]) < 1:
                raise ConfigError(f"{where}: npus_count[{d}] = {self.npus_count[d]} must be >= 1")
            bw, lat = float(self.bandwidth[d]), float(self.latency[d])
            if not RATE_MIN <= bw <= _FLOAT_MAX:
                raise ConfigError(
                    f"{where}: bandwidth[{d}] = {self.bandwidth[d]} must be {RATE_MIN:g}..{_FLOAT_MAX:g} GB/s"
                )
            if not 0 <= lat <= _FLOAT_MAX:
                raise ConfigError(f"{where}: latency[{d}] = {self.latency[d]} must be 0..{_FLOAT_MAX:g} ns")


@dataclass
class SystemConfig:
    """The keys ASTRA-sim 2.x parses (others are kept in `extra` and ignored, as ASTRA-sim does)."""

    scheduling_policy: str = "LIFO"
    collective_optimization: str = "localBWAware"
    endpoint_delay: int = 10
    active_chunks_per_dimension: int = 1
    preferred_dataset_splits: int = 1
    all_reduce_implementation: list[str] = field(default_factory=lambda: ["ring"])
    all_gather_implementation: list[str] = field(default_factory=lambda: ["ring"])
    reduce_scatter_implementation: list[str] = field(default_factory=lambda: ["ring"])
    all_to_all_implementation: list[str] = field(default_factory=lambda: ["ring"])
    local_mem_bw: float = 0.0  # GB/s, GB = 1e9 (roofline and reduction delay)
    peak_perf: float = 0.0  # TFLOPS
    roofline_enabled: bool = False
    replay_only: bool = False
    local_mem_latency: float = 0.0  # ns, local memory model (our key; ASTRA-sim has none)
    injection_scale: float = 1.0
    # `<collective>-implementation-custom`: the prefix of a custom algorithm's per-rank files
    # (relative paths are taken from the working directory, as ASTRA-sim does)
    custom_implementation: dict[str, str] = field(default_factory=dict)
    # `per-node-custom-implementation`: node id -> algorithm prefix. Only all-to-alls with per-peer
    # sizes may be named (what `chakra export astra-sim` writes): they run as exactly that direct
    # algorithm from their byte lists, so the algorithm files themselves are not read.
    per_node_custom: dict[int, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    path: Optional[Path] = None

    def implementation(self, coll: str) -> list[str]:
        return getattr(self, f"{coll}_implementation")


@dataclass
class MemoryConfig:
    """Remote memory (astra-memory-analytical) and the ASTRA-sim 2.0 hierarchical pool."""

    memory_type: str = "NO_MEMORY_EXPANSION"
    remote_mem_latency: float = 0.0  # ns
    remote_mem_bw: float = 0.0  # bytes/ns (= GB/s with GB = 1e9)
    num_nodes: int = 1
    num_npus_per_node: int = 1
    # HIERARCHICAL_MEMORY_POOL (paper §III-D): link bandwidths in GB/s (1e9), chunk size in bytes.
    num_out_node_switches: int = 1
    num_remote_memory_groups: int = 1
    mem_side_out_node_fabric_bw: float = 0.0
    gpu_side_out_node_fabric_bw: float = 0.0
    in_node_fabric_bw: float = 0.0
    chunk_size: int = 1 << 20
    in_switch_collective: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    path: Optional[Path] = None


MEMORY_TYPES = (
    "NO_MEMORY_EXPANSION",
    "PER_NPU_MEMORY_EXPANSION",
    "PER_NODE_MEMORY_EXPANSION",
    "MEMORY_POOL",
    "HIERARCHICAL_MEMORY_POOL",
)


def _as_list(where: str, key: str, value: Any) -> list:
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, (int, float, str)):
        return [value]
    raise ConfigError(f"{where}: key {excerpt(key)} must be a list, got {type(value).__name__}")


# ASTRA-sim reads integer keys into C++ `int`s; a float beyond this is no bandwidth, latency or
# rate any network has, and would only overflow the integer nanosecond arithmetic downstream.
_INT_RANGE = (-(1 << 31), (1 << 31) - 1)
_FLOAT_MAX = 1e15


#: The smallest bandwidth or rate (GB/s, TFLOPS) taken: below it a transfer of a few GiB no longer
#: fits the simulator's 64-bit nanosecond clock (1e-300 GB/s would overflow it).
RATE_MIN = 1e-3
#: Keys that are rates: 0 where "unset" is allowed, else RATE_MIN.._FLOAT_MAX.
_RATE_KEYS = frozenset(
    {
        "bandwidth",
        "local-mem-bw",
        "peak-perf",
        "remote-mem-bw",
        "mem-side-out-node-fabric-bw",
        "gpu-side-out-node-fabric-bw",
        "in-node-fabric-bw",
    }
)
#: Keys that are times, counts or sizes: never negative.
_NONNEGATIVE_KEYS = frozenset(
    {
        "latency",
        "local-mem-latency",
        "remote-mem-latency",
        "endpoint-delay",
        "npus_count",
        "num-nodes",
        "num-npus-per-node",
        "num-out-node-switches",
        "num-remote-memory-groups",
        "chunk-size",
        "roofline-enabled",
        "replay-only",
        "in-switch-collective",
    }
)


def _num(where: str, key: str, value: Any, kind: type = float) -> Any:
    try:
        if isinstance(value, bool):
            raise ValueError
        out = kind(value)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"{where}: key {key!r} must be a number, got {_short(value)}") from None
    if kind is float and not (math.isfinite(out) and abs(out) <= _FLOAT_MAX):
        raise ConfigError(
            f"{where}: key {key!r} is {_short(value)}, expected a finite number of at most {_FLOAT_MAX:g}"
        )
    if kind is int and not _INT_RANGE[0] <= out <= _INT_RANGE[1]:
        raise ConfigError(f"{where}: key {key!r} = {_short(value)} is out of range (ASTRA-sim reads a 32-bit int)")
    if key == "bandwidth" and not out >= RATE_MIN:
        raise ConfigError(f"{where}: key 'bandwidth' = {_short(value)} must be at least {RATE_MIN:g} GB/s")
    if key in _RATE_KEYS and out != 0 and not out >= RATE_MIN:
        raise ConfigError(f"{where}: key {key!r} = {_short(value)} must be 0 (unset) or at least {RATE_MIN:g}")
    if (key in _NONNEGATIVE_KEYS or key in _RATE_KEYS) and out < 0:
        raise ConfigError(f"{where}: key {key!r} = {_short(value)} must not be negative")
    return out


def _short(value: Any) -> str:
    if isinstance(value, int) and value.bit_length() > 100:  # str() of a huge int may itself fail
        return f"an integer of {value.bit_length()} bits"
    return excerpt(value)


def load_network(path: PathLike) -> NetworkConfig:
    """Read an analytical network YAML (`topology`, `npus_count`, `bandwidth`, `latency`)."""
    if isinstance(path, NetworkConfig):
        return path
    where = str(path)
    data = load_config(path, "network config")
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a YAML mapping with topology, npus_count, bandwidth, latency")
    missing = [k for k in ("topology", "npus_count", "bandwidth", "latency") if k not in data]
    if missing:
        raise ConfigError(f"{where}: missing key(s) {', '.join(missing)}")
    for key in ("topology", "npus_count", "bandwidth", "latency"):
        if any(isinstance(v, (list, dict)) for v in _as_list(where, key, data[key])):
            raise ConfigError(f"{where}: key {key!r} must be a flat list of values")
    net = NetworkConfig(
        topology=[str(t) for t in _as_list(where, "topology", data["topology"])],
        npus_count=[_num(where, "npus_count", v, int) for v in _as_list(where, "npus_count", data["npus_count"])],
        bandwidth=[_num(where, "bandwidth", v) for v in _as_list(where, "bandwidth", data["bandwidth"])],
        latency=[_num(where, "latency", v) for v in _as_list(where, "latency", data["latency"])],
        path=Path(path),
    )
    net.validate()
    return net


# Keys ASTRA-sim leaves uninitialised when absent (Sys::Sys reads them only `if (j.contains(...))`)
# and reads for every collective. collective-optimization is one too, but read only where a native
# ALL_REDUCE is planned (Sys::generate_collective; a custom implementation returns before it): its
# absence is refused there (chakra.sim.collective_run), so ASTRA-sim's custom-collective example runs.
_SYSTEM_REQUIRED = ("scheduling-policy", "preferred-dataset-splits")
#: SystemConfig.collective_optimization of a system JSON without the key.
UNSET = ""


def _per_node_mapping(where: str, value: Any) -> dict[int, str]:
    """The YAML file a system config names under per-node-custom-implementation (node id ->
    algorithm prefix); a relative path is taken from the working directory, as ASTRA-sim does."""
    from chakra.configfile import load_config

    key = "per-node-custom-implementation"
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: {key} must name a YAML file (node id: algorithm prefix)")
    data = load_config(value, f"{key} file")
    if not isinstance(data, dict):
        raise ConfigError(f"{value}: expected a mapping of node id to algorithm prefix ({key} of {where})")
    out: dict[int, str] = {}
    for k, v in data.items():
        try:
            out[int(k)] = str(v)
        except (TypeError, ValueError):
            raise ConfigError(f"{value}: {excerpt(str(k))} is not a node id ({key} of {where})") from None
    return out


def system_from_dict(data: dict[str, Any], path: Optional[PathLike] = None) -> SystemConfig:
    where = str(path or "<system>")
    missing = [k for k in _SYSTEM_REQUIRED if k not in data]
    if missing:
        raise ConfigError(
            f"{where}: missing key(s) {', '.join(missing)} (ASTRA-sim has no default for them: undefined behaviour)"
        )
    sysc = SystemConfig(path=Path(path) if path else None)
    sysc.scheduling_policy = str(data["scheduling-policy"])
    if sysc.scheduling_policy not in ("LIFO", "FIFO", "EXPLICIT"):
        raise ConfigError(f"{where}: scheduling-policy {excerpt(sysc.scheduling_policy)} is not LIFO, FIFO or EXPLICIT")
    sysc.collective_optimization = str(data.get("collective-optimization", UNSET))
    if sysc.collective_optimization not in ("baseline", "localBWAware", UNSET):
        raise ConfigError(
            f"{where}: collective-optimization {sysc.collective_optimization!r} is not baseline or localBWAware"
        )
    sysc.preferred_dataset_splits = _num(where, "preferred-dataset-splits", data["preferred-dataset-splits"], int)
    if not 1 <= sysc.preferred_dataset_splits <= MAX_SPLITS:
        raise ConfigError(
            f"{where}: preferred-dataset-splits must be 1..{MAX_SPLITS} (ASTRA-sim divides by it and "
            "simulates every chunk)"
        )
    sysc.endpoint_delay = _num(where, "endpoint-delay", data.get("endpoint-delay", 10), int)
    sysc.active_chunks_per_dimension = _num(
        where, "active-chunks-per-dimension", data.get("active-chunks-per-dimension", 1), int
    )
    if not 1 <= sysc.active_chunks_per_dimension <= MAX_SPLITS:
        raise ConfigError(f"{where}: active-chunks-per-dimension must be 1..{MAX_SPLITS}")
    sysc.local_mem_bw = _num(where, "local-mem-bw", data.get("local-mem-bw", 0))
    sysc.peak_perf = _num(where, "peak-perf", data.get("peak-perf", 0))
    sysc.roofline_enabled = bool(_num(where, "roofline-enabled", data.get("roofline-enabled", 0), int))
    sysc.replay_only = bool(_num(where, "replay-only", data.get("replay-only", 0), int))
    sysc.local_mem_latency = _num(where, "local-mem-latency", data.get("local-mem-latency", 0))
    for coll in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all"):
        key = f"{coll}-implementation"
        if key in data:
            algs = [str(a) for a in _as_list(where, key, data[key])]
            for a in algs:
                base = a[:-1].rstrip("0123456789") if a[-1:].isdigit() else a
                if base not in ALGORITHMS:
                    raise ConfigError(f"{where}: {key}: unknown algorithm {excerpt(a)} (use {', '.join(ALGORITHMS)})")
            setattr(sysc, f"{coll.replace('-', '_')}_implementation", algs)
        else:
            setattr(sysc, f"{coll.replace('-', '_')}_implementation", [])
    if "per-node-custom-implementation" in data:
        sysc.per_node_custom = _per_node_mapping(where, data["per-node-custom-implementation"])
    for coll in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all"):
        key = f"{coll}-implementation-custom"
        if key in data:
            got = _as_list(where, key, data[key])
            if len(got) != 1 or not isinstance(got[0], str) or not got[0]:
                raise ConfigError(
                    f"{where}: {key} must list exactly one algorithm prefix (ASTRA-sim: one ET covers all dimensions)"
                )
            sysc.custom_implementation[coll.replace("-", "_")] = got[0]
    if sysc.roofline_enabled and (sysc.peak_perf <= 0 or sysc.local_mem_bw <= 0):
        raise ConfigError(f"{where}: roofline-enabled needs peak-perf (TFLOPS) and local-mem-bw (GB/s) > 0")
    known = set(_SYSTEM_REQUIRED) | {
        "endpoint-delay",
        "active-chunks-per-dimension",
        "local-mem-bw",
        "peak-perf",
        "roofline-enabled",
        "replay-only",
        "local-mem-latency",
    }
    known |= {f"{c}-implementation" for c in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")}
    known |= {f"{c}-implementation-custom" for c in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")}
    sysc.extra = {k: v for k, v in data.items() if k not in known}
    return sysc


def load_system(path: PathLike) -> SystemConfig:
    """Read an ASTRA-sim system JSON (e.g. the regression test's `system_cfg.json`)."""
    if isinstance(path, SystemConfig):
        return path
    return system_from_dict(load_mapping(path, "system config", json_only=True), path)


_MEMORY_KEYS = {
    "remote-mem-latency": ("remote_mem_latency", float),
    "remote-mem-bw": ("remote_mem_bw", float),
    "num-nodes": ("num_nodes", int),
    "num-npus-per-node": ("num_npus_per_node", int),
    "num-out-node-switches": ("num_out_node_switches", int),
    "num-remote-memory-groups": ("num_remote_memory_groups", int),
    "mem-side-out-node-fabric-bw": ("mem_side_out_node_fabric_bw", float),
    "gpu-side-out-node-fabric-bw": ("gpu_side_out_node_fabric_bw", float),
    "in-node-fabric-bw": ("in_node_fabric_bw", float),
    "chunk-size": ("chunk_size", int),
    "in-switch-collective": ("in_switch_collective", int),
}


def memory_from_dict(data: dict[str, Any], path: Optional[PathLike] = None) -> MemoryConfig:
    where = str(path or "<memory>")
    if "memory-type" not in data:
        raise ConfigError(f"{where}: missing key memory-type ({', '.join(MEMORY_TYPES)})")
    mem = MemoryConfig(memory_type=str(data["memory-type"]), path=Path(path) if path else None)
    if mem.memory_type not in MEMORY_TYPES:
        raise ConfigError(f"{where}: unknown memory-type {excerpt(mem.memory_type)} (use {', '.join(MEMORY_TYPES)})")
    for key, (attr, kind) in _MEMORY_KEYS.items():
        if key in data:
            setattr(mem, attr, _num(where, key, data[key], kind))
    mem.in_switch_collective = bool(mem.in_switch_collective)
    need = {
        "PER_NPU_MEMORY_EXPANSION": ("remote-mem-bw",),
        "PER_NODE_MEMORY_EXPANSION": ("remote-mem-bw", "num-nodes", "num-npus-per-node"),
        "MEMORY_POOL": ("remote-mem-bw",),
        "HIERARCHICAL_MEMORY_POOL": (
            "num-nodes",
            "num-npus-per-node",
            "num-out-node-switches",
            "num-remote-memory-groups",
            "mem-side-out-node-fabric-bw",
            "gpu-side-out-node-fabric-bw",
            "in-node-fabric-bw",
        ),
    }.get(mem.memory_type, ())
    missing = [k for k in need if k not in data]
    if missing:
        raise ConfigError(f"{where}: memory-type {mem.memory_type} needs key(s) {', '.join(missing)}")
    for k in need:
        if getattr(mem, _MEMORY_KEYS[k][0]) <= 0:
            raise ConfigError(f"{where}: {k} must be > 0")
    mem.extra = {k: v for k, v in data.items() if k not in _MEMORY_KEYS and k != "memory-type"}
    return mem


def load_memory(path: Optional[PathLike]) -> MemoryConfig:
    """Read a remote-memory JSON; None means NO_MEMORY_EXPANSION (ASTRA-sim's regression default)."""
    if path is None:
        return MemoryConfig()
    if isinstance(path, MemoryConfig):
        return path
    return memory_from_dict(load_mapping(path, "memory config", json_only=True), path)


def bundled_config_dir() -> Path:
    """Folder of the configs shipped with chakra (`chakra/data/configs`)."""
    return Path(__file__).resolve().parent.parent / "data" / "configs"


def default_network(num_ranks: int) -> NetworkConfig:
    """The network used when --network is omitted (by simulate, whatif and export alike): one
    dimension of the regression test's link (50 GB/s, 500 ns) over `num_ranks`, a Ring, or
    FullyConnected for 2 NPUs, since ASTRA-sim's congestion-aware backend aborts on a Ring of 2."""
    npus = max(1, num_ranks)
    topology = "FullyConnected" if npus == 2 else "Ring"
    return NetworkConfig(topology=[topology], npus_count=[npus], bandwidth=[50.0], latency=[500.0])


def default_system() -> SystemConfig:
    """The bundled system config (a copy of ASTRA-sim's regression `system_cfg.json`)."""
    return load_system(bundled_config_dir() / "system.json")

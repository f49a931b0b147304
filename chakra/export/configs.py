"""ASTRA-sim config files for an exported trace, and the command line that runs it.

Constraints of the analytical binaries (seen running them): a one-NPU network is rejected; the
congestion-aware binary takes one dimension only and asserts on a Ring of 2 NPUs (FullyConnected
of 2 works); a memory node with `NO_MEMORY_EXPANSION` exits, so the memory file we write is
`PER_NPU_MEMORY_EXPANSION`; a comm-group path containing "empty" is silently ignored.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

import orjson

from chakra.errors import ConfigError
from chakra.io import atomic_output
from chakra.sim.config import NetworkConfig, bundled_config_dir, default_network, load_memory, load_network, load_system

PathLike = Union[str, os.PathLike]
BACKENDS = {"aware": "AstraSim_Analytical_Congestion_Aware", "unaware": "AstraSim_Analytical_Congestion_Unaware"}


def check_network(net: NetworkConfig, npus: int, backend: str) -> None:
    where = str(net.path or "<network>")
    if net.total_npus != npus:
        raise ConfigError(f"{where}: {net.total_npus} NPUs, but the exported trace has {npus} ranks")
    if backend == "aware":
        if net.dims != 1:
            raise ConfigError(
                f"{where}: {net.dims} dimensions; the congestion-aware binary takes 1: use --backend unaware"
            )
        if net.topology[0] == "Ring" and net.npus_count[0] == 2:
            raise ConfigError(f"{where}: the congestion-aware binary asserts on a Ring of 2 NPUs; use FullyConnected")


def write_network(path: Path, net: NetworkConfig) -> None:
    with atomic_output(path, "w") as fh:
        fh.write(
            "# written by chakra export astra-sim\n"
            f"topology: [ {', '.join(net.topology)} ]\n"
            f"npus_count: [ {', '.join(str(n) for n in net.npus_count)} ]\n"
            f"bandwidth: [ {', '.join(f'{b:.9g}' for b in net.bandwidth)} ]  # GB/s (GB = 2^30 bytes)\n"
            f"latency: [ {', '.join(f'{x:.6g}' for x in net.latency)} ]  # ns\n"
        )


@dataclass
class RunFiles:
    workload: Path
    network: Path
    system: Path
    memory: Path
    comm_groups: Optional[Path]
    backend: str
    extra: dict[str, str] = field(default_factory=dict)

    def command(self, bin_dir: Optional[PathLike] = None) -> list[str]:
        """argv of the ASTRA-sim binary for these files (`bin_dir`: its folder, else $ASTRA_SIM_BIN)."""
        folder = bin_dir if bin_dir is not None else os.environ.get("ASTRA_SIM_BIN")
        exe = str(Path(folder) / BACKENDS[self.backend]) if folder else BACKENDS[self.backend]
        argv = [
            exe,
            f"--workload-configuration={self.workload}",
            f"--system-configuration={self.system}",
            f"--network-configuration={self.network}",
            f"--remote-memory-configuration={self.memory}",
        ]
        if self.comm_groups is not None:
            argv.append(f"--comm-group-configuration={self.comm_groups}")
        return argv

    def command_line(self, bin_dir: Optional[PathLike] = None) -> str:
        return " ".join(shlex.quote(a) for a in self.command(bin_dir))

    def simulate_command_line(self) -> str:
        """The `chakra simulate` run on the same files (its figures should match ASTRA-sim's)."""
        argv = ["chakra", "simulate", str(self.workload), "--network", str(self.network), "--system", str(self.system)]
        argv += ["--memory", str(self.memory), "--congestion", self.backend]
        return " ".join(shlex.quote(a) for a in argv)


def write_configs(
    out: Path,
    npus: int,
    *,
    backend: str = "aware",
    network: Optional[PathLike] = None,
    system: Optional[PathLike] = None,
    memory: Optional[PathLike] = None,
    comm_groups: Optional[Path] = None,
    split: Optional[tuple[int, int]] = None,
    system_extra: Optional[dict[str, Any]] = None,
) -> RunFiles:
    """OUT.network.yml / OUT.system.json / OUT.memory.json for `npus` ranks (user files are checked
    and copied, so the printed command needs nothing but OUT.*). `split` (a, b): instead of the
    default 1-D network, a Ring a x Ring b one with every implementation list repeated to two
    entries (ASTRA-sim then gives each process subgroup its own implementation object).
    `system_extra`: keys added to the system JSON (the per-node custom algorithms)."""
    if backend not in BACKENDS:
        raise ConfigError(f"--backend must be aware or unaware, not {backend!r}")
    if npus < 2:
        raise ConfigError("ASTRA-sim needs at least 2 NPUs")
    if comm_groups is not None and "empty" in str(comm_groups):
        raise ConfigError(
            f"{comm_groups}: ASTRA-sim ignores a comm-group file whose path contains 'empty'; choose another -o"
        )
    net = load_network(network) if network is not None else default_network(npus)
    if split is not None and network is None:
        two = dict(bandwidth=[50.0] * 2, latency=[500.0] * 2)
        net = NetworkConfig(topology=["Ring", "Ring"], npus_count=list(split), **two)
    check_network(net, npus, backend)
    net_path = Path(f"{out}.network.yml")
    write_network(net_path, net)

    sys_src = Path(system) if system is not None else bundled_config_dir() / "system.json"
    sys_cfg = load_system(sys_src)  # checked as chakra simulate reads it
    sys_path = Path(f"{out}.system.json")
    data = sys_src.read_bytes()
    if (system is None or split is not None) and net.dims > 1:
        # one implementation per dimension, as ASTRA-sim's own multi-dimensional examples: with a
        # one-entry list it builds the logical topology of the first dimension only, and every
        # process subgroup borrows (and frees at exit) the same implementation object
        doc = orjson.loads(data)
        for key in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all"):
            algs = sys_cfg.implementation(key.replace("-", "_"))
            if len(algs) == 1:
                doc[f"{key}-implementation"] = algs * net.dims
        data = orjson.dumps(doc, option=orjson.OPT_INDENT_2)
    if system_extra:
        doc = orjson.loads(data)
        doc.update(system_extra)
        data = orjson.dumps(doc, option=orjson.OPT_INDENT_2)
    with atomic_output(sys_path) as fh:
        fh.write(data)

    mem_path = Path(f"{out}.memory.json")
    if memory is not None:
        load_memory(memory)
        data = Path(memory).read_bytes()
    else:
        # ASTRA-sim sends every memory node to its remote-memory model and exits on
        # NO_MEMORY_EXPANSION; at the system's local-memory bandwidth with no latency, a node costs
        # what chakra simulate's local-memory model charges (size / local-mem-bw).
        bw = sys_cfg.local_mem_bw if sys_cfg.local_mem_bw > 0 else 50.0
        data = orjson.dumps(
            {"memory-type": "PER_NPU_MEMORY_EXPANSION", "remote-mem-latency": 0, "remote-mem-bw": bw},
            option=orjson.OPT_INDENT_2,
        )
    with atomic_output(mem_path) as fh:
        fh.write(data)
    return RunFiles(Path(out), net_path, sys_path, mem_path, comm_groups, backend)

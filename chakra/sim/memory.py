"""Memory models for MEM_LOAD / MEM_STORE nodes (ASTRA-sim 2.0, paper §III-D; docs/astra-sim.md §2.4).

- local (node attr `tensor_loc` = "local" or 0): `local-mem-latency + tensor_size / local-mem-bw`
  (system config; GB/s with GB = 1e9, i.e. bytes/ns). ASTRA-sim has no local model: it sends every
  MEM node to the remote one, and so do we when a remote memory is configured (unless
  `compat=False`); with NO_MEMORY_EXPANSION, where ASTRA-sim exits, local nodes use this model;
- remote, by `memory-type` of the memory config (ASTRA-sim sends every MEM node here):
  - NO_MEMORY_EXPANSION: an error naming the node (ASTRA-sim exits);
  - PER_NPU_MEMORY_EXPANSION: `remote-mem-latency + floor(size / remote-mem-bw)`, never queues;
  - PER_NODE_MEMORY_EXPANSION: the same, requests served FIFO per node of `num-npus-per-node` NPUs;
  - MEMORY_POOL: the same, FIFO over one pool shared by every NPU;
  - HIERARCHICAL_MEMORY_POOL: the paper's pooled memory behind out-node switches: every GPU moves
    `size` bytes at once, pipelined in `chunk-size` units through three link stages (remote group
    -> out-node switch -> in-node switch -> GPU); time = latency + fill (sum of the three stage
    times) + (stages - 1) x the slowest stage. With `in-switch-collective` the switches gather on
    load and shard on store, so the two GPU-side stages carry whole gathered chunks (the paper's
    second set of equations).
"""

from __future__ import annotations

import math
from typing import Optional

from chakra.errors import ConfigError
from chakra.sim.config import MemoryConfig, SystemConfig


class MemoryModel:
    def __init__(self, mem: MemoryConfig, system: SystemConfig, num_ranks: int, *, compat: bool = True) -> None:
        self.mem = mem
        self.sys = system
        self.num_ranks = num_ranks
        self.compat = compat
        self.warnings: list[str] = []
        self._free: dict[int, int] = {}  # FIFO server -> time it becomes free
        self._last: dict[int, int] = {}  # FIFO server -> rank of the request it serves last
        # (rank, start) of the request the last `access` waits behind, None when it starts at once
        self.waits_behind: Optional[tuple[int, int]] = None

    @property
    def first_come(self) -> bool:
        """Requests of several NPUs queue for one server (MEMORY_POOL, PER_NODE_MEMORY_EXPANSION)."""
        return self.mem.memory_type in ("MEMORY_POOL", "PER_NODE_MEMORY_EXPANSION")

    def access(self, rank: int, size: int, local: bool, now: int, where: str) -> int:
        """End time of a load/store of `size` bytes issued at `now` by `rank`."""
        self.waits_behind = None
        if local and self.compat and self.mem.memory_type != "NO_MEMORY_EXPANSION":
            local = False  # ASTRA-sim: every MEM node goes to the remote memory model
        if local and self.mem.memory_type == "NO_MEMORY_EXPANSION" and not self.warnings:
            self.warnings.append(
                "MEM_LOAD/MEM_STORE node(s) with NO_MEMORY_EXPANSION: ASTRA-sim exits; here local ones use the "
                "local memory model (local-mem-latency + size / local-mem-bw)"
            )
        if local:
            bw = self.sys.local_mem_bw
            if bw <= 0:
                raise ConfigError(f"{where}: a local memory access needs local-mem-bw > 0 in the system config")
            return now + int(self.sys.local_mem_latency + size / bw)
        m = self.mem
        kind = m.memory_type
        if kind == "NO_MEMORY_EXPANSION":
            raise ConfigError(
                f"{where}: MEM_LOAD/MEM_STORE node needs a remote memory model; memory-type is NO_MEMORY_EXPANSION "
                "(give --memory with PER_NPU_MEMORY_EXPANSION, MEMORY_POOL, ...)"
            )
        if kind == "HIERARCHICAL_MEMORY_POOL":
            return now + self.hierarchical_time(size)
        service = int(m.remote_mem_latency + size // m.remote_mem_bw)
        if kind == "PER_NPU_MEMORY_EXPANSION":
            return now + service
        server = rank // max(1, m.num_npus_per_node) if kind == "PER_NODE_MEMORY_EXPANSION" else 0
        start = max(now, self._free.get(server, 0))
        if start > now:
            self.waits_behind = (self._last[server], start)
        self._free[server] = start + service
        self._last[server] = rank
        return start + service

    def hierarchical_time(self, size: int) -> int:
        m = self.mem
        gpus = m.num_nodes * m.num_npus_per_node
        chunk = max(1, m.chunk_size)
        stages = max(1, math.ceil(size * gpus / m.num_remote_memory_groups / m.num_out_node_switches / chunk))
        rem2out = chunk / m.mem_side_out_node_fabric_bw
        if m.in_switch_collective:
            out2in = m.num_remote_memory_groups * chunk / m.gpu_side_out_node_fabric_bw
            in2gpu = m.num_remote_memory_groups * m.num_out_node_switches * chunk / m.in_node_fabric_bw
        else:
            out2in = m.num_remote_memory_groups * chunk / (m.num_nodes * m.gpu_side_out_node_fabric_bw)
            in2gpu = m.num_remote_memory_groups * m.num_out_node_switches * chunk / (gpus * m.in_node_fabric_bw)
        stage_times = (rem2out, out2in, in2gpu)
        return int(m.remote_mem_latency + sum(stage_times) + (stages - 1) * max(stage_times))

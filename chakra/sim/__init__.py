"""The reference simulator: ASTRA-sim-compatible compute, analytical network and memory models.

Public API (docs/simulator.md): `simulate(..., options=SimOptions(...)) -> SimResult`, the config
loaders `load_network`, `load_system`, `load_memory` and their dataclasses (comm groups:
`chakra.commgroups`).
"""

from chakra.sim.api import RankResult, SimOptions, SimResult, simulate
from chakra.sim.config import (
    MemoryConfig,
    NetworkConfig,
    SystemConfig,
    load_memory,
    load_network,
    load_system,
)
from chakra.sim.core import SimDeadlock

__all__ = [
    "MemoryConfig",
    "NetworkConfig",
    "RankResult",
    "SimDeadlock",
    "SimOptions",
    "SimResult",
    "SystemConfig",
    "load_memory",
    "load_network",
    "load_system",
    "simulate",
]

"""The reference simulator: ASTRA-sim-compatible compute, analytical network and memory models.

Public API (docs/simulator.md): `simulate(..., options=SimOptions(...)) -> SimResult`, the config
loaders `load_network`, `load_system`, `load_memory` and their dataclasses (comm groups:
`chakra.commgroups`).

The names are imported on first use (PEP 562): a submodule such as `chakra.sim.steps` or
`chakra.sim.pathreplay` (the converter's profiler-cost fit) then does not pay for the whole
simulator's import.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

#: public name -> the submodule that defines it
_HOME = {
    "RankResult": "api",
    "SimOptions": "api",
    "SimResult": "api",
    "simulate": "api",
    "MemoryConfig": "config",
    "NetworkConfig": "config",
    "SystemConfig": "config",
    "load_memory": "config",
    "load_network": "config",
    "load_system": "config",
    "SimDeadlock": "core",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOME])


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

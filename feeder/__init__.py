"""Feeders: hand a simulator one rank's nodes as their dependencies are met (see `et_feeder`).

The names below load with their module on first use: the simulator indexes traces with
`chakra.feeder.table` alone, and a small `chakra simulate`'s start-up counts (tests/core/test_startup.py).
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "ETFeeder": "et_feeder",
    "FeederError": "et_feeder",
    "NodeTable": "table",
    "table_from_et": "table",
    "table_from_nodes": "table",
}

__all__ = ["ETFeeder", "FeederError", "NodeTable", "table_from_et", "table_from_nodes"]


def __getattr__(name: str) -> Any:
    if name in ("et_feeder", "table"):
        return importlib.import_module(f"{__name__}.{name}")
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

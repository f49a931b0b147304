"""Sweep grid files: load, check against the bundled JSON schema, expand into points.

A grid holds a base configuration (network, system, memory, comm groups, simulator options) and
axes: `product` (every combination) and `zip` (groups of axes that vary together, each group
crossed with the product). Axis names are `network.<key>`, `system.<ASTRA-sim key>`,
`memory.<key>`, `simulate.<option>` and `whatif`. Network values may be scalars (every
dimension) or per-dimension lists. `system.collective-implementation` sets the four
`*-implementation` keys at once. See docs/scale-out.md.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

import yaml

from chakra.errors import ConfigError, InputError
from chakra.files import read_bounded

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "data" / "sweep_grid.schema.json"
NETWORK_KEYS = ("topology", "npus_count", "bandwidth", "latency")
COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")
SIM_DEFAULTS = {"congestion": "aware", "comm_mode": "model", "compat": True, "policy": "id"}


@dataclass
class Point:
    """One simulation: `params` are the swept values (axis -> value), `config` everything resolved."""

    id: str
    params: dict[str, Any]
    config: dict[str, Any] = field(default_factory=dict)


@lru_cache(maxsize=1)
def _validator() -> Any:
    import jsonschema

    schema = json.loads(SCHEMA_PATH.read_text())
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema)


def _where(error: Any) -> str:
    path = list(error.absolute_path)
    return ".".join(str(p) for p in path) if path else "top level"


def check_grid(data: Any, where: str) -> None:
    """Raise one ConfigError naming the file and the key of the first schema violation."""
    errors = sorted(_validator().iter_errors(data), key=lambda e: (len(list(e.absolute_path)), str(e.absolute_path)))
    if errors:
        e = errors[0]
        best = e
        if e.context:  # oneOf/anyOf: the sub-error that went deepest says most
            best = max(e.context, key=lambda c: len(list(c.absolute_path)))
        raise ConfigError(f"{where}: key {_where(best)}: {best.message}")


def _load_mapping(value: Any, base_dir: Path, what: str) -> dict[str, Any]:
    """A config given inline (mapping) or as a path (YAML/JSON, relative to the grid file)."""
    if isinstance(value, dict):
        return copy.deepcopy(value)
    path = Path(value)
    if not path.is_absolute():
        path = base_dir / path
    try:
        data = yaml.safe_load(path.read_text())  # JSON is YAML
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such {what} config file") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read {what} config ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of {what} keys")
    return data


@dataclass
class Grid:
    path: Path
    base: dict[str, Any]
    product: dict[str, list[Any]]
    zips: list[dict[str, list[Any]]]

    @property
    def axes(self) -> list[str]:
        return [*self.product, *(k for z in self.zips for k in z)]


def load_grid(path: Path) -> Grid:
    path = Path(path)
    try:
        data = yaml.safe_load(read_bounded(path, "sweep grid (YAML)").decode("utf-8"))
    except InputError as exc:
        raise ConfigError(str(exc).replace(": no such file", ": no such grid file")) from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: not a readable YAML grid ({str(exc).splitlines()[0]})") from None
    if data is None:
        data = {}
    check_grid(data, str(path))
    zips = list(data.get("zip") or [])
    for i, z in enumerate(zips):
        lengths = {k: len(v) for k, v in z.items()}
        if len(set(lengths.values())) > 1:
            raise ConfigError(f"{path}: key zip.{i}: its axes must have one length each, got {lengths}")
    seen: set[str] = set()
    for k in [*(data.get("product") or {}), *(k for z in zips for k in z)]:
        if k in seen:
            raise ConfigError(f"{path}: key {k}: axis given twice (in product and zip, or in two zip groups)")
        seen.add(k)
    base_dir = path.parent
    base: dict[str, Any] = {
        "network": _load_mapping(data["network"], base_dir, "network") if "network" in data else None,
        "system": _load_mapping(data["system"], base_dir, "system") if "system" in data else None,
        "memory": _load_mapping(data["memory"], base_dir, "memory") if "memory" in data else None,
        "simulate": dict(SIM_DEFAULTS, **(data.get("simulate") or {})),
        "comm_groups": str((base_dir / data["comm_groups"]).absolute()) if "comm_groups" in data else None,
    }
    return Grid(path, base, dict(data.get("product") or {}), zips)


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _network(base: Optional[dict[str, Any]], ranks: int, over: dict[str, Any]) -> dict[str, Any]:
    """Resolved per-dimension lists; scalars and one-entry lists stand for every dimension."""
    net = dict(base or {"topology": ["Ring"], "npus_count": [ranks], "bandwidth": [50.0], "latency": [500.0]})
    net.setdefault("bandwidth", [50.0])
    net.setdefault("latency", [500.0])
    net.update(over)
    lists = {k: _as_list(net[k]) for k in NETWORK_KEYS}
    dims = max(len(v) for v in lists.values())
    return {k: (v * dims if len(v) == 1 else v) for k, v in lists.items()}


def _system(base: Optional[dict[str, Any]], dims: int, over: dict[str, Any]) -> dict[str, Any]:
    if base is None:
        from chakra.sim.config import bundled_config_dir

        base = json.loads((bundled_config_dir() / "system.json").read_text())
    sysd = dict(base)
    for key, value in over.items():
        keys = [f"{c}-implementation" for c in COLLECTIVES] if key == "collective-implementation" else [key]
        for k in keys:
            sysd[k] = value
    for c in COLLECTIVES:  # one algorithm named for a multi-dimensional network: every dimension
        k = f"{c}-implementation"
        if k in sysd:
            algs = _as_list(sysd[k])
            sysd[k] = algs * dims if len(algs) == 1 else algs
    return sysd


def _whatif(value: Any) -> Optional[dict[str, Any]]:
    if value is None or value == "none":
        return None
    return {"recipe": value} if isinstance(value, str) else dict(value)


def point_id(config: dict[str, Any]) -> str:
    """A stable hash of everything that decides a point's result (resume key)."""
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def expand(grid: Grid, workload: str, ranks: int) -> list[Point]:
    """Every point of the grid, in a stable order (product axes vary fastest last, as nested loops)."""
    axes: list[list[dict[str, Any]]] = [[{k: v} for v in values] for k, values in grid.product.items()]
    for z in grid.zips:
        n = len(next(iter(z.values())))
        axes.append([{k: z[k][i] for k in z} for i in range(n)])
    points = []
    for combo in itertools.product(*axes) if axes else [()]:
        params: dict[str, Any] = {}
        for part in combo:
            params.update(part)
        over: dict[str, dict[str, Any]] = {"network": {}, "system": {}, "memory": {}, "simulate": {}}
        for key, value in params.items():
            if key != "whatif":
                section, _, name = key.partition(".")
                over[section][name] = value
        net = _network(grid.base["network"], ranks, over["network"])
        memory = grid.base["memory"]
        if over["memory"]:
            memory = dict(memory or {"memory-type": "NO_MEMORY_EXPANSION"}, **over["memory"])
        config = {
            "workload": workload,
            "network": net,
            "system": _system(grid.base["system"], len(net["topology"]), over["system"]),
            "memory": memory,
            "simulate": dict(grid.base["simulate"], **over["simulate"]),
            "whatif": _whatif(params.get("whatif")),
            "comm_groups": grid.base["comm_groups"],
        }
        points.append(Point(point_id(config), params, config))
    return points

"""Shared by the ASTRA-sim truth-table tests: load the recorded table, run one case through our simulator."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Optional

from chakra.sim import SimOptions, load_system, simulate
from tools.truthcases import build_traces, write_configs

TABLE_DIR = Path(__file__).resolve().parent.parent / "data" / "astrasim_truth"
REL_TOL = 1e-3  # per rank, 0.1%

#: The binaries' command-line options and the `simulate()` keyword that would carry each one.
#: `injection-scale` maps onto `SystemConfig.injection_scale` (it multiplies endpoint-delay).
OPTION_KWARGS = {
    "comm-scale": "comm_scale",
    "num-queues-per-dim": "num_queues_per_dim",
    "rendezvous-protocol": "rendezvous_protocol",
}


def load_table() -> dict[str, list[dict[str, Any]]]:
    """{class: [case spec with its "result"]} from every JSON file of the table."""
    out = {}
    for path in sorted(TABLE_DIR.glob("*.json")):
        doc = json.loads(path.read_text())
        out[doc["class"]] = doc["cases"]
    return out


class Unsupported(Exception):
    """The case uses an ASTRA-sim option that `simulate()` has no parameter for."""


def run_ours(spec: dict[str, Any], tmp: Path) -> list[Optional[int]]:
    """Our simulator's per-rank finish (ns) for one case, configs read from the files ASTRA-sim read."""
    paths = write_configs(spec, tmp)
    system = load_system(paths["system"])
    kwargs: dict[str, Any] = {}
    accepted = {f.name for f in dataclasses.fields(SimOptions)}
    for key, value in (spec.get("options") or {}).items():
        if key == "injection-scale":
            system.injection_scale = float(value)
        elif OPTION_KWARGS.get(key) in accepted:
            kwargs[OPTION_KWARGS[key]] = value
        else:
            raise Unsupported(f"--{key}")
    res = simulate(
        build_traces(spec),
        paths["network"],
        system,
        paths["memory"],
        comm_groups=paths.get("groups"),
        congestion=spec["backend"],
        **kwargs,
    )
    return [res.ranks[r].finish_ns if r in res.ranks else None for r in range(len(spec["result"]["finish"]))]


def within(ours: Optional[int], truth: int) -> bool:
    return ours is not None and abs(ours - truth) <= REL_TOL * max(truth, 1)

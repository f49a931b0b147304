"""Helpers for simulator tests: ASTRA-sim configs written to their documented formats, tiny traces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chakra.schema import CollectiveType, NodeType
from chakra.trace import Trace, make_node
from tools.truthcases import BASE_SYSTEM

RT = "astrasim/configs_rt_template"

# ASTRA-sim's regression system config (docs/astra-sim.md §2.2); Ring_4chunks.json is the same with
# local-mem-bw 1600 (examples/system/native_collectives/Ring_4chunks.json).
RT_SYSTEM = dict(BASE_SYSTEM)


def write_network(path: Path, topology, npus, bw, lat) -> Path:
    """An analytical network YAML in ASTRA-sim's format (docs/astra-sim.md §2.3)."""
    path.write_text(
        f"topology: [ {', '.join(topology)} ]\nnpus_count: [ {', '.join(map(str, npus))} ]\n"
        f"bandwidth: [ {', '.join(map(str, bw))} ]  # GB/s\nlatency: [ {', '.join(map(str, lat))} ]  # ns\n"
    )
    return path


def write_system(path: Path, **overrides) -> Path:
    data = dict(RT_SYSTEM)
    for key, value in overrides.items():
        data[key.replace("_", "-")] = value
    path.write_text(json.dumps(data, indent=2))
    return path


def collective_traces(n: int, ctype: int, size: int = 1 << 20, **attrs) -> list[Trace]:
    """ASTRA-sim's microbenchmark shape: one COMM_COLL_NODE per rank, node id = rank."""
    out = []
    for r in range(n):
        t = Trace(rank=r)
        a = {"is_cpu_op": False, "comm_type": int(ctype), "comm_size": size}
        a.update(attrs)
        t.nodes = [make_node(r, f"{CollectiveType(ctype).name.lower()}_1MB", NodeType.COMM_COLL_NODE, attrs=a)]
        out.append(t)
    return out


@pytest.fixture
def rt_dir(samples_dir) -> Path:
    return samples_dir / RT


def generate_transformer(prefix: Path, *args: str) -> Path:
    """`chakra generate transformer ARGS -o PREFIX` (small model dimensions unless ARGS override
    them): PREFIX.<rank>.et and PREFIX.comm_groups.json, as a user makes them."""
    from typer.testing import CliRunner

    from chakra.cli import app

    small = ["--seq", "64", "--hidden", "64", "--heads", "2", "--vocab", "100"]
    res = CliRunner().invoke(app, ["generate", "transformer", *small, *args, "-o", str(prefix), "-q"])
    assert res.exit_code == 0, res.output
    return prefix

"""DSL memory nodes carry `tensor_loc`, so the simulator's local memory model is reachable from the DSL."""

from __future__ import annotations

import pytest

from chakra.dsl import Workload
from chakra.errors import ChakraError
from chakra.schema.attrs import get_attr
from chakra.sim import simulate
from chakra.sim.config import default_system


def one_load(location: str) -> Workload:
    w = Workload(ranks=2)
    w.load(0, "weights", 1 << 20, location=location, duration_us=0)
    w.store(1, "grads", 1 << 20, location=location, duration_us=0)
    return w


def test_local_memory_nodes_simulate_with_the_default_configs(tmp_path):
    w = one_load("local")
    w.save(tmp_path / "m")
    traces = w.traces()
    mem = [n for t in traces for n in t.nodes if n.name in ("weights", "grads")]
    assert [get_attr(n, "tensor_loc") for n in mem] == ["local", "local"]
    res = simulate(str(tmp_path / "m"))
    system = default_system()
    # local model: local-mem-latency + size / local-mem-bw (GB/s = bytes/ns)
    expected = int(system.local_mem_latency + (1 << 20) / system.local_mem_bw)
    assert res.ranks[0].mem_ns == pytest.approx(expected, abs=2)


def test_remote_memory_needs_a_remote_memory_model(tmp_path):
    one_load("remote").save(tmp_path / "r")
    with pytest.raises(ChakraError, match="remote memory"):
        simulate(str(tmp_path / "r"))


def test_unknown_location_is_refused():
    with pytest.raises(ChakraError):
        Workload(ranks=1).load(0, "x", 10, location="hbm")

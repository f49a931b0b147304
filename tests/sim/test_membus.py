"""The LogGP shared bus (`model-shared-bus: 1`) on single requests, against the LogGP arithmetic
by hand; whole collectives are checked against ASTRA-sim in test_astrasim_parity.py[system_opts]."""

from chakra.sim.config import SystemConfig
from chakra.sim.core import Clock
from chakra.sim.membus import INNER_G, SharedBus, shared_bus

LAT, OVH, GAP, G = 100, 20, 10, 0.02


def _cross(size: int, to_memory: bool, processed: bool, send_back: bool) -> list[int]:
    clock = Clock()
    bus = SharedBus(clock, LAT, OVH, GAP, G, 1)
    done: list[int] = []
    (bus.to_memory if to_memory else bus.to_npu)(size, processed, send_back, lambda: done.append(clock.now))
    clock.run()
    return done


def _hop(size: int, g: float) -> int:
    return int(OVH + (size - 1) * g + LAT + OVH)


def test_memory_to_npu_then_retired_over_the_inner_bus():
    assert _cross(1024, False, False, False) == [_hop(1024, G) + _hop(1024, INNER_G)]  # 160 + 143


def test_npu_to_memory_comes_up_the_inner_bus_first():
    assert _cross(1024, True, False, False) == [_hop(1024, INNER_G) + _hop(1024, G)]


def test_reduced_and_sent_back_at_the_npu_end():
    # MA -> NPU, inner round trip to fetch the operand, reduce, inner round trip, NPU -> MA
    reduce = (4096 // 100) * 1 + 50
    expect = _hop(4096, G) + 2 * _hop(4096, INNER_G) + reduce + 2 * _hop(4096, INNER_G) + _hop(4096, G)
    assert _cross(4096, False, True, True) == [expect]


def test_config_switch():
    assert shared_bus(SystemConfig()) is None
    cfg = SystemConfig(extra={"model-shared-bus": 1, "L": 100, "o": 20, "g": 10, "G": 0.02})
    assert shared_bus(cfg) == (100, 20, 10, 0.02, 1)

"""simulate() takes replacement network, collective and memory models (chakra.sim.models)."""

from __future__ import annotations

from chakra.schema import CollectiveType, NodeType
from chakra.sim import simulate
from chakra.sim.collective_run import CollectiveRunner
from chakra.sim.memory import MemoryModel as BuiltinMemory
from chakra.sim.models import CollectiveModel, MemoryModel, NetworkModel
from chakra.sim.network import Network
from chakra.trace import Trace, make_node
from tests.sim.conftest import collective_traces

GPU = {"is_cpu_op": False}


class FixedCollectives:
    """Every member finishes 1,000 ns after the last member issued."""

    def __init__(self) -> None:
        self.warnings: list[str] = []
        self.calls: list[tuple] = []

    def finish(self, ctype, size, members, involved, starts):
        self.calls.append((ctype, size, members))
        return [max(starts) + 1000] * len(members)


class FlatNetwork:
    aware = False

    def __init__(self) -> None:
        self.sent: list[tuple] = []

    def p2p_time(self, src, dst, size):
        self.sent.append((src, dst, size))
        return 7

    def route(self, src, dst):
        return []

    def link_times(self, dim, size):
        return 0, 0


class ConstantMemory:
    def access(self, rank, size, local, now, where):
        return now + 42


def test_builtin_models_satisfy_the_protocols(rt_dir):
    from chakra.sim.config import default_system, load_memory, load_network

    net = Network(load_network(rt_dir / "network_cfg.yml"), aware=True)
    assert isinstance(net, NetworkModel)
    assert isinstance(CollectiveRunner(net, default_system()), CollectiveModel)
    assert isinstance(BuiltinMemory(load_memory(None), default_system(), 8), MemoryModel)


def test_stub_collective_model_is_used(rt_dir):
    stub = FixedCollectives()
    res = simulate(collective_traces(8, CollectiveType.ALL_REDUCE), collective_model=stub)
    assert {r.finish_ns for r in res.ranks.values()} == {1000}
    assert stub.calls == [(int(CollectiveType.ALL_REDUCE), 1 << 20, tuple(range(8)))]


def test_stub_network_and_memory_models_are_used():
    send = make_node(1, "s", NodeType.COMM_SEND_NODE, attrs={**GPU, "comm_dst": 1, "comm_size": 64, "comm_tag": 3})
    recv = make_node(1, "r", NodeType.COMM_RECV_NODE, attrs={**GPU, "comm_src": 0, "comm_size": 64, "comm_tag": 3})
    load = make_node(2, "ld", NodeType.MEM_LOAD_NODE, data_deps=[1], attrs={**GPU, "tensor_size": 10})
    traces = [Trace(rank=0, nodes=[send]), Trace(rank=1, nodes=[recv, load])]
    net = FlatNetwork()
    res = simulate(traces, network_model=net, memory_model=ConstantMemory(), congestion="unaware")
    assert net.sent == [(0, 1, 64)]
    assert (res.ranks[0].finish_ns, res.ranks[1].finish_ns) == (7, 7 + 42)

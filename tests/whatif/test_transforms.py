"""Transformation primitives and scheduling policies on hand-built traces with exact times."""

from __future__ import annotations

import pytest

from chakra.errors import ChakraError, InputError
from chakra.schema.kinds import resource_of
from chakra.sim import simulate
from chakra.sim.policies import PriorityPolicy, custom, get_policy, priority_policy
from chakra.trace import Trace
from chakra.whatif.transforms import Graph, by_annotation, by_name, by_resource, by_type

from .helpers import T, allreduce, cpu, cpu_gpu_trace


def times(trace, **kw):
    res = simulate([trace], record_nodes=True, **kw)
    return res.finish_ns, res.node_times[0]


def test_baseline_schedule_is_what_the_helpers_say():
    finish, t = times(cpu_gpu_trace())
    assert finish == 45_000
    assert t[2] == (10_000, 40_000)


def test_select_by_resource_name_and_type():
    g = Graph(cpu_gpu_trace())
    assert [n.name for n in g.select(by_resource("gpu"))] == ["k"]
    assert [n.name for n in g.select(by_name("^[ab]$") & ~by_resource("gpu"))] == ["a", "b"]
    assert [n.name for n in g.select(by_type(T.COMP_NODE) & by_name("c|k"))] == ["k", "c"]
    assert resource_of(allreduce(9, 4)) == "comm"
    with pytest.raises(InputError):
        by_resource("tpu")


def test_scale_gpu_kernels_shortens_the_step():
    g = Graph(cpu_gpu_trace())
    assert g.scale(g.select(by_resource("gpu")), 0.5) == 1
    finish, t = times(g.to_trace())
    assert t[2] == (10_000, 25_000)
    assert finish == 35_000  # c waits for b (30) now, not k


def test_set_duration_and_scaled_never_rounds_positive_to_zero():
    g = Graph(cpu_gpu_trace())
    g.set_duration([g[1]], 2)
    g.scale([g[0]], 0.01)
    assert g[1].duration_micros == 2 and g[0].duration_micros == 1


def test_insert_between_repairs_the_edge():
    g = Graph(cpu_gpu_trace())
    x = g.insert("x", T.COMP_NODE, between=(0, 1), duration_us=4, attrs={"is_cpu_op": True})
    assert list(g[1].ctrl_deps) == [x.id] and list(x.ctrl_deps) == [0]
    finish, t = times(g.to_trace())
    assert t[1] == (14_000, 34_000)
    assert finish == 45_000


def test_insert_gpu_task_brings_its_launch_and_splices_the_cpu_chain():
    g = Graph(cpu_gpu_trace())
    launch, kernel = g.insert_gpu_task("new", 7, cpu_after=1, launch_us=3)
    assert resource_of(launch) == "cpu" and resource_of(kernel) == "gpu"
    assert list(kernel.ctrl_deps) == [launch.id]
    assert launch.id in g[3].ctrl_deps and 1 not in g[3].ctrl_deps  # c now follows the launch
    finish, t = times(g.to_trace())
    assert t[launch.id] == (30_000, 33_000)
    assert t[kernel.id] == (40_000, 47_000)  # one kernel at a time: waits for k
    assert finish == 47_000


def test_remove_bridges_dependencies_keeping_their_kind():
    tr = cpu_gpu_trace()
    tr.nodes[3].data_deps.append(1)
    del tr.nodes[3].ctrl_deps[:]
    tr.nodes[3].ctrl_deps.append(2)
    g = Graph(tr)
    g.remove([1])
    assert list(g[3].data_deps) == [0] and list(g[3].ctrl_deps) == [2]
    finish, _ = times(g.to_trace())
    assert finish == 45_000
    g.remove([2])
    finish, t = times(g.to_trace())
    assert finish == 15_000 and t[3] == (10_000, 15_000)


def test_fuse_replaces_a_set_by_one_node_with_outside_edges():
    g = Graph(cpu_gpu_trace())
    f = g.fuse([1, 3], "b+c")
    assert f.id == 1 and f.duration_micros == 25 and len(g) == 3
    assert sorted(g.parents(1)) == [0, 2]
    finish, t = times(g.to_trace())
    assert t[1] == (40_000, 65_000) and finish == 65_000
    g2 = Graph(cpu_gpu_trace())
    g2.fuse([0, 1], "a+b", duration_us=12)
    finish, _ = times(g2.to_trace())
    assert list(g2[2].ctrl_deps) == [0]  # k now waits for the fused a+b
    assert finish == 12_000 + 30_000 + 5_000


def test_an_edit_that_makes_a_cycle_is_reported():
    g = Graph(cpu_gpu_trace())
    g.insert("loop", after=[3], before=[0])
    with pytest.raises(InputError, match="cycle"):
        g.to_trace()


def test_by_annotation_uses_recorded_windows_and_inclusive_durations():
    nodes = [
        cpu(0, "fwd", 10),
        cpu(1, "Optimizer.step#Adam.step", 2, [0], inclusive_dur=30),
        cpu(2, "aten::add_", 10, [1]),
        cpu(3, "aten::mul_", 10, [2]),
        cpu(4, "next", 5, [3]),
    ]
    for n, s in zip(nodes, (0, 10, 12, 22, 40)):
        n.start_time_micros = s
    g = Graph(Trace(nodes=nodes, rank=0))
    assert [n.id for n in g.select(by_annotation(g, r"Optimizer\.step"))] == [1, 2, 3]


def _policy_trace():
    # r (id 1, 10 µs) and y (id 9, 20 µs) are ready at 0; x (id 2, 10 µs) becomes ready at 10.
    return Trace(nodes=[cpu(1, "r", 10), cpu(9, "y", 20), cpu(2, "x", 10, [1])], rank=0)


def test_policies_change_the_order_of_ready_work():
    _, by_id = times(_policy_trace(), policy="id")
    assert by_id[2] == (10_000, 20_000) and by_id[9] == (20_000, 40_000)
    _, fifo = times(_policy_trace(), policy=get_policy("earliest-ready"))
    assert fifo[9] == (10_000, 30_000) and fifo[2] == (30_000, 40_000)
    _, lifo = times(_policy_trace(), policy=get_policy("lifo"))
    assert lifo[9] == (0, 20_000) and lifo[1] == (20_000, 30_000)


def test_priority_policy_from_attributes_and_custom_callables():
    tr = _policy_trace()
    tr.nodes[1].CopyFrom(cpu(9, "y", 20, comm_priority=5))
    pol = priority_policy([tr])
    assert isinstance(pol, PriorityPolicy)
    _, t = times(tr, policy=pol)
    assert t[9] == (0, 20_000)
    _, t2 = times(_policy_trace(), policy=custom(lambda ready, rank: max(ready)))
    assert t2[9] == (0, 20_000)
    with pytest.raises(ChakraError):
        simulate([_policy_trace()], policy=custom(lambda ready, rank: -1))
    with pytest.raises(ChakraError):
        get_policy("random")


def test_select_across_ranks_and_by_attribute():
    from chakra.whatif.transforms import by_attr, by_ids, graphs, select

    t0, t1 = cpu_gpu_trace(), cpu_gpu_trace()
    t1.rank = 1
    t1.nodes[2].CopyFrom(cpu(2, "k", 30, [0], num_ops=4096))
    gs = graphs([t0, t1])
    assert [(g.rank, n.name) for g, n in select(gs, by_name("^k$"))] == [(0, "k"), (1, "k")]
    assert [(g.rank, n.name) for g, n in select(gs, by_name("^k$"), ranks=[1])] == [(1, "k")]
    big = by_attr("num_ops", lambda v: v > 1000)
    assert [(g.rank, n.id) for g, n in select(gs, big)] == [(1, 2)]
    assert [n.id for n in gs[0].select(by_ids([3, 0]))] == [0, 3]

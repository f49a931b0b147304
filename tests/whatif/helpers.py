"""Small hand-built traces (DSL-like) whose simulated times can be worked out by hand."""

from __future__ import annotations

from chakra.schema import CollectiveType, NodeType
from chakra.trace import Trace, make_node

T = NodeType


def cpu(i, name, dur, deps=(), **attrs):
    return make_node(i, name, T.COMP_NODE, duration_micros=dur, ctrl_deps=deps, attrs={"is_cpu_op": True, **attrs})


def gpu(i, name, dur, deps=(), **attrs):
    return make_node(i, name, T.COMP_NODE, duration_micros=dur, ctrl_deps=deps, attrs={"is_cpu_op": False, **attrs})


def allreduce(i, size, deps=(), name="all_reduce"):
    attrs = {"is_cpu_op": False, "comm_type": int(CollectiveType.ALL_REDUCE), "comm_size": size}
    return make_node(i, name, T.COMM_COLL_NODE, ctrl_deps=deps, attrs=attrs)


def cpu_gpu_trace() -> Trace:
    """a(10) -> b(20) on the CPU; kernel k(30) launched by a; c(5) waits for b and k.

    Simulated: a 0-10, b 10-30, k 10-40, c 40-45 µs.
    """
    return Trace(
        nodes=[
            cpu(0, "a", 10),
            cpu(1, "b", 20, [0]),
            gpu(2, "k", 30, [0]),
            cpu(3, "c", 5, [1, 2]),
        ],
        rank=0,
    )

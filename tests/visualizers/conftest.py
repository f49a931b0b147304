"""Visualizer test fixtures: traces built with chakra.trace.make_node that mimic real converter output.

`pytorch_like` follows the official PyTorch converter's output (docs/chakra-format.md §2.2): the
host call tree in ctrl_deps (one parent per node), the host ops flattened into one data-dep chain
in pre-order, GPU kernels right after their launcher with a data dep on it, NCCL kernels as
COMM_COLL nodes with comm_type/comm_size, a profiler step annotation around each iteration.
"""

from __future__ import annotations

import pytest

from chakra.schema import CollectiveType, NodeType
from chakra.trace import Trace, make_node

OPS_PER_STEP = ("aten::linear", "aten::relu", "aten::linear", "aten::cross_entropy_loss")


def pytorch_like(steps: int = 2, layers: int = 12, rank: int = 0) -> Trace:
    """A trace of `steps` ProfilerStep#k regions, each with `layers` forward ops (3 callees and a
    GPU kernel each), an Adam step looping over parameters, and an NCCL all-reduce kernel."""
    t = Trace(rank=rank)
    ids = iter(range(1, 1_000_000))
    prev_host = None

    def host(name: str, parent: int, dur: int) -> int:
        nonlocal prev_host
        nid = next(ids)
        t.nodes.append(
            make_node(
                nid,
                name,
                NodeType.COMP_NODE,
                ctrl_deps=[parent],
                data_deps=[prev_host] if prev_host else [],
                duration_micros=dur,
                attrs={"is_cpu_op": True},
            )
        )
        prev_host = nid
        return nid

    def kernel(name: str, launcher: int, dur: int, coll: bool = False) -> int:
        nid = next(ids)
        attrs = {"is_cpu_op": False}
        if coll:
            attrs.update(comm_type=int(CollectiveType.ALL_REDUCE), comm_size=4 << 20)
        t.nodes.append(
            make_node(
                nid,
                name,
                NodeType.COMM_COLL_NODE if coll else NodeType.COMP_NODE,
                ctrl_deps=[launcher],
                data_deps=[launcher],
                duration_micros=dur,
                attrs=attrs,
            )
        )
        return nid

    thread = next(ids)
    t.nodes.append(
        make_node(thread, "[pytorch|profiler|execution_trace|thread]", NodeType.COMP_NODE, attrs={"is_cpu_op": True})
    )
    prev_host = thread
    for step in range(1, steps + 1):
        ps = host(f"ProfilerStep#{step}", thread, 20)
        for layer in range(layers):
            op = host(OPS_PER_STEP[layer % len(OPS_PER_STEP)], ps, 5)
            for callee in ("aten::t", "aten::addmm", "aten::as_strided"):
                host(callee, op, 3)
            kernel(f"void gemm_kernel<float, {layer}>(int, float const*, float*)", op, 40)
        opt = host("Optimizer.step#Adam.step", ps, 10)
        for _param in range(2 * layers):
            for name in ("aten::add_", "aten::mul_", "aten::addcdiv_"):
                host(name, opt, 2)
        ar = host("c10d::allreduce_", ps, 8)
        kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", ar, 300, coll=True)
    return t


def p2p_pair() -> list[Trace]:
    """Two ranks exchanging two messages (send/recv with src, dst, tag) around compute."""
    traces = []
    for rank in (0, 1):
        peer = 1 - rank
        t = Trace(rank=rank)
        t.nodes.append(make_node(0, "fwd", NodeType.COMP_NODE, duration_micros=10, attrs={"is_cpu_op": False}))
        for k in range(2):
            send_attrs = {"comm_src": rank, "comm_dst": peer, "comm_tag": k, "comm_size": 1024}
            recv_attrs = {"comm_src": peer, "comm_dst": rank, "comm_tag": k, "comm_size": 1024}
            t.nodes.append(make_node(1 + 2 * k, f"send{k}", NodeType.COMM_SEND_NODE, data_deps=[0], attrs=send_attrs))
            t.nodes.append(make_node(2 + 2 * k, f"recv{k}", NodeType.COMM_RECV_NODE, data_deps=[0], attrs=recv_attrs))
        traces.append(t)
    return traces


@pytest.fixture
def shapes():
    """The trace builders above (fixtures, since test folders are not packages)."""

    class Shapes:
        pytorch_like = staticmethod(pytorch_like)
        p2p_pair = staticmethod(p2p_pair)

    return Shapes

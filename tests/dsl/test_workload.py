"""The DSL core: what a user checks after writing a workload by hand."""

from __future__ import annotations

import orjson
import pytest

from chakra.dsl import Device, DSLError, Workload
from chakra.io import read_traces
from chakra.schema import CollectiveType, NodeType
from chakra.schema.attrs import get_attr, get_int
from chakra.validate import parse_process_groups, validate_traces


def _by_type(trace, node_type):
    return [n for n in trace.nodes if n.type == node_type]


def test_collective_lands_on_every_member_only():
    w = Workload(4)
    g = w.group([1, 3], "odd")
    w.all_gather(4096, group=g)
    traces = w.traces()
    colls = {t.rank: _by_type(t, NodeType.COMM_COLL_NODE) for t in traces}
    assert [len(colls[r]) for r in range(4)] == [0, 1, 0, 1]
    for r in (1, 3):
        (n,) = colls[r]
        assert get_int(n, "comm_type") == CollectiveType.ALL_GATHER
        assert get_int(n, "comm_size") == 4096
        assert get_attr(n, "pg_name") == g.pg_name != "0"
    assert validate_traces(traces).ok


def test_send_creates_matched_pair_with_counting_tags():
    w = Workload(2)
    first = w.send(0, 1, 100)
    second = w.send(0, 1, 200, after=first)
    assert (first.tag, second.tag) == (0, 1)
    t0, t1 = w.traces()
    sends = _by_type(t0, NodeType.COMM_SEND_NODE)
    recvs = _by_type(t1, NodeType.COMM_RECV_NODE)
    assert [
        (get_int(n, "comm_src"), get_int(n, "comm_dst"), get_int(n, "comm_tag"), get_int(n, "comm_size")) for n in sends
    ] == [
        (0, 1, 0, 100),
        (0, 1, 1, 200),
    ]
    assert [get_int(n, "comm_tag") for n in recvs] == [0, 1]
    # The second send waits for the first send (same rank), the second recv for the first recv.
    assert list(sends[1].data_deps) == [sends[0].id]
    assert list(recvs[1].data_deps) == [recvs[0].id]
    assert validate_traces([t0, t1]).ok


def test_cross_rank_dependency_is_an_error():
    w = Workload(2)
    a = w.compute(0, "a", duration_us=1)
    with pytest.raises(DSLError, match="cannot depend"):
        w.compute(1, "b", duration_us=1, after=a)
    with pytest.raises(DSLError, match="outside"):
        w.compute(2, "c")
    with pytest.raises(DSLError, match="unknown collective"):
        w.collective("allsum", 10)


def test_roofline_durations_and_attrs():
    w = Workload(1, device=Device(tflops=1, mem_bw=100))
    compute_bound = w.compute(0, "gemm", flops=2e12, bytes=1e6)  # 2 s of compute, 10 us of memory
    memory_bound = w.compute(0, "copy", flops=1e3, bytes=1e9)  # 10 ms of memory
    (trace,) = w.traces()
    nodes = trace.by_id()
    assert nodes[compute_bound[0]].duration_micros == 2_000_000
    assert nodes[memory_bound[0]].duration_micros == 10_000
    assert get_int(nodes[compute_bound[0]], "num_ops") == 2 * 10**12
    assert get_int(nodes[memory_bound[0]], "tensor_size") == 10**9
    assert get_attr(nodes[compute_bound[0]], "is_cpu_op") is False


def test_metadata_node_and_comm_group_file(tmp_path):
    w = Workload(4)
    a = w.group([0, 1], "a")
    b = w.group([2, 3], "b")
    w.all_reduce(64, group=a)
    w.all_reduce(64, group=b)
    w.save(tmp_path / "plain")
    plain = read_traces([tmp_path / "plain"])  # default: no METADATA node (ASTRA-sim aborts on it)
    assert not [n for t in plain for n in t.nodes if n.type == NodeType.METADATA_NODE]
    assert plain[2].nodes[0].id == 1 and list(plain[2].nodes[0].data_deps) == []
    paths = w.save(tmp_path / "job", metadata_node=True)
    assert [p.name for p in paths] == [f"job.{r}.et" for r in range(4)]
    traces = read_traces([tmp_path / "job"])
    meta = traces[2].nodes[0]
    assert meta.id == 0 and meta.type == NodeType.METADATA_NODE and meta.name == "process_group:init"
    # ASTRA-sim strips two characters from each end and JSON-decodes the rest.
    pgs = orjson.loads(meta.inputs.values[2:-2])
    assert {p["pg_name"]: p["ranks"] for p in pgs} == {"0": [0, 1, 2, 3], b.pg_name: [2, 3]}
    assert parse_process_groups(meta) == {"0": [0, 1, 2, 3], b.pg_name: [2, 3]}
    # Roots wait for the metadata node so groups are registered first.
    coll = _by_type(traces[2], NodeType.COMM_COLL_NODE)[0]
    assert list(coll.data_deps) == [0]
    groups = orjson.loads((tmp_path / "job.comm_groups.json").read_bytes())
    assert groups == {a.pg_name: [0, 1], b.pg_name: [2, 3]}
    assert validate_traces(traces).ok


def test_memory_nodes_and_all_collective_methods():
    w = Workload(3)
    w.load(0, "ld", 1024)
    w.store([1, 2], "st", 2048)
    for method in (
        "all_reduce",
        "reduce",
        "all_gather",
        "gather",
        "scatter",
        "broadcast",
        "all_to_all",
        "reduce_scatter",
        "reduce_scatter_block",
    ):
        getattr(w, method)(512)
    w.barrier()
    traces = w.traces()
    types = [get_int(n, "comm_type") for n in _by_type(traces[1], NodeType.COMM_COLL_NODE)]
    assert types == list(range(10))
    assert get_int(_by_type(traces[0], NodeType.MEM_LOAD_NODE)[0], "tensor_size") == 1024
    assert len(_by_type(traces[2], NodeType.MEM_STORE_NODE)) == 1
    assert validate_traces(traces).ok

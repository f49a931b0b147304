"""Engine behaviour: resources, compute models, point-to-point, groups, policies, deadlocks, memory."""

from __future__ import annotations

import json

import pytest

from chakra.errors import ConfigError
from chakra.schema import CollectiveType, NodeType
from chakra.sim import SimDeadlock, simulate
from chakra.trace import Trace, make_metadata, make_node
from tests.sim.conftest import collective_traces, write_network, write_system

COMP, COLL, SEND, RECV = NodeType.COMP_NODE, NodeType.COMM_COLL_NODE, NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE


def one_rank(*nodes) -> list[Trace]:
    t = Trace(rank=0)
    t.nodes = list(nodes)
    return [t]


def gpu(i, dur, **kw):
    return make_node(i, f"k{i}", COMP, duration_micros=dur, attrs={"is_cpu_op": False}, **kw)


def cpu(i, dur, **kw):
    return make_node(i, f"c{i}", COMP, duration_micros=dur, attrs={"is_cpu_op": True}, **kw)


def test_replay_chain_zero_duration_is_one_ns():
    res = simulate(one_rank(gpu(0, 5), gpu(1, 0, data_deps=[0]), gpu(2, 7, ctrl_deps=[1])), record_nodes=True)
    assert res.ranks[0].finish_ns == 5000 + 1 + 7000
    assert res.node_times[0] == {0: (0, 5000), 1: (5000, 5001), 2: (5001, 12001)}
    assert res.ranks[0].compute_ns == 12001 and res.ranks[0].idle_ns == 0


def test_one_gpu_op_at_a_time_but_cpu_and_gpu_overlap():
    res = simulate(one_rank(gpu(0, 10), gpu(1, 10), cpu(2, 15)), record_nodes=True)
    times = res.node_times[0]
    assert times[0] == (0, 10000) and times[1] == (10000, 20000)  # serial, smallest id first
    assert times[2] == (0, 15000)  # CPU slot is separate
    assert res.ranks[0].finish_ns == 20000
    unlimited = simulate(one_rank(gpu(0, 10), gpu(1, 10)), slots={"gpu": 0})
    assert unlimited.ranks[0].finish_ns == 10000


def test_roofline(tmp_path):
    system = write_system(tmp_path / "s.json", roofline_enabled=1, peak_perf=100, local_mem_bw=1000)
    # OI = 1e9 / 1e6 = 1000 flop/B -> min(1000 GB/s * 1000, 100 TFLOPS) = 1e14 -> 1e9 / 1e14 s = 10,000 ns
    big = make_node(
        0, "mm", COMP, duration_micros=999, attrs={"is_cpu_op": False, "num_ops": 10**9, "tensor_size": 10**6}
    )
    # OI = 1e6 / 1e6 = 1 -> 1e12 flop/s (memory bound) -> 1e6 / 1e12 s = 1,000 ns
    mem_bound = make_node(1, "add", COMP, attrs={"is_cpu_op": False, "num_ops": 10**6, "tensor_size": 10**6})
    skipped = make_node(2, "view", COMP, duration_micros=50, attrs={"is_cpu_op": False, "num_ops": 5})  # no tensor_size
    on_cpu = make_node(3, "host", COMP, duration_micros=3, attrs={"is_cpu_op": True, "num_ops": 1, "tensor_size": 1})
    res = simulate(one_rank(big, mem_bound, skipped, on_cpu), system=system, record_nodes=True)
    t = res.node_times[0]
    assert t[0] == (0, 10_000)
    assert t[1][1] - t[1][0] == 1_000
    assert t[2][1] - t[2][0] == 0
    assert t[3] == (0, 3000)  # CPU ops are replayed


def p2p_pair(recv_delay_us=0, tag=7, recv_tag=7, size=1 << 20):
    a, b = Trace(rank=0), Trace(rank=1)
    a.nodes = [make_node(0, "send", SEND, attrs={"comm_dst": 1, "comm_tag": tag, "comm_size": size})]
    b.nodes = [
        gpu(0, recv_delay_us),
        make_node(1, "recv", RECV, data_deps=[0], attrs={"comm_src": 0, "comm_tag": recv_tag, "comm_size": size}),
    ]
    return [a, b]


def test_send_recv_matched_on_src_dst_tag(tmp_path):
    net = write_network(tmp_path / "n.yml", ["Ring"], [2], [50.0], [500.0])
    flight = int(500 + (1 << 20) / (50 * 2**30 / 1e9))  # one hop: floor(L + size/B')
    res = simulate(p2p_pair(), net, record_nodes=True)
    assert res.node_times[0][0] == (0, flight)  # a send completes on arrival
    assert res.node_times[1][1] == (1, flight)  # recv posted at 1 ns (0 us compute = 1 ns), waits
    late = simulate(p2p_pair(recv_delay_us=100), net, record_nodes=True)
    assert late.node_times[1][1] == (100_000, 100_000)  # data already there: completes at once
    sw = write_network(tmp_path / "sw.yml", ["Switch"], [2], [50.0], [500.0])
    res_sw = simulate(p2p_pair(), sw, congestion="unaware", record_nodes=True)
    assert res_sw.node_times[0][0][1] == int(2 * 500 + (1 << 20) / (50 * 2**30 / 1e9))  # 2 hops, 1 serialization
    res_sw = simulate(p2p_pair(), sw, congestion="aware", record_nodes=True)
    assert res_sw.node_times[0][0][1] == 2 * flight  # store-and-forward


def test_unmatched_recv_is_a_deadlock_report(tmp_path):
    with pytest.raises(SimDeadlock, match=r"rank 1 recv node 1 waits for a send 0->1 tag 8"):
        simulate(p2p_pair(recv_tag=8))


def test_collective_missing_on_one_rank_reports_who_waits(rt_dir):
    traces = collective_traces(8, CollectiveType.ALL_REDUCE)
    traces[5].nodes = [gpu(5, 1)]
    with pytest.raises(SimDeadlock, match=r"ALL_REDUCE #0 on group 'all'.*wait\(s\) for rank\(s\) \[5\]"):
        simulate(traces, rt_dir / "network_cfg.yml", rt_dir / "system_cfg.json")


def test_collective_mismatch_names_both_nodes(rt_dir):
    traces = collective_traces(8, CollectiveType.ALL_REDUCE)
    traces[3] = collective_traces(8, CollectiveType.ALL_GATHER)[3]
    with pytest.raises(SimDeadlock, match=r"rank 0 node 0 is ALL_REDUCE .* rank 3 node 3 is ALL_GATHER"):
        simulate(traces, rt_dir / "network_cfg.yml", rt_dir / "system_cfg.json")


def test_comm_overlaps_compute_and_exposed_comm(rt_dir):
    traces = collective_traces(8, CollectiveType.ALL_REDUCE)
    for t in traces:
        t.nodes.append(gpu(100, 50))  # independent of the all-reduce: overlaps it
    res = simulate(traces, rt_dir / "network_cfg.yml", rt_dir / "system_cfg.json")
    r = res.ranks[0]
    assert r.finish_ns == 117_780 and r.compute_ns == 50_000 and r.comm_ns == 117_780
    assert r.exposed_comm_ns == 117_780 - 50_000  # ASTRA-sim: finish - sum of GPU compute
    corrected = simulate(traces, rt_dir / "network_cfg.yml", rt_dir / "system_cfg.json", compat=False)
    assert corrected.ranks[0].exposed_comm_ns == 117_780 - 50_000  # comm time not under compute


def test_policy_callable_picks_the_next_node():
    nodes = [gpu(0, 1), gpu(1, 2), gpu(2, 3)]
    seen = []

    def largest_first(ready_ids, rank):
        seen.append(list(ready_ids))
        return max(ready_ids)

    res = simulate(one_rank(*nodes), policy=largest_first, record_nodes=True)
    t = res.node_times[0]
    assert t[2] == (0, 3000) and t[1] == (3000, 5000) and t[0] == (5000, 6000)
    assert seen[0] == [0, 1, 2]
    with pytest.raises(ConfigError, match="unknown scheduling policy"):
        simulate(one_rank(*nodes), policy="no-such-policy")


def test_broadcast_and_unmodelled_collectives_are_replayed(rt_dir):
    traces = collective_traces(8, CollectiveType.BROADCAST)
    for t in traces:
        t.nodes[0].duration_micros = 42
    res = simulate(traces, rt_dir / "network_cfg.yml", rt_dir / "system_cfg.json")
    assert {r.finish_ns for r in res.ranks.values()} == {42_000}
    assert res.settings["replayed_collectives"] == 8


def test_comm_replay_mode_uses_recorded_durations(rt_dir):
    traces = collective_traces(8, CollectiveType.ALL_REDUCE)
    for t in traces:
        t.nodes[0].duration_micros = 100 + t.rank
    res = simulate(traces, rt_dir / "network_cfg.yml", rt_dir / "system_cfg.json", comm_mode="replay")
    assert [res.ranks[r].finish_ns for r in range(8)] == [(100 + r) * 1000 for r in range(8)]


def test_pytorch_style_metadata_process_groups(rt_dir):
    """A METADATA node listing PyTorch process groups ("ranks": [] = every rank) names the groups."""
    pgs = '[{"pg_name": "0", "pg_desc": "default_pg", "ranks": [], "group_size": 8}, {"pg_name": "7", "ranks": [0, 1]}]'
    traces = collective_traces(8, CollectiveType.ALL_REDUCE, pg_name="0")
    for t in traces:
        t.nodes.insert(0, make_node(1000, "## process_group:init ##", NodeType.METADATA_NODE, inputs={"values": pgs}))
        t.nodes[1].data_deps.append(1000)
    res = simulate(traces, rt_dir / "network_cfg.yml", rt_dir / "system_cfg.json")
    assert {r.finish_ns for r in res.ranks.values()} == {117_780}
    traces[0].nodes[1].attr[-1].string_val = "9"
    with pytest.raises(ConfigError, match=r"node 0: unknown process group pg_name='9'"):
        simulate(traces, rt_dir / "network_cfg.yml", rt_dir / "system_cfg.json")


def test_memory_models(tmp_path):
    load = make_node(0, "load", NodeType.MEM_LOAD_NODE, attrs={"tensor_size": 1000})
    store = make_node(0, "store", NodeType.MEM_STORE_NODE, attrs={"tensor_size": 1000})
    net = write_network(tmp_path / "n.yml", ["Ring"], [2], [50.0], [500.0])
    mems = {}
    for name, body in {
        "npu": {"memory-type": "PER_NPU_MEMORY_EXPANSION", "remote-mem-latency": 100, "remote-mem-bw": 10},
        "pool": {"memory-type": "MEMORY_POOL", "remote-mem-latency": 100, "remote-mem-bw": 10},
        "none": {"memory-type": "NO_MEMORY_EXPANSION"},
    }.items():
        mems[name] = tmp_path / f"{name}.json"
        mems[name].write_text(json.dumps(body))
    a, b = Trace(rank=0, nodes=[load]), Trace(rank=1, nodes=[store])
    res = simulate([a, b], net, memory=mems["npu"])
    assert [res.ranks[r].finish_ns for r in (0, 1)] == [200, 200]  # 100 + 1000 / 10, in parallel
    res = simulate([a, b], net, memory=mems["pool"])
    assert sorted(res.ranks[r].finish_ns for r in (0, 1)) == [200, 400]  # one pool, FIFO
    assert res.ranks[0].mem_ns in (200, 400)
    with pytest.raises(ConfigError, match="node 0: MEM_LOAD/MEM_STORE node needs a remote memory model"):
        simulate([a, b], net, memory=mems["none"])
    system = write_system(tmp_path / "s.json", local_mem_bw=500, local_mem_latency=30)
    local = make_node(0, "hbm", NodeType.MEM_LOAD_NODE, attrs={"tensor_size": 10_000, "tensor_loc": "local"})
    res = simulate([Trace(rank=0, nodes=[local])], system=system)
    assert res.ranks[0].finish_ns == 30 + 10_000 // 500


def test_hierarchical_memory_pool_and_in_switch(tmp_path):
    body = {
        "memory-type": "HIERARCHICAL_MEMORY_POOL",
        "num-nodes": 16,
        "num-npus-per-node": 16,
        "num-out-node-switches": 4,
        "num-remote-memory-groups": 8,
        "mem-side-out-node-fabric-bw": 100,
        "gpu-side-out-node-fabric-bw": 100,
        "in-node-fabric-bw": 256,
        "chunk-size": 1 << 20,
    }
    path = tmp_path / "m.json"
    path.write_text(json.dumps(body))
    size = 64 << 20
    node = make_node(0, "load", NodeType.MEM_LOAD_NODE, attrs={"tensor_size": size})
    res = simulate([Trace(rank=0, nodes=[node])], memory=path)
    chunk = 1 << 20
    stages = size * 256 // 8 // 4 // chunk  # paper: W x GPUs / groups / out-node switches / chunk
    tx = (chunk / 100, 8 * chunk / (16 * 100), 8 * 4 * chunk / (256 * 256))
    assert res.ranks[0].finish_ns == int(sum(tx) + (stages - 1) * max(tx))
    body["in-switch-collective"] = 1
    path.write_text(json.dumps(body))
    res2 = simulate([Trace(rank=0, nodes=[node])], memory=path)
    tx2 = (chunk / 100, 8 * chunk / 100, 8 * 4 * chunk / 256)
    assert res2.ranks[0].finish_ns == int(sum(tx2) + (stages - 1) * max(tx2))


def test_round_trip_replay_of_a_measured_schedule():
    """A trace with measured start times: replay reproduces the measured step time exactly."""
    t = Trace(metadata=make_metadata(), rank=0)
    t.nodes = [
        make_node(0, "fwd", COMP, start_time_micros=1000, duration_micros=40, attrs={"is_cpu_op": False}),
        make_node(
            1,
            "ar",
            COLL,
            data_deps=[0],
            start_time_micros=1040,
            duration_micros=25,
            attrs={"comm_type": 0, "comm_size": 4096},
        ),
        make_node(
            2, "bwd", COMP, data_deps=[0], start_time_micros=1040, duration_micros=30, attrs={"is_cpu_op": False}
        ),
        make_node(
            3, "opt", COMP, data_deps=[1, 2], start_time_micros=1070, duration_micros=5, attrs={"is_cpu_op": False}
        ),
    ]
    measured = (max(n.start_time_micros + n.duration_micros for n in t.nodes) - 1000) * 1000
    res = simulate([t], comm_mode="replay")
    assert res.ranks[0].finish_ns == measured == 75_000


def test_timeline_log_format(tmp_path, rt_dir):
    traces = collective_traces(8, CollectiveType.ALL_REDUCE)
    traces[0].nodes[0].name = 'all_reduce, "grad"'
    log = tmp_path / "run.csv"
    simulate(traces, rt_dir / "network_cfg.yml", rt_dir / "system_cfg.json", log_path=log)
    lines = log.read_text().splitlines()
    assert len(lines) == 16
    assert lines[0] == 'issue,0,0,0,"all_reduce, ""grad"""'
    assert lines[1] == "issue,1,0,1,all_reduce_1MB"
    assert lines[8] == 'callback,0,117780,0,"all_reduce, ""grad"""'
    from chakra.simlog import iter_records

    recs = list(iter_records(log))
    assert recs[0][:5] == ("issue", 0, 0, 0, 'all_reduce, "grad"')
    assert sum(1 for r in recs if r[0] == "callback" and r[2] == 117780) == 8

"""`chakra simulate` on the shipped samples and configs, bad configs, and real PyTorch round trips."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chakra.io import read_traces
from chakra.sim import simulate
from tests.sim.conftest import write_network, write_system

AR_PREFIX = "astrasim/all_reduce_8npus_1MB/all_reduce"


def test_cli_regression_json(run_cli, samples_dir, rt_dir, tmp_path):
    log = tmp_path / "run.csv"
    res = run_cli(
        "simulate",
        str(samples_dir / AR_PREFIX),
        "--network",
        str(rt_dir / "network_cfg.yml"),
        "--system",
        str(rt_dir / "system_cfg.json"),
        "--memory",
        str(rt_dir / "remote_memory_cfg.json"),
        "--log",
        str(log),
        "--json",
        "-q",
    )
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["finish_ns"] == 117780
    assert set(out["ranks"]) == {str(r) for r in range(8)}
    for r in out["ranks"].values():
        assert {"finish_ns", "compute_ns", "comm_ns", "exposed_comm_ns", "idle_ns"} <= set(r)
        assert r["finish_ns"] == 117780
    assert sum(1 for line in log.read_text().splitlines() if line.startswith("callback,")) == 8


def test_cli_table_and_timeline(run_cli, samples_dir, tmp_path):
    out = tmp_path / "t.json"
    res = run_cli("simulate", str(samples_dir / AR_PREFIX), "--timeline", str(out), "-q")
    assert res.exit_code == 0, res.stderr
    assert "117,780" in res.stdout
    doc = json.loads(out.read_text())
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    assert sum(1 for e in events if e.get("ph") == "X") == 8


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        ("topology: [ Torus ]\nnpus_count: [ 8 ]\nbandwidth: [ 50 ]\nlatency: [ 500 ]\n", "unknown topology 'Torus'"),
        ("topology: [ Ring ]\nnpus_count: [ 8 ]\nbandwidth: [ 50 ]\n", "missing key(s) latency"),
        (
            "topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ 50 ]\nlatency: [ 500 ]\n",
            "gives 4 NPUs but there are 8",
        ),
        ("topology: [ Ring, Switch ]\nnpus_count: [ 8 ]\nbandwidth: [ 50 ]\nlatency: [ 500 ]\n", "one entry per dim"),
        ("topology: [ Ring\n", "not valid YAML"),
    ],
)
def test_bad_network_is_one_error_line(run_cli, samples_dir, tmp_path, yaml_text, message):
    net = tmp_path / "bad.yml"
    net.write_text(yaml_text)
    res = run_cli("simulate", str(samples_dir / AR_PREFIX), "--network", str(net))
    assert res.exit_code == 1
    lines = [x for x in res.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and message in lines[0] and "bad.yml" in lines[0], res.stderr


def test_bad_system_is_one_error_line(run_cli, samples_dir, tmp_path):
    sysf = tmp_path / "sys.json"
    sysf.write_text('{"scheduling-policy": "LIFO", "endpoint-delay": 10}')
    res = run_cli("simulate", str(samples_dir / AR_PREFIX), "--system", str(sysf))
    assert res.exit_code == 1
    assert "missing key(s) preferred-dataset-splits" in res.stderr
    # collective-optimization is refused where ASTRA-sim reads it: a native ALL_REDUCE
    sysf.write_text(
        '{"scheduling-policy": "LIFO", "preferred-dataset-splits": 4, "all-reduce-implementation": ["ring"]}'
    )
    res = run_cli("simulate", str(samples_dir / AR_PREFIX), "--system", str(sysf))
    assert res.exit_code == 1 and "missing key collective-optimization" in res.stderr
    write_system(sysf, all_reduce_implementation=["butterfly"])
    res = run_cli("simulate", str(samples_dir / AR_PREFIX), "--system", str(sysf))
    assert res.exit_code == 1 and "unknown algorithm 'butterfly'" in res.stderr
    net = write_network(tmp_path / "n.yml", ["Ring", "Switch"], [4, 2], [50, 50], [500, 500])
    res = run_cli("simulate", str(samples_dir / AR_PREFIX), "--network", str(net), "--system", str(sysf))
    assert res.exit_code == 1


def test_bad_comm_group_and_memory(run_cli, samples_dir, tmp_path):
    groups = tmp_path / "g.json"
    groups.write_text('{"0": [0, 1]}')
    res = run_cli("simulate", str(samples_dir / AR_PREFIX), "--comm-group", str(groups))
    assert res.exit_code == 1 and "must be > 0" in res.stderr
    mem = tmp_path / "m.json"
    mem.write_text('{"memory-type": "MEMORY_POOL"}')
    res = run_cli("simulate", str(samples_dir / AR_PREFIX), "--memory", str(mem))
    assert res.exit_code == 1 and "needs key(s) remote-mem-bw" in res.stderr


def _measured_ns(trace) -> int:
    nodes = trace.nodes
    return (
        max(n.start_time_micros + n.duration_micros for n in nodes) - min(n.start_time_micros for n in nodes)
    ) * 1000


@pytest.fixture(scope="module")
def converted(samples_dir, tmp_path_factory):
    import chakra.converters.pytorch as pytorch

    out = tmp_path_factory.mktemp("pt")
    prefixes = {}
    for name in ("mlp", "ddp2", "collectives2"):
        folder = samples_dir / "pytorch" / name
        inputs = sorted(folder.glob("et.*.json")) + sorted(folder.glob("kineto.*.json"))
        pytorch.convert(inputs, out / name, profiled=True)  # replayed against the profiler's own steps
        prefixes[name] = out / name
    return prefixes


@pytest.mark.parametrize(("name", "tolerance"), [("mlp", 0.03), ("ddp2", 0.03), ("collectives2", 0.03)])
def test_pytorch_samples_round_trip_with_comm_replay(converted, name, tolerance):
    """Replaying recorded durations reproduces the measured span (every sample rank to the µs: a host
    gap that waited for a collective starts at its wake-up, so start + duration is its real end)."""
    prefix: Path = converted[name]
    res = simulate(str(prefix), comm_mode="replay")
    for trace in read_traces([prefix]):
        measured = _measured_ns(trace)
        assert abs(res.ranks[trace.rank].finish_ns - measured) <= tolerance * measured, (trace.rank, measured)
    if name != "collectives2":
        assert all(
            abs(res.ranks[t.rank].finish_ns - _measured_ns(t)) <= 0.03 * _measured_ns(t) for t in read_traces([prefix])
        )


@pytest.mark.parametrize("name", ["mlp", "ddp2", "collectives2"])
def test_pytorch_samples_simulate_with_network_model(converted, name, run_cli):
    res = run_cli("simulate", str(converted[name]), "--congestion", "unaware", "--json", "-q")
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["finish_ns"] > 0 and len(out["ranks"]) == len(read_traces([converted[name]]))


def test_identical_rank_files_share_one_index_and_give_the_same_result(tmp_path, rt_dir):
    """Byte-identical rank files (SPMD) are indexed once; results equal those of separate traces."""
    import os

    from chakra.io import write_trace
    from chakra.schema import NodeType
    from chakra.trace import Trace, make_node

    t = Trace(rank=0)
    t.nodes = [
        make_node(0, "fwd", NodeType.COMP_NODE, duration_micros=30, attrs={"is_cpu_op": False}),
        make_node(1, "ar", NodeType.COMM_COLL_NODE, data_deps=[0], attrs={"comm_type": 0, "comm_size": 1 << 20}),
        make_node(2, "bwd", NodeType.COMP_NODE, data_deps=[0], duration_micros=200, attrs={"is_cpu_op": False}),
        make_node(3, "load", NodeType.MEM_LOAD_NODE, data_deps=[2], attrs={"tensor_size": 4096}),
    ]
    first = write_trace(tmp_path / "spmd.0.et", t)
    for r in range(1, 8):
        os.link(first, tmp_path / f"spmd.{r}.et")
    mem = tmp_path / "mem.json"
    mem.write_text('{"memory-type": "PER_NPU_MEMORY_EXPANSION", "remote-mem-latency": 5, "remote-mem-bw": 64}')
    shared = simulate(str(tmp_path / "spmd"), rt_dir / "network_cfg.yml", rt_dir / "system_cfg.json", mem)
    separate = [Trace(rank=r, nodes=list(t.nodes)) for r in range(8)]
    ref = simulate(separate, rt_dir / "network_cfg.yml", rt_dir / "system_cfg.json", mem)
    assert shared.to_json()["ranks"] == ref.to_json()["ranks"]
    assert shared.ranks[3].finish_ns == 30_000 + max(117_780, 200_000) + 5 + 4096 // 64


def test_official_json_sample_simulates(run_cli, samples_dir):
    """Its collectives carry no comm_type/comm_size: they are replayed from their runtime."""
    res = run_cli("simulate", str(samples_dir / "et/official_small_chakra.0.json"), "--json", "-q")
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["settings"]["replayed_collectives"] == 3
    assert out["finish_ns"] >= 318_000 + 28_000

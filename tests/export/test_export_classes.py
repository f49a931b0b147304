"""The classes of trace on which ASTRA-sim aborts, hangs or corrupts memory: `validate --for
astra-sim` lists each, `export astra-sim` fixes and counts each, `simulate` warns on each.

Inputs come from the project's own producers where one writes the class; tests/interop runs the
exported results through the real binaries.
"""

from __future__ import annotations

import json
from pathlib import Path

from chakra.io import read_traces, write_rank_traces
from chakra.schema import CollectiveType, NodeType
from chakra.schema.attrs import get_attr
from chakra.trace import Trace

ROOFLINE = {"roofline-enabled": 1, "peak-perf": 900, "local-mem-bw": 1600}


def _ok(res) -> None:
    assert res.exit_code == 0, res.stderr[-2000:]


def _codes(run_cli, prefix: Path, *opts: str) -> dict[str, int]:
    res = run_cli("validate", "--for", "astra-sim", str(prefix), "--json", *opts)
    out: dict[str, int] = {}
    for f in json.loads(res.stdout)["findings"]:
        out[f["code"]] = out.get(f["code"], 0) + 1
    return out


def _export(run_cli, prefix: Path, out: Path, *opts: str) -> dict:
    res = run_cli("export", "astra-sim", str(prefix), "-o", str(out), "--json", "-q", *opts)
    _ok(res)
    return json.loads(res.stdout)


def _roofline_system(tmp_path: Path, repo: Path) -> Path:
    doc = json.loads((repo / "chakra" / "data" / "configs" / "system.json").read_text())
    doc.update(ROOFLINE)
    path = tmp_path / "roofline.json"
    path.write_text(json.dumps(doc))
    return path


REPO = Path(__file__).resolve().parents[2]


def test_empty_ranks_get_an_idle_node(tmp_path, run_cli):
    raw = tmp_path / "ff"
    _ok(run_cli("convert", "flexflow", str(REPO / "tests/data/flexflow/dp2_taskgraph.dot"), "--placement", "*=0",
                "--npus", "4", "-o", str(raw), "-q"))  # fmt: skip
    assert [len(t.nodes) for t in read_traces([raw])][1:] == [0, 0, 0]
    assert _codes(run_cli, raw) == {"empty-rank": 3}
    summary = _export(run_cli, raw, tmp_path / "x")
    assert summary["changes"] == {"idle node added to empty ranks": 3}
    out = read_traces([tmp_path / "x"])
    assert [len(t.nodes) for t in out][1:] == [1, 1, 1] and out[1].nodes[0].duration_micros == 0
    res = run_cli("simulate", str(raw), "-q")
    assert "ASTRA-sim would fail here (empty-rank: ranks 1-3, 3 such)" in " ".join(res.stderr.split())


def test_cpu_compute_nodes_become_gpu_nodes(samples_dir, tmp_path, run_cli):
    d = samples_dir / "pytorch" / "mlp"
    raw = tmp_path / "mlp"
    _ok(run_cli("convert", "pytorch", str(d / "et.0.json"), "-k", str(d / "kineto.0.json"), "-o", str(raw), "-q"))
    cpu = sum(1 for n in read_traces([raw])[0].nodes if n.type == NodeType.COMP_NODE and get_attr(n, "is_cpu_op"))
    assert cpu > 100
    assert _codes(run_cli, raw)["cpu-compute"] == cpu
    summary = _export(run_cli, raw, tmp_path / "x")
    assert summary["changes"]["is_cpu_op cleared on compute nodes"] == cpu
    assert not [n for n in read_traces([tmp_path / "x"])[0].nodes if get_attr(n, "is_cpu_op")]


def test_roofline_num_ops_zero_and_missing(samples_dir, tmp_path, run_cli):
    raw = tmp_path / "gpt"
    _ok(run_cli("generate", "transformer", "--layers", "2", "--dp", "2", "-o", str(raw), "-q"))
    zero = [n for n in read_traces([raw])[0].nodes if n.type == NodeType.COMP_NODE and not get_attr(n, "num_ops")]
    assert zero and all(get_attr(n, "tensor_size") > 0 for n in zero)  # the embeddings
    system = _roofline_system(tmp_path, REPO)
    assert _codes(run_cli, raw) == {}  # without the roofline ASTRA-sim replays durations
    assert _codes(run_cli, raw, "--system", str(system)) == {"zero-num-ops": 2 * len(zero)}
    summary = _export(run_cli, raw, tmp_path / "x", "--system", str(system))
    assert summary["changes"] == {"num_ops 0 set to 1 (roofline)": 2 * len(zero)}
    # CPU operators (no num_ops, no tensor_size) get both from their duration at peak-perf
    d = samples_dir / "pytorch" / "mlp"
    _ok(run_cli("convert", "pytorch", str(d / "et.0.json"), "-k", str(d / "kineto.0.json"), "-o",
                str(tmp_path / "mlp"), "-q"))  # fmt: skip
    summary = _export(run_cli, tmp_path / "mlp", tmp_path / "y", "--system", str(system))
    assert summary["changes"]["num_ops/tensor_size set from the duration (roofline)"] > 100
    for n in read_traces([tmp_path / "y"])[0].nodes:
        if n.type == NodeType.COMP_NODE and n.duration_micros > 0:
            assert get_attr(n, "tensor_size") is not None and get_attr(n, "num_ops") is not None


def test_short_involved_dim_is_padded(samples_dir, tmp_path, run_cli):
    raw = tmp_path / "ar"
    _ok(run_cli("convert", "text", str(samples_dir / "astrasim/text_workloads/microAllReduce.txt"), "--npus", "4",
                "-o", str(raw), "-q"))  # fmt: skip
    net = tmp_path / "net.yml"
    net.write_text("topology: [ Ring, Ring ]\nnpus_count: [ 2, 2 ]\nbandwidth: [ 100, 50 ]\nlatency: [ 500, 500 ]\n")
    assert _codes(run_cli, raw) == {}
    assert _codes(run_cli, raw, "--network", str(net), "--backend", "unaware") == {"short-involved-dim": 4}
    summary = _export(run_cli, raw, tmp_path / "x", "--network", str(net), "--backend", "unaware")
    assert summary["changes"] == {"involved_dim padded to the network's dimensions": 4}
    colls = [n for n in read_traces([tmp_path / "x"])[0].nodes if n.type == NodeType.COMM_COLL_NODE]
    assert [get_attr(n, "involved_dim") for n in colls] == [[True, False]]


def test_self_sends_become_compute(tmp_path, run_cli):
    # No producer here writes a message to itself (BigSim logs can); built to the Chakra p2p shape.
    traces = []
    for r in range(2):
        t = Trace(rank=r)
        work = t.add("work", NodeType.COMP_NODE, duration_micros=5, attrs={"is_cpu_op": False})
        if r == 0:
            p2p = {"is_cpu_op": False, "comm_src": 0, "comm_dst": 0, "comm_size": 4096, "comm_tag": 7}
            t.add("send", NodeType.COMM_SEND_NODE, data_deps=[work.id], duration_micros=3, attrs=p2p)
            t.add("recv", NodeType.COMM_RECV_NODE, data_deps=[work.id], duration_micros=3, attrs=p2p)
        traces.append(t)
    write_rank_traces(tmp_path / "s", traces)
    assert _codes(run_cli, tmp_path / "s") == {"self-send": 2}
    assert _export(run_cli, tmp_path / "s", tmp_path / "x")["changes"] == {"compute (self-send)": 2}
    nodes = read_traces([tmp_path / "x"])[0].nodes
    assert [(n.type, n.duration_micros) for n in nodes[1:]] == [(NodeType.COMP_NODE, 3)] * 2


def test_all_gathers_below_the_chunk_count(tmp_path, run_cli):
    raw = tmp_path / "mb"
    _ok(run_cli("generate", "microbench", "--ranks", "4", "--min-size", "1", "--max-size", "8", "-t", "ALL_GATHER",
                "-o", str(raw), "-q"))  # fmt: skip
    sizes = [get_attr(n, "comm_size") for n in read_traces([raw])[0].nodes if n.type == NodeType.COMM_COLL_NODE]
    small = sum(1 for s in sizes if s < 4)  # the bundled system splits each collective into 4 chunks
    assert small and _codes(run_cli, raw) == {"below-chunk-size": 4 * small}
    summary = _export(run_cli, raw, tmp_path / "x")
    assert summary["changes"] == {"collectives raised to the chunk count": 4 * small}
    out = [
        get_attr(n, "comm_size") for n in read_traces([tmp_path / "x"])[0].nodes if n.type == NodeType.COMM_COLL_NODE
    ]
    assert min(out) == 4


def test_subgroup_double_free_is_avoided_on_unaware(tmp_path, run_cli):
    """Every rank all-reduces on its TP pair and on its DP pair (the layout of docs/astra-sim.md §7)."""
    raw = tmp_path / "gpt"
    _ok(run_cli("generate", "transformer", "--layers", "2", "--dp", "2", "--tp", "2", "-o", str(raw), "-q"))
    assert _codes(run_cli, raw) == {"subgroup-double-free": 4}
    summary = _export(run_cli, raw, tmp_path / "u", "--backend", "unaware")
    assert summary["changes"] == {"network split in two dimensions (subgroup double free)": 1}
    assert not summary["not_fixed"]
    net = (tmp_path / "u.network.yml").read_text()
    assert "npus_count: [ 2, 2 ]" in net
    system = json.loads((tmp_path / "u.system.json").read_text())
    assert system["all-reduce-implementation"] == ["ring", "ring"]
    # the aware binary takes one dimension: listed as not fixed, and simulate warns
    summary = _export(run_cli, raw, tmp_path / "a", "--backend", "aware")
    assert {f["code"] for f in summary["not_fixed"]} == {"subgroup-double-free"}
    res = run_cli("simulate", str(raw), "-q")
    warned = " ".join(res.stderr.split())
    assert "(subgroup-double-free: ranks 0-3, 4 such)" in warned and "use --backend unaware" in warned
    # with the unaware export's own files, nothing is left to warn about
    res = run_cli("simulate", *summary_cmd(tmp_path / "u"), "-q")
    assert res.exit_code == 0 and "ASTRA-sim would fail" not in res.stderr


def summary_cmd(prefix: Path) -> list[str]:
    return [str(prefix), "--network", f"{prefix}.network.yml", "--system", f"{prefix}.system.json", "--memory",
            f"{prefix}.memory.json", "--congestion", "unaware"]  # fmt: skip


def test_simulate_is_quiet_where_astrasim_runs(tmp_path, run_cli):
    raw = tmp_path / "dp"
    _ok(run_cli("generate", "spec", str(REPO / "examples" / "data_parallel.py"), "-o", str(raw), "-q"))
    res = run_cli("simulate", str(raw), "-q")
    assert res.exit_code == 0 and "ASTRA-sim would" not in res.stderr
    colls = [n for t in read_traces([raw]) for n in t.nodes if n.type == NodeType.COMM_COLL_NODE]
    assert colls and {get_attr(n, "comm_type") for n in colls} == {CollectiveType.ALL_REDUCE}


def test_replay_says_nothing_of_astrasim_model_mode_warns(samples_dir, tmp_path, run_cli):
    """Model mode stands in for ASTRA-sim: one warning per failure kind. A replay of recorded
    durations answers another question (what the recorded run did): nothing about ASTRA-sim."""
    d = samples_dir / "pytorch" / "ddp2"
    raw = tmp_path / "ddp2"
    ets = [str(d / f"et.{r}.json") for r in (0, 1)]
    _ok(
        run_cli(
            "convert",
            "pytorch",
            *ets,
            "-k",
            str(d / "kineto.0.json"),
            "-k",
            str(d / "kineto.1.json"),
            "-o",
            str(raw),
            "-q",
        )
    )
    model = run_cli("simulate", str(raw))
    assert model.exit_code == 0 and "ASTRA-sim would fail here (cpu-compute" in " ".join(model.stderr.split())
    replay = run_cli("simulate", str(raw), "--comm", "replay")
    text = " ".join(replay.stderr.split())
    # A replay of the recorded run says nothing about ASTRA-sim: the user asked for the recorded times.
    assert replay.exit_code == 0 and "warning" not in text.lower() and "ASTRA-sim" not in text, text
    quiet = run_cli("simulate", str(raw), "--comm", "replay", "-q")
    assert quiet.exit_code == 0 and quiet.stderr == ""

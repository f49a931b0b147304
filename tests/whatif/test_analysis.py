"""Breakdown, critical paths, analyze and diff on hand-built traces and on every sample kind."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from chakra.analysis import (
    analyze_traces,
    breakdown,
    classes_of_traces,
    diff_classes,
    op_class,
    read_sim_log,
    schedule_critical_path,
)
from chakra.io import read_traces, write_rank_traces
from chakra.sim import simulate
from chakra.trace import Trace

from .helpers import allreduce, cpu, cpu_gpu_trace


def iv(*pairs):
    return np.array([p[0] for p in pairs], dtype=np.int64), np.array([p[1] for p in pairs], dtype=np.int64)


def test_breakdown_splits_time_exactly():
    b = breakdown({"cpu": iv((0, 10), (20, 30)), "gpu": iv((5, 25)), "comm": iv((25, 40))})
    assert b == {
        "step": 40,
        "cpu_only": 10,
        "gpu_only": 10,
        "cpu_gpu_overlap": 10,
        "compute": 30,
        "comm": 15,
        "comm_overlapped": 5,
        "exposed_comm": 10,
        "mem": 0,
        "idle": 0,
    }
    assert breakdown({"cpu": iv((10, 20))}, finish_ns=50)["idle"] == 40


def test_schedule_path_follows_what_delayed_the_end():
    tr = cpu_gpu_trace()
    res = simulate([tr], record_nodes=True)
    assert schedule_critical_path(tr, res.node_times[0]) == [0, 2, 3]  # a -> kernel k -> c
    rep = analyze_traces([tr], res.node_times)
    r0 = rep["ranks"][0]
    assert r0["critical_path"]["length_ns"] == 45_000
    assert r0["breakdown"]["cpu_gpu_overlap"] == 20_000 and r0["breakdown"]["gpu_only"] == 10_000
    assert r0["schedule_path"]["by_resource"] == {"gpu": 30_000, "cpu": 15_000}


def test_op_class_strips_noise():
    assert op_class("autograd::engine::evaluate_function: AddmmBackward0") == "AddmmBackward0"
    assert op_class("ProfilerStep#3") == "ProfilerStep"
    assert (
        op_class("void at::native::vectorized_elementwise_kernel<4, float>(int)")
        == "void at::native::vectorized_elementwise_kernel"
    )
    assert op_class(allreduce(0, 8)) == "COMM_COLL:ALL_REDUCE"


def test_diff_classes_counts_and_deltas():
    a = Trace(nodes=[cpu(0, "aten::mm", 10), cpu(1, "aten::relu", 4, [0])], rank=0)
    b = Trace(nodes=[cpu(0, "aten::mm", 7), cpu(1, "aten::mm", 7, [0]), allreduce(2, 64, [1])], rank=0)
    rows = {r["class"]: r for r in diff_classes(classes_of_traces([a]), classes_of_traces([b]))}
    assert rows["aten::mm"]["count_b"] == 2 and rows["aten::mm"]["delta_ns"] == 4_000
    assert rows["aten::relu"]["delta_pct"] == -100.0 and rows["COMM_COLL:ALL_REDUCE"]["count_a"] == 0


# ----------------------------------------------------------------------------- every sample kind


def _convert(name: str, inputs: list[Path], prefix: Path) -> str:
    import importlib

    mod = importlib.import_module(f"chakra.converters.{name}")
    mod.convert(inputs, prefix)
    return str(prefix)


@pytest.fixture(scope="module")
def sample_prefixes(samples_dir, tmp_path_factory):
    d = samples_dir
    tmp = tmp_path_factory.mktemp("converted")
    pt = d / "pytorch"
    return {
        "astrasim": str(d / "astrasim" / "all_reduce_8npus_1MB" / "all_reduce"),
        "official_json": str(d / "et" / "official_small_chakra.0.json"),
        "pytorch_mlp": _convert("pytorch", [pt / "mlp" / "et.0.json", pt / "mlp" / "kineto.0.json"], tmp / "mlp"),
        "pytorch_ddp2": _convert(
            "pytorch",
            [pt / "ddp2" / f"{k}.{r}.json" for k in ("et", "kineto") for r in (0, 1)],
            tmp / "ddp2",
        ),
        "pytorch_et_linear": _convert("pytorch", [d / "pytorch_et" / "param_1.0.1_linear_et.json.gz"], tmp / "lin"),
        "nsys": _convert("nsys", [d / "nsys" / "testcuda_nsys2026.1_report2.sqlite"], tmp / "nsys"),
    }


@pytest.mark.parametrize(
    "key", ["astrasim", "official_json", "pytorch_mlp", "pytorch_ddp2", "pytorch_et_linear", "nsys"]
)
def test_analyze_every_sample(key, sample_prefixes, run_cli):
    res = run_cli("analyze", sample_prefixes[key], "--json", "-q")
    assert res.exit_code == 0, res.stderr
    rep = json.loads(res.stdout)
    traces = read_traces([sample_prefixes[key]])
    assert len(rep["ranks"]) == len(traces)
    for r in rep["ranks"].values():
        b = r["breakdown"]
        assert b["step"] > 0
        # No schedule beats the dependency chain, and the parts add up to the step.
        assert r["critical_path"]["length_ns"] <= b["step"]
        assert b["compute"] + b["exposed_comm"] + b["mem"] + b["idle"] >= b["step"] - b["mem"]
        assert b["cpu_only"] + b["gpu_only"] + b["cpu_gpu_overlap"] == b["compute"]
    human = run_cli("analyze", sample_prefixes[key])
    assert human.exit_code == 0 and "critical path" in human.stdout


def test_analyze_astrasim_matches_the_reference_time(sample_prefixes, run_cli):
    rep = json.loads(run_cli("analyze", sample_prefixes["astrasim"], "--json", "-q").stdout)
    assert rep["schedule"] == "simulated"
    for r in rep["ranks"].values():
        assert r["breakdown"]["step"] == 117_780 and r["breakdown"]["exposed_comm"] == 117_780


def test_analyze_falls_back_when_a_trace_cannot_be_simulated(tmp_path, run_cli):
    # A collective on a process group nobody defines cannot be simulated: recorded times are used.
    a, c = cpu(0, "a", 10), allreduce(1, 64, [0])
    c.attr.add(name="pg_name", string_val="undefined-group")
    c.start_time_micros, c.duration_micros = 10, 30
    write_rank_traces(tmp_path / "bad", [Trace(nodes=[a, c], rank=0)])
    res = run_cli("analyze", str(tmp_path / "bad"), "--json")
    assert res.exit_code == 0, res.stderr
    rep = json.loads(res.stdout)
    assert rep["schedule"] == "recorded" and "not simulated" in res.stderr
    assert rep["ranks"]["0"]["breakdown"]["exposed_comm"] == 30_000
    strict = run_cli("analyze", str(tmp_path / "bad"), "--schedule", "simulate")
    assert strict.exit_code == 1


def test_diff_traces_and_logs(sample_prefixes, run_cli, tmp_path):
    same = json.loads(run_cli("diff", sample_prefixes["pytorch_mlp"], sample_prefixes["pytorch_mlp"], "--json").stdout)
    assert same["summary"]["delta_ns"] == 0 and all(r["delta_ns"] == 0 for r in same["classes"])
    res = run_cli("diff", sample_prefixes["pytorch_mlp"], sample_prefixes["pytorch_ddp2"], "--json")
    assert res.exit_code == 0, res.stderr
    rows = {r["class"]: r for r in json.loads(res.stdout)["classes"]}
    assert rows["COMM_COLL:ALL_REDUCE"]["count_a"] == 0 and rows["COMM_COLL:ALL_REDUCE"]["count_b"] > 0
    # Two simulation logs: the 8-NPU all-reduce at the default and at double bandwidth.
    from chakra.sim.config import default_network

    traces = read_traces([sample_prefixes["astrasim"]])
    simulate(traces, log_path=tmp_path / "base.log")
    simulate(traces, default_network(8).scaled(bandwidth=2), log_path=tmp_path / "fast.log")
    log = read_sim_log(tmp_path / "base.log")
    assert set(log.finish_ns.values()) == {117_780}
    res = run_cli("diff", str(tmp_path / "base.log"), str(tmp_path / "fast.log"), "--json")
    row = json.loads(res.stdout)["classes"][0]
    assert row["count_a"] == row["count_b"] == 8 and row["delta_ns"] < 0
    an = run_cli("analyze", str(tmp_path / "fast.log"), "--json")
    assert an.exit_code == 0 and json.loads(an.stdout)["schedule"] == "log"


def test_bad_log_line_names_file_and_line(tmp_path, run_cli):
    p = tmp_path / "x.log"
    p.write_text("issue,0,10,1,a\ncallback,0,x,1,a\n")
    res = run_cli("analyze", str(p))
    assert res.exit_code == 1 and "x.log (line 2)" in res.stderr


def test_write_then_analyze_recorded_schedule(tmp_path, run_cli):
    a, b = cpu(0, "a", 10), cpu(1, "b", 5, [0])
    a.start_time_micros, b.start_time_micros = 100, 120
    write_rank_traces(tmp_path / "rec", [Trace(nodes=[a, b], rank=0)])
    rep = json.loads(run_cli("analyze", str(tmp_path / "rec"), "--schedule", "recorded", "--json").stdout)
    assert rep["ranks"]["0"]["breakdown"]["step"] == 25_000 and rep["ranks"]["0"]["breakdown"]["idle"] == 10_000


def test_analyze_and_timeline_read_both_log_spellings(run_cli, samples_dir, tmp_path):
    """One log reader: `analyze`, `diff` and `timeline` take our CSV log and ASTRA-sim's output alike.

    The ASTRA-sim spelling is built from our own simulator's log of the all-reduce sample in the
    format ASTRA-sim's workload prints (`issue,sys->id=N, tick=T, node->id=I, node->name=X,
    node->type=K` behind spdlog's `[time] [logger] [level]` prefix, among other program output).
    """
    csv_log = tmp_path / "sim.csv"
    prefix = samples_dir / "astrasim" / "all_reduce_8npus_1MB" / "all_reduce"
    assert run_cli("simulate", str(prefix), "--log", str(csv_log), "-q").exit_code == 0
    lines = ["ring of node 0, id: 0 dimension: local total nodes in ring: 8"]
    for row in csv_log.read_text().splitlines():
        ev, npu, t, nid, name = row.split(",", 4)
        lines.append(
            f"[2026-11-23 10:00:00.000] [workload] [debug] {ev},sys->id={npu}, tick={t}, node->id={nid}, "
            f"node->name={name}, node->type=7"
        )
    lines.append("sys[0] finished, 117780 cycles, exposed communication 117780 cycles.")
    astra_log = tmp_path / "astra.log"
    astra_log.write_text("\n".join(lines) + "\n")
    reports = []
    for log in (csv_log, astra_log):
        res = run_cli("analyze", str(log), "--json")
        assert res.exit_code == 0, res.stderr
        reports.append(json.loads(res.stdout)["ranks"])
        assert run_cli("timeline", str(log), "-o", str(log) + ".json", "-q").exit_code == 0
    assert reports[0] == reports[1]
    assert len(reports[0]) == 8 and {r["finish_ns"] for r in reports[0].values()} == {117_780}
    res = run_cli("diff", str(csv_log), str(astra_log), "--json")
    assert res.exit_code == 0, res.stderr

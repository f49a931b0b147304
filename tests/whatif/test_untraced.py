"""The untraced run: the profiler's cost removed on conversion, replay and what-if about the real step.

Inputs are the H200 recordings of tests/data/gpu (written by tools/pytorch_gpu.py; each folder's
timing.json holds the median of 40 untraced, CUDA-synchronised steps, the truth these tests
compare with) and, where torch is installed, a run recorded here with chakra.record.Recorder.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from chakra.converters.pytorch import convert_files
from chakra.converters.pytorch.driver import Options
from chakra.io import read_traces
from chakra.schema.attrs import get_attr

GPU = Path(__file__).resolve().parents[1] / "data" / "gpu"


def untraced_ns(run: str) -> float:
    return json.loads((GPU / run / "timing.json").read_text())["step_s"]["median"] * 1e9


def traced_ns(run: str) -> float:
    steps = json.loads((GPU / run / "timing.json").read_text())["traced_step_s"]
    return sum(steps) / len(steps) * 1e9


def convert(run: str, out: Path, **opts) -> dict:
    folder = GPU / run
    (summary,) = convert_files([folder / "et.json.gz"], [folder / "kineto.json.gz"], out / run, Options(**opts))
    return summary


@pytest.fixture(scope="module")
def fp32(tmp_path_factory):
    """The launch-bound FP32 run, converted with its manifest (timing.json beside the traces)."""
    out = tmp_path_factory.mktemp("fp32")
    return out / "fp32", convert("fp32", out)


def test_manifest_beside_the_traces_fits_the_untraced_step(fp32, run_cli):
    prefix, summary = fp32
    o = summary["profiler_overhead"]
    truth = untraced_ns("fp32")
    assert o["mode"] == "measured" and o["measured_source"].endswith("fp32/timing.json")
    assert o["measured_step_ns"] == pytest.approx(truth)
    # the profiled replay is the traced step (4.8x the untraced one); the converted trace is the untraced step
    assert o["replay_profiled_ns"] == pytest.approx(traced_ns("fp32"), rel=0.02)
    assert o["predicted_step_ns"] == pytest.approx(truth, rel=0.03)
    res = run_cli("simulate", str(prefix), "--comm", "replay", "--json")
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    step = out["step"]
    assert step["times"] == "untraced" and step["steps"] == 2
    assert step["step_ns"] == pytest.approx(truth, rel=0.03)
    assert out["finish_ns"] == pytest.approx(2 * truth, rel=0.05)  # two untraced steps
    assert step["profiled_replay_step_ns"] == pytest.approx(traced_ns("fp32"), rel=0.02)
    assert step["profiled_recorded_step_ns"] == pytest.approx(traced_ns("fp32"), rel=0.02)
    text = run_cli("simulate", str(prefix), "--comm", "replay").stdout
    assert "the untraced run" in text and "profiled step" in text


def test_recorded_times_stay_on_the_nodes(fp32):
    prefix, _ = fp32
    (t,) = read_traces([prefix])
    changed = [n for n in t.nodes if get_attr(n, "profiled_dur_us", None) is not None]
    assert len(changed) > 5000  # the host nodes of two launch-bound steps
    assert all(n.duration_micros <= get_attr(n, "profiled_dur_us") for n in changed)
    now, recorded = sum(n.duration_micros for n in changed), sum(get_attr(n, "profiled_dur_us") for n in changed)
    assert now < 0.3 * recorded  # a launch-bound run: the profiler is most of the host time
    kernels = [n for n in t.nodes if get_attr(n, "is_cpu_op", None) is False and n.name != "queue"]
    assert kernels and not any(get_attr(n, "profiled_dur_us", None) is not None for n in kernels)


def test_profiled_option_keeps_the_recorded_durations(tmp_path, run_cli):
    s = convert("fp32", tmp_path, overhead="keep")
    o = s["profiler_overhead"]
    assert o["mode"] == "kept" and o["removed_us"] == 0
    assert o["profiled_step_ns"] == pytest.approx(traced_ns("fp32"), rel=0.02)
    out = json.loads(run_cli("simulate", str(tmp_path / "fp32"), "--comm", "replay", "--json").stdout)
    assert out["step"]["times"] == "profiled"
    assert out["step"]["step_ns"] == pytest.approx(traced_ns("fp32"), rel=0.02)


def test_step_time_by_hand_and_bad_step_time(tmp_path, run_cli):
    folder = tmp_path / "in"
    folder.mkdir()
    for name in ("et.json.gz", "kineto.json.gz"):  # no timing.json beside them
        shutil.copy(GPU / "amp" / name, folder / name)
    et, kin = str(folder / "et.json.gz"), str(folder / "kineto.json.gz")
    res = run_cli("convert", "pytorch", et, "-k", kin, "-o", str(tmp_path / "amp"), "--step-time", "10.43ms", "--json")
    assert res.exit_code == 0, res.stderr
    o = json.loads(res.stdout)[0]["profiler_overhead"]
    assert o["mode"] == "measured" and o["measured_source"] == "--step-time"
    assert o["predicted_step_ns"] == pytest.approx(untraced_ns("amp"), rel=0.03)
    res = run_cli("convert", "pytorch", et, "-k", kin, "-o", str(tmp_path / "bad"), "--step-time", "fast")
    assert res.exit_code == 1
    assert "--step-time" in res.stderr and "27.8ms" in res.stderr and "Traceback" not in res.stderr
    assert not list(tmp_path.glob("bad*"))


def test_trace_alone_is_estimated_and_says_so(tmp_path, run_cli):
    folder = tmp_path / "in"
    folder.mkdir()
    for name in ("et.json.gz", "kineto.json.gz"):
        shutil.copy(GPU / "big-amp" / name, folder / name)
    res = run_cli("convert", "pytorch", str(folder / "et.json.gz"), "-k", str(folder / "kineto.json.gz"),
                  "-o", str(tmp_path / "run"))  # fmt: skip
    assert res.exit_code == 0, res.stderr
    assert "estimated from the trace alone" in res.stdout
    assert "host's untraced speed" in " ".join(res.stdout.split())  # what it cannot know, said (the table wraps)
    (t,) = read_traces([tmp_path / "run"])
    o = json.loads(get_attr(t.metadata, "profiler_overhead"))
    assert o["mode"] == "estimated" and o["measured_step_ns"] is None
    assert o["removed_us"] > 0.8 * o["host_recorded_us"]  # the profiler is most of this run's host time
    # the profiled step is 6x the untraced one; the estimate lands near it (docs/whatif-validation.md)
    assert o["profiled_step_ns"] > 5 * untraced_ns("big-amp")
    step = json.loads(run_cli("simulate", str(tmp_path / "run"), "--comm", "replay", "--json").stdout)["step"]
    assert "estimated from the trace alone" in step["label"] and "uncertain" in step["label"]
    assert step["step_ns"] == pytest.approx(untraced_ns("big-amp"), rel=0.25)


def test_whatif_baseline_is_the_replay_simulate_prints(fp32, run_cli):
    """One baseline: whatif's "before" is the step simulate prints, for the same --comm."""
    prefix, _ = fp32
    sim = json.loads(run_cli("simulate", str(prefix), "--comm", "replay", "--json").stdout)
    res = run_cli("whatif", str(prefix), "-r", "cuda-graphs", "--comm", "replay", "--json")
    assert res.exit_code == 0, res.stderr
    w = json.loads(res.stdout)
    assert w["baseline"]["step_ns"] == pytest.approx(sim["step"]["step_ns"], abs=1)
    assert w["timebase"]["times"] == "untraced"
    # CUDA graphs on the launch-bound model: the recorded graph run is 1.78x faster untraced
    real = untraced_ns("fp32") / untraced_ns("cudagraph")
    assert w["speedup"] == pytest.approx(real, rel=0.10)


def test_median_step_skips_a_capture_step(tmp_path, run_cli):
    """The CUDA-graph recording's first traced step is the capture (95 ms of 3 steps): the step
    time is the median, the replays, not the mean."""
    s = convert("cudagraph", tmp_path, overhead="keep")
    out = json.loads(run_cli("simulate", str(tmp_path / "cudagraph"), "--comm", "replay", "--json").stdout)
    steps = out["step"]["steps_ns"]
    assert len(steps) == 3 and steps[0] > 10 * steps[1]
    assert out["step"]["step_ns"] == pytest.approx(steps[1], rel=0.05)
    assert s["profiler_overhead"]["mode"] == "kept"


def test_recorder_on_cpu(tmp_path, run_cli):
    """chakra.record.Recorder in a training loop: manifest, ET + Kineto, and the converter uses it."""
    torch = pytest.importorskip("torch")
    from chakra.record import Recorder

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(16, 64), torch.randint(0, 8, (16,))
    rec = Recorder(tmp_path / "run", warmup=2, timed=8, traced=2, timed_after=4, device="cpu", extra={"model": "mlp"})
    phases = []
    while rec.running:
        with rec.step() as phase:
            phases.append(phase)
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            opt.zero_grad()
    # one profiler warm-up step; untraced steps again after the traced ones
    assert phases == ["warmup"] * 2 + ["timed"] * 8 + ["traced"] * 3 + ["timed-after"] * 4
    m = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert m["kind"] == "chakra.record" and m["world_size"] == 1 and m["device"]["type"] == "cpu"
    assert m["untraced_step_s"]["n"] == 12 and len(m["traced_step_s"]) == 2 and len(m["traced_thread_cpu_s"]) == 2
    assert m["untraced_before_step_s"]["n"] == 8 and m["untraced_after_step_s"]["n"] == 4
    assert m["untraced_drift"] == pytest.approx(
        m["untraced_after_step_s"]["median"] / m["untraced_before_step_s"]["median"] - 1
    )
    # one thread on CPU: the truth is its CPU time (never above the wall clock); else the wall clock
    from chakra.record.manifest import truth_of

    t = truth_of(m)
    one = m["device"]["threads"] == 1 and m["untraced_thread_cpu_s"]["median"] < m["untraced_step_s"]["median"]
    assert t.what == ("thread CPU" if one else "wall")
    assert t.step_ns <= m["untraced_step_s"]["median"] * 1e9 + 1
    assert m["versions"]["torch"] == torch.__version__ and m["extra"] == {"model": "mlp"}
    assert sorted(m["files"]) == ["et.0.json.gz", "kineto.0.json.gz"]
    res = run_cli("convert", "pytorch", str(tmp_path / "run" / "et.0.json.gz"), "-k",
                  str(tmp_path / "run" / "kineto.0.json.gz"), "-o", str(tmp_path / "out"), "--json")  # fmt: skip
    assert res.exit_code == 0, res.stderr
    o = json.loads(res.stdout)[0]["profiler_overhead"]
    assert o["mode"] == "measured" and o["measured_source"].endswith("manifest.json")
    truth = t.step_ns
    if o["replay_profiled_ns"] > truth and not o["notes"]:
        assert o["predicted_step_ns"] == pytest.approx(truth, rel=0.03)


def test_recorder_manifest_is_read_by_the_converter(tmp_path, run_cli, samples_dir):
    """A run the Recorder wrote (tests/data/samples/record): its manifest gives the step time."""
    d = samples_dir / "record" / "mlp-fused"
    m = json.loads((d / "manifest.json").read_text())
    res = run_cli("convert", "pytorch", str(d / "et.0.json.gz"), "-k", str(d / "kineto.0.json.gz"),
                  "-o", str(tmp_path / "mlp"), "--json")  # fmt: skip
    assert res.exit_code == 0, res.stderr
    o = json.loads(res.stdout)[0]["profiler_overhead"]
    # a one-threaded CPU run: the truth is the thread's CPU time (its wall clock also holds the
    # other processes' time on a shared core), the median of the steps before and after the traced ones
    cpu = m["untraced_thread_cpu_s"]["median"]
    truth = min(cpu, m["untraced_step_s"]["median"]) * 1e9
    assert m["untraced_thread_cpu_s"]["n"] == 60 and len(m["untraced_per_step_s"]) == 60
    assert m["untraced_after_step_s"]["n"] == 20 and abs(m["untraced_drift"]) < 0.5
    assert o["mode"] == "measured" and o["measured_source"].endswith("mlp-fused/manifest.json")
    assert o["measured_step_ns"] == pytest.approx(truth)
    assert o["predicted_step_ns"] == pytest.approx(truth, rel=0.03)
    assert o["replay_profiled_ns"] > 2 * truth  # the profiler tripled this CPU run's step
    step = json.loads(run_cli("simulate", str(tmp_path / "mlp"), "--comm", "replay", "--json").stdout)["step"]
    assert step["steps"] == 3 and step["step_ns"] == pytest.approx(truth, rel=0.03)


def test_ddp_waits_follow_the_peer_and_the_collectives(tmp_path):
    """Two DDP ranks (gloo) sharing one GPU, converted from the trace alone: the main thread's
    backward wait ends with the helper threads (autograd's and gloo's), not after its profiled
    36 ms; the optimizer starts only after the last all-reduce of its step; the two ranks leave
    each collective together (its wait for the peer follows the converted schedule)."""
    from chakra.schema import NodeType
    from chakra.sim import SimOptions, simulate
    from chakra.sim.steps import step_node_ids

    folder = GPU / "ddp2"
    ets = sorted(folder.glob("et.*.json.gz"))
    kins = sorted(folder.glob("kineto.*.json.gz"))
    res = convert_files(ets, kins, tmp_path / "ddp2", Options(overhead="estimate"))
    assert any("waits for their peers rebuilt" in n for n in res[0]["profiler_overhead"]["notes"])
    traces = read_traces([tmp_path / "ddp2"])
    sim = simulate(traces, options=SimOptions(comm_mode="replay", record_nodes=True))
    ends = {}
    for t in traces:
        times = sim.node_times[t.rank]
        s0 = times[step_node_ids(t)[-1]][0]
        colls = [n for n in t.nodes if n.type == NodeType.COMM_COLL_NODE and times[n.id][0] >= s0]
        opt = next(n for n in t.nodes if n.name.startswith("Optimizer.step") and times[n.id][0] >= s0)
        assert len(colls) == 3  # DDP's three buckets
        assert times[opt.id][0] >= max(times[c.id][1] for c in colls)
        ends[t.rank] = [times[c.id][1] for c in colls]
        # no main-thread wait keeps the profiled backward: the longest host gap is under 5 ms
        gaps = [n.duration_micros for n in t.nodes if n.name == "gap" and times[n.id][0] >= s0]
        assert max(gaps) < 5000
    # members of a collective finish together (within the 1 µs rounding of each span)
    for a, b in zip(ends[0], ends[1]):
        assert abs(a - b) <= 2000
    # the replay is the untraced step within 20% from the trace alone (was +87%)
    from chakra.sim.steps import step_time

    step = step_time(traces, {r: v.finish_ns for r, v in sim.ranks.items()}, sim.node_times).step_ns
    assert step == pytest.approx(untraced_ns("ddp2"), rel=0.20)


def test_fit_reaches_a_step_below_the_per_call_floor(tmp_path, run_cli, samples_dir):
    """A CPU run whose host ran slower while traced than untraced: removing every per-call cost
    still leaves the replay longer than the measured step, so the fit scales the host work left
    after the profiler's costs by one share (the recorded MLP run, given a step 0.6x its truth)."""
    d = samples_dir / "record" / "mlp-fused"
    m = json.loads((d / "manifest.json").read_text())
    target_ms = 0.6 * m["untraced_thread_cpu_s"]["median"] * 1e3
    res = run_cli("convert", "pytorch", str(d / "et.0.json.gz"), "-k", str(d / "kineto.0.json.gz"),
                  "-o", str(tmp_path / "mlp"), "--step-time", f"{target_ms:.4f}ms", "--json")  # fmt: skip
    assert res.exit_code == 0, res.stderr
    o = json.loads(res.stdout)[0]["profiler_overhead"]
    assert 0.0 < o["work_share"] < 1.0
    assert any("the host ran slower while traced" in n for n in o["notes"]), o["notes"]
    assert o["predicted_step_ns"] == pytest.approx(target_ms * 1e6, rel=0.03)
    # the manifest's own step needs no such share: the record says nothing of it
    res = run_cli("convert", "pytorch", str(d / "et.0.json.gz"), "-k", str(d / "kineto.0.json.gz"),
                  "-o", str(tmp_path / "own"), "--json")  # fmt: skip
    assert "work_share" not in json.loads(res.stdout)[0]["profiler_overhead"]


def test_device_check_script_end_to_end_on_cpu(tmp_path):
    """tools/gpu_truth_device.sh in its CPU mode: records each variant untraced and traced, then
    converts and prints the replay and recipe tables (the GPU session's script, run small)."""
    pytest.importorskip("torch")
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "OUT": str(tmp_path / "out"), "MODELS": "bert", "TIMED": "6", "PY": sys.executable,
           "JOBS": "1"}  # fmt: skip
    proc = subprocess.run([str(root / "tools" / "gpu_truth_device.sh"), "--device", "cpu", "--tiny"], env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    runs = sorted(p.name for p in (tmp_path / "out" / "runs").iterdir())
    assert runs == ["bert-bf16", "bert-fp32", "bert-fused"]
    for r in runs:
        m = json.loads((tmp_path / "out" / "runs" / r / "manifest.json").read_text())
        assert m["untraced_before_step_s"]["n"] == 6 and m["untraced_after_step_s"]["n"] == 10
        assert m["extra"]["tiny"] is True and len(m["traced_step_s"]) == 3
    table = json.loads((tmp_path / "out" / "table.json").read_text())
    assert sorted(r["run"] for r in table["replay"]) == runs
    for r in table["replay"]:
        assert r["profiled_replay_ms"] == pytest.approx(r["traced_ms"], rel=0.1)  # the replay is exact
        assert r["with_step_time_ms"] == pytest.approx(r["untraced_ms"], rel=0.03)
    assert {(r["recipe"], r["variant"]) for r in table["recipes"]} == {("fused-optimizer", "fused"), ("amp", "bf16")}
    text = (tmp_path / "out" / "table.md").read_text()
    assert "| bert-fp32" in text and "with the step time within 3%: 3/3" in text


def test_manifest_cautions_reach_the_conversion(tmp_path, run_cli, samples_dir):
    """A manifest whose traced steps were preempted, or whose untraced step moved between before
    and after the traced steps, says so in the conversion's notes. The recorded MLP run has
    neither (drift under 10%, no preemption); its copy here carries the values two recordings of
    docs/whatif-validation.md showed (A1 lstm-fused preempted 44% while traced, A2 cnn-fused drift -30%)."""
    import shutil

    from chakra.record.manifest import cautions

    d = samples_dir / "record" / "mlp-fused"
    m = json.loads((d / "manifest.json").read_text())
    assert cautions(m) == ()
    run = tmp_path / "run"
    shutil.copytree(d, run)
    m.update(traced_preemption=0.44, untraced_drift=-0.30)
    (run / "manifest.json").write_text(json.dumps(m))
    res = run_cli("convert", "pytorch", str(run / "et.0.json.gz"), "-k", str(run / "kineto.0.json.gz"),
                  "-o", str(tmp_path / "out"), "--json")  # fmt: skip
    assert res.exit_code == 0, res.stderr
    notes = json.loads(res.stdout)[0]["profiler_overhead"]["notes"]
    assert any("preempted (wall clock 44%" in n and n.startswith("manifest.json: ") for n in notes), notes
    assert any("moved -30% between before and after" in n for n in notes), notes
    text = run_cli("convert", "pytorch", str(run / "et.0.json.gz"), "-k", str(run / "kineto.0.json.gz"),
                   "-o", str(tmp_path / "out2")).stdout  # fmt: skip
    assert "re-record at a higher priority" in text.replace("\n", " ").replace("│", "").replace("  ", " ")

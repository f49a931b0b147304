"""Replay and what-if against GPU runs recorded after the profiler-cost method was fixed
(tests/data/gpu-fresh/, SOURCES.md there; docs/whatif-validation.md, "GPU, held out").

Nine of the 35 runs recorded on an H200 on 2026-11-28 with `tools/gpu_truth_device.sh`, models
never used to choose the method. The test recomputes their rows with `tools/truth_table.py` and
checks the figures the docs state (within 0.5 percentage points: fixed inputs, only float
rounding moves them) and the target that holds on them: with the untraced step time given, the
replay is within 3% of it. From the trace alone it is not (2 of 9 within 10%): the docs say why.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "gpu-fresh"


@pytest.fixture(scope="module")
def res():
    sys.path.insert(0, str(ROOT / "tools"))  # truth_table imports its sibling gpu_whatif
    try:
        spec = importlib.util.spec_from_file_location("truth_table", ROOT / "tools" / "truth_table.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod.validate(DATA, json.loads((DATA / "peaks.json").read_text()))
    finally:
        sys.path.remove(str(ROOT / "tools"))


def err(p, m):
    return 100.0 * (p / m - 1.0)


# run -> (error with the trace alone %, error with the untraced step time given %), as the docs state
REPLAY = {
    "encoder-fused": (-13.0, 0.1),
    "lstm-cudagraph": (45.3, 0.0),
    "lstm-fp32": (-20.0, 0.0),
    "mlp-cudagraph": (18.4, -0.1),
    "mlp-fp32": (-43.6, 0.0),
    "mlp-fused": (-27.7, 0.1),
    "resnet-fp32": (-11.1, 0.3),
    "resnet512-fp32": (-3.2, -0.1),
    "resnet512-fused": (-2.5, 0.0),
}
#: a CUDA graph's replay under CUPTI: the profiler also slows the device side (each kernel of the
#: graph is traced), which the recorded kernel times hold but a replay of them cannot add back
GRAPHS = {"lstm-cudagraph", "mlp-cudagraph"}


@pytest.mark.parametrize("run", sorted(REPLAY))
def test_replay_against_the_untraced_step(res, run):
    row = next(x for x in res["replay"] if x["run"] == run)
    alone, given = REPLAY[run]
    assert err(row["trace_alone_ms"], row["untraced_ms"]) == pytest.approx(alone, abs=0.5)
    assert err(row["with_step_time_ms"], row["untraced_ms"]) == pytest.approx(given, abs=0.5)
    assert abs(err(row["with_step_time_ms"], row["untraced_ms"])) < 3.0
    if run not in GRAPHS:
        # the replay of the recorded durations is the traced step, 1.8-4.4x the untraced one
        assert row["profiled_replay_ms"] == pytest.approx(row["traced_ms"], rel=0.02)
        assert row["traced_ms"] > 1.7 * row["untraced_ms"]


def test_cuda_truth_is_the_steps_before_the_profiler():
    """On CUDA the steps timed after the traced ones run with the profiler's device tracing still
    attached (resnet-fp32: +38%): the truth is the steps before, and the caution says so."""
    from chakra.record.manifest import find_truth, truth_of

    m = json.loads((DATA / "resnet-fp32" / "manifest.json").read_text())
    assert m["device"]["type"] == "cuda" and m["untraced_drift"] > 0.3
    t = truth_of(m)
    assert t.step_ns == pytest.approx(m["untraced_before_step_s"]["median"] * 1e9)
    assert t.step_ns < 0.99 * m["untraced_step_s"]["median"] * 1e9  # all 40 steps would say 9.84 ms
    assert any("on CUDA" in c for c in t.cautions)
    found = find_truth([DATA / "resnet-fp32" / "et.0.json.gz"])
    assert found is not None and found.step_ns == pytest.approx(t.step_ns)


# (model, recipe) -> (real speedup, error with the step time %, error from the trace alone %)
RECIPES = {
    ("lstm", "cuda-graphs"): (5.441, 7.8, -13.7),
    ("mlp", "cuda-graphs"): (5.832, -9.6, -49.0),
    ("mlp", "fused-optimizer"): (1.350, 17.1, 22.6),
    ("resnet512", "fused-optimizer"): (1.040, -1.7, -1.6),
}


@pytest.mark.parametrize("model,recipe", sorted(RECIPES))
def test_recipe_speedups_against_real_speedups(res, model, recipe):
    row = next(x for x in res["recipes"] if x["model"] == model and x["recipe"] == recipe)
    real, given, alone = RECIPES[(model, recipe)]
    assert row["real_speedup"] == pytest.approx(real, abs=0.005)
    assert err(row["predicted_speedup_measured"], row["real_speedup"]) == pytest.approx(given, abs=0.5)
    assert err(row["predicted_speedup_estimate"], row["real_speedup"]) == pytest.approx(alone, abs=0.5)


def _converted(run, tmp_path):
    from chakra.converters.pytorch import convert_files
    from chakra.io import read_traces

    d = DATA / run
    convert_files([d / "et.0.json.gz"], [d / "kineto.0.json.gz"], tmp_path / run)  # the manifest: fitted
    return read_traces([tmp_path / f"{run}.0.et"])


def test_cuda_graphs_makes_a_per_parameter_adam_capturable(tmp_path):
    """The mlp's Adam (foreach=False) updates 14 parameters per step, 3 steps: capturing it adds
    14 one-element kernels per update, as its recorded graph run has (349 kernels per step against
    153). A fused Adam is captured as it is."""
    from chakra.schema.kinds import resource_of
    from chakra.whatif import recipes

    base = _converted("mlp-fp32", tmp_path)
    w = recipes.cuda_graphs(base, scalar_kernel_us=1.0, kernel_gap_us=0.0)
    assert w.changed["capturable_updates"] == 14 * 3
    gpu = [n for n in base[0].nodes if resource_of(n) == "gpu" and n.name != "queue"]
    after = {n.id: n.duration_micros for n in w.traces[0].nodes}
    assert sum(after[n.id] - n.duration_micros for n in gpu) == 14 * 14 * 3  # µs: 14 kernels x 1 µs each
    assert any("made capturable" in n for n in w.notes)
    fused = recipes.cuda_graphs(_converted("mlp-fused", tmp_path))
    assert fused.changed["capturable_updates"] == 0


def test_cuda_graphs_keeps_side_stream_kernels_in_capture_order(tmp_path):
    """cuDNN's LSTM runs most of its kernel time on side streams: in the graph each kernel follows
    the one recorded before it, so the predicted graph step is not shorter than the kernels."""
    from chakra.converters.pytorch.overhead import simulated_step_ns
    from chakra.schema.kinds import resource_of
    from chakra.whatif import recipes

    base = _converted("lstm-fp32", tmp_path)
    w = recipes.cuda_graphs(base, kernel_gap_us=0.0, scalar_kernel_us=0.0)
    kernels = [n for n in w.traces[0].nodes if resource_of(n) == "gpu" and n.name != "queue"]
    per_step_us = sum(n.duration_micros for n in kernels) / 3
    assert simulated_step_ns(w.traces) / 1e3 >= 0.95 * per_step_us
    assert w.changed["streams_joined"] > 0 and any("capture order" in n for n in w.notes)

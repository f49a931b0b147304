"""`amp --on cpu --measure`: bf16 autocast dtypes propagated through a real fp32 CPU recording,
and its operators timed here in fp32 and bf16.

Input: tests/data/samples/pytorch/mlp, a CPU training run (3 x Linear(+ReLU), Adam, 2 profiled
steps) recorded with torch's ExecutionTraceObserver and Kineto. The propagation tests need no
torch; the measuring ones skip without it (the `[torch]` extra).
"""

from __future__ import annotations

import collections
import json
import sys
from pathlib import Path

import pytest

from chakra.converters.pytorch import convert_files
from chakra.converters.pytorch.driver import Options
from chakra.errors import InputError
from chakra.io import read_traces
from chakra.whatif import recipes
from chakra.whatif.autocast_cpu import BF16, FP32, propagate

MLP = Path(__file__).resolve().parents[1] / "data" / "samples" / "pytorch" / "mlp"


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    out = tmp_path_factory.mktemp("amp_cpu") / "mlp"
    (summary,) = convert_files([MLP / "et.0.json"], [MLP / "kineto.0.json"], out, Options())
    return read_traces([summary["output"]])


def by(units, phase, name):
    return [u for u in units if u.phase == phase and u.node.name == name]


def test_forward_follows_autocast_cpu_lists(mlp):
    us = propagate(mlp[0].nodes)
    steps = 2
    linears = by(us, "forward", "aten::linear")
    assert len(linears) == 3 * steps
    assert all(u.policy == "lower" and u.out_dtype == BF16 and u.autocast for u in linears)
    # the first layer reads the fp32 batch (autocast casts it); the others read the bf16 ReLU output
    first = [u.in_dtypes[0] for u in linears]
    assert first == [FP32, BF16, BF16] * steps
    # weights and biases stay fp32 tensors (autocast casts a copy)
    assert all(u.in_dtypes[1:] == [FP32, FP32] for u in linears)
    relus = by(us, "forward", "aten::relu")
    assert len(relus) == 2 * steps and all(u.in_dtypes == [BF16] and u.out_dtype == BF16 for u in relus)
    (loss, *_rest) = by(us, "forward", "aten::cross_entropy_loss")
    assert loss.policy == "fp32" and loss.in_dtypes[0] == BF16 and loss.out_dtype == FP32


def test_backward_runs_in_the_forward_ops_dtype(mlp):
    us = propagate(mlp[0].nodes)
    mms = by(us, "backward", "aten::mm")
    # per step: dW for 3 layers, dX for the 2 upper ones (the batch needs no gradient)
    assert len(mms) == 5 * 2
    assert all(u.in_dtypes == [BF16, BF16] and u.out_dtype == BF16 for u in mms)
    assert all(u.backward_of is not None for u in mms)
    relu_bw = by(us, "backward", "aten::threshold_backward")
    assert len(relu_bw) == 4 and all(u.in_dtypes[:2] == [BF16, BF16] for u in relu_bw)
    # the loss's backward stays fp32 (cross_entropy is on autocast's fp32 list)
    assert all(u.out_dtype == FP32 for u in by(us, "backward", "aten::_log_softmax_backward_data"))


def test_optimizer_and_gradient_accumulation_stay_fp32(mlp):
    us = propagate(mlp[0].nodes)
    opt = [u for u in us if u.phase == "optimizer"]
    acc = [u for u in us if u.phase == "accumulate"]
    assert len(opt) > 100 and len(acc) == 2 * 2 * 6  # AccumulateGrad + its detach, 6 parameters, 2 steps
    assert not any(u.changed for u in opt + acc)
    assert all(BF16 not in u.in_dtypes for u in opt + acc)


def test_gradient_casts_back(mlp):
    us = propagate(mlp[0].nodes)
    casts = [c for u in us for c in u.backward_casts]
    # per step: 6 parameters cast to bf16 (their gradients cast back to fp32) and the loss input
    # cast to fp32 (its gradient back to bf16)
    assert len(casts) == 7 * 2
    assert collections.Counter((src, dst) for _s, src, dst in casts) == {(BF16, FP32): 12, (FP32, BF16): 2}
    # the weights' and biases' shapes (Linear 64->128->128->10), then the logits (batch 32)
    assert [tuple(s) for s, _a, _b in casts[:7]] == [(128, 64), (128,), (128, 128), (128,), (10, 128), (10,), (32, 10)]


def test_unmeasured_cpu_amp_says_so(mlp):
    w = recipes.amp(mlp, on="cpu")
    assert any("unmeasured" in n for n in w.notes)


def test_measure_needs_on_cpu(mlp):
    with pytest.raises(InputError, match="--on cpu"):
        recipes.amp(mlp, measure=True)


def test_measure_without_torch_is_one_clear_error(mlp, monkeypatch, run_cli, tmp_path):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    with pytest.raises(InputError, match=r"chakra-et\[torch\]"):
        recipes.amp(mlp, on="cpu", measure=True)
    from chakra.io import write_rank_traces

    write_rank_traces(tmp_path / "mlp", mlp)
    res = run_cli("whatif", str(tmp_path / "mlp"), "-r", "amp", "--on", "cpu", "--measure", "-q")
    assert res.exit_code == 1
    assert "[torch]" in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


# ----------------------------------------------------------------------------- with torch


def test_static_lists_agree_with_torch():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    x, w = torch.randn(8, 16), torch.randn(16, 16)
    img = torch.randn(2, 3, 8, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        lower = {
            "linear": F.linear(x, w),
            "mm": torch.mm(x, w),
            "bmm": torch.bmm(x[None], w[None]),
            "conv2d": F.conv2d(img, torch.randn(4, 3, 3, 3)),
            "addmm": torch.addmm(torch.randn(16), x, w),
        }
        lowx = x.to(torch.bfloat16)
        fp32 = {
            "cross_entropy_loss": F.cross_entropy(lowx, torch.zeros(8, dtype=torch.long)),
            "mse_loss": F.mse_loss(lowx, lowx),
        }
        first = {
            "layer_norm": F.layer_norm(lowx, (16,), torch.ones(16), torch.zeros(16)),
            "batch_norm": F.batch_norm(
                img.to(torch.bfloat16), torch.zeros(3), torch.ones(3), torch.ones(3), torch.zeros(3), training=True
            ),
        }
    from chakra.whatif.autocast_cpu import CPU_FP32, CPU_LOWER, FIRST_INPUT

    for name, out in lower.items():
        assert name in CPU_LOWER and out.dtype == torch.bfloat16, name
    for name, out in fp32.items():
        assert name in CPU_FP32 and out.dtype == torch.float32, name
    for name, out in first.items():
        assert name in FIRST_INPUT and out.dtype == torch.bfloat16, name


def test_measured_amp_retimes_the_gemms(mlp, run_cli, tmp_path):
    pytest.importorskip("torch")
    from chakra.whatif.autocast_cpu import units

    w = recipes.amp(mlp, on="cpu", measure=True, threads=1)
    assert w.recipe == "amp" and "measured on this host" in w.notes[0]
    assert "0 could not be rebuilt" in w.notes[0]
    before = {n.id: n.duration_micros for n in mlp[0].nodes}
    after = {n.id: n.duration_micros for n in w.traces[0].nodes}
    gemm = [u for u in units(mlp[0].nodes) if u.node.name in ("aten::linear", "aten::mm")]
    changed = [u for u in gemm if sum(before[m] for m in u.members) != sum(after[m] for m in u.members)]
    assert len(changed) >= len(gemm) // 2
    # the optimizer keeps its time exactly
    opt = [u for u in units(mlp[0].nodes) if u.phase == "optimizer"]
    assert all(before[m] == after[m] for u in opt for m in u.members)
    # and through the CLI: progress on stderr, a speedup in the JSON
    from chakra.io import write_rank_traces

    write_rank_traces(tmp_path / "mlp", mlp)
    res = run_cli("whatif", str(tmp_path / "mlp"), "-r", "amp", "--on", "cpu", "--measure", "--threads", "1", "--json")
    assert res.exit_code == 0, res.stderr
    report = json.loads(res.stdout)
    assert 0.3 < report["speedup"] < 3.0
    assert any("measured on this host" in n for n in report["notes"])
    res = run_cli("whatif", str(tmp_path / "mlp"), "-r", "amp", "--on", "cpu", "--measure", "--threads", "1")
    assert "amp --measure:" in res.stderr

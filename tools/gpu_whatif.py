"""Replay and what-if against the untraced H200 runs of tests/data/gpu/ (docs/whatif-validation.md).

Every recording holds ET + Kineto of traced steps and, in its timing.json, the median of 40
untraced, CUDA-synchronised steps: the step the user gets. Three tables:

* replay: each recording converted with the trace alone (the profiler's cost estimated) and with
  its untraced step time (fitted), replayed (`chakra simulate --comm replay`, the median
  ProfilerStep# span of chakra.sim.steps), against the untraced step; the traced step and the
  replay of the recorded (profiled) durations beside them;
* recipes: from the FP32 recording of each model, the fused-AdamW, AMP and CUDA-graphs what-ifs,
  their predicted speedup (baseline step / what-if step, both replayed) against the real one
  (untraced FP32 step / untraced step of the run that did it);
* device time per phase and the roofline model against every measured kernel (the recipes'
  device-side models; durations measured by CUPTI, unaffected by the profiler's host cost).

    python tools/gpu_whatif.py                 # markdown tables on stdout
    python tools/gpu_whatif.py --json          # the figures
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any, Optional

from chakra.converters.pytorch import convert_files
from chakra.converters.pytorch.driver import Options
from chakra.io import read_trace, read_traces
from chakra.sim import SimOptions, simulate
from chakra.sim.steps import step_time
from chakra.whatif import recipes
from chakra.whatif.phases import PHASES, gpu_time_by_phase, quartiles, roofline_errors

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "gpu"
RUNS = ("fp32", "amp", "fused", "foreach", "compile", "cudagraph", "ddp2",
        "big-fp32", "big-amp", "big-fused", "big-foreach")  # fmt: skip


def _inputs(run: str, data: Path) -> tuple[list[Path], list[Path]]:
    folder = data / run
    ets = sorted(folder.glob("et*.json.gz"))
    kins = sorted(p for p in folder.glob("kineto*.json.gz") if not p.name.startswith("kineto_only"))
    return ets, kins


def convert(run: str, out: Path, data: Path, mode: str) -> tuple[list, dict[str, Any]]:
    """`mode`: "measured" (timing.json beside the inputs), "estimate" (trace alone), "keep" (profiled)."""
    ets, kins = _inputs(run, data)
    overhead = {"measured": "remove", "estimate": "estimate", "keep": "keep"}[mode]
    res = convert_files(ets, kins, out / f"{run}-{mode}", Options(overhead=overhead, overhead_replay=True))
    traces = [read_trace(r["output"], rank=r["rank"]) for r in res]
    return traces, res[0]["profiler_overhead"]


def replay_step_ns(traces: list, comm_mode: str = "replay") -> float:
    res = simulate(traces, options=SimOptions(comm_mode=comm_mode, record_nodes=True))
    return step_time(traces, {r: v.finish_ns for r, v in res.ranks.items()}, res.node_times).step_ns


def timing(run: str, data: Path) -> dict[str, Any]:
    return json.loads((data / run / "timing.json").read_text())


def replay_table(data: Path, tmp: Path) -> list[dict[str, Any]]:
    rows = []
    for run in RUNS:
        t = timing(run, data)
        est_traces, est = convert(run, tmp, data, "estimate")
        _, fit = convert(run, tmp, data, "measured")
        traced = t["traced_step_s"][1:] if t.get("traced_capture_step") else t["traced_step_s"]
        rows.append(
            {
                "run": run,
                "traced_ms": 1e3 * statistics.median(traced),
                "untraced_ms": 1e3 * t["step_s"]["median"],
                "profiled_replay_ms": est["replay_profiled_ns"] / 1e6,
                "trace_alone_ms": est["predicted_step_ns"] / 1e6,
                "with_step_time_ms": fit["predicted_step_ns"] / 1e6,
                "fit_base_us": fit["base_us"],
                "fit_notes": fit["notes"],
            }
        )
    return rows


def _recipe(name: str, base: list, peaks: dict[str, float]) -> recipes.WhatIf:
    if name == "fused-optimizer":
        # the fused kernel moves each tensor once, at the measured copy bandwidth
        return recipes.fused_optimizer(base, cost="roofline", bytes_per_s=peaks["copy_bytes_per_s"])
    if name == "amp":
        # autocast: matmul-class kernels at the measured fp16/fp32 peak ratio; elementwise, norms,
        # softmax and the loss stay fp32 (autocast's op lists): no memory speed-up
        ratio = peaks["matmul_fp16_flops"] / peaks["matmul_fp32_flops"]
        # the recordings are fp16 + GradScaler
        return recipes.amp(base, compute_speedup=ratio, memory_speedup=1.0, grad_scaler=True)
    if name == "cuda-graphs":
        return recipes.cuda_graphs(base)
    raise ValueError(name)


RECIPES = (("small", "fused-optimizer", "fused"), ("small", "amp", "amp"), ("small", "cuda-graphs", "cudagraph"),
           ("big", "fused-optimizer", "big-fused"), ("big", "amp", "big-amp"))  # fmt: skip


def recipe_table(data: Path, tmp: Path) -> list[dict[str, Any]]:
    rows = []
    bases: dict[tuple[str, str], tuple[list, float]] = {}
    for size, recipe, target in RECIPES:
        peaks = json.loads((data / f"manifest-{size}.json").read_text())["peaks"]
        src = "fp32" if size == "small" else "big-fp32"
        real = timing(src, data)["step_s"]["median"] / timing(target, data)["step_s"]["median"]
        row: dict[str, Any] = {"model": size, "recipe": recipe, "target": target, "real_speedup": real}
        for mode in ("measured", "estimate"):
            if (src, mode) not in bases:
                traces, _ = convert(src, tmp, data, mode)
                bases[(src, mode)] = (traces, replay_step_ns(traces, "model"))
            traces, base_ns = bases[(src, mode)]
            w = _recipe(recipe, traces, peaks)
            pred = replay_step_ns(w.traces, "model")
            row[f"predicted_speedup_{mode}"] = base_ns / pred
            row[f"baseline_ms_{mode}"] = base_ns / 1e6
            row[f"predicted_ms_{mode}"] = pred / 1e6
        rows.append(row)
    return rows


def device_table(data: Path, tmp: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Device time per phase (predicted from FP32 vs the target run's trace) and the roofline."""
    rows, roof = [], {}
    for size, prefix in (("small", ""), ("big", "big-")):
        peaks = json.loads((data / f"manifest-{size}.json").read_text())["peaks"]
        (base,), _ = convert(f"{prefix}fp32", tmp, data, "measured")
        for recipe in ("fused-optimizer", "amp"):
            target = f"{prefix}{'fused' if recipe == 'fused-optimizer' else 'amp'}"
            (t,) = read_traces([tmp / f"{target}-measured"]) if (tmp / f"{target}-measured.0.et").exists() else (None,)
            if t is None:
                (t,), _ = convert(target, tmp, data, "measured")
            w = _recipe(recipe, [base], peaks)
            pred, meas = gpu_time_by_phase(w.traces[0], steps=2), gpu_time_by_phase(t, steps=2)
            rows.append({"model": size, "recipe": recipe, "predicted": {**pred, "total": sum(pred.values())},
                         "measured": {**meas, "total": sum(meas.values())}})  # fmt: skip
        roof[size] = roofline_errors(
            base, flops_per_s=peaks["matmul_fp32_flops"], bytes_per_s=peaks["copy_bytes_per_s"]
        )
    return rows, roof


def validate(data: Path = DATA, parts: Optional[set[str]] = None) -> dict[str, Any]:
    parts = parts or {"replay", "recipes", "device"}
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        if "replay" in parts:
            out["replay"] = replay_table(data, Path(tmp))
        if "recipes" in parts:
            out["recipes"] = recipe_table(data, Path(tmp))
        if "device" in parts:
            out["device"], out["roofline"] = device_table(data, Path(tmp))
    return out


def err(p: float, m: float) -> float:
    return 100.0 * (p / m - 1.0)


def roofline_table(rows: list) -> list[tuple[str, int, tuple[float, float, float], float]]:
    """(class, kernels, error quartiles in %, share of measured time) per class, then 'all'."""
    classes: dict[str, list] = {}
    for cls, model, meas in rows:
        classes.setdefault(cls, []).append((model, meas))
        classes.setdefault("all", []).append((model, meas))
    total = sum(m for _c, _p, m in rows)
    table = []
    for cls, xs in sorted(classes.items(), key=lambda kv: (kv[0] == "all", -len(kv[1]))):
        q = quartiles([err(p, m) for p, m in xs])
        table.append((cls, len(xs), q, 100.0 * sum(m for _p, m in xs) / total))
    return table


def markdown(res: dict[str, Any]) -> str:
    lines: list[str] = []
    if "replay" in res:
        head = "| run | traced | untraced (truth) | profiled replay | trace alone | error | with step time | error |"
        lines += [head, "|---|---|---|---|---|---|---|---|"]
        for r in res["replay"]:
            u = r["untraced_ms"]
            lines.append(
                f"| {r['run']} | {r['traced_ms']:.2f} | {u:.2f} | {r['profiled_replay_ms']:.2f} | "
                f"{r['trace_alone_ms']:.2f} | {err(r['trace_alone_ms'], u):+.1f}% | {r['with_step_time_ms']:.2f} | "
                f"{err(r['with_step_time_ms'], u):+.1f}% |"
            )
        lines.append("")
    if "recipes" in res:
        lines += ["| model | recipe | real speedup (untraced) | predicted, with step time | error | "
                  "predicted, trace alone | error |", "|---|---|---|---|---|---|---|"]  # fmt: skip
        for r in res["recipes"]:
            real, pm, pe = r["real_speedup"], r["predicted_speedup_measured"], r["predicted_speedup_estimate"]
            lines.append(
                f"| {r['model']} | {r['recipe']} | {real:.3f}x | {pm:.3f}x | {err(pm, real):+.1f}% | "
                f"{pe:.3f}x | {err(pe, real):+.1f}% |"
            )
        lines.append("")
    if "device" in res:
        lines += ["| model | recipe | device ms/step predicted / measured: forward | backward | optimizer | total "
                  "| error |", "|---|---|---|---|---|---|---|"]  # fmt: skip
        for r in res["device"]:
            d = r
            cells = [f"{d['predicted'][k] / 1e3:.2f} / {d['measured'][k] / 1e3:.2f}" for k in (*PHASES, "total")]
            lines.append(
                f"| {r['model']} | {r['recipe']} | " + " | ".join(cells) + " | "
                f"{err(d['predicted']['total'], d['measured']['total']):+.1f}% |"
            )
        lines += ["", "| model | kernel class | kernels | model/measured - 1: p25 | median | p75 | share of time |",
                  "|---|---|---|---|---|---|---|"]  # fmt: skip
        for size, rows in res["roofline"].items():
            for cls, n, (q1, q2, q3), share in roofline_table(rows):
                lines.append(f"| {size} | {cls} | {n} | {q1:+.0f}% | {q2:+.0f}% | {q3:+.0f}% | {share:.0f}% |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(DATA), help="the recordings (default: tests/data/gpu)")
    ap.add_argument("--only", nargs="+", choices=("replay", "recipes", "device"), help="some tables only")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    res = validate(Path(args.data), set(args.only) if args.only else None)
    print(json.dumps(res, indent=1) if args.json else markdown(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())

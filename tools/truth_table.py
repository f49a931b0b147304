#!/usr/bin/env python3
"""Replay and what-if against the untraced truth of `chakra.record.Recorder` recordings.

Reads every run folder under ROOT (made by tools/record_truth.py: `<model>-<variant>/` with
et.0.json.gz, kineto.0.json.gz, manifest.json), and prints two tables (docs/whatif-validation.md):

* replay: per run the traced step, the untraced step (the truth the manifest's fit uses: wall
  clock on a GPU, the calling thread's CPU time on a one-threaded CPU run, chakra.record.manifest),
  the untraced wall clock beside it, the replay of the profiled durations, and the replay of the
  trace converted with the profiler's cost removed from the trace alone and with the step time;
* recipes: from each model's fp32 run, the what-if of every other variant recorded
  (fused -> fused-optimizer, bf16 -> amp, fp16 -> amp with GradScaler, cudagraph -> cuda-graphs),
  predicted speedup against the real one (untraced fp32 step / untraced step of the variant).

    python tools/truth_table.py /tmp/truth                 # markdown
    python tools/truth_table.py /tmp/truth --json
    python tools/truth_table.py /tmp/truth --amp-measure   # CPU amp timed here (amp --on cpu --measure)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Optional

import gpu_whatif  # the GPU tables' conversion, replay and error (tools/ is on sys.path)
from gpu_whatif import err, replay_step_ns

from chakra.io import read_traces
from chakra.record.manifest import truth_of
from chakra.whatif import recipes

#: --amp-measure: amp on CPU runs times the operators here (`amp --on cpu --measure`, one thread)
AMP_MEASURE = False
#: variant -> the what-if recipe that predicts it from the fp32 run
RECIPE_OF = {"fused": "fused-optimizer", "bf16": "amp", "fp16": "amp", "cudagraph": "cuda-graphs"}


def runs(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.glob("*/manifest.json"))


def convert(folder: Path, out: Path, mode: str) -> tuple[list, dict[str, Any]]:
    """`mode`: "measured" (the manifest beside the inputs) or "estimate" (the trace alone)."""
    return gpu_whatif.convert(folder.name, out, folder.parent, mode)


def _recipe(name: str, variant: str, base: list, peaks: dict[str, float], device: str) -> recipes.WhatIf:
    if name == "fused-optimizer":
        if device == "cuda" and peaks.get("copy_bytes_per_s"):
            return recipes.fused_optimizer(base, cost="roofline", bytes_per_s=peaks["copy_bytes_per_s"])
        return recipes.fused_optimizer(base)
    if name == "amp":
        kw: dict[str, Any] = {"grad_scaler": variant == "fp16", "on": "gpu" if device == "cuda" else "cpu"}
        if device == "cpu" and AMP_MEASURE:  # this host's bf16/fp32 operator times (chakra.whatif.cpu_rates)
            return recipes.amp(base, on="cpu", measure=True, threads=1)
        low = peaks.get(f"matmul_{variant}_flops")  # the measured peak of the precision the run used
        if low and peaks.get("matmul_fp32_flops"):
            kw.update(compute_speedup=low / peaks["matmul_fp32_flops"], memory_speedup=1.0)
        return recipes.amp(base, **kw)
    if name == "cuda-graphs":
        return recipes.cuda_graphs(base)
    raise ValueError(name)


def _preemption(m: dict[str, Any]) -> Optional[float]:
    """The traced steps' wall clock over their thread CPU time, less 1 (one-threaded CPU runs)."""
    if m.get("traced_preemption") is not None:
        return float(m["traced_preemption"])
    pairs = list(zip(m.get("traced_step_s", []), m.get("traced_thread_cpu_s", [])))
    if m["device"]["type"] != "cpu" or m["device"].get("threads") != 1 or not pairs:
        return None
    return statistics.median(w / c - 1.0 for w, c in pairs if c > 0)


def replay_row(folder: Path, work: Path) -> dict[str, Any]:
    """One run's replay row; its two conversions stay under `work` (the recipes read them)."""
    m = json.loads((folder / "manifest.json").read_text())
    truth = truth_of(m)
    _, est = convert(folder, work, "estimate")
    _, fit = convert(folder, work, "measured")
    cpu = m.get("untraced_thread_cpu_s", {}).get("median")
    traced = m["traced_step_s"]  # a CUDA graph is captured in the warm-up: every traced step is a replay
    return {
        "run": folder.name,
        "model": m.get("extra", {}).get("model", folder.name.rsplit("-", 1)[0]),
        "variant": m.get("extra", {}).get("variant", folder.name.rsplit("-", 1)[-1]),
        "device": m["device"]["type"],
        "traced_ms": 1e3 * statistics.median(traced),
        "untraced_ms": truth.step_ns / 1e6,
        "truth": truth.what,
        "untraced_wall_ms": 1e3 * m["untraced_step_s"]["median"],
        "untraced_cpu_ms": 1e3 * cpu if cpu else None,
        "drift": m.get("untraced_drift"),
        "traced_preemption": _preemption(m),
        "profiled_replay_ms": est["replay_profiled_ns"] / 1e6,
        "trace_alone_ms": est["predicted_step_ns"] / 1e6,
        "with_step_time_ms": fit["predicted_step_ns"] / 1e6,
        "fit_notes": fit["notes"],
    }


def validate(root: Path, peaks: Optional[dict[str, float]] = None, jobs: int = 1) -> dict[str, Any]:
    peaks = peaks or {}
    folders = runs(root)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if jobs > 1:
            with ProcessPoolExecutor(jobs) as pool:
                rows = list(pool.map(replay_row, folders, [work] * len(folders)))
        else:
            rows = [replay_row(f, work) for f in folders]
        recipe_rows = []
        bases: dict[tuple[str, str], tuple[list, float]] = {}
        by = {(r["model"], r["variant"]): r for r in rows}
        for (model, variant), r in sorted(by.items()):
            if variant not in RECIPE_OF or (model, "fp32") not in by:
                continue
            base_row = by[(model, "fp32")]
            recipe = RECIPE_OF[variant]
            row: dict[str, Any] = {"model": model, "recipe": recipe, "variant": variant,
                                   "real_speedup": base_row["untraced_ms"] / r["untraced_ms"]}  # fmt: skip
            for mode in ("measured", "estimate"):
                if (base_row["run"], mode) not in bases:
                    traces = read_traces([work / f"{base_row['run']}-{mode}"])
                    bases[(base_row["run"], mode)] = (traces, replay_step_ns(traces, "model"))
                traces, base_ns = bases[(base_row["run"], mode)]
                w = _recipe(recipe, variant, traces, peaks, base_row["device"])
                pred = replay_step_ns(w.traces, "model")
                row[f"predicted_speedup_{mode}"] = base_ns / pred
            recipe_rows.append(row)
    return {"replay": rows, "recipes": recipe_rows}


PREEMPTED = " (preempted while traced)"


def markdown(res: dict[str, Any]) -> str:
    lines = [
        "| run | traced | untraced (truth) | untraced wall | drift | profiled replay | trace alone | error "
        "| with step time | error |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in res["replay"]:
        u = r["untraced_ms"]
        lines.append(
            f"| {r['run']}{PREEMPTED if (r['traced_preemption'] or 0) > 0.02 else ''} | {r['traced_ms']:.2f} | "
            f"{u:.2f} ({r['truth']}) | {r['untraced_wall_ms']:.2f} | "
            f"{'' if r['drift'] is None else format(100 * r['drift'], '+.0f') + '%'} | "
            f"{r['profiled_replay_ms']:.2f} | {r['trace_alone_ms']:.2f} | {err(r['trace_alone_ms'], u):+.1f}% | "
            f"{r['with_step_time_ms']:.2f} | {err(r['with_step_time_ms'], u):+.1f}% |"
        )
    alone = sum(abs(err(r["trace_alone_ms"], r["untraced_ms"])) <= 10 for r in res["replay"])
    given = sum(abs(err(r["with_step_time_ms"], r["untraced_ms"])) <= 3 for r in res["replay"])
    n = len(res["replay"])
    lines += ["", f"trace alone within 10%: {alone}/{n}; with the step time within 3%: {given}/{n}"]
    if any((r["traced_preemption"] or 0) > 0.02 for r in res["replay"]):
        lines.append(
            f"{PREEMPTED}: the traced steps took more than 2% longer by wall clock than on their thread's CPU "
            "(preempted: the recorded operator times hold other processes' turns; re-record at higher priority)"
        )
    lines.append("")
    lines += [
        "| model | recipe (variant) | real speedup | predicted, with step time | error "
        "| predicted, trace alone | error |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in res["recipes"]:
        real, pm, pe = r["real_speedup"], r["predicted_speedup_measured"], r["predicted_speedup_estimate"]
        lines.append(
            f"| {r['model']} | {r['recipe']} ({r['variant']}) | {real:.3f}x | {pm:.3f}x | {err(pm, real):+.1f}% | "
            f"{pe:.3f}x | {err(pe, real):+.1f}% |"
        )
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root", type=Path, help="folder of run folders (tools/record_truth.py --out)")
    ap.add_argument(
        "--peaks",
        type=Path,
        help="JSON with matmul_{fp32,fp16,bf16}_flops and copy_bytes_per_s "
        "(default: ROOT/peaks.json when there, as record_truth.py --peaks writes it)",
    )
    ap.add_argument("--jobs", type=int, default=1, help="runs converted at once (default 1)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument(
        "--amp-measure", action="store_true", help="CPU runs: amp measured on this host (torch), not fixed factors"
    )
    args = ap.parse_args(argv)
    global AMP_MEASURE
    AMP_MEASURE = args.amp_measure
    if not runs(args.root):
        print(f"{args.root}: no run folders with a manifest.json", file=sys.stderr)
        return 1
    peaks_file = args.peaks or (args.root / "peaks.json" if (args.root / "peaks.json").exists() else None)
    peaks = json.loads(peaks_file.read_text()) if peaks_file else None
    res = validate(args.root, peaks, args.jobs)
    print(json.dumps(res, indent=1) if args.json else markdown(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What-if recipes against the measured GPU runs of tests/data/gpu/ (docs/whatif-validation.md).

From each FP32 recording (small = launch-bound, big = compute-bound) predict the AMP step and the
fused-AdamW step with `chakra.whatif.recipes`, and compare with the recordings of those runs:

* traced step: the what-if trace replayed (`chakra simulate`, recorded durations) per step, against
  the target run's traced steps (Kineto window from the first ProfilerStep to the last, per step);
* device time per phase: the predicted kernels' time per step in forward, backward and optimizer
  (`chakra.whatif.phases.gpu_time_by_phase`) against the same sums on the target run's trace;
* the roofline compute model against every measured kernel (median and quartiles of
  model/measured - 1, by kernel class), with the GPU's measured peaks from the manifests.

    python tools/gpu_whatif.py                 # markdown tables on stdout
    python tools/gpu_whatif.py --json          # the figures
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from chakra.converters.pytorch import convert_files
from chakra.io import read_trace
from chakra.sim import SimOptions, simulate
from chakra.whatif import recipes
from chakra.whatif.phases import PHASES, gpu_time_by_phase, quartiles, roofline_errors

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "gpu"
STEPS = 2  # traced steps per recording


def window_us(kineto: Path) -> float:
    ev = json.loads(gzip.decompress(kineto.read_bytes()))["traceEvents"]
    steps = [e for e in ev if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    return max(e["ts"] + e["dur"] for e in steps) - min(e["ts"] for e in steps)


def _convert(variant: str, out: Path, data: Path) -> Any:
    (s,) = convert_files([data / variant / "et.json.gz"], [data / variant / "kineto.json.gz"], out / variant)
    return read_trace(s["output"])


def _step_us(traces: list) -> float:
    # `chakra simulate`'s defaults (one CPU and one GPU task at a time), as `chakra whatif` runs it
    return simulate(traces, None, None, options=SimOptions()).finish_ns / 1e3 / STEPS


def validate(data: Path = DATA) -> dict[str, Any]:
    out: dict[str, Any] = {"whatif": [], "roofline": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for size, prefix in (("small", ""), ("big", "big-")):
            peaks = json.loads((data / f"manifest-{size}.json").read_text())["peaks"]
            base = _convert(f"{prefix}fp32", Path(tmp), data)
            ratio = peaks["matmul_fp16_flops"] / peaks["matmul_fp32_flops"]
            predictions = {
                "amp": recipes.amp([base]),
                # autocast: matmul-class kernels at the measured fp16/fp32 peak ratio; elementwise,
                # norms, softmax and the loss stay fp32 (autocast's op lists): no memory speed-up
                "amp-autocast": recipes.amp([base], compute_speedup=ratio, memory_speedup=1.0),
                "fused": recipes.fused_optimizer([base]),
                # the fused kernel moves each tensor once, at the measured copy bandwidth
                "fused-roofline": recipes.fused_optimizer(
                    [base], cost="roofline", bytes_per_s=peaks["copy_bytes_per_s"]
                ),
            }
            targets = {}
            for name, w in predictions.items():
                target = name.split("-")[0]
                if target not in targets:
                    t = _convert(f"{prefix}{target}", Path(tmp), data)
                    timing = json.loads((data / f"{prefix}{target}" / "timing.json").read_text())
                    targets[target] = (t, window_us(data / f"{prefix}{target}" / "kineto.json.gz") / STEPS, timing)
                t, measured_step, timing = targets[target]
                pred_phase = gpu_time_by_phase(w.traces[0], steps=STEPS)
                meas_phase = gpu_time_by_phase(t, steps=STEPS)
                pred_step = _step_us(w.traces)
                out["whatif"].append(
                    {
                        "model": size,
                        "prediction": name,
                        "compute_speedup": ratio if name == "amp-autocast" else (3.0 if name == "amp" else None),
                        "traced_step_us": {"predicted": pred_step, "measured": measured_step},
                        "device_us": {
                            "predicted": {**pred_phase, "total": sum(pred_phase.values())},
                            "measured": {**meas_phase, "total": sum(meas_phase.values())},
                        },
                        "untraced_gpu_phase_us": {
                            k: timing["phases_gpu_s"][k]["median"] * 1e6 for k in ("step_gpu", *PHASES)
                        },
                        "untraced_step_us": timing["step_s"]["median"] * 1e6,
                        "notes": w.notes,
                    }
                )
            out["roofline"][size] = roofline_errors(
                base, flops_per_s=peaks["matmul_fp32_flops"], bytes_per_s=peaks["copy_bytes_per_s"]
            )
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
    lines = [
        "| model | prediction | traced step predicted / measured (ms) | error | device ms/step predicted / measured:"
        " forward | backward | optimizer | total | error |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in res["whatif"]:
        ts, d = r["traced_step_us"], r["device_us"]
        cells = [f"{d['predicted'][k] / 1e3:.2f} / {d['measured'][k] / 1e3:.2f}" for k in (*PHASES, "total")]
        lines.append(
            f"| {r['model']} | {r['prediction']} | {ts['predicted'] / 1e3:.1f} / {ts['measured'] / 1e3:.1f} | "
            f"{err(ts['predicted'], ts['measured']):+.1f}% | " + " | ".join(cells) + " | "
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
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    res = validate(Path(args.data))
    if args.json:
        print(json.dumps(res, indent=1))
    else:
        print(markdown(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())

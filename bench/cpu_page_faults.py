"""Page faults of a CPU training step, fp32 against bf16 autocast: the cost `amp --measure` misses.

Trains each model of tools/record_truth.py (the CPU validation sets' models) for a few steps in a
child process, one torch thread, and prints per step the calling thread's CPU time, its minor page
faults and its system time (getrusage RUSAGE_THREAD), in fp32 and under
`torch.autocast("cpu", dtype=torch.bfloat16)`; then the same with glibc's heap trimming and mmap
of large blocks turned off (`MALLOC_TRIM_THRESHOLD_` / `MALLOC_MMAP_THRESHOLD_` set high, before
the child starts). The step time that goes away with them is what fresh pages cost the step:
glibc gives the top of its heap back to the kernel when a step ends and maps it again, zeroed,
in the next. An operator timed alone (chakra.whatif.cpu_rates) reuses its memory and never pays it.

    .venv/bin/python bench/cpu_page_faults.py                  # cnn lstm mlp encoder
    .venv/bin/python bench/cpu_page_faults.py cnn --steps 50 --repeat 3

Each (model, precision, allocator) runs in a fresh process (`--repeat` of them): the faults of a
step depend on the heap the process built before it. torch is the `[torch]` extra.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

TOOLS = Path(__file__).resolve().parents[1] / "tools"
NO_TRIM = {"MALLOC_TRIM_THRESHOLD_": str(1 << 30), "MALLOC_MMAP_THRESHOLD_": str(1 << 30)}

CHILD = r"""
import json, resource, sys, time
import torch
sys.path.insert(0, sys.argv[1])
import record_truth
torch.set_num_threads(1)
model, bf16, steps = sys.argv[2], sys.argv[3] == "bf16", int(sys.argv[4])
torch.manual_seed(0)
m, data = getattr(record_truth, model)()
opt = torch.optim.AdamW(m.parameters())
x, y = data()
def step():
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        loss = torch.nn.functional.cross_entropy(m(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
for _ in range(5):
    step()
r0, t0 = resource.getrusage(resource.RUSAGE_THREAD), time.thread_time()
for _ in range(steps):
    step()
r1, t1 = resource.getrusage(resource.RUSAGE_THREAD), time.thread_time()
print(json.dumps({"ms": (t1 - t0) / steps * 1e3, "faults": (r1.ru_minflt - r0.ru_minflt) / steps,
                  "sys_ms": (r1.ru_stime - r0.ru_stime) / steps * 1e3}))
"""


def run(model: str, precision: str, steps: int, no_trim: bool) -> dict[str, float]:
    env = dict(os.environ, **(NO_TRIM if no_trim else {}))
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(TOOLS), model, precision, str(steps)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="*", default=["cnn", "lstm", "mlp", "encoder"])
    ap.add_argument("--steps", type=int, default=30, help="timed steps per process (after 5 warm-up steps)")
    ap.add_argument("--repeat", type=int, default=2, help="fresh processes per configuration (median shown)")
    a = ap.parse_args()
    head = f"{'model':8} {'precision':9} {'allocator':10} {'ms/step':>8} {'faults/step':>12} {'sys ms':>7}"
    print(head + "  (per process: ms/faults)")
    for model in a.models:
        for precision in ("fp32", "bf16"):
            for no_trim in (False, True):
                rs = [run(model, precision, a.steps, no_trim) for _ in range(a.repeat)]
                med = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
                each = ", ".join(f"{r['ms']:.2f} ms/{r['faults']:.0f}" for r in rs)
                print(
                    f"{model:8} {precision:9} {'no trim' if no_trim else 'glibc':10} {med['ms']:8.2f} "
                    f"{med['faults']:12.0f} {med['sys_ms']:7.2f}  ({each})",
                    flush=True,
                )


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""MoE routing imbalance on ASTRA-sim and `chakra simulate`: the figures of docs/moe.md.

Generates MoE layers (`chakra generate moe`) with zipf routing and with uniform routing, makes the
zipf one's all-to-alls uniform with `whatif --recipe rebalance-routing`, exports each for both
ASTRA-sim binaries and runs them; prints the slowest rank's finish (ns) from ASTRA-sim and from
`chakra simulate` on the same files, and the largest per-rank difference between the two.

    python bench/moe_imbalance.py [--experts 8 --ranks 4 --layers 2 --seed 1 --exponent 1.2]

Needs the ASTRA-sim binaries ($ASTRA_SIM_BIN or ../shared/tools/astra-sim/bin); without them only
the chakra figures are printed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tools.truthcases import find_binaries, finish_cycles  # noqa: E402


def chakra(*args: str) -> str:
    out = subprocess.run([sys.executable, "-m", "chakra.cli", *args], capture_output=True, text=True, check=True)
    return out.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--exponent", type=float, default=1.2)
    a = ap.parse_args()
    bins = find_binaries()
    common = ["--experts", str(a.experts), "--ranks", str(a.ranks), "--layers", str(a.layers), "--seed", str(a.seed)]
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        share = {}
        for name, dist in (("zipf", f"zipf:{a.exponent:g}"), ("uniform", "uniform")):
            argv = ["generate", "moe", *common, "--imbalance", dist, "-o", str(t / name), "--json", "-q"]
            got = json.loads(chakra(*argv))
            share[name] = got["busiest rank's token share"]
        rebalanced = str(t / "rebalanced")
        chakra("whatif", str(t / "zipf"), "--recipe", "rebalance-routing", "-o", rebalanced, "-q", "--no-simulate")
        share["rebalanced"] = share["zipf"]
        print(f"{'routing':<12} {'share':>6} {'backend':>8} {'ASTRA-sim ns':>14} {'chakra ns':>14} {'max diff':>9}")
        for name in ("zipf", "rebalanced", "uniform"):
            for backend in ("aware", "unaware"):
                out = t / f"{name}_{backend}"
                summary = json.loads(
                    chakra("export", "astra-sim", str(t / name), "-o", str(out), "--backend", backend, "--json", "-q")
                )
                sim = json.loads(chakra("simulate", *summary["simulate_command"].split()[2:], "--json", "-q"))
                ours = {int(r): v["finish_ns"] for r, v in sim["ranks"].items()}
                astra: dict[int, int] = {}
                if bins is not None:
                    argv = summary["command"].split()
                    argv[0] = str(bins / argv[0])
                    run = subprocess.run(argv, capture_output=True, text=True, cwd=tmp, timeout=600)
                    astra = finish_cycles(run.stdout + run.stderr)
                diff = max((abs(ours[r] - astra[r]) for r in astra), default=-1)
                shown = f"{max(astra.values()):>14,}" if astra else f"{'-':>14}"
                print(f"{name:<12} {share[name]:>6.3f} {backend:>8} {shown} {max(ours.values()):>14,} {diff:>9}")


if __name__ == "__main__":
    main()

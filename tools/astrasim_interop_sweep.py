#!/usr/bin/env python3
"""Exported traces under varied configs on the real ASTRA-sim: how many finish, and is `chakra
simulate` ever silent where ASTRA-sim fails.

    .venv/bin/python tools/astrasim_interop_sweep.py [--seed 1] [--cases 162] [--bin DIR]
                                                     [--timeout 60] [--json FILE] [-q]

Workloads: the bundled samples through `convert` (PyTorch, Kineto, Nsight, FlexFlow with more
ranks than devices, BigSim, the ASTRA-sim text format with --dims, official JSON) and `generate`
workloads at 8-32 ranks at their default sizes (transformer with random dp/tp/pp, DLRM, MLP,
microbench down to 1-byte messages). Each case draws one workload, a backend, and a random
config: either the export's own network or a random 1-3-D one (Ring, FullyConnected, Switch;
1-D for the congestion-aware binary), and a system with random preferred-dataset-splits,
collective optimisation, scheduling policy, active chunks and, sometimes, the roofline.

Per case: `chakra export astra-sim` (the user's network and system given, when drawn), then the
binary on the exported files (`finished` = every rank's finish line, exit status 0 and no
`[critical]` line, within --timeout) and on the raw traces with the same configs, and, where that fails, `chakra
simulate` on the raw traces: a case is *silent* when ASTRA-sim fails on the raw traces and
simulate answered without a warning or an error.

Run it on another checkout's code with `PYTHONPATH=/that/checkout` (same seed, same cases) to
compare before and after a change. Everything goes through the CLI in-process.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Optional

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # for tools.truthcases
SAMPLES = REPO / "tests" / "data" / "samples"
BINARIES = {"aware": "AstraSim_Analytical_Congestion_Aware", "unaware": "AstraSim_Analytical_Congestion_Unaware"}


def cli(*args: str) -> tuple[int, str, str]:
    """`chakra ARGS` in this process: (exit code, stdout, stderr)."""
    from typer.testing import CliRunner

    from chakra.cli import app

    try:
        runner = CliRunner(mix_stderr=False)
    except TypeError:
        runner = CliRunner()
    res = runner.invoke(app, list(args), catch_exceptions=True)
    err = res.stderr if res.exception is None or isinstance(res.exception, SystemExit) else repr(res.exception)
    return res.exit_code, res.stdout, err


# ------------------------------------------------------------------------------------ workloads


def _pytorch(name: str, ranks: int) -> Callable[[Path], list[str]]:
    def make(work: Path) -> list[str]:
        d = SAMPLES / "pytorch" / name
        args = [str(d / f"et.{r}.json") for r in range(ranks)]
        for r in range(ranks):
            args += ["-k", str(d / f"kineto.{r}.json")]
        return ["convert", "pytorch", *args]

    return make


def _bigsim(case: str) -> Callable[[Path], list[str]]:
    def make(work: Path) -> list[str]:
        logs = work / "bigsim_logs"
        if not logs.exists():
            with tarfile.open(SAMPLES / "bigsim" / "text2log_v6_examples.tgz") as tar:
                tar.extractall(logs, filter="data")
        return ["convert", "bigsim", str(logs / "examples" / case)]

    return make


def _fixed(*args: str) -> Callable[[Path], list[str]]:
    return lambda work: [a.replace("{S}", str(SAMPLES)).replace("{R}", str(REPO)) for a in args]


def sample_workloads() -> dict[str, Callable[[Path], list[str]]]:
    text = "{S}/astrasim/text_workloads/"
    return {
        "pytorch-mlp": _pytorch("mlp", 1),
        "pytorch-ddp2": _pytorch("ddp2", 2),
        "pytorch-collectives2": _pytorch("collectives2", 2),
        "kineto-nccl": _fixed("convert", "kineto", "{S}/kineto/hta_nccl_data.json.gz"),
        "nsys": _fixed("convert", "nsys", "{S}/nsys/testcuda_nsys2026.1_report2.sqlite"),
        "flexflow-npus4": _fixed(
            "convert", "flexflow", "{R}/tests/data/flexflow/dp2_taskgraph.dot", "--placement", "*=0", "--npus", "4"
        ),
        "bigsim-case3": _bigsim("case3"),
        "bigsim-case5": _bigsim("case5"),
        "text-allreduce-dims2x4": _fixed(
            "convert", "text", text + "microAllReduce.txt", "--npus", "8", "--dims", "2x4"
        ),
        "text-mlp-8": _fixed("convert", "text", text + "MLP_ModelParallel.txt", "--npus", "8"),
        "text-allreduce-8": _fixed("convert", "text", text + "microAllReduce.txt", "--npus", "8"),
        "official-json": _fixed("convert", "auto", "{S}/et/official_small_chakra.0.json"),
    }


def generated_workload(rng: random.Random) -> tuple[str, list[str]]:
    """A `generate` command at 8-32 ranks and default sizes."""
    kind = rng.choice(["transformer", "transformer", "dlrm", "mlp", "microbench"])
    if kind == "transformer":
        while True:
            dp, tp, pp = rng.choice([1, 2, 4]), rng.choice([1, 2, 4]), rng.choice([1, 2, 4])
            if 8 <= dp * tp * pp <= 32:
                break
        args = ["--layers", str(2 * pp), "--dp", str(dp), "--tp", str(tp), "--pp", str(pp)]
        return f"transformer-dp{dp}-tp{tp}-pp{pp}", ["generate", "transformer", *args]
    if kind == "dlrm":
        n = rng.choice([8, 16, 32])
        return f"dlrm-{n}", ["generate", "dlrm", "--ranks", str(n)]
    if kind == "mlp":
        d1, d2 = rng.choice([(2, 4), (4, 2), (4, 4), (2, 8), (4, 8)])
        return f"mlp-{d1}x{d2}", ["generate", "mlp", "--dim1", str(d1), "--dim2", str(d2)]
    n = rng.choice([8, 16])
    return f"microbench-{n}", ["generate", "microbench", "--ranks", str(n), "--min-size", "1", "--max-size", "1MiB"]


# -------------------------------------------------------------------------------------- configs


def _factor(n: int, dims: int, rng: random.Random) -> Optional[list[int]]:
    """n as a product of `dims` factors, each >= 2 (None if impossible)."""
    if dims == 1:
        return [n]
    options = [a for a in range(2, n) if n % a == 0]
    rng.shuffle(options)
    for a in options:
        rest = _factor(n // a, dims - 1, rng)
        if rest is not None:
            return [a, *rest]
    return None


def random_network(n: int, backend: str, rng: random.Random) -> Optional[str]:
    """A network YAML for n NPUs, or None (the export's own)."""
    if rng.random() < 0.4:
        return None
    dims = 1 if backend == "aware" else rng.choice([1, 2, 3])
    counts = _factor(n, dims, rng) or [n]
    topo = [rng.choice(["Ring", "FullyConnected", "Switch"]) for _ in counts]
    if backend == "aware" and topo[0] == "Ring" and counts[0] == 2:
        topo[0] = "FullyConnected"
    bw = [rng.choice([25, 50, 100, 200]) for _ in counts]
    lat = [rng.choice([100, 500, 1000]) for _ in counts]
    return (
        f"topology: [ {', '.join(topo)} ]\nnpus_count: [ {', '.join(map(str, counts))} ]\n"
        f"bandwidth: [ {', '.join(map(str, bw))} ]\nlatency: [ {', '.join(map(str, lat))} ]\n"
    )


def random_system(dims: int, rng: random.Random) -> Optional[dict[str, Any]]:
    if rng.random() < 0.3:
        return None
    doc: dict[str, Any] = json.loads((REPO / "chakra" / "data" / "configs" / "system.json").read_text())
    doc["preferred-dataset-splits"] = rng.choice([1, 2, 4, 8, 16, 64])
    doc["collective-optimization"] = rng.choice(["localBWAware", "baseline"])
    doc["scheduling-policy"] = rng.choice(["LIFO", "FIFO"])
    doc["active-chunks-per-dimension"] = rng.choice([1, 2])
    for key in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all"):
        doc[f"{key}-implementation"] = ["ring"] * dims
    if rng.random() < 0.35:
        doc.update(
            {"roofline-enabled": 1, "peak-perf": rng.choice([100, 900]), "local-mem-bw": rng.choice([900, 1600])}
        )
    return doc


# ---------------------------------------------------------------------------------------- running


def run_binary(argv: list[str], cwd: Path, timeout: int) -> subprocess.Popen:
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=cwd)


def outcome(proc: subprocess.Popen, ranks: int, timeout: int) -> tuple[str, str]:
    """(status, last line): finished | unfinished | crash | abort | timeout."""
    from tools.truthcases import finish_cycles

    try:
        data, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return "timeout", f"still running after {timeout} s"
    text = data.decode(errors="replace")
    lines = [ln for ln in text.splitlines() if ln.strip()]
    last = next((ln for ln in reversed(lines) if "critical" in ln or "error" in ln.lower()), lines[-1] if lines else "")
    done = finish_cycles(text)
    if proc.returncode < 0 or proc.returncode in (134, 139):
        return "crash", last[-160:]
    if proc.returncode != 0:
        return "abort", last[-160:]
    if len(done) < ranks:
        return "unfinished", last[-160:]
    if "[critical]" in text:
        return "report-abort", last[-160:]
    return "finished", ""


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cases", type=int, default=162)
    ap.add_argument("--bin", type=Path, default=None, help="folder of the ASTRA-sim binaries")
    ap.add_argument("--timeout", type=int, default=60, help="seconds before a run counts as a hang")
    ap.add_argument("--json", type=Path, default=None, help="write every case's result here")
    ap.add_argument("--only", type=int, nargs="*", default=None, help="run these case numbers only (same draws)")
    ap.add_argument("--keep", type=Path, default=None, help="work in this folder and keep it")
    ap.add_argument("-q", "--quiet", action="store_true")
    args = ap.parse_args(argv)

    from tools.truthcases import find_binaries

    bin_dir = args.bin or find_binaries()
    if bin_dir is None:
        print("ASTRA-sim binaries not found (--bin, $ASTRA_SIM_BIN or ../shared/tools/astra-sim/bin)", file=sys.stderr)
        return 2
    rng = random.Random(args.seed)
    samples = sample_workloads()
    results = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="chakra-sweep-") as tmp:
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        made: dict[str, tuple[Path, int]] = {}
        for i in range(args.cases):
            if rng.random() < 0.4:
                name = rng.choice(sorted(samples))
                cmd = samples[name](root)
            else:
                name, cmd = generated_workload(rng)
            backend = rng.choice(["aware", "unaware"])
            skip = args.only is not None and i not in args.only
            if name not in made:
                raw = root / name.replace("/", "_") / "raw"
                raw.parent.mkdir(parents=True, exist_ok=True)
                code, _, err = cli(*cmd, "-o", str(raw), "-q")
                if code != 0:
                    raise SystemExit(f"{name}: {' '.join(cmd)} failed: {err.strip()[-300:]}")
                made[name] = (raw, len(list(raw.parent.glob("raw.*.et"))))
            raw, ranks = made[name]
            work = root / f"case{i}"
            npus = max(ranks, 2)
            net_text = random_network(npus, backend, rng)
            dims = net_text.count(",", 0, net_text.index("\n")) + 1 if net_text else 1
            sys_doc = random_system(dims, rng)
            if skip:
                continue
            work.mkdir(exist_ok=True)
            opts = ["--backend", backend, "--missing-deps", "drop"]
            if net_text:
                (work / "net.yml").write_text(net_text)
                opts += ["--network", str(work / "net.yml")]
            if sys_doc:
                (work / "sys.json").write_text(json.dumps(sys_doc))
                opts += ["--system", str(work / "sys.json")]
            row: dict[str, Any] = {"case": i, "workload": name, "backend": backend, "ranks": ranks}
            row["network"] = net_text.splitlines()[:2] if net_text else "export's own"
            keys = ("preferred-dataset-splits", "roofline-enabled")
            row["system"] = {k: sys_doc[k] for k in keys if k in sys_doc} if sys_doc else "bundled"
            code, out, err = cli("export", "astra-sim", str(raw), "-o", str(work / "x"), "--json", "-q", *opts)
            if code != 0:
                row.update(exported="refused", export_error=err.strip()[-200:], raw="-", simulate="-")
                results.append(row)
                continue
            summary = json.loads(out)
            command = summary["command"].split()
            command[0] = str(Path(bin_dir) / command[0])
            procs = [run_binary(command, work, args.timeout)]
            if ranks >= 2:  # the raw traces on the same configs (a one-rank job has no raw run)
                raw_cmd = [a if not a.startswith("--workload-configuration=") else f"--workload-configuration={raw}"
                           for a in command]  # fmt: skip
                if (raw.parent / "raw.comm_groups.json").exists() and not any("comm-group" in a for a in raw_cmd):
                    raw_cmd.append(f"--comm-group-configuration={raw.parent / 'raw.comm_groups.json'}")
                procs.append(run_binary(raw_cmd, work, args.timeout))
            sim_args = ["simulate", str(raw), "--network", str(work / "x.network.yml"), "--system"]
            sim_args += [str(work / "x.system.json"), "--memory", str(work / "x.memory.json"), "--congestion", backend]
            sim_args += ["--missing-deps", "drop", "-q"]
            row["exported"], row["exported_message"] = outcome(procs[0], summary["ranks"], args.timeout)
            row["changes"] = summary["changes"]
            row["not_fixed"] = sorted({f["code"] for f in summary["not_fixed"]})
            if ranks >= 2:
                row["raw"], row["raw_message"] = outcome(procs[1], ranks, args.timeout)
                row["simulate"] = "-"
                if row["raw"] != "finished":  # does `chakra simulate` say anything where ASTRA-sim fails?
                    scode, _, serr = cli(*sim_args)
                    row["simulate"] = "error" if scode != 0 else ("warned" if "warning" in serr else "silent")
            else:
                row["raw"], row["simulate"] = "-", "-"
            results.append(row)
            if not args.quiet:
                print(f"{i + 1}/{args.cases} {name} {backend}: exported {row['exported']}, raw {row['raw']}, "
                      f"simulate {row['simulate']}", file=sys.stderr)  # fmt: skip
    wall = time.perf_counter() - t0
    exported = Counter(r["exported"] for r in results)
    raw_fail = [r for r in results if r["raw"] not in ("finished", "-")]
    silent = sum(1 for r in raw_fail if r["simulate"] == "silent")
    print(f"cases: {len(results)} ({wall:.0f} s)")
    print(f"exported traces finishing on ASTRA-sim: {exported['finished']} of {len(results)}  {dict(exported)}")
    bad = Counter((r["workload"].split("-")[0], r["exported"], r.get("exported_message", "")[:70]) for r in results
                  if r["exported"] != "finished")  # fmt: skip
    for (wl, status, msg), count in bad.most_common():
        print(f"  {count:3d} x {wl:12s} {status:12s} {msg}")
    print(f"raw traces ASTRA-sim fails on: {len(raw_fail)}; chakra simulate silent on {silent} of them")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

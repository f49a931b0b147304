"""Start-up of `chakra simulate` on a small trace, against the floor `python -c "import typer, rich"`.

A batch of many small simulations run as separate `chakra simulate` processes pays the
interpreter's start-up and the imports on every call; this prints that cost next to the floor any
typer + rich program pays, and the cost of one more simulation through the library API
(`chakra.sim.simulate` in a loop: the fast path for sweeps and Python callers).

The small trace is ASTRA-sim's own 1 MiB all-reduce on 8 NPUs with its rt_template configs
(tests/data/samples). Whole processes are timed from outside by `farm-bench` where it is installed
(A and the floor alternate, the ratio taken pair by pair), else by this script the same way
(wall clock and the child's user + system CPU from wait4). Children compile chakra's modules once
into a private bytecode cache, as an installed package has them (a PYTHONDONTWRITEBYTECODE
environment would otherwise recompile them on every run). Two outputs are timed: the per-rank
table people read, and `--json -q` (what a script running many of them reads; no table).

`--before-rev REV` adds the same commands run from the source of git revision REV (checked out
into a temporary folder, same interpreter) for a before/after figure; `--before-src DIR` takes
such a folder made by hand: DIR/chakra first on PYTHONPATH, with the folders that install under
chakra (feeder/, converters/, visualizers/) copied into DIR/chakra/ as the installed package has
them (else the editable install's own copies of those are used). The machine is shared: compare
figures from one run of this script.

    .venv/bin/python bench/startup_bench.py [--runs 9] [--before-rev main | --before-src DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "tests" / "data" / "samples" / "astrasim"
TRACE = SAMPLES / "all_reduce_8npus_1MB" / "all_reduce"
NETWORK = SAMPLES / "configs_rt_template" / "network_cfg.yml"
SYSTEM = SAMPLES / "configs_rt_template" / "system_cfg.json"


#: (label, extra arguments) of the timed commands
OUTPUTS = (("table", []), ("--json -q", ["--json", "-q"]))
#: The folders that install as chakra.<name> (setup.py's ROOTS).
SUBPACKAGES = ("feeder", "converters", "visualizers")


def simulate_args(python: str, extra: list[str]) -> list[str]:
    return [
        python, "-m", "chakra.cli", "simulate", str(TRACE), "--network", str(NETWORK), "--system", str(SYSTEM), *extra,
    ]  # fmt: skip


def source_of_rev(rev: str, into: Path) -> Path:
    """The package source of git revision `rev`, laid out as installed (chakra/ with feeder/,
    converters/ and visualizers/ inside it), under `into`."""
    names = ["chakra", *(n for n in SUBPACKAGES if (REPO / n).is_dir())]
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, *names], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    for name in names[1:]:
        shutil.move(str(into / name), str(into / "chakra" / name))
    return into


def floor_args(python: str) -> list[str]:
    return [python, "-c", "import typer, rich"]


def child_env(cache: str, src: str = "") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    env["PYTHONPYCACHEPREFIX"] = cache
    env["COLUMNS"] = "120"
    if src:
        env["PYTHONPATH"] = src
    return env


def run_once(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall s, user + system CPU s) of one whole process."""
    start = time.perf_counter()
    cwd = env["PYTHONPYCACHEPREFIX"]  # not the repository: `-m chakra.cli` must import the chosen copy
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{' '.join(args)} exited with {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime


def paired(a: list[str], b: list[str], runs: int, env: dict[str, str]) -> dict[str, float]:
    """Medians of A and B run in turn (after one warm-up each), and the median pairwise ratio."""
    farm = shutil.which("farm-bench")
    if farm:
        cmd = [farm, "-n", str(runs), "--timeout", str(60 * runs), "--vs", shlex.join(b), "--", *a]
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=env["PYTHONPYCACHEPREFIX"]).stdout
        for side in ("A", "B"):
            m = re.search(rf"^{side} exit (\d+)", out, re.M)
            if m is None or m.group(1) != "0":
                raise SystemExit(f"farm-bench: command {side} did not exit 0:\n{out}")
        med = {}
        for key in ("A cpu s", "A wall s", "B cpu s", "B wall s", "A/B cpu", "A/B wall"):
            m = re.search(rf"^{re.escape(key)}\s+\S+\s+(\S+)", out, re.M)
            if m is None:
                raise SystemExit(f"farm-bench gave no {key!r}:\n{out}")
            med[key] = float(m.group(1))
        return med
    run_once(a, env), run_once(b, env)
    rows = [(run_once(a, env), run_once(b, env)) for _ in range(runs)]
    return {
        "A wall s": statistics.median(ra[0] for ra, _ in rows),
        "A cpu s": statistics.median(ra[1] for ra, _ in rows),
        "B wall s": statistics.median(rb[0] for _, rb in rows),
        "B cpu s": statistics.median(rb[1] for _, rb in rows),
        "A/B wall": statistics.median(ra[0] / rb[0] for ra, rb in rows),
        "A/B cpu": statistics.median(ra[1] / max(rb[1], 1e-9) for ra, rb in rows),
    }


def library_loop(calls: int) -> float:
    """Seconds per `chakra.sim.simulate` call on the same case, in one process (after the first)."""
    from chakra.sim import load_network, load_system, simulate

    network, system = load_network(NETWORK), load_system(SYSTEM)
    first = simulate(str(TRACE), network, system)
    assert first.finish_ns == 117_780, first.finish_ns  # ASTRA-sim's figure for this case
    start = time.perf_counter()
    for _ in range(calls):
        simulate(str(TRACE), network, system)
    return (time.perf_counter() - start) / calls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9, help="processes timed per command (medians are printed)")
    ap.add_argument("--before-rev", help="a git revision whose source to time too (e.g. main)")
    ap.add_argument("--before-src", help="another copy of the source (a folder holding chakra/) to time too")
    ap.add_argument("--calls", type=int, default=50, help="library API calls timed in one process")
    opts = ap.parse_args()
    timer = "farm-bench" if shutil.which("farm-bench") else "this script (wait4)"
    print(f"start-up of one small `chakra simulate` (8 ranks, 1 MiB all-reduce); medians of {opts.runs}, by {timer}")
    print(f"{'command':<44} {'wall s':>8} {'cpu s':>8} {'floor wall':>10} {'floor cpu':>9} {'x floor (cpu)':>13}")
    with tempfile.TemporaryDirectory(prefix="chakra-before-") as before:
        sources = [("", "")]
        if opts.before_rev:
            sources.append((f" ({opts.before_rev})", str(source_of_rev(opts.before_rev, Path(before)))))
        elif opts.before_src:
            sources.append((" (--before-src)", str(Path(opts.before_src).resolve())))
        for output, extra in OUTPUTS:
            for tag, src in sources:
                with tempfile.TemporaryDirectory(prefix="chakra-startup-") as cache:
                    env = child_env(cache, src)
                    python = sys.executable
                    m = paired(simulate_args(python, extra), floor_args(python), opts.runs, env)
                label = f"chakra simulate SMALL, {output}{tag}"
                print(
                    f"{label:<44} {m['A wall s']:8.3f} {m['A cpu s']:8.3f} {m['B wall s']:10.3f} {m['B cpu s']:9.3f}"
                    f" {m['A/B cpu']:13.2f}"
                )
    per_call = library_loop(opts.calls)
    print(f"{'chakra.sim.simulate(...) in a loop, per call':<44} {per_call:8.4f}")
    print('floor = python -c "import typer, rich" under the same interpreter, run in turn with the command')


if __name__ == "__main__":
    main()

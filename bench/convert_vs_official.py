"""`chakra convert pytorch` against the orjson parse floor and the official MLCommons pipeline, side by side.

The input is one rank of a GPT-like decoder recorded on the CPU (`tools/record_pytorch.py gpt`:
12 layers, AdamW's per-parameter loop, 7 traced steps, recorded by chakra.record.Recorder the
documented way): ~67 MB of Execution Trace + ~28 MB of Kineto trace, plus the Recorder's
manifest (the untraced step time the profiler's cost is fitted to). It is not in git: the bench
records it into bench/out/gpt/ the first time (needs the `[torch]` extra), or takes `--trace DIR`
(et.0.json + kineto.0.json).

Every command runs in its own process and is measured from outside (wall time, CPU time = user +
system of the process, peak RSS from wait4), `--repeat` times; the best wall and CPU are kept
(the machine is shared: CPU time is the figure to compare). The processes may cache their
bytecode as installed packages do (PYTHONDONTWRITEBYTECODE is dropped for them: an editable
install would otherwise compile every module on every run). Rows:

* orjson parse: `orjson.loads` of both files in a fresh process, as a script would (the cyclic
  GC on), and with the GC off (the hard floor: nothing but building the objects);
* ours: the whole `chakra convert pytorch ET -k KINETO -o OUT` process (start-up, read, link,
  build, the profiler-cost fit to the manifest's step, write); and on the ET alone;
* official: `chakra_trace_link` (ET + Kineto -> linked ET+), then `chakra_converter PyTorch` on
  its output where it finishes, and `chakra_converter PyTorch` on the ET alone.

Targets (docs/pytorch.md, "Performance"): ours takes at most half the CPU time of the orjson parse of
the same two files (ratio <= 0.5), and the official pipeline takes at least 20x ours where it
finishes.

The official tools live in their own virtual environment (never in ours): give its bin folder
with `--official DIR`, or let the bench look in /tmp/official-venv/bin. Without them those rows
are skipped and the bench says how to install them (docs/pytorch.md, "Performance").

    .venv/bin/python bench/convert_vs_official.py [--trace DIR] [--official DIR] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
DEFAULT_OFFICIAL = Path("/tmp/official-venv/bin")
#: ours / orjson parse (CPU), at most
FLOOR_TARGET = 0.5
#: official / ours (CPU), at least
OFFICIAL_TARGET = 20.0

_PARSE = """
import gc, sys, orjson
from pathlib import Path
if sys.argv[1] == "off":
    gc.disable()
docs = [orjson.loads(Path(p).read_bytes()) for p in sys.argv[2:]]
"""


def record(trace_dir: Path) -> None:
    """Record the GPT trace into `trace_dir` with tools/record_pytorch.py (needs torch)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        sys.exit(
            f"no trace in {trace_dir} and torch is not installed: `pip install -e .[torch]`, "
            "or give --trace DIR (et.0.json + kineto.0.json)"
        )
    print(f"recording the GPT trace into {trace_dir} (tools/record_pytorch.py gpt) ...", file=sys.stderr)
    cmd = [sys.executable, str(ROOT / "tools" / "record_pytorch.py"), "--out", str(trace_dir), "gpt"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def measure(cmd: list[str], cwd: Optional[Path] = None) -> dict[str, Any]:
    """Run `cmd` once: wall s, CPU s (user + system), peak RSS MB, exit code, last stderr line."""
    with tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, cwd=cwd, env=_ENV)
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        tail = [line for line in err.read().decode(errors="replace").splitlines() if line.strip()]
    return {
        "wall_s": wall,
        "cpu_s": ru.ru_utime + ru.ru_stime,
        "peak_mb": ru.ru_maxrss / 1024,
        "rc": proc.returncode,
        "error": tail[-1][:200] if proc.returncode and tail else None,
    }


def best(cmd: list[str], repeat: int, cwd: Optional[Path] = None) -> dict[str, Any]:
    runs = [measure(cmd, cwd) for _ in range(repeat)]
    out = dict(runs[0])
    out["wall_s"] = min(r["wall_s"] for r in runs)
    out["cpu_s"] = min(r["cpu_s"] for r in runs)
    out["peak_mb"] = max(r["peak_mb"] for r in runs)
    out["cpu_runs"] = [round(r["cpu_s"], 3) for r in runs]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", type=Path, help="folder with et.0.json + kineto.0.json (default: bench/out/gpt)")
    ap.add_argument("--official", type=Path, help=f"official tools' venv bin folder (default {DEFAULT_OFFICIAL})")
    ap.add_argument("--repeat", type=int, default=3, help="runs per row; the best wall and CPU are kept")
    ap.add_argument("--official-repeat", type=int, default=1, help="runs per official row (they are slow)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()

    trace_dir = args.trace or OUT / "gpt"
    et, kin = trace_dir / "et.0.json", trace_dir / "kineto.0.json"
    if not (et.exists() and kin.exists()):
        if args.trace:
            sys.exit(f"{trace_dir}: no et.0.json + kineto.0.json")
        record(trace_dir)
    work = OUT / "convert_vs_official"
    work.mkdir(parents=True, exist_ok=True)
    chakra = shutil.which("chakra", path=str(Path(sys.executable).parent)) or "chakra"
    py = sys.executable
    rows: dict[str, dict[str, Any]] = {}
    rows["orjson parse (GC on, as a script)"] = best([py, "-c", _PARSE, "on", str(et), str(kin)], args.repeat)
    rows["orjson parse (GC off)"] = best([py, "-c", _PARSE, "off", str(et), str(kin)], args.repeat)
    rows["ours: chakra convert pytorch ET -k KINETO"] = best(
        [chakra, "convert", "pytorch", str(et), "-k", str(kin), "-o", str(work / "ours"), "-q"], args.repeat
    )
    rows["ours: chakra convert pytorch ET (ET alone)"] = best(
        [chakra, "convert", "pytorch", str(et), "-o", str(work / "ours_et"), "-q"], args.repeat
    )
    official = args.official or DEFAULT_OFFICIAL
    link, conv = official / "chakra_trace_link", official / "chakra_converter"
    have_official = link.exists() and conv.exists()
    if have_official:
        linked = work / "linked.0.json"
        # from a neutral folder: the official package is also called `chakra`
        rows["official: chakra_trace_link ET + KINETO"] = best(
            [str(link), "--rank", "0", "--chakra-host-trace", str(et), "--chakra-device-trace", str(kin),
             "--output-file", str(linked)], args.official_repeat, cwd=work,
        )  # fmt: skip
        if rows["official: chakra_trace_link ET + KINETO"]["rc"] == 0:
            rows["official: chakra_converter PyTorch (linked ET+)"] = best(
                [str(conv), "--log-filename", str(work / "official.log"), "PyTorch", "--input", str(linked),
                 "--output", str(work / "official_linked.0.et")], args.official_repeat, cwd=work,
            )  # fmt: skip
        rows["official: chakra_converter PyTorch (ET alone)"] = best(
            [str(conv), "--log-filename", str(work / "official.log"), "PyTorch", "--input", str(et),
             "--output", str(work / "official_et.0.et")], args.official_repeat, cwd=work,
        )  # fmt: skip
    mb = (et.stat().st_size + kin.stat().st_size) / 1e6
    ours = rows["ours: chakra convert pytorch ET -k KINETO"]
    ours_et = rows["ours: chakra convert pytorch ET (ET alone)"]
    floor = rows["orjson parse (GC on, as a script)"]
    ratios = {
        "ours / orjson parse (GC on), CPU": ours["cpu_s"] / floor["cpu_s"],
        "ours / orjson parse (GC off), CPU": ours["cpu_s"] / rows["orjson parse (GC off)"]["cpu_s"],
    }
    if have_official:
        ratios["official converter (ET alone) / ours (ET alone), CPU"] = (
            rows["official: chakra_converter PyTorch (ET alone)"]["cpu_s"] / ours_et["cpu_s"]
        )
        ratios["official converter (ET alone) / ours (ET + Kineto), CPU"] = (
            rows["official: chakra_converter PyTorch (ET alone)"]["cpu_s"] / ours["cpu_s"]
        )
        lk = rows["official: chakra_trace_link ET + KINETO"]
        whole = lk["cpu_s"] + rows.get("official: chakra_converter PyTorch (linked ET+)", {}).get("cpu_s", 0.0)
        key = "official link + convert / ours, CPU" if lk["rc"] == 0 else "official link (until its crash) / ours, CPU"
        ratios[key] = whole / ours["cpu_s"]
    result = {
        "input": {"et": str(et), "kineto": str(kin), "mb": round(mb, 1)},
        "rows": rows,
        "ratios": ratios,
        "targets": {"ours / orjson parse (GC on)": f"<= {FLOOR_TARGET}", "official / ours": f">= {OFFICIAL_TARGET}"},
    }
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(f"input: {et} ({et.stat().st_size / 1e6:.1f} MB) + {kin.name} ({kin.stat().st_size / 1e6:.1f} MB)")
    print(f"{'':52} {'wall s':>8} {'CPU s':>8} {'peak MB':>8}  finishes")
    for name, r in rows.items():
        done = "yes" if r["rc"] == 0 else f"no (exit {r['rc']}: {r['error']})"
        print(f"{name:52} {r['wall_s']:8.2f} {r['cpu_s']:8.2f} {r['peak_mb']:8.0f}  {done}")
    print()
    for name, v in ratios.items():
        print(f"{name:58} {v:7.2f}")
    print(f"targets: ours / orjson parse (GC on) <= {FLOOR_TARGET}; official / ours >= {OFFICIAL_TARGET} where it ends")
    if not have_official:
        print(
            f"\nofficial tools not found in {official}: install them into a venv of their own (docs/pytorch.md, "
            "'Performance') and pass --official VENV/bin"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

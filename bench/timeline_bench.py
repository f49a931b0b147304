"""Benchmark `chakra timeline` on big simulator logs: time and peak memory (not a test).

Writes logs in the chakra simulator's CSV format (issue/callback,npu,time_ns,node_id,name; names
with commas CSV-quoted) with N ops over 8 NPUs, compute and communication overlapping, then runs
`chakra timeline LOG -o OUT.json` in a child process and reports wall time and the child's peak
RSS. Memory must stay flat as N grows (the log is streamed); time must stay under 20 s for a
million events.

    .venv/bin/python bench/timeline_bench.py            # 100k and 1M ops (0.2M and 2M lines)
    .venv/bin/python bench/timeline_bench.py --ops 50000
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NPUS = 8


def write_log(path: Path, ops: int) -> int:
    """A log with `ops` operations (2 lines each); returns the number of lines."""
    lines = 0
    per_npu = ops // NPUS
    with open(path, "w", encoding="utf-8") as f:
        buf = []
        t = 0
        for step in range(0, per_npu, 2):
            # Each step: every NPU issues a compute op and a collective; the collective outlives the compute.
            for npu in range(NPUS):
                buf.append(f"issue,{npu},{t},{step},aten::mm\n")
                buf.append(f'issue,{npu},{t + 10},{step + 1},"all_reduce, bucket {step}"\n')
            for npu in range(NPUS):
                buf.append(f"callback,{npu},{t + 700},{step},aten::mm\n")
            for npu in range(NPUS):
                buf.append(f'callback,{npu},{t + 1500},{step + 1},"all_reduce, bucket {step}"\n')
            lines += 4 * NPUS
            t += 1000  # the next compute starts while this collective still runs -> a second lane
            if len(buf) > 100_000:
                f.writelines(buf)
                buf.clear()
        f.writelines(buf)
    return lines


def run(ops: int, workdir: Path) -> None:
    log = workdir / f"log_{ops}.csv"
    out = workdir / f"timeline_{ops}.json"
    t0 = time.perf_counter()
    lines = write_log(log, ops)
    gen = time.perf_counter() - t0
    chakra = Path(sys.executable).with_name("chakra")
    usage0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    before = usage0.ru_maxrss
    t0 = time.perf_counter()
    proc = subprocess.run([str(chakra), "timeline", str(log), "-o", str(out), "-q"], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    usage1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    peak = usage1.ru_maxrss
    cpu = (usage1.ru_utime - usage0.ru_utime) + (usage1.ru_stime - usage0.ru_stime)
    if proc.returncode != 0:
        print(proc.stderr, file=sys.stderr)
        raise SystemExit(f"chakra timeline failed on {log}")
    rss = max(peak, before) / 1024  # ru_maxrss is KiB on Linux
    size = os.path.getsize(log) / 2**20
    out_size = os.path.getsize(out) / 2**20
    print(
        f"{ops:>9,} ops ({lines:>9,} lines, {size:6.1f} MiB log; generated in {gen:4.1f} s): "
        f"timeline in {wall:5.2f} s wall, {cpu:5.2f} s CPU ({lines / cpu / 1e6:4.2f} M lines per CPU-s), "
        f"peak RSS {rss:6.1f} MiB "
        f"(max over runs so far), output {out_size:6.1f} MiB"
    )
    log.unlink()
    out.unlink()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", type=int, nargs="*", default=[100_000, 1_000_000], help="op counts to run")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="chakra-timeline-bench-") as tmp:
        for ops in sorted(args.ops):
            run(ops, Path(tmp))


if __name__ == "__main__":
    main()

"""Convert a ~1 GB Nsight Systems report and print rows/s, MB/s and peak RSS.

The report is built (not kept in git) by copying the real 2026.1 sample and replicating its CUDA
activity rows with SQL: each doubling appends a time-shifted copy of every runtime, kernel,
memcpy, sync and event row with fresh correlation and event ids, so the big file has the sample's
structure (4 streams, event + device syncs, gaps) repeated. The conversion runs in a child
process so its peak RSS is measured alone.

  .venv/bin/python bench/nsys_bench.py [--size-mb 1024] [--workdir bench/out/nsys] [--keep]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAMPLE = Path(os.environ.get("CHAKRA_SAMPLES", REPO / "tests" / "data" / "samples")) / (
    "nsys/testcuda_nsys2026.1_report2.sqlite"
)
TABLES = (
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    "CUPTI_ACTIVITY_KIND_CUDA_EVENT",
)


def build(path: Path, size_mb: int) -> int:
    shutil.copyfile(SAMPLE, path)
    path.chmod(0o644)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute("PRAGMA synchronous = OFF")
    # drop the bulky non-CUDA tables so the size is CUDA rows (what the converter reads)
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
        if name in ("SCHED_EVENTS", "OSRT_API", "COMPOSITE_EVENTS", "SAMPLING_CALLCHAINS", "OSRT_CALLCHAINS"):
            conn.execute(f"DELETE FROM {name}")
    conn.commit()
    target = size_mb * 1024 * 1024
    while path.stat().st_size < target:
        (t0, t1) = conn.execute("SELECT MIN(start), MAX(end) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()
        shift = t1 - t0 + 1000
        c0, c1 = conn.execute(
            "SELECT MIN(correlationId), MAX(correlationId) FROM CUPTI_ACTIVITY_KIND_RUNTIME"
        ).fetchone()
        corr = c1 + 1
        # the last round copies only the first part of the timeline, to land near the target size
        frac = min(1.0, (target - path.stat().st_size) / path.stat().st_size)
        upto = c0 + int(frac * (c1 - c0)) + 1
        ev = conn.execute("SELECT MAX(eventSyncId) FROM CUPTI_ACTIVITY_KIND_CUDA_EVENT").fetchone()[0] + 1
        for table in TABLES:
            cols = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
            exprs = []
            for c in cols:
                if c in ("start", "end") or (c == "timestamp" and table.endswith("CUDA_EVENT")):
                    exprs.append(f"{c} + {shift}" if c != "timestamp" else c)
                elif c == "correlationId":
                    exprs.append(f"{c} + {corr}")
                elif c in ("eventSyncId", "eventId"):
                    exprs.append(f"CASE WHEN {c} = 4294967295 THEN {c} ELSE {c} + {ev} END")
                else:
                    exprs.append(c)
            conn.execute(
                f"INSERT INTO {table} ({', '.join(cols)}) SELECT {', '.join(exprs)} FROM {table} "
                f"WHERE correlationId <= {upto}"
            )
        conn.commit()
        print(f"  built {path.stat().st_size / 2**20:.0f} MiB", file=sys.stderr)
    rows = sum(conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in TABLES)
    conn.close()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--workdir", type=Path, default=REPO / "bench" / "out" / "nsys")
    ap.add_argument("--keep", action="store_true", help="keep the big report and outputs")
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    report = args.workdir / f"big_{args.size_mb}mb.sqlite"
    t = time.perf_counter()
    if not report.exists():
        rows = build(report, args.size_mb)
    else:
        conn = sqlite3.connect(report)
        rows = sum(conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in TABLES)
        conn.close()
    size = report.stat().st_size
    print(f"report: {report} {size / 2**20:.0f} MiB, {rows:,} CUDA rows (built in {time.perf_counter() - t:.0f} s)")

    prefix = args.workdir / "big"
    code = (
        "import sys, time, resource\n"
        "from pathlib import Path\n"
        "from chakra.converters.nsys import convert_reports\n"
        "t = time.perf_counter()\n"
        "r = convert_reports([Path(sys.argv[1])], Path(sys.argv[2]))\n"
        "dt = time.perf_counter() - t\n"
        "n = sum(x.nodes for x in r.ranks)\n"
        "print(dt, r.rows, n, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(report), str(prefix)], check=True, capture_output=True, text=True
    ).stdout.split()
    dt, events, nodes, rss_kb = float(out[0]), int(out[1]), int(out[2]), int(out[3])
    et_size = sum(p.stat().st_size for p in args.workdir.glob("big.*.et"))
    print(f"converted in {dt:.1f} s: {events:,} events ({events / dt:,.0f} rows/s, {size / 2**20 / dt:.1f} MB/s)")
    print(f"  {nodes:,} nodes written ({et_size / 2**20:.0f} MiB of .et), peak RSS {rss_kb / 1024:.0f} MiB")
    print(f"  (this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB)")
    if not args.keep:
        report.unlink()
        for p in args.workdir.glob("big.*.et"):
            p.unlink()


if __name__ == "__main__":
    main()

"""Throughput of the BigSim converter: a large log built by replicating a real sample's SEBs.

Run: .venv/bin/python bench/bench_bigsim.py [SEBS_PER_PROC]   (prints read / convert / write figures)
"""

from __future__ import annotations

import copy
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from chakra.converters.bigsim import read_binary_logs, write_traces
from chakra.converters.bigsim.writer import write_binary_logs

SAMPLES = Path(__file__).resolve().parents[1] / "tests" / "data" / "samples" / "bigsim" / "text2log_v6_examples.tgz"


def main() -> None:
    per_proc = int(sys.argv[1]) if len(sys.argv) > 1 else 50_000
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        with tarfile.open(SAMPLES) as tf:
            tf.extractall(tmp, filter="data")
        base = read_binary_logs(tmp / "examples" / "case8")
        # Repeat each proc's timeline: SEB i of copy r is a local SEB (no message, so every copy stays matched)
        for proc, sebs in base.timelines.items():
            out = list(sebs)
            while len(out) < per_proc:
                s = copy.copy(sebs[len(out) % len(sebs)])
                s.msgs, s.src_pe, s.src_msg_id, s.back = [], -1, -1, [len(out) - 1]
                s.seqno = len(out)
                out.append(s)
            base.timelines[proc] = out
        logdir = tmp / "big"
        write_binary_logs(base, logdir)
        size = sum(p.stat().st_size for p in logdir.iterdir())
        t0 = time.perf_counter()
        log = read_binary_logs(logdir)
        t1 = time.perf_counter()
        summary = write_traces(log, tmp / "out" / "t")
        t2 = time.perf_counter()
        n = log.num_sebs()
        print(f"log: {n:,} SEBs, {size / 1e6:.1f} MB binary")
        print(f"read:    {t1 - t0:.2f} s  ({n / (t1 - t0):,.0f} SEBs/s, {size / 1e6 / (t1 - t0):.1f} MB/s)")
        print(f"convert+write: {t2 - t1:.2f} s  ({summary.nodes:,} nodes, {summary.nodes / (t2 - t1):,.0f} nodes/s)")


if __name__ == "__main__":
    main()

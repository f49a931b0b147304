"""Benchmark `chakra timeline` on big simulator logs: time and peak memory (not a test).

Writes logs in the chakra simulator's CSV format (issue/callback,npu,time_ns,node_id,name; names
with commas CSV-quoted) with N ops over 8 NPUs, compute and communication overlapping, then runs
`chakra timeline LOG -o OUT.json` in a child process and reports wall time and the child's peak
RSS. Memory must stay flat as N grows (the log is streamed); time must stay under 20 s for a
million events.

    .venv/bin/python bench/timeline_bench.py            # 100k and 1M ops (0.2M and 2M lines)
    .venv/bin/python bench/timeline_bench.py --ops 50000

`--recorded COPIES` benchmarks the profiler layout instead: the real GPU step in
tests/data/gpu/fp32 is converted, its steps are repeated COPIES times one after another in one
trace (ids, references and times shifted), `chakra timeline TRACE -o OUT.json` runs in a child
process, and the output is checked against Perfetto's JSON importer rules
(`chakra.visualizers.chrome_trace.importer_problems`). 130 copies give about a million events.

    .venv/bin/python bench/timeline_bench.py --recorded 130
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


_REFS = ("launcher", "gap_of", "queue_of")


def repeated_gpu_step(workdir: Path, copies: int) -> Path:
    """The converted fp32 GPU recording repeated `copies` times in one trace; returns its path."""
    import chakra.converters.pytorch as pytorch
    from chakra.io import read_traces, write_trace
    from chakra.schema import pb
    from chakra.trace import Trace

    data = Path(__file__).resolve().parents[1] / "tests" / "data" / "gpu" / "fp32"
    written = pytorch.convert([data / "et.json.gz", data / "kineto.json.gz"], workdir / "fp32").paths
    base = read_traces([str(written[0])])[0]
    id_span = max(n.id for n in base.nodes) + 1
    starts = [n.start_time_micros for n in base.nodes if n.start_time_micros]
    t_span = max(n.start_time_micros + n.duration_micros for n in base.nodes) - min(starts) + 1000
    nodes = []
    for k in range(copies):
        di, dt = k * id_span, k * t_span
        for n in base.nodes:
            m = pb.Node()
            m.CopyFrom(n)
            m.id = n.id + di
            if n.start_time_micros:
                m.start_time_micros = n.start_time_micros + dt
            m.data_deps[:] = [d + di for d in n.data_deps]
            m.ctrl_deps[:] = [d + di for d in n.ctrl_deps]
            for a in m.attr:
                if a.name in _REFS and a.int64_val:
                    a.int64_val += di
            nodes.append(m)
    path = workdir / "repeated.0.et"
    write_trace(path, Trace(nodes=nodes, rank=0))
    return path


def run_recorded(copies: int, workdir: Path) -> None:
    import orjson

    from chakra.visualizers.chrome_trace import importer_problems

    t0 = time.perf_counter()
    trace = repeated_gpu_step(workdir, copies)
    gen = time.perf_counter() - t0
    out = workdir / "recorded.json"
    chakra = Path(sys.executable).with_name("chakra")
    usage0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([str(chakra), "timeline", str(trace), "-o", str(out), "-q"], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    usage1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        print(proc.stderr, file=sys.stderr)
        raise SystemExit(f"chakra timeline failed on {trace}")
    cpu = (usage1.ru_utime - usage0.ru_utime) + (usage1.ru_stime - usage0.ru_stime)
    doc = orjson.loads(out.read_bytes())
    events = doc["traceEvents"]
    kinds = {ph: sum(1 for e in events if e["ph"] == ph) for ph in ("X", "s", "M")}
    t0 = time.perf_counter()
    problems = importer_problems(doc)
    check = time.perf_counter() - t0
    print(
        f"{copies} copies of the fp32 GPU step ({os.path.getsize(trace) / 2**20:.1f} MiB .et, made in {gen:.1f} s): "
        f"{len(events):,} events ({kinds['X']:,} slices, {kinds['s']:,} arrows, {kinds['M']:,} metadata) in "
        f"{wall:.1f} s wall, {cpu:.1f} s CPU, peak RSS {usage1.ru_maxrss / 1024:.0f} MiB, output "
        f"{os.path.getsize(out) / 2**20:.0f} MiB; Perfetto importer rules: "
        f"{problems or 'all kept'} (checked in {check:.1f} s)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", type=int, nargs="*", default=[100_000, 1_000_000], help="op counts to run")
    ap.add_argument("--recorded", type=int, metavar="COPIES", help="benchmark the recorded (profiler) layout")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="chakra-timeline-bench-") as tmp:
        if args.recorded:
            run_recorded(args.recorded, Path(tmp))
            return
        for ops in sorted(args.ops):
            run(ops, Path(tmp))


if __name__ == "__main__":
    main()

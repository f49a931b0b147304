"""Time and peak memory of `chakra validate`, `stats` and `analyze` on a long dependency chain.

Writes an N-node chain (each node depends on the one before, durations 1..7 µs, the project's own
writer), then runs each command as a child process and prints wall time and peak RSS (the child's
ru_maxrss from wait4). `--before` names another `chakra` executable (say the main branch's
`.venv/bin/chakra`) to run the same commands with, for a before/after table; the JSON outputs of
the two are compared too. The machine is shared: compare figures from one run of this script.

    .venv/bin/python bench/memory_bench.py [--nodes 1000000] [--before /work/main/.venv/bin/chakra]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from chakra.io import TraceWriter
from chakra.schema import NodeType, pb

#: analyze twice: the dependency-only schedule, and the default one (the simulator's)
COMMANDS = (("validate",), ("stats",), ("analyze", "--schedule", "asap"), ("analyze",))


def write_chain(path: Path, n: int) -> None:
    with TraceWriter(path) as w:
        w.write_metadata(pb.GlobalMetadata(version="0.0.4"))
        for s in range(0, n, 20_000):
            w.write_nodes(
                [
                    pb.Node(
                        id=i,
                        name=f"op{i}",
                        type=NodeType.COMP_NODE,
                        duration_micros=1 + i % 7,
                        data_deps=[i - 1] if i else [],
                    )  # fmt: skip
                    for i in range(s, min(n, s + 20_000))
                ]
            )


def measure(exe: str, args: tuple[str, ...], trace: Path) -> tuple[float, float, int, bytes]:
    """(seconds, peak MB, exit code, stdout) of one run."""
    with tempfile.TemporaryFile() as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen([exe, *args, "-q", "--json", str(trace)], stdout=out, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t0
        out.seek(0)
        return seconds, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status), out.read()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--before", help="another chakra executable to compare with")
    ap.add_argument("--only", choices=[c[0] for c in COMMANDS], action="append")
    a = ap.parse_args()
    after = str(Path(sys.executable).with_name("chakra"))
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "chain.0.et"
        t0 = time.perf_counter()
        write_chain(trace, a.nodes)
        size = trace.stat().st_size
        print(f"{a.nodes:,} nodes, {size / 2**20:.1f} MB on disk ({size / a.nodes:.0f} B/node), "
              f"written in {time.perf_counter() - t0:.1f} s; load {os.getloadavg()[0]:.1f}")  # fmt: skip
        print(f"{'command':<24} {'which':<7} {'seconds':>8} {'peak MB':>8} {'B/node':>7} rc  output")
        for cmd in COMMANDS:
            if a.only and cmd[0] not in a.only:
                continue
            runs = [("before", a.before)] if a.before else []
            outputs = []
            for which, exe in runs + [("after", after)]:
                sec, mb, rc, out = measure(exe, cmd, trace)
                outputs.append(out)
                same = "" if len(outputs) < 2 else ("same" if outputs[0] == outputs[1] else "DIFFERENT")
                name = " ".join(cmd)[:24]
                print(f"{name:<24} {which:<7} {sec:>8.1f} {mb:>8.0f} {mb * 2**20 / a.nodes:>7.0f} {rc:<3} {same}")


if __name__ == "__main__":
    main()

"""One timed run of a real ASTRA-sim binary, for the benches that set ours beside it.

Wall seconds from a monotonic clock around the child; CPU seconds and peak RSS from GNU time when
/usr/bin/time exists (a child's own `wait4` maximum would also count the pages it shared with
the large Python process that forked it), else from `wait4`. Every rank's finish is read from
its output. Imported by `bench/sim_bench.py` and `bench/scale_sim.py` (run as scripts, this
folder is on their path).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tools.truthcases
from tools.truthcases import finish_cycles  # noqa: E402


def run_timed(cmd: list[str], folder: Path, timeout: Optional[float] = None) -> dict:
    """{"wall", "cpu", "rss_mib", "finish": {rank: ns}} of `cmd` run in `folder` (its output in
    folder/astra.out), or {"error": "> N s"} when it ran past `timeout` seconds and was killed."""
    timefile = folder / "astra.time"
    gnu_time = Path("/usr/bin/time")
    if gnu_time.exists():
        cmd = [str(gnu_time), "-f", "%U %S %M", "-o", str(timefile), *cmd]
    t0 = time.perf_counter()
    with open(folder / "astra.out", "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=folder, start_new_session=True)
        timer = threading.Timer(timeout, os.killpg, (proc.pid, signal.SIGKILL)) if timeout else None
        if timer is not None:
            timer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if timer is not None:
            timer.cancel()
    wall = time.perf_counter() - t0
    if timeout and proc.returncode == -signal.SIGKILL and wall >= timeout:
        return {"error": f"> {timeout:.0f} s"}
    finish = finish_cycles((folder / "astra.out").read_text(errors="replace"))
    if gnu_time.exists():
        user, system, kib = timefile.read_text().split()[-3:]
        return {"wall": wall, "cpu": float(user) + float(system), "rss_mib": float(kib) / 1024, "finish": finish}
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss_mib": usage.ru_maxrss / 1024, "finish": finish}

"""Running `chakra` as a user would, with faults around it: a separate process (so signals, time
and memory are its own), its peak memory (VmHWM, sampled), and the checks every fault test
makes: one line on stderr, the exit code, no traceback, nothing left behind, bounded time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

REPO = Path(__file__).resolve().parents[2]
ALL_REDUCE = REPO / "tests" / "data" / "samples" / "astrasim" / "all_reduce_8npus_1MB" / "all_reduce"
DDP2 = REPO / "tests" / "data" / "samples" / "pytorch" / "ddp2"
CONFIGS = REPO / "chakra" / "data" / "configs"


@dataclass
class Run:
    rc: int
    stdout: str
    stderr: str
    seconds: float
    max_rss_mb: float  # sampled every 20 ms while it ran
    pid: int

    @property
    def lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]


def _default_sighup() -> None:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def chakra(
    *args: object,
    cwd: Optional[Path] = None,
    timeout: float = 60,
    kill_after: Optional[float] = None,
    sig: int = signal.SIGKILL,
    group: bool = True,
    when: Optional[Callable[[int], bool]] = None,
    seen: Optional[set[int]] = None,
) -> Run:
    """Run `chakra ARGS` in its own process group. With `kill_after`, send `sig` that many seconds
    in (and once `when(pid)` holds, if given): to the whole group as a terminal's Ctrl-C does, or
    (`group=False`) to the command alone, as a SIGKILL of its pid. `seen` collects every process
    that ran below the command."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-m", "chakra.cli", *map(str, args)],
            cwd=cwd,
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"},
            # as started from a terminal: under `nohup pytest` the child would inherit SIGHUP
            # ignored, and chakra rightly keeps an ignored SIGHUP ignored
            preexec_fn=_default_sighup,
        )
        sent = False
        peak = 0.0
        status = 0
        while True:
            pid, status, _ = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            now = time.monotonic() - t0
            peak = max(peak, _hwm_mb(proc.pid))
            if seen is not None:
                seen |= descendants(proc.pid)
            if kill_after is not None and not sent and now >= kill_after and (when is None or when(proc.pid)):
                if group:
                    os.killpg(proc.pid, sig)
                else:
                    os.kill(proc.pid, sig)
                sent = True
            if now > timeout:
                os.killpg(proc.pid, signal.SIGKILL)
                os.wait4(proc.pid, 0)
                raise AssertionError(f"chakra {' '.join(map(str, args))} did not end within {timeout} s")
            time.sleep(0.02)
        proc.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.monotonic() - t0
        out.seek(0)
        err.seek(0)
        return Run(
            proc.returncode,
            out.read().decode("utf-8", "replace"),
            err.read().decode("utf-8", "replace"),
            seconds,
            peak,
            proc.pid,
        )


def _hwm_mb(pid: int) -> float:
    """Peak resident memory of a running process (VmHWM). Not wait4's ru_maxrss: Linux carries
    the parent's peak across fork and exec, so a child of a big test process would report it."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return 0.0


def assert_one_line(run: Run, rc: int = 1, *, mentions: tuple[str, ...] = (), seconds: float = 30) -> str:
    """The fault became exactly one line on stderr with exit code `rc`, quickly, no traceback."""
    text = run.stderr
    assert "Traceback" not in text and "Error:" not in text.replace("error:", ""), text[-2000:]
    assert run.rc == rc, (run.rc, text[-2000:])
    assert len(run.lines) == 1, text[-2000:]
    for word in mentions:
        assert word in run.lines[0], (word, run.lines[0])
    assert run.seconds < seconds, run.seconds
    return run.lines[0]


def temp_files(folder: Path) -> list[str]:
    """Temporary outputs of this program (or the older naming) left in `folder`."""
    return sorted(p.name for p in Path(folder).iterdir() if p.name.endswith(".tmp") or ".part" in p.name)


def descendants(pid: int) -> set[int]:
    """Every live process below `pid` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.add(child)
            todo.append(child)
    return out


def alive(pids: set[int]) -> set[int]:
    out = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                    out.add(pid)
        except OSError:
            pass
    return out


def wait_gone(pids: set[int], seconds: float = 10) -> set[int]:
    deadline = time.monotonic() + seconds
    left = alive(pids)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = alive(left)
    return left

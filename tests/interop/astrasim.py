"""Run the real ASTRA-sim 2.x analytical binaries and read their per-rank finish times.

Found via $ASTRA_SIM_BIN, else ../shared/tools/astra-sim/bin beside the repository. A binary that
is present but cannot start (its protobuf runtime missing) counts as absent, with the loader's
message as the reason.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Optional

from tools.truthcases import BINARY_NAMES, find_binaries, finish_cycles

BINARIES = tuple(BINARY_NAMES.values())
# What `export astra-sim` cannot fix for the aware binary (one network dimension only): the export
# lists it under not_fixed, the real binary may abort at exit on it (a double free, its output lost
# on some runs), and the same trace runs on the unaware binary, where the export fixes it.
AWARE_ONLY_LIMITS = frozenset({"subgroup-double-free"})


def bin_dir() -> tuple[Optional[Path], str]:
    """(folder of the binaries, "") or (None, why they cannot be used)."""
    folder = find_binaries()
    if folder is None:
        return None, "ASTRA-sim binaries not found ($ASTRA_SIM_BIN or ../shared/tools/astra-sim/bin)"
    try:
        probe = subprocess.run([str(folder / BINARIES[0]), "--help"], capture_output=True, timeout=30)
    except OSError as exc:
        return None, f"{folder / BINARIES[0]} cannot run: {exc}"
    if b"error while loading shared libraries" in probe.stderr:
        return None, f"{BINARIES[0]} cannot start: {probe.stderr.decode(errors='replace').strip()}"
    return folder, ""


def run(argv: list[str], cwd: Path, timeout: int = 120) -> tuple[dict[int, int], str]:
    """Per-rank finish cycles of one run (ranks that never finish are absent) and its output."""
    proc = subprocess.run(argv, capture_output=True, timeout=timeout, cwd=cwd)
    out = proc.stdout + proc.stderr
    text = out.decode(errors="replace")
    return finish_cycles(text), text


def start(argv: list[str], cwd: Path, runs: int) -> list[subprocess.Popen]:
    """`runs` runs of one command at once (their outputs to pipes)."""
    return [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=cwd) for _ in range(runs)]


def collect(procs: list[subprocess.Popen], timeout: int = 120) -> list[tuple[dict[int, int], int, str]]:
    """Per run: the finish cycles of each rank that finished, the exit status, and the output."""
    out = []
    for proc in procs:
        try:
            data, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            data, _ = proc.communicate()
            data += b"\n(killed: still running after %d s)" % timeout
        text = data.decode(errors="replace")
        out.append((finish_cycles(text), proc.returncode, text))
    return out

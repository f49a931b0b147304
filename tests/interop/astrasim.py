"""Run the real ASTRA-sim 2.x analytical binaries and read their per-rank finish times.

Found via $ASTRA_SIM_BIN, else ../shared/tools/astra-sim/bin beside the repository. A binary that
is present but cannot start (its protobuf runtime missing) counts as absent, with the loader's
message as the reason.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parents[2]
BINARIES = ("AstraSim_Analytical_Congestion_Aware", "AstraSim_Analytical_Congestion_Unaware")
FINISHED = re.compile(rb"sys\[(\d+)\] finished, (\d+) cycles")


def bin_dir() -> tuple[Optional[Path], str]:
    """(folder of the binaries, "") or (None, why they cannot be used)."""
    env = os.environ.get("ASTRA_SIM_BIN")
    folder = Path(env) if env else REPO.parent / "shared" / "tools" / "astra-sim" / "bin"
    missing = [b for b in BINARIES if not (folder / b).is_file()]
    if missing:
        return None, f"ASTRA-sim binaries not found in {folder} (set ASTRA_SIM_BIN)"
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
    finished = {int(m.group(1)): int(m.group(2)) for m in FINISHED.finditer(out)}
    return finished, out.decode(errors="replace")

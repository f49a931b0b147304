"""Run one workload through the real ASTRA-sim and through `chakra.sim.simulate`, per-rank side by side.

A development aid for simulator parity (the recorded truth table lives in tests/data/astrasim_truth/).
The ASTRA-sim binaries are found via $ASTRA_SIM_BIN or ../shared/tools/astra-sim/bin next to the repo.

    from tools.sim_vs_astrasim import compare
    compare(traces, net_yml, sys_json, aware=True, groups={"1": [0, 1]})
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Optional

from chakra.io import write_trace
from chakra.trace import Trace

REPO = Path(__file__).resolve().parent.parent
_FINISHED = re.compile(r"sys\[(\d+)\] finished, (\d+) cycles")


def astrasim_bin_dir() -> Optional[Path]:
    """$ASTRA_SIM_BIN, else ../shared/tools/astra-sim/bin next to the repository; None if absent."""
    env = os.environ.get("ASTRA_SIM_BIN")
    d = Path(env) if env else REPO.parent / "shared/tools/astra-sim/bin"
    return d if (d / "AstraSim_Analytical_Congestion_Aware").exists() else None


def run_astrasim(
    traces: list[Trace],
    network: Path,
    system: Path,
    *,
    aware: bool = True,
    groups: Optional[dict[str, list[int]]] = None,
    memory: Optional[Path] = None,
    extra_args: tuple[str, ...] = (),
    timeout: float = 120,
) -> dict[int, int]:
    """{rank: finish ns} from ASTRA-sim's `sys[i] finished, T cycles` lines (missing ranks: absent)."""
    bindir = astrasim_bin_dir()
    if bindir is None:
        raise RuntimeError("ASTRA-sim binaries not found (set ASTRA_SIM_BIN)")
    binary = bindir / ("AstraSim_Analytical_Congestion_Aware" if aware else "AstraSim_Analytical_Congestion_Unaware")
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        for i, tr in enumerate(traces):
            write_trace(t / f"w.{tr.rank if tr.rank is not None else i}.et", tr)
        if memory is None:
            memory = t / "mem.json"
            memory.write_text(json.dumps({"memory-type": "NO_MEMORY_EXPANSION"}))
        cmd = [
            str(binary),
            f"--workload-configuration={t}/w",
            f"--system-configuration={system}",
            f"--network-configuration={network}",
            f"--remote-memory-configuration={memory}",
            f"--logging-folder={t}/log",
            *extra_args,
        ]
        if groups:
            (t / "groups.json").write_text(json.dumps(groups))
            cmd.append(f"--comm-group-configuration={t}/groups.json")
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=t)
        if os.environ.get("SIM_VS_ASTRASIM_VERBOSE"):
            print("\n".join((out.stdout + out.stderr).splitlines()[-4:]))
    return {int(r): int(c) for r, c in _FINISHED.findall(out.stdout)}


def compare(traces: list[Trace], network: Path, system: Path, *, aware: bool = True, **kw: Any) -> dict:
    from chakra.sim import simulate

    groups = kw.pop("groups", None)
    ours_kw = kw.pop("ours", {})
    truth = run_astrasim(traces, network, system, aware=aware, groups=groups, **kw)
    res = simulate(traces, network, system, comm_groups=groups, congestion="aware" if aware else "unaware", **ours_kw)
    ours = {r: v.finish_ns for r, v in res.ranks.items()}
    return {"astra": truth, "ours": ours, "equal": truth == ours}

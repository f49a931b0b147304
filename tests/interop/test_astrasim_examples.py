"""ASTRA-sim's own examples (its `examples/` folder at 518bd51) run in `chakra simulate` with the
finish times ASTRA-sim prints for them.

The inputs are ASTRA-sim's files, copied unchanged under tests/data/samples/astrasim/examples/
(SOURCES.md); each case is one of its run scripts (examples/run_scripts/analytical/*/*.sh), read
for its workload, system, network and remote-memory paths and its binary. ASTRA-sim's scripts run
from the root of its repository, and its custom-collective system JSON names its algorithm by a
path from there, so every run here starts in the folder that holds `examples/`.

The finishes ASTRA-sim printed are recorded in examples/finishes.json; where the binaries are
present they are run again and must print the same. The ns-3 and htsim examples need network
backends this project does not model (packet-level ns-3, htsim): they are not run.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from .astrasim import bin_dir, run

ROOT = Path(__file__).resolve().parents[1] / "data" / "samples" / "astrasim"
EXAMPLES = ROOT / "examples"
SCRIPTS = sorted((EXAMPLES / "run_scripts" / "analytical").glob("*/*.sh"))
RECORDED = json.loads((EXAMPLES / "finishes.json").read_text())
BACKEND = {"AstraSim_Analytical_Congestion_Aware": "aware", "AstraSim_Analytical_Congestion_Unaware": "unaware"}
BINARY = {v: k for k, v in BACKEND.items()}


def _script(path: Path) -> dict[str, str]:
    """A run script's inputs (paths from the folder holding examples/) and its backend."""
    text = path.read_text()
    out = {}
    for key in ("WORKLOAD", "SYSTEM", "NETWORK", "REMOTE_MEMORY"):
        value = re.search(rf'^{key}="\$\{{EXAMPLE_DIR:\?\}}/([^"]+)"', text, re.M)
        assert value, f"{path.name}: no {key}="
        out[key] = f"examples/{value.group(1)}"
    binary = re.search(r"bin/(AstraSim_Analytical_Congestion_\w+)\"", text)
    assert binary, f"{path.name}: no analytical binary"
    out["backend"] = BACKEND[binary.group(1)]
    return out


CASES = [(p.stem, b) for p in SCRIPTS for b in RECORDED[p.stem] if b != "about"]


def test_every_analytical_example_is_covered():
    assert len(SCRIPTS) == 4 and {p.stem for p in SCRIPTS} == set(RECORDED) - {"about"}
    assert all(_script(p)["backend"] in RECORDED[p.stem] for p in SCRIPTS)


def _simulate(name: str, backend: str, run_cli, monkeypatch) -> dict:
    inputs = _script(EXAMPLES / "run_scripts" / "analytical" / f"{backend_dir(name)}" / f"{name}.sh")
    monkeypatch.chdir(ROOT)
    res = run_cli("simulate", inputs["WORKLOAD"], "--network", inputs["NETWORK"], "--system", inputs["SYSTEM"],
                  "--memory", inputs["REMOTE_MEMORY"], "--congestion", backend, "--json", "-q")  # fmt: skip
    assert res.exit_code == 0, res.stderr
    return json.loads(res.stdout)


def backend_dir(name: str) -> str:
    return next(p.parent.name for p in SCRIPTS if p.stem == name)


@pytest.mark.parametrize(("name", "backend"), CASES)
def test_simulate_gives_astrasims_finishes(name, backend, run_cli, monkeypatch):
    """Every example is accepted (the custom-collective one has no collective-optimization, which
    ASTRA-sim never reads on that path) and every rank finishes when ASTRA-sim's does."""
    out = _simulate(name, backend, run_cli, monkeypatch)
    got = [out["ranks"][str(r)]["finish_ns"] for r in range(len(out["ranks"]))]
    assert got == RECORDED[name][backend]
    assert out["warnings"] == []


def test_a_native_all_reduce_without_collective_optimization_is_refused(run_cli, tmp_path, monkeypatch):
    """Where ASTRA-sim does read the key (a native ALL_REDUCE), its absence is still refused."""
    system = json.loads((EXAMPLES / "system" / "custom_collectives" / "custom_collective.json").read_text())
    del system["all-reduce-implementation-custom"]
    system["all-reduce-implementation"] = ["ring"]
    path = tmp_path / "native.json"
    path.write_text(json.dumps(system))
    monkeypatch.chdir(ROOT)
    res = run_cli("simulate", "examples/workload/microbenchmarks/all_reduce/8npus_1MB/all_reduce", "--system",
                  str(path), "--network", "examples/network/analytical/Ring_8npus.yml", "-q")  # fmt: skip
    assert res.exit_code == 1
    assert "missing key collective-optimization" in res.stderr and "undefined behaviour" in res.stderr


BIN, WHY = bin_dir()


@pytest.mark.skipif(BIN is None, reason=WHY)
@pytest.mark.parametrize(("name", "backend"), CASES)
def test_astrasim_prints_the_recorded_finishes(name, backend, tmp_path):
    inputs = _script(EXAMPLES / "run_scripts" / "analytical" / backend_dir(name) / f"{name}.sh")
    argv = [
        str(BIN / BINARY[backend]),
        f"--workload-configuration={inputs['WORKLOAD']}",
        f"--system-configuration={inputs['SYSTEM']}",
        f"--network-configuration={inputs['NETWORK']}",
        f"--remote-memory-configuration={inputs['REMOTE_MEMORY']}",
        f"--logging-folder={tmp_path / 'log'}",  # its default, ./log, would land among the inputs
    ]
    finished, log = run(argv, ROOT)
    assert [finished.get(r) for r in range(len(RECORDED[name][backend]))] == RECORDED[name][backend], log[-2000:]


def test_the_scripts_are_astrasims_own():
    """The run scripts are ASTRA-sim's, unchanged: they still name its build's binaries."""
    for p in SCRIPTS:
        assert "build/astra_analytical/build/bin/AstraSim_Analytical_Congestion_" in p.read_text()
        assert subprocess.run(["bash", "-n", str(p)]).returncode == 0

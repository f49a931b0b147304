"""The recorded ASTRA-sim truth table is reproduced by the real binaries (a representative subset).

Runs when the ASTRA-sim analytical binaries are found (`$ASTRA_SIM_BIN`, else
`../shared/tools/astra-sim/bin` beside the repository) and load (they need `libprotobuf32`);
skips with a one-line reason otherwise.
"""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import pytest

from tests.sim.astrasim_truth import load_table
from tools.truthcases import BINARY_NAMES, find_binaries

ROOT = Path(__file__).resolve().parents[2]
BIN = find_binaries()
TABLE = load_table()
FAILURE_NAMES = (
    "fail/aware/metadata-node",
    "fail/unaware/unimplemented-BARRIER",
    "fail/aware/missing-dep",
    "fail/unaware/send-recv-size-mismatch",
    "fail/aware/coll-size-mismatch",
    "fail/unaware/one-npu",
    "fail/aware/ring-of-2",
    "fail/aware/multidim-on-aware",
)


def _subset() -> list[dict]:
    """Per class and backend the first finishing case and one from the middle, plus failure modes."""
    picked = []
    for _cls, cases in sorted(TABLE.items()):
        for backend in ("aware", "unaware"):
            done = [c for c in cases if c["backend"] == backend and c["result"]["status"] == "finished"]
            if done:
                picked.append(done[0])
                if len(done) > 2:
                    picked.append(done[len(done) // 2])
    by_name = {c["name"]: c for cases in TABLE.values() for c in cases}
    picked += [by_name[n] for n in FAILURE_NAMES]
    return picked


SUBSET = _subset()


def _load_tool():
    spec = importlib.util.spec_from_file_location("astrasim_truth_tool", ROOT / "tools" / "astrasim_truth.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def tool():
    if BIN is None:
        pytest.skip("ASTRA-sim binaries not found ($ASTRA_SIM_BIN or ../shared/tools/astra-sim/bin)")
    probe = subprocess.run([str(BIN / BINARY_NAMES["unaware"]), "--help"], capture_output=True, text=True)
    if "error while loading shared libraries" in probe.stderr:
        pytest.skip(f"ASTRA-sim binaries do not load: {probe.stderr.strip().splitlines()[-1]}")
    return _load_tool()


def test_subset_is_representative():
    assert len(SUBSET) >= 30
    assert {c["backend"] for c in SUBSET} == {"aware", "unaware"}
    assert {c["cls"] for c in SUBSET} == set(TABLE)


@pytest.mark.parametrize("spec", SUBSET, ids=[c["name"] for c in SUBSET])
def test_binaries_reproduce_recorded_result(tool, spec):
    got = tool.run_case(spec, BIN, timeout=5.0)
    want = spec["result"]
    assert got["status"] == want["status"], (got, want)
    assert got["finish"] == want["finish"]
    if want["status"] == "finished":
        assert got["exposed"] == want["exposed"]
    else:
        assert got.get("message") == want.get("message")


def test_binaries_beside_the_checkout_are_found():
    """Where ../shared/tools/astra-sim/bin exists beside the checkout (CI, developers), the default
    lookup finds it: a wrong path would silently skip every test that runs the real ASTRA-sim."""
    beside = ROOT.parent / "shared" / "tools" / "astra-sim" / "bin"
    if not all((beside / name).is_file() for name in BINARY_NAMES.values()):
        pytest.skip(f"no ASTRA-sim binaries at {beside}")
    assert find_binaries() is not None

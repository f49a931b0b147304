"""The built wheel installs into a clean venv and works under the oldest and newest protobuf runtimes.

The generated module carries no runtime-version pin (tools/gen_proto.py), which is what lets
protobuf 4.25 and 7.x both import it; this test proves it on real installs, from outside the repo.
"""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

CHECK = r"""
import sys, google.protobuf
import chakra, chakra.converters, chakra.visualizers, chakra.feeder, chakra.schema, chakra.io
assert not chakra.__file__.startswith(sys.argv[1]), chakra.__file__  # the installed copy, not the repo
from chakra.io import read_traces, write_trace, read_trace
from chakra.schema.attrs import get_attr
traces = read_traces([sys.argv[2]])
assert len(traces) == 8 and get_attr(traces[0].nodes[0], "comm_size") == 1048576
write_trace(sys.argv[3] + "/x.0.json", traces[0])
write_trace(sys.argv[3] + "/x.0.et", read_trace(sys.argv[3] + "/x.0.json"))
assert open(sys.argv[3] + "/x.0.et", "rb").read() == open(str(traces[0].path), "rb").read()
import importlib.resources
assert importlib.resources.files("chakra.schema").joinpath("trace.schema.json").is_file()
print(google.protobuf.__version__)
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(REPO)],
        check=True,
    )
    (whl,) = out.glob("chakra_et-*.whl")
    return whl


@pytest.mark.slow
@pytest.mark.parametrize("protobuf", ["protobuf==4.25.*", "protobuf>=7"])
def test_wheel_in_fresh_venv(wheel, tmp_path, samples_dir, protobuf):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", str(wheel), protobuf], check=True, cwd=tmp_path)
    prefix = samples_dir / "astrasim" / "all_reduce_8npus_1MB" / "all_reduce"
    proc = subprocess.run(
        [str(py), "-c", CHECK, str(REPO), str(prefix), str(tmp_path)], capture_output=True, text=True, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    major = int(proc.stdout.strip().split(".")[0])
    assert major == (4 if protobuf.startswith("protobuf==4") else 7)
    chakra = str(env_dir / "bin" / "chakra")
    help_proc = subprocess.run([chakra, "--help"], capture_output=True, text=True, cwd=tmp_path)
    assert help_proc.returncode == 0 and "validate" in help_proc.stdout and help_proc.stderr == ""
    # The bundled ASTRA-sim configs ship in the wheel: the regression case runs with no config file.
    sim = subprocess.run(
        [chakra, "simulate", str(prefix), "--json", "-q"], capture_output=True, text=True, cwd=tmp_path
    )
    assert sim.returncode == 0, sim.stderr
    assert json.loads(sim.stdout)["finish_ns"] == 117780


def test_build_lists_every_packaged_folder(tmp_path):
    """A build names every folder it ships (chakra/data holds the bundled configs), so setuptools
    prints no BuildBackendWarning pages during `make setup` / `make demo`, and the data is in the wheel."""
    import zipfile

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-v",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            str(REPO),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    log = proc.stdout + proc.stderr
    assert "BuildBackendWarning" not in log and "absent from the `packages`" not in log
    (whl,) = tmp_path.glob("chakra_et-*.whl")
    names = set(zipfile.ZipFile(whl).namelist())
    assert {"chakra/data/configs/system.json", "chakra/data/sweep_grid.schema.json"} <= names

"""Standard output and error that go away or fill up, for every command that writes to them.

- A reader that closes its end (`chakra timeline LOG | head -c 64`): the command ends quietly,
  exit code 0, as `cat` does; nothing but what it would say anyway on stderr.
- stdout on a full device (`> /dev/full`): one line naming the stream, exit code 1, no traceback.
- stderr on a full device: exit code 1, stdout still whole.
Either way no temporary file stays in the output folder.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from .faultlib import ALL_REDUCE, REPO, chakra, temp_files

ENV = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """The 8-rank all-reduce, its simulation log, and a log of a larger run (a timeline of about
    5 MB, far past a pipe's 64 KiB buffer)."""
    d = tmp_path_factory.mktemp("inputs")
    for p in ALL_REDUCE.parent.glob("all_reduce.*.et"):
        shutil.copy(p, d / p.name)
    run = chakra("simulate", d / "all_reduce", "--log", d / "run.csv", "-q")
    assert run.rc == 0, run.stderr
    run = chakra("generate", "transformer", "--dp", "8", "-o", d / "big", "-q")
    assert run.rc == 0, run.stderr
    run = chakra("simulate", d / "big", "--log", d / "big.csv", "-q", timeout=120)
    assert run.rc == 0, run.stderr
    return d


# name -> arguments (IN: the inputs folder, OUT: an output folder)
COMMANDS = {
    "timeline": ["timeline", "IN/run.csv"],
    "timeline (large)": ["timeline", "IN/big.csv"],
    "stats": ["stats", "IN/all_reduce"],
    "stats --json": ["stats", "IN/all_reduce", "--json"],
    "simulate": ["simulate", "IN/all_reduce", "--log", "OUT/s.csv"],
    "simulate --json": ["simulate", "IN/all_reduce", "--json"],
    "validate": ["validate", "IN/all_reduce"],
    "validate --for astra-sim --json": ["validate", "IN/all_reduce", "--for", "astra-sim", "--json"],
    "export astra-sim --json": ["export", "astra-sim", "IN/all_reduce", "-o", "OUT/x", "--json"],
    "--help": ["--help"],
    "simulate --help": ["simulate", "--help"],
}


def _args(words, inputs, out):
    return [str(w).replace("IN/", f"{inputs}/").replace("OUT/", f"{out}/") for w in words]


def _run(args, *, stdout, stderr=subprocess.PIPE, timeout=120):
    proc = subprocess.run(
        [sys.executable, "-m", "chakra.cli", *args],
        stdout=stdout,
        stderr=stderr,
        stdin=subprocess.DEVNULL,
        env=ENV,
        timeout=timeout,
        cwd=REPO,
    )
    return proc.returncode, (proc.stderr or b"").decode(errors="replace")


def _normal(args):
    for a in args:  # its own output folder
        if "/normal/" in a:
            os.makedirs(a.rsplit("/", 1)[0], exist_ok=True)
    proc = subprocess.run(
        [sys.executable, "-m", "chakra.cli", *args], capture_output=True, env=ENV, timeout=120, cwd=REPO
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    said = proc.stderr.decode().replace("/normal/", "/")  # the same lines as for the run's own folder
    return proc.stdout, {x.strip() for x in said.splitlines() if x.strip()}


def _clean(err: str) -> None:
    assert "Traceback" not in err and "Exception ignored" not in err and "BrokenPipe" not in err, err[-3000:]


@pytest.mark.parametrize("name", list(COMMANDS))
def test_reader_gone_before_any_output(name, inputs, tmp_path):
    """The reader closed its end before the command wrote a byte: a quiet end, exit 0."""
    args = _args(COMMANDS[name], inputs, tmp_path)
    _, said = _normal(_args(COMMANDS[name], inputs, tmp_path / "normal"))
    r, w = os.pipe()
    os.close(r)
    try:
        rc, err = _run(args, stdout=w)
    finally:
        os.close(w)
    _clean(err)
    assert rc == 0, err
    assert {x.strip() for x in err.splitlines() if x.strip()} <= said, err
    assert temp_files(tmp_path) == []


def test_head_of_a_large_timeline(inputs, tmp_path):
    """`chakra timeline LOG | head -c 64`: head gets its 64 bytes, the command ends quietly, exit 0."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "chakra.cli", "timeline", inputs / "big.csv"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ENV,
        cwd=REPO,
    )
    head = proc.stdout.read(64)
    proc.stdout.close()  # as head does once it has its bytes
    err = proc.stderr.read().decode(errors="replace")
    rc = proc.wait(timeout=120)
    _clean(err)
    assert head.startswith(b'{"traceEvents":[')
    assert rc == 0, err


@pytest.mark.parametrize("name", list(COMMANDS))
def test_stdout_on_a_full_device(name, inputs, tmp_path):
    args = _args(COMMANDS[name], inputs, tmp_path)
    with open("/dev/full", "wb") as full:
        rc, err = _run(args, stdout=full)
    _clean(err)
    lines = [x for x in err.splitlines() if x.strip()]
    assert rc == 1, err
    assert lines[-1] == "error: cannot write to standard output: No space left on device", err
    # what came before it is what the command says on stderr anyway (a warning of its own)
    _, said = _normal(_args(COMMANDS[name], inputs, tmp_path / "normal"))
    assert {x.strip() for x in lines[:-1]} <= said, err
    assert temp_files(tmp_path) == []


def _stderr_on_full_device(args: list) -> subprocess.CompletedProcess:
    """`chakra ARGS` with stdout captured and stderr on /dev/full."""
    with open("/dev/full", "wb") as full:
        return subprocess.run(
            [sys.executable, "-m", "chakra.cli", *args], stdout=subprocess.PIPE, stderr=full, env=ENV, timeout=60
        )


def test_stderr_on_a_full_device(inputs, tmp_path):
    """An error that cannot be said still ends the command with exit 1 (not a crash, not a hang)."""
    proc = _stderr_on_full_device(["validate", tmp_path / "absent"])
    assert proc.returncode == 1 and proc.stdout == b""
    # a command whose stdout is fine and whose stderr warns: its stdout is whole, exit 1
    proc = _stderr_on_full_device(["timeline", inputs / "run.csv"])
    normal, said = _normal(["timeline", str(inputs / "run.csv")])
    assert said, "timeline of a log without --trace warns on stderr"
    assert proc.returncode == 1
    assert proc.stdout in (b"", normal)

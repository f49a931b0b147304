"""Ctrl-C, SIGTERM, SIGHUP and SIGKILL at seeded moments for every command that writes files.

After Ctrl-C (SIGINT to the whole process group, as a terminal sends it): exit 130 and the one
line `interrupted`; after SIGTERM or SIGHUP the same with exit 128 + the signal and the line
`interrupted by SIGTERM` (SIGHUP); or, when the moment fell after the work, a normal exit; either way no
traceback, no temporary file and no process left. After SIGKILL of the command alone: no worker
left running, every output either absent or whole, and the next run of the same command succeeds
and removes what the killed one left (its recognisable temporary files).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import time
from contextlib import suppress
from pathlib import Path

import pytest

from .faultlib import ALL_REDUCE, DDP2, REPO, chakra, descendants, temp_files, wait_gone

SEED = 26


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    """Inputs in one folder: the 8-rank all-reduce, its JSON form, a DSL spec, a simulation log."""
    d = tmp_path_factory.mktemp("inputs")
    for p in ALL_REDUCE.parent.glob("all_reduce.*.et"):
        shutil.copy(p, d / p.name)
    shutil.copy(REPO / "examples" / "two_stage_pipeline.yaml", d / "spec.yaml")
    run = chakra("jsonize", d / "all_reduce", "-o", d / "js", "-q")
    assert run.rc == 0, run.stderr
    run = chakra("simulate", d / "all_reduce", "--log", d / "run.csv", "-q")
    assert run.rc == 0, run.stderr
    return d


# name -> (arguments with IN for the inputs folder and OUT for the output folder, outputs to check)
COMMANDS = {
    "convert pytorch -j 2": (["convert", "pytorch", DDP2 / "et.0.json", DDP2 / "et.1.json", "--kineto",
                              DDP2 / "kineto.0.json", "--kineto", DDP2 / "kineto.1.json", "-j", "2", "-o", "OUT/ddp2"],
                             ["ddp2.0.et", "ddp2.1.et"]),
    "jsonize": (["jsonize", "IN/all_reduce", "-o", "OUT/j"], ["j.0.json", "j.7.json"]),
    "dejsonize": (["dejsonize", "IN/js", "-o", "OUT/d"], ["d.0.et", "d.7.et"]),
    "visualize": (["visualize", "IN/all_reduce.0.et", "-o", "OUT/v.svg"], ["v.svg"]),
    "simulate --log --timeline": (["simulate", "IN/all_reduce", "--log", "OUT/s.csv", "--timeline", "OUT/s.json", "-q"],
                                  ["s.csv", "s.json"]),
    "timeline": (["timeline", "IN/run.csv", "-o", "OUT/t.json"], ["t.json"]),
    "export astra-sim": (["export", "astra-sim", "IN/all_reduce", "-o", "OUT/x"],
                         ["x.0.et", "x.7.et", "x.network.yml", "x.system.json", "x.memory.json"]),
    "generate spec": (["generate", "spec", "IN/spec.yaml", "-o", "OUT/g"], ["g.0.et"]),
}  # fmt: skip


def _args(words, inputs: Path, out: Path) -> list[str]:
    return [str(w).replace("IN/", f"{inputs}/").replace("OUT/", f"{out}/") for w in words]


def _moment(name: str, kind: str) -> float:
    """A seeded moment between the program's start (imports) and the end of its work."""
    return random.Random(f"{SEED}:{name}:{kind}").uniform(0.5, 2.5)


def _whole(path: Path) -> bool:
    """An output that exists must be complete: traces read back, text outputs are not cut."""
    if path.suffix == ".et":
        from chakra.io import read_trace

        read_trace(path)
        return True
    data = path.read_bytes()
    if path.suffix == ".json":
        import orjson

        orjson.loads(data)
    if path.suffix == ".svg":
        assert data.rstrip().endswith(b"</svg>")
    return True


def _kill_group(pid: int) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


#: Ctrl-C (a terminal), SIGTERM (kill, Slurm, Kubernetes) and SIGHUP (a closed terminal or ssh
#: session), each to the whole process group: the same clean end, the signal named in the line.
STOPS = {
    signal.SIGINT: "interrupted",
    signal.SIGTERM: "interrupted by SIGTERM",
    signal.SIGHUP: "interrupted by SIGHUP",
}


@pytest.mark.parametrize("sig", list(STOPS), ids=lambda s: signal.Signals(s).name)
@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_stop_signal(name, sig, inputs, tmp_path):
    words, outputs = COMMANDS[name]
    seen: set[int] = set()
    kind = "int" if sig == signal.SIGINT else signal.Signals(sig).name
    run = chakra(*_args(words, inputs, tmp_path), kill_after=_moment(name, kind), sig=sig, seen=seen)
    try:
        assert "Traceback" not in run.stderr and "Exception ignored" not in run.stderr, run.stderr[-3000:]
        if run.rc == 128 + sig:
            lines = [x.strip() for x in run.stderr.splitlines() if x.strip()]
            assert lines[-1] == STOPS[sig], run.stderr
            if len(lines) > 1:  # what the command had said before the Ctrl-C came (a slow machine)
                normal = chakra(*_args(words, inputs, tmp_path))
                said = {x.strip() for x in normal.stderr.splitlines()}
                assert all(x in said for x in lines[:-1]), (run.stderr, normal.stderr)
        else:  # the work was done before the moment came (-N: at the interpreter's exit)
            assert run.rc in (0, -sig), run.stderr
        assert temp_files(tmp_path) == []
        assert not wait_gone(seen), "processes left running after Ctrl-C"
        for out in outputs:
            p = tmp_path / out
            assert not p.exists() or _whole(p)
    finally:
        _kill_group(run.pid)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_sigkill_then_rerun(name, inputs, tmp_path):
    words, outputs = COMMANDS[name]
    args = _args(words, inputs, tmp_path)
    seen: set[int] = set()
    # The command alone gets the SIGKILL (its workers are not told); for the pool, once it runs.
    pool = (lambda pid: len(descendants(pid)) >= 2) if "-j" in words else None
    run = chakra(*args, kill_after=_moment(name, "kill"), group=False, when=pool, seen=seen)
    try:
        assert not wait_gone(seen), f"{name}: processes outlived the killed command"
        for out in outputs:
            p = tmp_path / out
            assert not p.exists() or _whole(p)
        again = chakra(*args)
        assert again.rc == 0, again.stderr
        assert temp_files(tmp_path) == [], "the rerun left temporary files (its own or the killed run's)"
        for out in outputs:
            assert _whole(tmp_path / out)
    finally:
        _kill_group(run.pid)


def test_stale_temp_files_of_live_processes_are_kept(inputs, tmp_path):
    """Only files the program can prove are its own, of a process that is gone, are removed."""
    from chakra.files import temp_path

    mine_dead = temp_path(tmp_path / "j.0.json", pid=_dead_pid())
    alive = temp_path(tmp_path / "j.0.json", pid=os.getpid())
    other = tmp_path / ".j.0.json.something.tmp"  # not our naming: never touched
    for p in (mine_dead, alive, other):
        p.write_text("x")
    run = chakra("jsonize", inputs / "all_reduce", "-o", tmp_path / "j", "-q")
    assert run.rc == 0, run.stderr
    assert not mine_dead.exists()
    assert alive.exists() and other.exists()


def test_temp_files_of_unreaped_workers_are_removed(inputs, tmp_path):
    """A killed worker that nobody reaps (a container's init may not) stays a zombie: its pid
    still answers signal 0, but its temporary file is stale all the same."""
    import subprocess

    from chakra.files import temp_path

    proc = subprocess.Popen(["true"])  # exits at once; not waited for, so a zombie until reaped
    try:
        for _ in range(200):
            with open(f"/proc/{proc.pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
            time.sleep(0.01)
        left = temp_path(temp_path(tmp_path / "j.0.json", pid=_dead_pid()), pid=proc.pid)
        left.write_text("x")
        run = chakra("jsonize", inputs / "all_reduce", "-o", tmp_path / "j", "-q")
        assert run.rc == 0, run.stderr
        assert not left.exists()
    finally:
        proc.wait()


def _dead_pid() -> int:
    """A process id that no process holds now."""
    import subprocess

    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


SWEEP_GRID = (
    "network: {topology: Ring, npus_count: 8, bandwidth: 50, latency: 500}\n"
    "product:\n"
    f"  network.bandwidth: [{', '.join(str(b) for b in range(1, 41))}]\n"
    f"  network.latency: [{', '.join(str(t) for t in range(100, 3100, 100))}]\n"
)
# enough work that the first flush (every 0.2 s here) comes well before the last point: a point
# takes a few ms, and 600 of them once all fit in the 1 s between two flushes
SWEEP_POINTS = 40 * 30


@pytest.mark.slow
@pytest.mark.parametrize("sig", list(STOPS), ids=lambda s: signal.Signals(s).name)
def test_sweep_stop_keeps_finished_points_for_resume(sig, inputs, tmp_path):
    """Ctrl-C, SIGTERM or SIGHUP to a Dask sweep's process group: one line, the scheduler and
    workers gone, the finished points kept, and the rerun simulates only the rest (every point once)."""
    pytest.importorskip("distributed")
    pa = pytest.importorskip("pyarrow.parquet")
    grid = tmp_path / "grid.yaml"
    grid.write_text(SWEEP_GRID)
    args = ["sweep", inputs / "all_reduce", "--grid", grid, "-o", tmp_path / "r", "--workers", "2", "-q"]
    seen: set[int] = set()
    started: dict[str, float] = {}

    def running(pid: int) -> bool:  # points finishing (a first flush), then a short seeded moment more
        if (tmp_path / "r.parquet").exists():
            started.setdefault("t", time.monotonic())
            return time.monotonic() - started["t"] > random.Random(f"{SEED}:{sig}").uniform(0.0, 0.1)
        return False

    os.environ["CHAKRA_SWEEP_FLUSH_S"] = "0.2"
    try:
        run = chakra(*args, kill_after=0.5, sig=sig, when=running, seen=seen, timeout=120)
    finally:
        del os.environ["CHAKRA_SWEEP_FLUSH_S"]
    try:
        assert "Traceback" not in run.stderr and "CancelledError" not in run.stderr, run.stderr[-3000:]
        assert run.rc == 128 + sig, run.stderr[-3000:]
        assert [x for x in run.stderr.splitlines() if x.strip()] == [STOPS[sig]], run.stderr[-3000:]
        assert not wait_gone(seen, 15), "scheduler or workers outlived the interrupted sweep"
        kept = pa.read_table(tmp_path / "r.parquet").to_pylist()
        done = {r["point_id"] for r in kept if r["scope"] == "overall"}
        assert 0 < len(done) < SWEEP_POINTS, len(done)
        assert all(r["status"] == "ok" for r in kept)
        assert temp_files(tmp_path) == []
        again = chakra(*args, "--json", timeout=180)
        assert again.rc == 0, again.stderr
        import orjson

        summary = orjson.loads(again.stdout)
        assert summary["skipped"] == len(done) and summary["ran"] == SWEEP_POINTS - len(done)
        rows = [r for r in pa.read_table(tmp_path / "r.parquet").to_pylist() if r["scope"] == "overall"]
        assert len(rows) == SWEEP_POINTS and len({r["point_id"] for r in rows}) == SWEEP_POINTS
    finally:
        _kill_group(run.pid)

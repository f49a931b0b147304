"""A Dask worker SIGKILLed in the middle of a sweep on a real cluster (`dask scheduler` and
`dask worker` processes, as docs/scale-out.md runs them across hosts): its tasks are retried on
the workers left, the sweep ends normally, and RESULTS holds every point exactly once, all ok."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import time

import pytest

from .faultlib import ALL_REDUCE, descendants, temp_files

pytest.importorskip("distributed")
pa = pytest.importorskip("pyarrow.parquet")

SEED = 33
WAIT_S = 60
POINTS = 12 * 10
GRID = (
    "network: {topology: Ring, npus_count: 8, bandwidth: 50, latency: 500}\n"
    "product:\n"
    f"  network.bandwidth: [{', '.join(str(b) for b in range(1, 13))}]\n"
    f"  network.latency: [{', '.join(str(t) for t in range(100, 1100, 100))}]\n"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def cluster(folder):
    """(address, worker commands) of a scheduler with two single-thread workers (each under its nanny)."""
    from distributed import Client

    address = f"tcp://127.0.0.1:{_free_port()}"
    dask = [sys.executable, "-m", "dask"]
    procs: list[subprocess.Popen] = []
    with open(folder / "cluster.log", "wb") as log:
        try:
            procs.append(subprocess.Popen([*dask, "scheduler", "--host", "127.0.0.1", "--port",
                                           address.rsplit(":", 1)[1], "--no-dashboard"],
                                          stdout=log, stderr=subprocess.STDOUT))  # fmt: skip
            for i in range(2):
                procs.append(subprocess.Popen([*dask, "worker", address, "--nthreads", "1", "--name", f"w{i}",
                                               "--host", "127.0.0.1", "--no-dashboard", "--death-timeout",
                                               str(WAIT_S), "--local-directory", str(folder / f"w{i}")],
                                              stdout=log, stderr=subprocess.STDOUT))  # fmt: skip
            deadline = time.monotonic() + WAIT_S
            while True:
                try:
                    with Client(address, timeout=5) as c:
                        c.wait_for_workers(2, timeout=max(1, deadline - time.monotonic()))
                    break
                except (OSError, TimeoutError):
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
            yield address, procs[1:]
        finally:
            for p in reversed(procs):
                if p.poll() is None:
                    p.terminate()
            for p in procs:
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


def _worker_process(nanny: subprocess.Popen) -> int:
    """The process a `dask worker` nanny runs its worker in (multiprocessing's spawned child)."""
    for pid in sorted(descendants(nanny.pid)):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/cmdline", "rb") as f:
            if b"spawn_main" in f.read():
                return pid
    raise AssertionError("no worker process under the nanny")


@pytest.mark.slow
def test_worker_sigkilled_mid_sweep_costs_a_retry_not_the_sweep(tmp_path):
    grid = tmp_path / "grid.yaml"
    grid.write_text(GRID)
    out = tmp_path / "r"
    with cluster(tmp_path) as (address, nannies):
        env = {**os.environ, "CHAKRA_SWEEP_FLUSH_S": "0.5", "NO_COLOR": "1"}
        sweep = subprocess.Popen(
            [sys.executable, "-m", "chakra.cli", "sweep", str(ALL_REDUCE), "--grid", str(grid), "-o", str(out),
             "--scheduler", address, "--json", "-q"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + WAIT_S
            while not (tmp_path / "r.parquet").exists():  # points are finishing
                assert sweep.poll() is None, sweep.communicate()
                assert time.monotonic() < deadline, "no point finished"
                time.sleep(0.05)
            time.sleep(random.Random(SEED).uniform(0.0, 0.5))
            victim = _worker_process(nannies[random.Random(SEED).randrange(2)])
            os.kill(victim, signal.SIGKILL)
            assert sweep.poll() is None, "the sweep ended before the worker was killed"
            stdout, stderr = sweep.communicate(timeout=180)
        finally:
            if sweep.poll() is None:
                sweep.kill()
                sweep.wait()
    text = stderr.decode(errors="replace")
    assert "Traceback" not in text, text[-3000:]
    assert sweep.returncode == 0, text[-3000:]
    import orjson

    summary = orjson.loads(stdout)
    assert (summary["points"], summary["ran"], summary["failed"]) == (POINTS, POINTS, 0), summary
    rows = [r for r in pa.read_table(tmp_path / "r.parquet").to_pylist() if r["scope"] == "overall"]
    ids = [r["point_id"] for r in rows]
    assert len(ids) == POINTS and len(set(ids)) == POINTS, "a point missing or written twice"
    assert all(r["status"] == "ok" for r in rows)
    assert temp_files(tmp_path) == []

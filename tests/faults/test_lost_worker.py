"""A Dask worker SIGKILLed in the middle of a sweep on a real cluster (`dask scheduler` and
`dask worker` processes, as docs/scale-out.md runs them across hosts): its tasks are retried on
the workers left, the sweep ends normally, and RESULTS holds every point exactly once, all ok."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from tests.dask_cluster import WAIT_S, dask_cluster

from .faultlib import ALL_REDUCE, descendants, temp_files

pytest.importorskip("distributed")
pa = pytest.importorskip("pyarrow.parquet")

SEED = 33
POINTS = 12 * 10
GRID = (
    "network: {topology: Ring, npus_count: 8, bandwidth: 50, latency: 500}\n"
    "product:\n"
    f"  network.bandwidth: [{', '.join(str(b) for b in range(1, 13))}]\n"
    f"  network.latency: [{', '.join(str(t) for t in range(100, 1100, 100))}]\n"
)


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
    with dask_cluster(tmp_path) as (address, nannies):
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

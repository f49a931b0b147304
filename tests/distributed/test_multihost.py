"""A real Dask cluster from its own commands (`dask scheduler`, `dask worker`) on 127.0.0.1, driven
through `--scheduler` exactly as docs/scale-out.md shows for several hosts."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time

import orjson
import pytest

pytest.importorskip("distributed")
pytest.importorskip("pyarrow")

WAIT_S = 60  # bound on every wait: cluster start, a command


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=15)


@pytest.fixture(scope="module")
def scheduler(tmp_path_factory):
    """tcp://127.0.0.1:PORT of a scheduler with two single-thread worker processes."""
    from distributed import Client

    d = tmp_path_factory.mktemp("cluster")
    address = f"tcp://127.0.0.1:{_free_port()}"
    dask = [sys.executable, "-m", "dask"]
    procs: list[subprocess.Popen] = []
    logs = []
    try:
        log = open(d / "scheduler.log", "wb")  # noqa: SIM115 (closed below)
        logs.append(log)
        procs.append(subprocess.Popen([*dask, "scheduler", "--host", "127.0.0.1", "--port", address.rsplit(":", 1)[1],
                                       "--no-dashboard"], stdout=log, stderr=subprocess.STDOUT))  # fmt: skip
        for i in range(2):
            log = open(d / f"worker{i}.log", "wb")  # noqa: SIM115
            logs.append(log)
            procs.append(subprocess.Popen([*dask, "worker", address, "--nthreads", "1", "--name", f"w{i}",
                                           "--host", "127.0.0.1", "--no-dashboard", "--death-timeout", str(WAIT_S),
                                           "--local-directory", str(d / f"w{i}")],
                                          stdout=log, stderr=subprocess.STDOUT))  # fmt: skip
        deadline = time.monotonic() + WAIT_S
        while True:
            try:
                with Client(address, timeout=5) as c:
                    c.wait_for_workers(2, timeout=max(1, deadline - time.monotonic()))
                break
            except (OSError, TimeoutError):
                if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                    raise RuntimeError("cluster did not start: " + (d / "scheduler.log").read_text()[-2000:]) from None
                time.sleep(0.5)
        yield address
    finally:
        _stop(procs[1:])
        _stop(procs[:1])
        for log in logs:
            with contextlib.suppress(OSError):
                log.close()


def chakra(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "chakra.cli", *args], capture_output=True, text=True, timeout=WAIT_S,
                          env=None if env is None else {**os.environ, **env})  # fmt: skip


def test_batch_conversion_through_scheduler(scheduler, samples_dir, tmp_path):
    src = samples_dir / "pytorch" / "ddp2"
    res = chakra("convert", "pytorch", f"{src}/*.json", "--scheduler", scheduler, "-o", str(tmp_path / "ddp"), "--json")
    assert res.returncode == 0, res.stderr
    doc = orjson.loads(res.stdout)
    assert doc["workers"] == 2 and doc["failed"] == 0 and doc["cross_rank"]["ok"]
    assert [r["rank"] for r in doc["ranks"]] == [0, 1]
    assert all(r["stats"]["nodes"] == 1007 for r in doc["ranks"])  # as `convert pytorch` writes them
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ddp.0.et", "ddp.1.et"]


def test_sweep_through_scheduler(scheduler, tmp_path):
    gen = chakra("generate", "transformer", "--layers", "2", "--hidden", "1024", "--dp", "2", "--tp", "2",
                 "-o", str(tmp_path / "gpt"), "-q")  # fmt: skip
    assert gen.returncode == 0, gen.stderr
    grid = tmp_path / "grid.yaml"
    grid.write_text("network: {topology: Ring, npus_count: 4}\nproduct:\n  network.bandwidth: [25, 50, 100, 200]\n")
    res = chakra("sweep", str(tmp_path / "gpt"), "--grid", str(grid), "-o", str(tmp_path / "res"),
                 "--scheduler", scheduler, "--json")  # fmt: skip
    assert res.returncode == 0, res.stderr
    doc = orjson.loads(res.stdout)
    assert (doc["points"], doc["ran"], doc["failed"], doc["workers"]) == (4, 4, 0, 2)
    from chakra.distributed.sweep import read_results

    overall = [r for r in read_results(tmp_path / "res") if r["scope"] == "overall"]
    steps = [r["finish_ns"] for r in sorted(overall, key=lambda r: r["network.bandwidth"])]
    assert steps == sorted(steps, reverse=True) and steps[0] > steps[-1]


def test_unreachable_scheduler_is_one_error_line(tmp_path, samples_dir):
    res = chakra("convert", "kineto", str(samples_dir / "pytorch" / "ddp2" / "kineto.0.json"),
                 "--scheduler", f"tcp://127.0.0.1:{_free_port()}", "-o", str(tmp_path / "k"),
                 env={"CHAKRA_DASK_CONNECT_TIMEOUT": "2"})  # fmt: skip
    assert res.returncode == 1
    assert res.stderr.startswith("error:") and "cannot connect" in res.stderr and "Traceback" not in res.stderr

"""A real Dask cluster from its own commands (`dask scheduler`, `dask worker`) on 127.0.0.1, driven
through `--scheduler` exactly as docs/scale-out.md shows for several hosts."""

from __future__ import annotations

import os
import subprocess
import sys

import orjson
import pytest

from tests.dask_cluster import WAIT_S, dask_cluster, free_port

pytest.importorskip("distributed")
pytest.importorskip("pyarrow")


@pytest.fixture(scope="module")
def scheduler(tmp_path_factory):
    """tcp://127.0.0.1:PORT of a scheduler with two single-thread worker processes."""
    with dask_cluster(tmp_path_factory.mktemp("cluster")) as (address, _):
        yield address


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
                 "--scheduler", f"tcp://127.0.0.1:{free_port()}", "-o", str(tmp_path / "k"),
                 env={"CHAKRA_DASK_CONNECT_TIMEOUT": "2"})  # fmt: skip
    assert res.returncode == 1
    assert res.stderr.startswith("error:") and "cannot connect" in res.stderr and "Traceback" not in res.stderr

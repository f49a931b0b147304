"""Design-space sweeps on Dask: grid files, points, results, resume, failing points."""

from __future__ import annotations

from pathlib import Path

import pytest

from chakra.distributed.grid import expand, load_grid
from chakra.distributed.sweep import read_results, run_sweep
from chakra.errors import ConfigError

pytest.importorskip("distributed", reason="Dask (distributed) is not installed: pip install 'chakra-et[dist]'")

pa = pytest.importorskip("pyarrow")


@pytest.fixture(scope="module")
def workload(tmp_path_factory) -> Path:
    """A 4-rank tensor+data parallel transformer step (`chakra generate`), with its comm groups."""
    from typer.testing import CliRunner

    from chakra.cli import app

    out = tmp_path_factory.mktemp("gpt") / "gpt"
    res = CliRunner().invoke(app, ["generate", "transformer", "--layers", "2", "--hidden", "1024", "--dp", "2",
                                   "--tp", "2", "-o", str(out), "-q"])  # fmt: skip
    assert res.exit_code == 0, res.output
    return out


def _grid(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "grid.yaml"
    p.write_text(text)
    return p


def test_grid_errors_name_the_key(tmp_path):
    with pytest.raises(ConfigError, match=r"grid.yaml: key product: 'network.bandwith' does not match"):
        load_grid(_grid(tmp_path, "product:\n  network.bandwith: [1, 2]\n"))
    with pytest.raises(ConfigError, match=r"key product.network.bandwidth.1: .*-5"):
        load_grid(_grid(tmp_path, "product:\n  network.bandwidth: [50, -5]\n"))
    with pytest.raises(ConfigError, match=r"key zip.0: its axes must have one length each"):
        load_grid(_grid(tmp_path, "zip:\n  - {network.bandwidth: [1, 2], network.latency: [1]}\n"))
    with pytest.raises(ConfigError, match=r"key whatif.*given twice"):
        load_grid(_grid(tmp_path, "product: {whatif: [none]}\nzip:\n  - {whatif: [amp]}\n"))


def test_cli_grid_error_is_one_line(run_cli, workload, tmp_path):
    grid = _grid(tmp_path, "product:\n  network.topology: [Ring, Torus]\n")
    res = run_cli("sweep", str(workload), "--grid", str(grid), "-o", str(tmp_path / "r"), "-W", "1")
    assert res.exit_code == 1
    assert res.stderr.strip().startswith("error:") and "network.topology" in res.stderr and "Torus" in res.stderr
    assert "Traceback" not in res.stderr


def test_product_and_zip_points(tmp_path, workload):
    grid = load_grid(
        _grid(
            tmp_path,
            """
network: {topology: Ring, npus_count: 4, bandwidth: 50, latency: 500}
product:
  network.topology: [Ring, Switch]
  system.collective-implementation: [ring, direct, halvingDoubling]
zip:
  - {network.bandwidth: [25, 100], network.latency: [1000, 250]}
""",
        )
    )
    points = expand(grid, str(workload), 4)
    assert len(points) == 2 * 3 * 2 and len({p.id for p in points}) == 12
    p = points[-1]
    assert p.params == {"network.topology": "Switch", "system.collective-implementation": "halvingDoubling",
                        "network.bandwidth": 100, "network.latency": 250}  # fmt: skip
    assert p.config["network"] == {"topology": ["Switch"], "npus_count": [4], "bandwidth": [100], "latency": [250]}
    assert p.config["system"]["all-to-all-implementation"] == ["halvingDoubling"]
    assert [q.id for q in expand(grid, str(workload), 4)] == [q.id for q in points]  # stable resume keys


GRID = """
network: {topology: Ring, npus_count: 4, bandwidth: 50, latency: 500}
product:
  network.bandwidth: [25, 100]
  network.topology: [Ring, Switch]
  whatif: [none, amp]
zip:
  - {network.npus_count: [4, 3]}   # 3 NPUs for 4 rank traces: these points fail
"""


def test_sweep_results_resume_and_failures(client, workload, tmp_path, run_cli):
    from chakra.sim import simulate
    from chakra.sim.config import NetworkConfig

    grid = load_grid(_grid(tmp_path, GRID))
    out = tmp_path / "res"
    s = run_sweep(grid, str(workload), out, client=client)
    assert (s.points, s.ran, s.failed, s.skipped) == (16, 16, 8, 0)
    rows = read_results(out)
    overall = [r for r in rows if r["scope"] == "overall"]
    assert len(overall) == 16 and len(rows) == 8 + 8 * 5  # ok points: overall + 4 ranks; failed: one row
    bad = [r for r in overall if r["status"] == "error"]
    assert {r["network.npus_count"] for r in bad} == {3} and all("npus_count" in r["error"] for r in bad)
    ok = {(r["network.topology"], r["network.bandwidth"], r["whatif"]): r for r in overall if r["status"] == "ok"}
    for topo in ("Ring", "Switch"):
        for wi in ("none", "amp"):
            assert ok[(topo, 100, wi)]["finish_ns"] < ok[(topo, 25, wi)]["finish_ns"]
        assert ok[(topo, 25, "amp")]["finish_ns"] < ok[(topo, 25, "none")]["finish_ns"]
    # A point equals the simulator run by hand with the same settings.
    direct = simulate(workload, NetworkConfig(["Switch"], [4], [25.0], [500.0]),
                      comm_groups=Path(f"{workload}.comm_groups.json"))  # fmt: skip
    assert ok[("Switch", 25, "none")]["finish_ns"] == direct.finish_ns
    per_rank = [r for r in rows if r["point_id"] == ok[("Switch", 25, "none")]["point_id"] and r["scope"] == "rank"]
    assert [r["finish_ns"] for r in per_rank] == [direct.ranks[i].finish_ns for i in range(4)]
    # The CSV holds the same table.
    csv = pa.csv.read_csv(str(out) + ".csv")
    assert csv.num_rows == len(rows) and csv.column_names == list(rows[0])

    again = run_sweep(load_grid(_grid(tmp_path, GRID)), str(workload), out, client=client)
    assert (again.ran, again.skipped) == (0, 16)
    retry = run_sweep(load_grid(_grid(tmp_path, GRID)), str(workload), out, client=client, retry_errors=True)
    assert (retry.ran, retry.failed, retry.skipped) == (8, 8, 8)
    assert len(read_results(out)) == len(rows)
    # Nothing left to run: the CLI needs no cluster (this scheduler address has none behind it).
    res = run_cli("sweep", str(workload), "--grid", str(tmp_path / "grid.yaml"), "-o", str(out),
                  "--scheduler", "tcp://127.0.0.1:9", "--json")  # fmt: skip
    assert res.exit_code == 0, res.stderr
    assert '"skipped": 16' in res.stdout and '"ran": 0' in res.stdout


@pytest.mark.parametrize(("name", "points"), [("network.yaml", 48), ("hierarchy.yaml", 54)])
def test_example_grids_are_valid(name, points):
    grid = load_grid(Path(__file__).resolve().parents[2] / "examples" / "sweeps" / name)
    assert len(expand(grid, "out/gpt64", 64)) == points

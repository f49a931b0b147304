"""`simulate --traffic`: where the bytes went, per dimension and link, over time.

ASTRA-sim's analytical backends report no traffic figures (only its ns-3 and htsim front ends
count bytes per node, and neither is built here), so the figures are checked by conservation:
the bytes on each dimension must be what the collective algorithms have to move, and recording
must not change a single simulated time.

Ring all-reduce over N members moves 2(N-1)/N of the data per member (a reduce-scatter then an
all-gather, each N-1 steps of 1/N); ASTRA-sim splits a collective into `preferred-dataset-splits`
chunks, every one a full chunk, and runs each on its own.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from chakra.io import read_traces
from chakra.schema import CollectiveType
from chakra.schema.attrs import get_attr
from chakra.sim import simulate
from chakra.simlog import iter_records

from .conftest import write_network, write_system

AR8 = "astrasim/all_reduce_8npus_1MB/all_reduce"


@pytest.fixture(scope="module")
def ddp4(samples_dir, tmp_path_factory) -> Path:
    """The zoo's recorded 4-rank DDP run (PyTorch + Kineto, gloo), converted."""
    from chakra.converters.pytorch import convert

    d = samples_dir / "pytorch" / "ddp4"
    prefix = tmp_path_factory.mktemp("ddp4") / "ddp4"
    convert([d / f"et.{r}.json.gz" for r in range(4)] + [d / f"kineto.{r}.json.gz" for r in range(4)], prefix)
    return prefix


def _collectives(prefix: Path) -> list[tuple[int, int]]:
    """(type, size) of rank 0's collectives, in trace order."""
    out = []
    for n in read_traces([prefix.parent / f"{prefix.name}.0.et"])[0].nodes:
        ctype = get_attr(n, "comm_type")
        if ctype is not None and get_attr(n, "comm_size") is not None:
            out.append((int(ctype), int(get_attr(n, "comm_size"))))
    return out


@pytest.mark.parametrize("congestion", ["aware", "unaware"])
def test_astrasim_all_reduce_bytes_are_conserved_and_times_unchanged(samples_dir, congestion):
    """ASTRA-sim's own 1 MiB all-reduce on 8 NPUs: 2 x 7/8 MiB per NPU on the one ring dimension."""
    rt = samples_dir / "astrasim/configs_rt_template"
    args = (str(samples_dir / AR8), rt / "network_cfg.yml", rt / "system_cfg.json")
    plain = simulate(*args, congestion=congestion)
    res = simulate(*args, congestion=congestion, traffic=True)
    assert {r: v.finish_ns for r, v in res.ranks.items()} == {r: v.finish_ns for r, v in plain.ranks.items()}
    assert res.finish_ns == 117_780  # what the ASTRA-sim binaries print for this case (tools README)
    t = res.traffic
    (dim,) = t["dimensions"]
    assert dim["bytes"] == 8 * 2 * 7 * (1 << 20) // 8  # 14,680,064
    assert dim["messages"] == 8 * 4 * 2 * 7  # per NPU: 4 chunks x 2(N-1) ring steps
    (coll,) = t["collectives"]
    assert coll["type"] == "ALL_REDUCE" and coll["size"] == 1 << 20 and coll["bytes"] == dim["bytes"]
    assert 0 < dim["utilization"] <= 1
    if congestion == "aware":
        # the ring sends to the clockwise neighbour only: 8 of the 16 links, one hop each, equal shares
        assert len(t["links"]) == 8
        assert {row["bytes"] for row in t["links"]} == {dim["bytes"] // 8}
        assert sum(row["busy_ns"] for row in t["links"]) == dim["busy_ns"]
        # every message holds its link floor(size / B') ns: 32 KiB at 50 GiB/s
        per_msg = int(32768 / (50 * (1 << 30) / 1e9))
        assert t["links"][0]["busy_ns"] == t["links"][0]["messages"] * per_msg
        # the bins add up to the busy time
        total = sum(sum(row["bins"]) for row in t["links"]) * t["bin_ns"]
        assert total == pytest.approx(dim["busy_ns"], rel=1e-3)
        assert t["links"][0]["collectives"][0]["bytes"] == dim["bytes"] // 8
    else:
        assert t["links"] == []
        assert sum(dim["bins"]) * t["bin_ns"] * 8 == pytest.approx(dim["busy_ns"], rel=1e-3)


def test_recorded_ddp_run_per_collective_and_per_dimension(ddp4, tmp_path):
    """The recorded DDP run on a 2 x 2 network (unaware, localBWAware all-reduce): dimension 0
    carries the reduce-scatter and all-gather halves, 2(p0-1)/p0 of the data per NPU; dimension 1
    the all-reduce of the p0-th part, 2(p1-1)/p1 of it. Each collective's own share checks out."""
    net = write_network(tmp_path / "net.yml", ["Ring", "Ring"], [2, 2], [50, 25], [500, 700])
    sys_cfg = write_system(
        tmp_path / "sys.json", preferred_dataset_splits=4, all_reduce_implementation=["ring", "ring"]
    )
    plain = simulate(str(ddp4), net, sys_cfg, congestion="unaware")
    res = simulate(str(ddp4), net, sys_cfg, congestion="unaware", traffic=True)
    assert res.finish_ns == plain.finish_ns
    t = res.traffic
    sizes = [s for c, s in _collectives(ddp4) if c == CollectiveType.ALL_REDUCE]
    assert len(sizes) == 4 and len(t["collectives"]) == 4
    for row in t["collectives"]:
        s = row["size"]
        assert s in sizes
        # per NPU: 2(p0-1)/p0 of s on dimension 0, 2(p1-1)/p1 of s/p0 on dimension 1 (p0 = p1 = 2;
        # every size here splits evenly into 4 chunks, and none is small enough to be inflated)
        assert s % 16 == 0
        assert row["bytes_per_dim"] == [4 * s, 4 * (s // 2)], row
    assert [d["bytes"] for d in t["dimensions"]] == [
        sum(r["bytes_per_dim"][0] for r in t["collectives"]),
        sum(r["bytes_per_dim"][1] for r in t["collectives"]),
    ]


def test_cli_traffic_tables_json_log_and_html(ddp4, tmp_path, run_cli):
    res = run_cli("simulate", str(ddp4), "--traffic", "-q")
    assert res.exit_code == 0, res.stderr
    assert "traffic per dimension" in res.stdout and "heaviest links" in res.stdout
    assert "ALL_REDUCE #1 on group 0 (66,560 B" in res.stdout
    log, page = tmp_path / "run.csv", tmp_path / "run.html"
    res = run_cli("simulate", str(ddp4), "--traffic", "--traffic-bins", "20", "--json", "-q", "--log", str(log),
                  "--html", str(page))  # fmt: skip
    assert res.exit_code == 0, res.stderr
    t = json.loads(res.stdout)["traffic"]
    assert (
        t["bins"] == 20 and len(t["links"]) == 4 and t["dimensions"][0]["bytes"] == 2 * 3 * (256 + 66560 + 66304 + 64)
    )
    # the log keeps every issue/callback record and ends with the traffic as comment lines
    lines = log.read_text().splitlines()
    assert sum(1 for _ in iter_records(log)) == 2 * 4 * 2085
    traffic_lines = [x for x in lines if x.startswith("# traffic,")]
    assert len(traffic_lines) == 1 + 1 + 4 and re.search(r"bytes=799104\b", traffic_lines[1])
    text = page.read_text()
    assert '"type":"heatmap"' in text and "top collectives" in text


def test_traffic_heat_map_draws_in_a_browser(ddp4, tmp_path, run_cli):
    from tests.distributed.test_report import CHROMIUM, check_in_browser

    if CHROMIUM is None:
        pytest.skip("no Chromium to render the HTML")
    page = tmp_path / "traffic.html"
    res = run_cli("simulate", str(ddp4), "--traffic", "--html", str(page), "-q")
    assert res.exit_code == 0, res.stderr
    check_in_browser(page, expected_plots=3)  # rank breakdown, link heat map, bytes per dimension


def test_traffic_bad_bins(ddp4, run_cli):
    res = run_cli("simulate", str(ddp4), "--traffic", "--traffic-bins", "0")
    assert res.exit_code == 1 and "traffic bins must be 1 to 10000" in res.stderr

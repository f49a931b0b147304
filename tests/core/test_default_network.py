"""`simulate` (and `whatif`) without --network pick what `export astra-sim` writes, so a default
never warns about itself: FullyConnected for 2 NPUs (ASTRA-sim's aware backend aborts on a Ring of 2)."""

from __future__ import annotations

import json

import yaml


def test_two_rank_default_is_what_export_writes_and_does_not_warn(run_cli, samples_dir, tmp_path):
    d = samples_dir / "pytorch" / "ddp2"
    out = tmp_path / "ddp2"
    res = run_cli(
        "convert", "pytorch", str(d / "et.0.json"), str(d / "et.1.json"),
        "-k", str(d / "kineto.0.json"), "-k", str(d / "kineto.1.json"), "-o", str(out), "-q",
    )  # fmt: skip
    assert res.exit_code == 0, res.stderr
    sim = run_cli("simulate", str(out), "--comm", "replay")
    assert sim.exit_code == 0, sim.stderr
    assert "warning" not in sim.stderr and "Ring of 2" not in sim.stderr
    net = json.loads(run_cli("simulate", str(out), "--json", "-q").stdout)["settings"]["network"]
    exp = run_cli("export", "astra-sim", str(out), "-o", str(tmp_path / "astra"), "-q")
    assert exp.exit_code == 0, exp.stderr
    exported = yaml.safe_load((tmp_path / "astra.network.yml").read_text())
    assert net["topology"] == exported["topology"] == ["FullyConnected"]
    assert net["npus_count"] == exported["npus_count"] == [2]
    assert net["bandwidth_GBps"] == exported["bandwidth"] and net["latency_ns"] == exported["latency"]


def test_eight_rank_default_stays_a_ring(run_cli, samples_dir):
    prefix = str(samples_dir / "astrasim" / "all_reduce_8npus_1MB" / "all_reduce")
    res = run_cli("simulate", prefix, "--json", "-q")
    doc = json.loads(res.stdout)
    assert doc["settings"]["network"]["topology"] == ["Ring"] and doc["finish_ns"] == 117780

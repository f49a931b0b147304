"""Stragglers on a real 4-rank PyTorch DDP run (tests/data/samples/pytorch/ddp4, recorded with gloo
on a shared VM, so its ranks' recorded compute already differs): `chakra analyze` names the ranks
that hold the others up and why, and `chakra whatif --recipe straggler` predicts what one slow
rank costs every rank."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from chakra.converters.pytorch import convert


@pytest.fixture(scope="module")
def ddp4(samples_dir: Path, tmp_path_factory) -> str:
    d = samples_dir / "pytorch" / "ddp4"
    world = json.loads((d / "manifest.json").read_text())["world_size"]
    assert world == 4
    prefix = tmp_path_factory.mktemp("ddp4") / "ddp4"
    convert([d / f"et.{r}.json.gz" for r in range(world)], prefix,
            kineto=[d / f"kineto.{r}.json.gz" for r in range(world)], jobs=1, profiled=True)  # fmt: skip
    return str(prefix)


def _json(result) -> dict:
    assert result.exit_code == 0, result.stderr
    return orjson.loads(result.stdout)


@pytest.fixture(scope="module")
def baseline(ddp4: str) -> dict:
    from typer.testing import CliRunner

    from chakra.cli import app

    result = CliRunner().invoke(app, ["analyze", ddp4, "--json", "-q"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return orjson.loads(result.stdout)


def test_analyze_names_the_rank_that_computes_longest(baseline: dict) -> None:
    ranks = baseline["ranks"]
    s = baseline["stragglers"]
    compute = {int(r): v["breakdown"]["compute"] for r, v in ranks.items()}
    heaviest = max(compute, key=compute.get)
    # The recorded run's slowest rank computes more than 5% of a step above the median rank and
    # waits least: it is named, first, as compute-bound; the rank waiting most is not a straggler.
    assert s["stragglers"][0] == heaviest, s
    row = s["ranks"][str(heaviest)]
    assert row["cause"] == "compute" and row["compute_excess_ns"] > 0.05 * s["median"]["finish_ns"]
    waits = {int(r): v["wait_ns"] for r, v in s["ranks"].items()}
    assert min(waits, key=waits.get) == heaviest
    assert max(waits, key=waits.get) not in s["stragglers"]
    # wait + compute is the rank's whole step
    for r, v in ranks.items():
        assert s["ranks"][r]["wait_ns"] + s["ranks"][r]["compute_ns"] == v["breakdown"]["step"]


def test_slowing_the_critical_rank_delays_every_rank_by_its_extra_compute(ddp4, baseline, run_cli, tmp_path) -> None:
    compute = {int(r): v["breakdown"]["compute"] for r, v in baseline["ranks"].items()}
    critical = max(compute, key=compute.get)  # waits least: its compute sets the step
    out = str(tmp_path / "slow")
    report = _json(run_cli("whatif", ddp4, "--recipe", "straggler", "--rank", str(critical), "--factor", "1.5",
                           "-o", out, "--json", "-q"))  # fmt: skip
    after = _json(run_cli("analyze", out, "--json", "-q"))
    added = after["ranks"][str(critical)]["breakdown"]["compute"] - compute[critical]
    assert added == pytest.approx(0.5 * compute[critical], rel=0.01)  # x1.5 of its compute, no other rank's
    for r in compute:
        if r != critical:
            assert after["ranks"][str(r)]["breakdown"]["compute"] == compute[r]
    # On the critical path, the step grows by about the added compute, and so does every rank's
    # step: the others wait for it in each all-reduce.
    growth = report["predicted"]["step_ns"] - report["baseline"]["step_ns"]
    assert 0.95 * added <= growth <= 1.01 * added, (growth, added)
    for r, v in report["ranks"].items():
        assert v["predicted_step_ns"] - v["baseline_step_ns"] >= 0.9 * added, (r, v)


def test_a_rank_with_slack_becomes_the_named_straggler_and_costs_less_than_its_extra_compute(
    ddp4, baseline, run_cli, tmp_path
) -> None:
    waits = {int(r): v["wait_ns"] for r, v in baseline["stragglers"]["ranks"].items()}
    idle = max(waits, key=waits.get)  # the rank that waited most for the others
    assert idle not in baseline["stragglers"]["stragglers"]
    out = str(tmp_path / "slow")
    report = _json(run_cli("whatif", ddp4, "--recipe", "straggler", "--rank", str(idle), "--factor", "1.5",
                           "-o", out, "--json", "-q"))  # fmt: skip
    after = _json(run_cli("analyze", out, "--json", "-q"))
    s = after["stragglers"]
    assert s["stragglers"][0] == idle and s["ranks"][str(idle)]["cause"] == "compute", s
    # Its slack absorbs part of the slowdown: the step grows by less than the compute added, yet
    # the new step holds at least the slowed rank's whole compute.
    now = after["ranks"][str(idle)]["breakdown"]["compute"]
    added = now - baseline["ranks"][str(idle)]["breakdown"]["compute"]
    growth = report["predicted"]["step_ns"] - report["baseline"]["step_ns"]
    assert 0 < growth < 0.5 * added, (growth, added)
    assert report["predicted"]["step_ns"] >= now


def test_straggler_table_and_usage_errors(ddp4, run_cli) -> None:
    result = run_cli("whatif", ddp4, "--recipe", "straggler", "--rank", "2", "--factor", "1.2")
    assert result.exit_code == 0, result.stderr
    assert "every rank's step" in result.stdout and "2 (slowed)" in result.stdout
    assert "rank 2:" in result.stderr and "compute nodes x1.2" in result.stderr
    result = run_cli("whatif", ddp4, "--recipe", "straggler", "--rank", "7", "--factor", "1.2")
    assert result.exit_code == 1 and "--rank 7: no such rank (the traces have ranks 0, 1, 2, 3)" in result.stderr
    result = run_cli("whatif", ddp4, "--recipe", "straggler", "--factor", "1.2")
    assert result.exit_code == 1 and "recipe straggler needs --rank" in result.stderr
    result = run_cli("whatif", ddp4, "--recipe", "straggler", "--rank", "1", "--factor", "0")
    assert result.exit_code == 1 and "--factor must be > 0" in result.stderr
    result = run_cli("analyze", ddp4, "-q")
    assert result.exit_code == 0 and "Stragglers (ms) against the median rank" in result.stdout

"""Batch conversion on Dask: real PyTorch DDP ranks, failures per rank, cross-rank check on summaries."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from chakra.converters.pytorch.driver import convert_files
from chakra.distributed.batch import convert_batch
from chakra.distributed.inputs import expand
from chakra.distributed.replicate import replicate_pair
from chakra.io import read_traces
from chakra.ranks import by_rank, rank_of
from chakra.schema.attrs import get_attr
from chakra.validate import validate_traces

pytest.importorskip("distributed", reason="Dask (distributed) is not installed: pip install 'chakra-et[dist]'")


@pytest.fixture(scope="module")
def ddp2(samples_dir) -> Path:
    return samples_dir / "pytorch" / "ddp2"


def test_rank_numbers_come_from_names():
    assert rank_of(Path("traces/et.12.json")) == 12
    assert rank_of(Path("traces/kineto_12.json.gz")) == 12
    assert rank_of(Path("job/rank12/trace.json")) == 12
    assert rank_of(Path("node03_rank7.pt.trace.json")) == 7
    assert rank_of(Path("manifest.json")) is None


def test_folder_and_glob_inputs_pair_by_rank(ddp2):
    files, skipped = expand([ddp2], "pytorch")
    assert [p.name for p in skipped] == ["manifest.json"]
    groups = by_rank(files)
    assert sorted(groups) == [0, 1]
    assert sorted(p.name for p in groups[1][0]) == ["et.1.json", "kineto.1.json"]
    globbed, _ = expand([Path(f"{ddp2}/et.*.json")], "pytorch")
    assert [p.name for p in globbed] == ["et.0.json", "et.1.json"]


def test_batch_matches_the_single_process_converter(client, ddp2, tmp_path):
    result = convert_batch("pytorch", [ddp2], tmp_path / "out" / "ddp", client=client)
    assert [o.rank for o in result.ranks] == [0, 1]
    assert not result.failed and result.cross_rank.ok and result.workers == 2
    ets, kins = sorted(ddp2.glob("et.*.json")), sorted(ddp2.glob("kineto.*.json"))
    (tmp_path / "ref").mkdir()
    convert_files(ets, kins, tmp_path / "ref" / "ddp")
    for r in (0, 1):
        assert (tmp_path / "out" / f"ddp.{r}.et").read_bytes() == (tmp_path / "ref" / f"ddp.{r}.et").read_bytes()


def test_replicated_ranks_convert_and_agree(client, ddp2, tmp_path):
    pairs = replicate_pair(ddp2 / "et.0.json", ddp2 / "kineto.0.json", tmp_path / "in", range(4))
    result = convert_batch("pytorch", [p for pair in pairs for p in pair], tmp_path / "out" / "job", client=client)
    assert [o.rank for o in result.ranks] == [0, 1, 2, 3]
    assert not result.failed and result.cross_rank.ok
    assert all(o.stats["nodes"] == 1007 for o in result.ranks)  # as `convert pytorch` writes rank 0
    traces = read_traces([tmp_path / "out" / "job"])
    assert [get_attr(t.metadata, "world_size") for t in traces] == [4, 4, 4, 4]
    assert validate_traces(traces).ok


def test_a_failed_rank_is_reported_and_leaves_no_output(client, ddp2, samples_dir, tmp_path):
    src = tmp_path / "in"
    pairs = replicate_pair(ddp2 / "et.0.json", ddp2 / "kineto.0.json", src, range(3))
    # Rank 2's "ET" is really an Nsight Systems report: the converter refuses it.
    shutil.copy(samples_dir / "nsys" / "testcuda_nsys2026.1_report2.sqlite", pairs[2][0])
    result = convert_batch("pytorch", [p for pair in pairs for p in pair], tmp_path / "out" / "job", client=client)
    assert [o.rank for o in result.failed] == [2]
    bad = result.failed[0]
    assert str(pairs[2][0]) in bad.inputs and "et.2.json" in bad.error
    out = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert out == ["job.0.et", "job.1.et"]  # no file, not even a temporary one, for rank 2


def test_cross_rank_check_runs_on_summaries(client, samples_dir, tmp_path):
    # Rank 0 of a DDP run next to rank 1 of a different job: their collectives disagree.
    src = tmp_path / "in"
    src.mkdir()
    for name in ("et.0.json", "kineto.0.json"):
        shutil.copy(samples_dir / "pytorch" / "ddp2" / name, src / name)
    for name in ("et.1.json", "kineto.1.json"):
        shutil.copy(samples_dir / "pytorch" / "collectives2" / name, src / name)
    result = convert_batch("pytorch", [src], tmp_path / "out" / "mix", client=client)
    assert not result.failed
    full = validate_traces(read_traces([tmp_path / "out" / "mix"]))
    cross = {k: v for k, v in full.counts.items() if k[1].startswith(("collective-", "unmatched-", "p2p-"))}
    assert cross and not result.cross_rank.ok
    assert dict(result.cross_rank.counts) == cross


def test_nsys_reports_convert_one_task_each(client, samples_dir, tmp_path):
    from chakra.converters.daydream.driver import convert_reports

    reports = sorted((samples_dir / "nsys").glob("*.sqlite"))
    result = convert_batch("nsys", reports, tmp_path / "b" / "x", client=client)
    (tmp_path / "r").mkdir()
    ref = convert_reports(reports, tmp_path / "r" / "x")
    assert [o.rank for o in result.ranks] == [r.rank for r in ref.ranks]
    for r in ref.ranks:
        assert (tmp_path / "b" / f"x.{r.rank}.et").read_bytes() == r.path.read_bytes()


def test_cli_folder_input_with_local_workers(run_cli, ddp2, tmp_path):
    res = run_cli("convert", "pytorch", str(ddp2), "--workers", "2", "-o", str(tmp_path / "ddp"), "--json")
    assert res.exit_code == 0, res.stderr
    import orjson

    doc = orjson.loads(res.stdout)
    assert [r["rank"] for r in doc["ranks"]] == [0, 1] and doc["failed"] == 0 and doc["cross_rank"]["ok"]
    assert doc["workers"] == 2


def test_cli_failed_rank_exits_1_with_one_line_per_rank(run_cli, ddp2, samples_dir, tmp_path):
    src = tmp_path / "in"
    pairs = replicate_pair(ddp2 / "et.0.json", ddp2 / "kineto.0.json", src, range(2))
    # A mix-up: rank 1's Kineto trace says (distributedInfo) it is rank 5.
    raw = pairs[1][1].read_bytes()
    pairs[1][1].write_bytes(raw.replace(b'"rank": 1, "world_size"', b'"rank": 5, "world_size"', 1))
    res = run_cli("convert", "pytorch", f"{src}/*.json", "-W", "1", "-o", str(tmp_path / "o" / "x"), "-q")
    assert res.exit_code == 1
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "rank 1" in lines[0] and "kineto.1.json" in lines[0]
    assert "Traceback" not in res.stderr
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["x.0.et"]


def test_cli_rejects_zero_workers(run_cli, ddp2, tmp_path):
    res = run_cli("convert", "pytorch", str(ddp2), "--workers", "0", "-o", str(tmp_path / "x"))
    assert res.exit_code == 1 and res.stderr.startswith("error: --workers must be >= 1")

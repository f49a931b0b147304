"""Shapes that broke commands: empty and 10 MB node names, names with the characters graphviz and
CSV treat specially, rank sets with gaps, file names with a newline.

The traces are the bundled 8-rank all-reduce (ASTRA-sim's own example) with node names rewritten:
no producer here writes such names, and the Chakra format allows any string.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import orjson
import pytest

from chakra.io import read_traces, write_trace

from .faultlib import ALL_REDUCE, assert_one_line, chakra

BIG = 10 << 20


def _renamed(tmp_path, tag: str, name: str, only_rank0: bool = False):
    for t in read_traces([ALL_REDUCE]):
        if not only_rank0 or t.rank == 0:
            for n in t.nodes:
                n.name = name
        write_trace(tmp_path / f"{tag}.{t.rank}.et", t)
    return tmp_path / tag


def _dot_ok(path) -> None:
    if shutil.which("dot") is None:
        pytest.skip("graphviz dot is not installed")
    proc = subprocess.run(["dot", "-Tsvg", str(path)], capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[:500]


@pytest.mark.parametrize("name", ["", 'a<b>&"c" {d} | e\\f\nnext line', "x" * 5000])
def test_visualize_draws_any_name(name, tmp_path, run_cli):
    prefix = _renamed(tmp_path, "n", name)
    res = run_cli("visualize", f"{prefix}.0.et", "-o", str(tmp_path / "g.dot"))
    assert res.exit_code == 0, res.stderr
    _dot_ok(tmp_path / "g.dot")  # graphviz itself accepts what was written
    if shutil.which("dot"):
        res = run_cli("visualize", f"{prefix}.0.et", "-o", str(tmp_path / "g.svg"))
        assert res.exit_code == 0, res.stderr
        svg = (tmp_path / "g.svg").read_text()
        assert "(no name)" in svg if not name else len(svg) < 200_000  # long names are cut in labels


def test_ten_megabyte_name(tmp_path):
    """visualize draws it (cut), and simulate --timeline reads back its own log holding it."""
    prefix = _renamed(tmp_path, "big", "N" * BIG, only_rank0=True)
    run = chakra("visualize", f"{prefix}.0.et", "-o", tmp_path / "b.svg", "-q", timeout=60)
    assert run.rc == 0 and "Traceback" not in run.stderr, run.stderr[-2000:]
    assert (tmp_path / "b.svg").stat().st_size < 100_000
    run = chakra("simulate", prefix, "--timeline", tmp_path / "t.json", "-q", timeout=90)
    assert run.rc == 0 and "Traceback" not in run.stderr, run.stderr[-2000:]
    events = orjson.loads((tmp_path / "t.json").read_bytes())
    events = events["traceEvents"] if isinstance(events, dict) else events
    assert any(len(e.get("name", "")) == BIG for e in events)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # its log went
    assert 0 < run.max_rss_mb < 1500, run.max_rss_mb


def test_csv_log_round_trips_odd_names(tmp_path, run_cli):
    name = 'all,reduce "quoted"\nsecond line'
    prefix = _renamed(tmp_path, "odd", name)
    res = run_cli("simulate", str(prefix), "--log", str(tmp_path / "s.csv"), "-q")
    assert res.exit_code == 0, res.stderr
    res = run_cli("timeline", str(tmp_path / "s.csv"), "-o", str(tmp_path / "t.json"))
    assert res.exit_code == 0, res.stderr
    events = orjson.loads((tmp_path / "t.json").read_bytes())
    events = events["traceEvents"] if isinstance(events, dict) else events
    assert any(e.get("name") == name for e in events)


def test_rank_gaps_are_reported_alike(tmp_path):
    """x.0.et and x.99999.et alone: validate fails, stats warns, simulate refuses: one wording."""
    t = read_traces([f"{ALL_REDUCE}.0.et"])[0]
    write_trace(tmp_path / "gap.0.et", t)
    write_trace(tmp_path / "gap.99999.et", t)
    wording = "rank numbers must be 0..1 without gaps or repeats, got [0, 99999]"
    validate = chakra("validate", tmp_path / "gap", "--json")
    assert validate.rc == 1 and wording in validate.stdout
    stats = chakra("stats", tmp_path / "gap", "-q")
    assert stats.rc == 0 and wording in stats.stderr
    simulate = chakra("simulate", tmp_path / "gap", "-q")
    assert assert_one_line(simulate).endswith(wording)


def test_newline_in_an_output_name_is_refused_at_write_time(tmp_path, run_cli):
    res = run_cli("generate", "microbench", "--ranks", "2", "-o", str(tmp_path / "two\nlines"), "-q")
    lines = [x for x in res.stderr.splitlines() if x.strip()]
    assert res.exit_code == 1 and len(lines) == 1 and "newline" in lines[0], res.stderr
    assert list(tmp_path.iterdir()) == []


def test_existing_files_with_a_newline_are_read(tmp_path, run_cli):
    """Written by another tool: a PREFIX with a newline still finds its ranks."""
    for p in ALL_REDUCE.parent.glob("all_reduce.*.et"):
        shutil.copy(p, tmp_path / p.name.replace("all_reduce", "all\nreduce"))
    res = run_cli("validate", str(tmp_path / "all\nreduce"), "--json")
    assert res.exit_code == 0, res.stderr
    assert orjson.loads(res.stdout)["ranks"] == list(range(8))
    assert os.path.exists(tmp_path / "all\nreduce.7.et")


@pytest.mark.parametrize("schedule", ["asap", "auto"])
def test_durations_past_a_64_bit_schedule_are_refused(tmp_path, schedule):
    """duration_micros is uint64: the real all-reduce sample with each compute node at 2^62 µs
    sums past what a schedule in int64 ns holds; analyze names the file instead of wrapping around
    (negative shares) or tracebacking."""
    for t in read_traces([ALL_REDUCE]):
        for n in t.nodes:
            n.duration_micros = (1 << 62) - 1
        write_trace(tmp_path / f"huge.{t.rank}.et", t)
    run = chakra("analyze", tmp_path / "huge", "--schedule", schedule, "-q")
    line = assert_one_line(run)
    assert "huge.0.et" in line and "more than a schedule in 64-bit ns can hold" in line

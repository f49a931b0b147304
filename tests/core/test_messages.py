"""Messages say what the command found, what it did, and what to do instead (cases a new user met)."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest


def _ddp2_args(samples_dir: Path) -> list[str]:
    d = samples_dir / "pytorch" / "ddp2"
    return [str(d / "et.0.json"), str(d / "et.1.json"), "-k", str(d / "kineto.0.json"), "-k", str(d / "kineto.1.json")]


def test_convert_pytorch_says_where_groups_went(run_cli, samples_dir, tmp_path):
    """ddp2 has only the default group: no comm_groups.json is written, and the summary says so."""
    res = run_cli("convert", "pytorch", *_ddp2_args(samples_dir), "-o", str(tmp_path / "d"))
    assert res.exit_code == 0, res.stderr
    assert not (tmp_path / "d.comm_groups.json").exists()
    assert "groups written to" not in res.stdout
    assert "only the default group (all ranks): no comm_groups.json needed" in res.stdout
    assert "process_group:init METADATA node (--metadata-node keeps it)" in res.stdout


def test_synthesize_writes_no_empty_groups_file(run_cli, samples_dir, tmp_path):
    """A job whose collectives all span every rank gets no `{}` comm_groups.json (the converters
    write none either); a workload with sub-groups still gets its file."""
    pytest.importorskip("sklearn", reason="synthesis needs the optional 'synth' extra")
    res = run_cli("convert", "pytorch", *_ddp2_args(samples_dir), "-o", str(tmp_path / "d"), "-q")
    assert res.exit_code == 0, res.stderr
    res = run_cli("synthesize", str(tmp_path / "d"), "--ranks", "2", "-o", str(tmp_path / "s"), "-q")
    assert res.exit_code == 0, res.stderr
    assert (tmp_path / "s.1.et").is_file() and not (tmp_path / "s.comm_groups.json").exists()
    res = run_cli("generate", "transformer", "--layers", "2", "--dp", "2", "--tp", "2", "-o", str(tmp_path / "tp"))
    assert res.exit_code == 0, res.stderr
    groups = json.loads((tmp_path / "tp.comm_groups.json").read_text())
    assert groups and all(len(r) == 2 for r in groups.values())
    assert str(tmp_path / "tp.comm_groups.json") in res.stdout


@pytest.fixture(scope="module")
def case3(samples_dir: Path, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bigsim")
    with tarfile.open(samples_dir / "bigsim" / "text2log_v6_examples.tgz") as tf:
        tf.extractall(out, filter="data")
    return out / "examples" / "case3"


@pytest.mark.parametrize("fmt", ["bigsim", "auto"])
def test_one_detail_dump_of_several_names_the_others(run_cli, case3, tmp_path, fmt):
    res = run_cli("convert", fmt, str(case3 / "detail-0-0-0.0.log"), "-o", str(tmp_path / "b"))
    assert res.exit_code == 1
    assert "no detail dump for procs" not in res.stderr
    assert "only 1 detail dump(s) were given; detail-0-0-0.1.log is beside it" in res.stderr
    assert f"chakra convert bigsim {case3}" in res.stderr
    ok = run_cli("convert", "bigsim", str(case3 / "detail-0-0-0.0.log"), str(case3 / "detail-0-0-0.1.log"),
                 "-o", str(tmp_path / "b"), "-q")  # fmt: skip
    assert ok.exit_code == 0, ok.stderr


def test_convert_auto_on_a_chakra_trace_says_it_already_is_one(run_cli, samples_dir, tmp_path):
    et = samples_dir / "astrasim" / "all_reduce_8npus_1MB" / "all_reduce.0.et"
    res = run_cli("convert", "auto", str(et), "-o", str(tmp_path / "x"))
    assert res.exit_code == 1
    assert "format not recognised" not in res.stderr
    assert "already a Chakra trace (.et), nothing to convert" in res.stderr and "chakra jsonize" in res.stderr


def test_convert_auto_skips_a_manifest_among_traces_with_a_note(run_cli, samples_dir, tmp_path):
    d = samples_dir / "pytorch" / "ddp2"
    files = sorted(str(p) for p in d.glob("*.json"))  # what the shell makes of ddp2/*.json
    assert any(f.endswith("manifest.json") for f in files)
    res = run_cli("convert", "auto", *files, "-o", str(tmp_path / "a"))
    assert res.exit_code == 0, res.stderr
    assert f"skipped {d / 'manifest.json'}: not a trace of any format, and no rank number in its name" in res.stderr
    assert (tmp_path / "a.0.et").is_file() and (tmp_path / "a.1.et").is_file()
    # On its own it is still an error: there is nothing else to convert.
    res = run_cli("convert", "auto", str(d / "manifest.json"), "-o", str(tmp_path / "m"))
    assert res.exit_code == 1 and "format not recognised" in res.stderr


def test_convert_kineto_on_an_execution_trace(run_cli, samples_dir, tmp_path):
    res = run_cli("convert", "kineto", str(samples_dir / "pytorch" / "ddp2" / "et.0.json"), "-o", str(tmp_path / "k"))
    assert res.exit_code == 1
    assert "--kineto" not in res.stderr
    assert "a PyTorch Execution Trace, not a Kineto trace: convert it with `chakra convert pytorch`" in res.stderr


@pytest.mark.parametrize("command", ["simulate", "validate", "stats"])
def test_trace_commands_on_an_nsys_report(run_cli, samples_dir, command):
    report = samples_dir / "nsys" / "testcuda_nsys2026.1_report2.sqlite"
    res = run_cli(command, str(report))
    assert res.exit_code == 1
    assert "empty (zero-length) messages" not in res.stderr
    assert "an SQLite database (an Nsight Systems report?), not a Chakra trace" in res.stderr
    assert f"chakra convert nsys {report} -o PREFIX" in res.stderr

"""One output convention: results on stdout, progress and warnings on stderr; tables take the width
of their content when not on a terminal (never a cut number), `chakra --width N` or COLUMNS narrow
them, and then cells wrap instead of ending in an ellipsis."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

NSYS = "nsys/testcuda_nsys2026.1_report2.sqlite"


@pytest.fixture(autouse=True)
def _no_columns(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)


def _ddp2(samples_dir: Path) -> list[str]:
    d = samples_dir / "pytorch" / "ddp2"
    return [str(d / "et.0.json"), str(d / "et.1.json"), "-k", str(d / "kineto.0.json"), "-k", str(d / "kineto.1.json")]


def test_nsys_table_is_whole_when_piped(run_cli, samples_dir, tmp_path):
    res = run_cli("convert", "nsys", str(samples_dir / NSYS), "-o", str(tmp_path / "n"))
    assert res.exit_code == 0, res.stderr
    # The span (1,351.358 ms of the real report) and the report's file name, uncut, on stdout.
    assert "1351.358" in res.stdout and "testcuda_nsys2026.1_report2.sqlite" in res.stdout
    assert "…" not in res.stdout
    assert "wrote" in res.stderr and "wrote" not in res.stdout


@pytest.mark.parametrize("how", ["option", "COLUMNS"])
def test_narrow_width_wraps_cells_and_cuts_no_number(run_cli, samples_dir, tmp_path, monkeypatch, how):
    args = ["convert", "nsys", str(samples_dir / NSYS), "-o", str(tmp_path / "n")]
    if how == "option":
        args = ["--width", "60", *args]
    else:
        monkeypatch.setenv("COLUMNS", "60")
    res = run_cli(*args)
    assert res.exit_code == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines and max(len(line) for line in lines) <= 60
    assert "…" not in res.stdout
    # The span value is split across lines of its cell, all its digits kept in order.
    span_cells = "".join(re.findall(r"│\s*([\d.]*)\s*│\s*$", res.stdout, flags=re.M))
    assert span_cells == "1351.358", res.stdout


def test_pytorch_summary_on_stdout_like_nsys(run_cli, samples_dir, tmp_path):
    res = run_cli("convert", "pytorch", *_ddp2(samples_dir), "-o", str(tmp_path / "d"))
    assert res.exit_code == 0, res.stderr
    assert "rank 0:" in res.stdout and "rank 1:" in res.stdout and "comm ALL_REDUCE" in res.stdout
    assert "nodes" in res.stdout and "┃" not in res.stderr and "│" not in res.stderr


def test_kineto_summary_on_stdout(run_cli, samples_dir, tmp_path):
    res = run_cli("convert", "kineto", str(samples_dir / "kineto" / "hta_nccl_data.json.gz"), "-o", str(tmp_path / "k"))
    assert res.exit_code == 0, res.stderr
    assert "rank 0:" in res.stdout and "│" not in res.stderr


def test_error_is_the_first_line_of_stderr(tmp_path, samples_dir):
    """No blank line (a progress bar's leftover) before `error:` when stderr is a pipe."""
    bad = tmp_path / "bad.0.et"
    bad.write_bytes(b"\xff" * 64)
    for args in (
        ["convert", "nsys", str(tmp_path / "missing.sqlite"), "-o", str(tmp_path / "x")],
        ["simulate", str(tmp_path / "bad")],
        ["convert", "pytorch", str(tmp_path / "missing.json"), "-o", str(tmp_path / "x")],
    ):
        proc = subprocess.run([sys.executable, "-m", "chakra.cli", *args], capture_output=True, text=True)
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr.startswith("error: "), repr(proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_simulate_table_whole_when_piped(tmp_path, samples_dir):
    prefix = samples_dir / "astrasim" / "all_reduce_8npus_1MB" / "all_reduce"
    proc = subprocess.run([sys.executable, "-m", "chakra.cli", "simulate", str(prefix)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("117,780") >= 8 and "…" not in proc.stdout


def test_diff_shows_whole_operator_names_when_piped(run_cli, samples_dir, tmp_path):
    res = run_cli("convert", "pytorch", *_ddp2(samples_dir), "-o", str(tmp_path / "d"), "-q")
    assert res.exit_code == 0, res.stderr
    res = run_cli("synthesize", str(tmp_path / "d"), "--ranks", "2", "-o", str(tmp_path / "s"), "-q")
    if res.exit_code != 0:  # synthesis needs the optional 'synth' extra: compare the trace with itself
        (tmp_path / "s.0.et").write_bytes((tmp_path / "d.0.et").read_bytes())
        (tmp_path / "s.1.et").write_bytes((tmp_path / "d.1.et").read_bytes())
    res = run_cli("diff", str(tmp_path / "d"), str(tmp_path / "s"), "--top", "0")
    assert res.exit_code == 0, res.stderr
    assert "…" not in res.stdout
    for name in ("torch::autograd::AccumulateGrad", "c10d::allreduce_", "aten::threshold_backward"):
        assert f"│ {name} " in res.stdout, name

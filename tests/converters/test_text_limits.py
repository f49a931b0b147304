"""ASTRA-sim text workloads with counts and sizes the converter must refuse: one error line, no files."""

from __future__ import annotations

from pathlib import Path

import pytest

FUZZ = Path(__file__).resolve().parents[1] / "data" / "astrasim_text_fuzz"


def _one_error_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 1, result.stderr
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("name", "npus", "passes", "where", "what"),
    [
        ("comm_size_over_int64.txt", 3, 2, "line 3", "weight-gradient comm size must be at most 9223372036854775807"),
        ("compute_time_over_uint64.txt", 8, 1, "line 8", "input-gradient compute time must be at most"),
    ],
)
def test_fuzz_repros_give_one_error_line(run_cli, tmp_path, name, npus, passes, where, what):
    src = FUZZ / name
    out = tmp_path / "o"
    args = ["convert", "text", str(src), "--npus", str(npus), "--passes", str(passes), "-o", str(out)]
    line = _one_error_line(run_cli(*args))
    assert f"{src} ({where}): {what}" in line
    assert list(tmp_path.iterdir()) == []


def _with_header(text_dir: Path, tmp_path: Path, header: str) -> Path:
    """The real MLP_ModelParallel.txt with header options added after its keyword."""
    lines = (text_dir / "MLP_ModelParallel.txt").read_text().splitlines()
    lines[0] = f"{lines[0].rstrip()} {header}"
    path = tmp_path / "mlp.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def text_dir(samples_dir: Path) -> Path:
    return samples_dir / "astrasim" / "text_workloads"


def test_auto_refuses_huge_header_npus(run_cli, text_dir, tmp_path):
    src = _with_header(text_dir, tmp_path, "all_gpus: 1000000000")
    out = tmp_path / "out" / "o"
    out.parent.mkdir()
    line = _one_error_line(run_cli("convert", "auto", str(src), "-o", str(out), "-q"))
    assert f"{src} (line 1): all_gpus: 1,000,000,000 would write" in line
    assert "limit of 4,096" in line and "--max-npus 1000000000" in line
    assert list(out.parent.iterdir()) == []


def test_auto_rejects_non_integer_header_npus(run_cli, text_dir, tmp_path):
    src = _with_header(text_dir, tmp_path, "all_gpus: 1e9")
    line = _one_error_line(run_cli("convert", "auto", str(src), "-o", str(tmp_path / "o"), "-q"))
    assert f"{src} (line 1): all_gpus must be an integer, got '1e9'" in line


def test_npus_limit_and_raising_it(run_cli, text_dir, tmp_path):
    src = text_dir / "MLP_ModelParallel.txt"
    line = _one_error_line(run_cli("convert", "text", str(src), "--npus", "100000", "-o", str(tmp_path / "o")))
    assert "--npus 100,000 would write 100,000 trace files, above the limit of 4,096" in line
    assert "--max-npus 100000" in line
    line = _one_error_line(
        run_cli("convert", "text", str(src), "--npus", "8", "--max-npus", "4", "-o", str(tmp_path / "o"))
    )
    assert "above the limit of 4;" in line
    ok = run_cli("convert", "text", str(src), "--npus", "8", "--max-npus", "8", "-o", str(tmp_path / "o"), "-q")
    assert ok.exit_code == 0, ok.stderr
    assert len(list(tmp_path.glob("o.*.et"))) == 8


def test_auto_uses_header_npus(run_cli, text_dir, tmp_path):
    src = _with_header(text_dir, tmp_path, "all_gpus: 4")
    res = run_cli("convert", "auto", str(src), "-o", str(tmp_path / "o"))
    assert res.exit_code == 0, res.stderr
    assert "detected format: text" in res.stderr
    assert sorted(p.name for p in tmp_path.glob("o.*.et")) == [f"o.{r}.et" for r in range(4)]

"""FlexFlow task graphs whose labels claim absurd devices, times or sizes: a clear error, fast."""

from __future__ import annotations

import re

import pytest

from chakra.converters.flexflow.lower import MAX_NPUS

from .bad_input import FUZZ, assert_clean_error

LEGACY = FUZZ.parent / "flexflow" / "legacy_npu.dot"


def test_huge_device_id_is_refused_not_allocated(run_cli, tmp_path):
    """npu=710186142643 once hung the converter and then ran out of memory."""
    dot = FUZZ / "flexflow" / "huge_device_id" / "taskgraph.dot"
    result = run_cli("convert", "flexflow", str(dot), "--placement", "*=0", "-o", str(tmp_path / "o"))
    assert_clean_error(
        result, tmp_path, f"{dot} (line 5): node n3 uses device 710186142643", f"over the limit of {MAX_NPUS}",
        "--max-npus",
    )  # fmt: skip


def _legacy_with(tmp_path, old: str, new: str):
    text = LEGACY.read_text()
    assert old in text
    path = tmp_path / "graph.dot"
    path.write_text(text.replace(old, new, 1))
    out = tmp_path / "out"
    out.mkdir()
    return path, out


def test_the_limit_is_an_option(run_cli, tmp_path):
    """A claim over the limit is refused; the same graph converts once --max-npus allows it."""
    first = re.search(r"npu=(\d+)", LEGACY.read_text()).group(0)
    path, out = _legacy_with(tmp_path, first, "npu=9")
    result = run_cli("convert", "flexflow", str(path), "--max-npus", "8", "-o", str(out / "o"))
    assert_clean_error(result, out, "uses device 9: 10 rank files, over the limit of 8", "--max-npus")
    result = run_cli("convert", "flexflow", str(path), "--max-npus", "10", "-o", str(out / "o"))
    assert result.exit_code == 0, result.stderr
    assert len(list(out.glob("o.*.et"))) == 10


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("wall_clock_time", "1e308", "wall_clock_time 1e308 is outside 0 .. 1e+12"),
        ("wall_clock_time", "-5", "is outside 0 .. 1e+12"),
        ("comm_size", "99999999999999999999999", "comm_size=99999999999999999999999 is outside 0 .. 2**63-1"),
    ],
)
def test_out_of_range_numbers_name_the_line(run_cli, tmp_path, key, value, expected):
    m = re.search(rf"{key}=([0-9.e-]+)", LEGACY.read_text())
    path, out = _legacy_with(tmp_path, m.group(0), f"{key}={value}")
    line = LEGACY.read_text()[: m.start()].count("\n") + 1
    result = run_cli("convert", "flexflow", str(path), "-o", str(out / "o"))
    assert_clean_error(result, out, f"{path} (line {line})", expected)

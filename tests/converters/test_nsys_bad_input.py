"""Nsight Systems exports with values of the wrong type or range: one error naming table, row, column.

Each case is a real bundled report with one value changed, the change the fuzzer's minimized
crash inputs made (SQLite stores any type in any column, whatever the declared schema says).
"""

from __future__ import annotations

import shutil
import sqlite3

import pytest

from .bad_input import assert_clean_error

REPORT = "testcuda_nsys2026.1_report2.sqlite"

# (table, column, new value) -> the error it must give
CASES = [
    ("CUPTI_ACTIVITY_KIND_RUNTIME", "end", "", "end must be a non-negative integer, not ''"),
    ("CUPTI_ACTIVITY_KIND_RUNTIME", "globalTid", "", "globalTid must be a non-negative integer"),
    ("CUPTI_ACTIVITY_KIND_KERNEL", "start", "abc", "start must be a non-negative integer, not 'abc'"),
    ("CUPTI_ACTIVITY_KIND_KERNEL", "end", 1.5, "end must be a non-negative integer, not 1.5"),
    ("CUPTI_ACTIVITY_KIND_MEMCPY", "bytes", -4, "bytes must be a non-negative integer, not -4"),
    ("CUPTI_ACTIVITY_KIND_MEMCPY", "streamId", "abc", "streamId must be a non-negative integer"),
    ("StringIds", "value", b"\x00\xff", "value must be text, not b'\\x00\\xff'"),
    ("TARGET_INFO_CUDA_STREAM", "streamId", "", "streamId must be a non-negative integer"),
    ("CUPTI_ACTIVITY_KIND_KERNEL", "start", 2**62, "ends before it starts"),
]


@pytest.mark.parametrize(("table", "column", "value", "expected"), CASES, ids=[f"{c[0]}.{c[1]}" for c in CASES])
def test_one_bad_value_is_named(run_cli, samples_dir, tmp_path, table, column, value, expected):
    path = tmp_path / "report.sqlite"
    shutil.copy(samples_dir / "nsys" / REPORT, path)
    with sqlite3.connect(path) as conn:
        rowid = conn.execute(f'SELECT MIN(rowid) FROM "{table}"').fetchone()[0]
        conn.execute(f'UPDATE "{table}" SET "{column}" = ? WHERE rowid = ?', (value, rowid))
    conn.close()
    out = tmp_path / "out"
    out.mkdir()
    result = run_cli("convert", "nsys", str(path), "--per", "device", "-o", str(out / "o"))
    assert_clean_error(result, out, f"{path}: table {table} row {rowid}: {expected}")

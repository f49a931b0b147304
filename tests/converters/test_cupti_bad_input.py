"""CUPTI records of the wrong shape: one error naming the file and the record."""

from __future__ import annotations

import resource
import time

import orjson
import pytest

from chakra.converters.cupti.records import MAX_DEPTH, export_cupti_records

from .bad_input import FUZZ, assert_clean_error

# minimized fuzzer input -> the place the error must name
CASES = {
    "synchronization_correlation_id_too_big": "(line 1): bad SYNCHRONIZATION record: field 'correlationId'",
    "nested_too_deep": f"(message 0): JSON nested deeper than {MAX_DEPTH} levels",
    "memset_correlation_id_not_integer": "(line 1): bad MEMSET record: field 'correlationId' must be an integer",
    "runtime_ends_before_start": "(line 1): bad RUNTIME record: ends before it starts (15 < 2647)",
    "runtime_start_not_integer": "(line 1): bad RUNTIME record: field 'start' must be an integer from 0",
    "runtime_bad_field_json_array": "(message 0): bad RUNTIME record: field",
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CASES))
def test_minimized_fuzz_inputs_fail_cleanly(run_cli, tmp_path, case):
    records = FUZZ / "cupti" / case / "records.json"
    result = run_cli("convert", "cupti", str(records), "-o", str(tmp_path / "o"))
    assert_clean_error(result, tmp_path, f"{records}", CASES[case])


@pytest.fixture(scope="module")
def real_records(samples_dir, tmp_path_factory) -> list[dict]:
    """The CUPTI records of a real nsys report (the records format is our own export's)."""
    path = tmp_path_factory.mktemp("cupti") / "records.jsonl"
    export_cupti_records(samples_dir / "nsys" / "testcuda_nsys2026.1_report2.sqlite", path)
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def test_deep_nesting_is_refused_fast_and_in_bounded_memory(run_cli, real_records, tmp_path):
    """80 KB of brackets once took the streaming reader 3.9 GB; now the depth limit stops it."""
    marker = {"kind": "MARKER", "name": "x", "start": 1, "end": 2, "processId": 1, "threadId": 1}
    deep = "[" * 40_000 + "]" * 40_000
    text = b"[" + b",".join(orjson.dumps(r) for r in real_records[:20])
    text += b', {"payload": ' + deep.encode() + b", " + orjson.dumps(marker)[1:] + b"]"
    path = tmp_path / "records.json"
    path.write_bytes(text)
    out = tmp_path / "out"
    out.mkdir()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    result = run_cli("convert", "cupti", str(path), "-o", str(out / "o"))
    assert time.perf_counter() - t0 < 20
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000  # KiB
    assert_clean_error(result, out, "(message 20)", f"nested deeper than {MAX_DEPTH} levels")


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("start", "5", "field 'start' must be an integer from 0 to 2**63-1, not '5'"),
        ("start", 2**63, "field 'start' must be an integer"),
        ("correlationId", 1.5, "field 'correlationId' must be an integer"),
        ("name", ["cudaLaunchKernel"], "field 'name' must be a string"),
    ],
)
def test_wrong_types_name_the_line(run_cli, real_records, tmp_path, field, value, expected):
    index = next(i for i, r in enumerate(real_records) if r["kind"] == "RUNTIME")
    records = [dict(r) for r in real_records]
    records[index][field] = value
    path = tmp_path / "records.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(r) for r in records))
    out = tmp_path / "out"
    out.mkdir()
    result = run_cli("convert", "cupti", str(path), "-o", str(out / "o"))
    assert_clean_error(result, out, f"(line {index + 1}): bad RUNTIME record: {expected}")

"""Kineto traces of the wrong shape: one error naming the file and the event, before deep code runs."""

from __future__ import annotations

import gzip

import orjson
import pytest

from .bad_input import FUZZ, assert_clean_error

# minimized fuzzer input -> the place the error must name
CASES = {
    "name_is_object": "traceEvents[0]: Expected `str`, got `object` - at `event.name`",
    "name_is_object_2": "traceEvents[0]: Expected `str`, got `object` - at `event.name`",
    "event_is_array": "traceEvents[0]: Expected `object | null`, got `array`",
    "event_is_int": "traceEvents[0]: Expected `object | null`, got `int`",
    "ts_dur_not_numeric": "traceEvents[0]: no numeric ts/dur",
    "record_function_id_wrong_type": "at `event.args.Record function id`",
    "name_is_array": "traceEvents[0]: Expected `str`, got `array` - at `event.name`",
    "int_field_is_array": "traceEvents[300]: Expected `int`, got `array`",
    "id_field_is_object": "traceEvents[0]: Expected `int | str | null`, got `object`",
    "cat_wrong_type": "at `event.cat`",
    "id_field_is_object_2": "traceEvents[33]: Expected `int | str | null`, got `object`",
    "tid_wrong_type": "at `event.tid`",
    "external_id_wrong_type": "at `event.args.External id`",
    "int_field_is_array_2": "traceEvents[37]: Expected `int`, got `array`",
    "int_field_is_array_3": "traceEvents[1]: Expected `int`, got `array`",
    "id_field_is_object_3": "traceEvents[1]: Expected `int | str | null`, got `object`",
    "corrupt_gzip": "corrupt gzip data",
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CASES))
def test_minimized_fuzz_inputs_fail_cleanly(run_cli, tmp_path, case):
    (trace,) = (FUZZ / "kineto" / case).glob("trace.json*")
    result = run_cli("convert", "kineto", str(trace), "-o", str(tmp_path / "o"))
    assert_clean_error(result, tmp_path, trace.name, CASES[case])


def _sample(samples_dir) -> dict:
    return orjson.loads(gzip.decompress((samples_dir / "kineto" / "hta_event_sync_trace.json.gz").read_bytes()))


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("ts", -5.0, "time out of range"),
        ("ts", "12", "Expected `int | float`, got `str` - at `event.ts`"),
        ("dur", [1], "at `event.dur`"),
    ],
)
def test_bad_times_name_the_event(run_cli, samples_dir, tmp_path, field, value, expected):
    doc = _sample(samples_dir)
    index = next(i for i, e in enumerate(doc["traceEvents"]) if e.get("ph") == "X" and e.get("cat") == "cpu_op")
    doc["traceEvents"][index][field] = value
    path = tmp_path / "trace.json"
    path.write_bytes(orjson.dumps(doc))
    out = tmp_path / "out"
    out.mkdir()
    result = run_cli("convert", "kineto", str(path), "-o", str(out / "o"))
    assert_clean_error(result, out, f"traceEvents[{index}]", expected)


def test_big_trace_with_a_bad_event_names_it(run_cli, samples_dir, tmp_path):
    """Over 1 MB the events are decoded in chunks by the typed decoder; the error is the same."""
    doc = _sample(samples_dir)
    events = doc["traceEvents"]
    doc["traceEvents"] = events * (2_000_000 // len(orjson.dumps(events)) + 1)
    last = (
        len(doc["traceEvents"])
        - 1
        - next(i for i, e in enumerate(reversed(doc["traceEvents"])) if e.get("ph") == "X" and e.get("args"))
    )
    doc["traceEvents"][last] = {**doc["traceEvents"][last], "args": {"correlation": -3}}
    path = tmp_path / "trace.json"
    path.write_bytes(orjson.dumps(doc))
    assert path.stat().st_size > 1 << 20
    out = tmp_path / "out"
    out.mkdir()
    result = run_cli("convert", "kineto", str(path), "-o", str(out / "o"))
    assert_clean_error(result, out, f"traceEvents[{last}]", "Expected `int` >= 0", "event.args.correlation")


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: d["pg_config"][0].update(ranks=[0, "1"]), "Expected `int`, got `str` - at `$[0].ranks[1]`"),
        (lambda d: d["pg_config"][0].update(pg_size=-2), "Expected `int` >= 0 - at `$[0].pg_size`"),
        (lambda d: d.update(rank=[0]), "distributedInfo: Expected `int | null`, got `array` - at `$.rank`"),
    ],
)
def test_bad_distributed_info_is_named(run_cli, samples_dir, tmp_path, mutate, expected):
    doc = orjson.loads((samples_dir / "pytorch" / "ddp2" / "kineto.0.json").read_bytes())
    mutate(doc["distributedInfo"])
    path = tmp_path / "kineto.0.json"
    path.write_bytes(orjson.dumps(doc))
    out = tmp_path / "out"
    out.mkdir()
    result = run_cli("convert", "kineto", str(path), "-o", str(out / "o"))
    assert_clean_error(result, out, str(path), expected)

"""PyTorch Execution Traces of the wrong shape: one error naming the file and the node."""

from __future__ import annotations

import gzip
import io
import tarfile

import orjson
import pytest

from .bad_input import FUZZ, assert_clean_error

# minimized fuzzer input -> the place the error must name
CASES = {
    "fw_parent_out_of_range": "node #0: attr 'fw_parent' must be an integer from 0 to 2**63-1",
    "tid_not_integer": "trace_et.json: node #671: attr 'tid' must be an integer",
    "seq_id_out_of_range": "node #0: attr 'seq_id' must be an integer from -1 to 2**63-1",
    "scope_not_integer": "node #0: attr 'scope' must be an integer",
    "fw_tid_not_integer": "node #0: attr 'fw_tid' must be an integer",
    "op_schema_not_string": "node #28: attr 'op_schema' must be a string",
    "kernel_file_not_string": "node #0: attr 'kernel_file' must be str",
    "kineto_int_field_is_array": "kineto.json: traceEvents[0]: Expected `int`, got `array`",
    "rf_id_not_integer": "node #0: attr 'rf_id' must be an integer",
    "fw_parent_not_integer": "node #0: attr 'fw_parent' must be an integer",
    "seq_id_not_integer": "node #585: attr 'seq_id' must be an integer",
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CASES))
def test_minimized_fuzz_inputs_fail_cleanly(run_cli, tmp_path, case):
    folder = FUZZ / "pytorch" / case
    (et,) = folder.glob("et.json*")
    kineto = ["-k", str(folder / "kineto.json")] if (folder / "kineto.json").exists() else []
    result = run_cli("convert", "pytorch", str(et), *kineto, "-o", str(tmp_path / "o"))
    assert_clean_error(result, tmp_path, CASES[case])
    assert f"{folder}/" in result.stderr


def _nested_sample(samples_dir) -> dict:
    raw = gzip.decompress((samples_dir / "pytorch_et" / "param_1.1.1_pt2_et.json.tar.gz").read_bytes())
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        member = next(m for m in tar if m.isfile() and m.name.endswith(".json") and "/._" not in m.name)
        return orjson.loads(tar.extractfile(member).read())


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda n: n.update(id=[n["id"]]), "id must be an integer from 0 to 2**63-1, not ["),
        (lambda n: n.update(id=-4), "id must be an integer from 0 to 2**63-1"),
        (lambda n: n.update(name=7), "name must be a string"),
        (lambda n: n.update(ctrl_deps="a"), "parent must be an integer"),
    ],
)
def test_bad_node_fields_name_the_node(run_cli, samples_dir, tmp_path, mutate, expected):
    doc = _nested_sample(samples_dir)
    index = len(doc["nodes"]) // 2
    mutate(doc["nodes"][index])
    path = tmp_path / "et.json"
    path.write_bytes(orjson.dumps(doc))
    out = tmp_path / "out"
    out.mkdir()
    result = run_cli("convert", "pytorch", str(path), "-o", str(out / "o"))
    assert_clean_error(result, out, "et.json", f"node #{index}: {expected}")


def test_header_fields_are_checked(run_cli, samples_dir, tmp_path):
    doc = _nested_sample(samples_dir)
    doc["start_ts"] = [1]
    path = tmp_path / "et.json"
    path.write_bytes(orjson.dumps(doc))
    out = tmp_path / "out"
    out.mkdir()
    result = run_cli("convert", "pytorch", str(path), "-o", str(out / "o"))
    assert_clean_error(result, out, "'start_ts' must be an integer from 0 to 2**63-1")


def test_corrupt_gzip_is_named(run_cli, samples_dir, tmp_path):
    raw = bytearray((samples_dir / "pytorch_et" / "hta_1.0.1_benchmark_simple_add_et.json.gz").read_bytes())
    raw[len(raw) // 2] ^= 0xFF  # inside the deflate stream
    path = tmp_path / "et.json.gz"
    path.write_bytes(bytes(raw))
    out = tmp_path / "out"
    out.mkdir()
    result = run_cli("convert", "pytorch", str(path), "-o", str(out / "o"))
    assert_clean_error(result, out, "et.json.gz", "corrupt gzip data")


def test_untimed_launcher_of_a_timed_executor_converts(run_cli, samples_dir, tmp_path):
    """A c10d::send whose rf_id is missing (so Kineto cannot time it) launching a timed gloo:send:
    the executor then waits on nothing from it (it once compared None with a time)."""
    from chakra.io import read_trace
    from chakra.schema import NodeType

    doc = orjson.loads((samples_dir / "pytorch" / "collectives2" / "et.0.json").read_bytes())
    call, executor = (n for n in doc["nodes"] if n["id"] in (396, 397))
    assert (call["name"], executor["name"]) == ("c10d::send", "gloo:send")
    doc["nodes"] = [{"id": 396, "name": "c10d::send"}, executor]
    path = tmp_path / "et.0.json"
    path.write_bytes(orjson.dumps(doc))
    kineto = samples_dir / "pytorch" / "collectives2" / "kineto.0.json"
    result = run_cli("convert", "pytorch", str(path), "-k", str(kineto), "-o", str(tmp_path / "o"))
    assert result.exit_code == 0, result.stderr
    nodes = read_trace(tmp_path / "o.0.et").nodes
    sends = [n for n in nodes if n.type == NodeType.COMM_SEND_NODE]
    assert len(sends) == 1 and sends[0].duration_micros > 0

"""CUPTI JSON records -> Chakra, checked against the nsys path on the same real reports.

There is no public CUPTI activity dump with a fixed format (docs/input-formats.md §C.8), so the record
files here are written by `export_cupti_records` from the two real nsys samples, or by hand to the
format documented in docs/nsys.md (small files, said so where they are built).
"""

from __future__ import annotations

import orjson
import pytest

from chakra.converters import cupti, detect
from chakra.converters.cupti.records import export_cupti_records
from chakra.converters.nsys import convert_reports
from chakra.errors import TraceFormatError
from chakra.io import read_trace
from chakra.schema.attrs import attrs_dict, get_attr
from chakra.validate import validate_traces

SAMPLES = ["nsys/testcuda_nsys2026.1_report2.sqlite", "nsys/reconstream_nsys2023.1_report3.sqlite"]


def node_view(trace):
    return [
        (n.id, n.name, n.type, list(n.data_deps), n.start_time_micros, n.duration_micros, attrs_dict(n))
        for n in trace.nodes
    ]


@pytest.mark.parametrize("sample", SAMPLES)
def test_both_paths_give_the_same_graph(samples_dir, tmp_path, sample):
    src = samples_dir / sample
    records = tmp_path / "records.json"
    n = export_cupti_records(src, records)
    assert n > 20
    assert detect(records) == ["cupti"]
    convert_reports([src], tmp_path / "direct")
    result = cupti.convert_records([records], tmp_path / "via")
    direct, via = read_trace(tmp_path / "direct.0.et"), read_trace(tmp_path / "via.0.et")
    assert node_view(direct) == node_view(via)
    assert get_attr(via.metadata, "source_format") == "cupti"
    assert get_attr(via.metadata, "source_file") == "records.json"
    assert result.ranks[0].source == records
    assert validate_traces([via]).ok


def test_array_and_object_forms(samples_dir, tmp_path):
    src = samples_dir / SAMPLES[1]
    lines = tmp_path / "r.jsonl"
    export_cupti_records(src, lines)
    recs = [orjson.loads(line) for line in lines.read_bytes().splitlines()]
    arr = tmp_path / "arr.json"
    arr.write_bytes(orjson.dumps(recs))
    obj = tmp_path / "obj.json"
    obj.write_bytes(orjson.dumps({"format": "chakra-cupti-records", "records": recs}, option=orjson.OPT_INDENT_2))
    views = []
    for i, path in enumerate((lines, arr, obj)):
        assert detect(path) == ["cupti"]
        cupti.convert_records([path], tmp_path / f"o{i}")
        views.append(node_view(read_trace(tmp_path / f"o{i}.0.et")))
    assert views[0] == views[1] == views[2]


def test_hand_written_records(tmp_path, run_cli):
    """A minimal Daydream-style dump written by hand to the documented format: GPU records without processId
    (one process per file), a pthread_t-sized threadId, numeric and named copy kinds, records out of order."""
    big_tid = 140234567890123
    recs = [
        {"kind": "KERNEL", "name": "gemm", "start": 12_000, "end": 40_000, "deviceId": 0, "streamId": 7,
         "correlationId": 2},
        {"kind": "RUNTIME", "name": "cudaMemcpyAsync", "start": 1_000, "end": 3_000, "processId": 42,
         "threadId": big_tid, "correlationId": 1},
        {"kind": "RUNTIME", "name": "cudaLaunchKernel", "start": 5_000, "end": 9_000, "processId": 42,
         "threadId": big_tid, "correlationId": 2},
        {"kind": "MEMCPY", "copyKind": 1, "bytes": 4096, "start": 4_000, "end": 11_000, "deviceId": 0,
         "streamId": 7, "correlationId": 1},
        {"kind": "RUNTIME", "name": "cudaStreamSynchronize", "start": 10_000, "end": 41_000, "processId": 42,
         "threadId": big_tid, "correlationId": 3},
        {"kind": "SYNCHRONIZATION", "type": "STREAM_SYNCHRONIZE", "start": 10_100, "end": 40_900, "streamId": 7,
         "correlationId": 3},
        {"kind": "MARKER", "name": "forward", "start": 500, "end": 9_500, "processId": 42, "threadId": big_tid},
    ]  # fmt: skip
    path = tmp_path / "dump.json"
    path.write_bytes(b"\n".join(orjson.dumps(r) for r in recs) + b"\n")
    res = run_cli("convert", "cupti", str(path), "-o", str(tmp_path / "h"), "--json")
    assert res.exit_code == 0, res.stderr
    trace = read_trace(tmp_path / "h.0.et")
    by = {(get_attr(n, "kind"), get_attr(n, "correlation_id")): n for n in trace.nodes}
    copy, kernel = by[("memcpy", 1)], by[("kernel", 2)]
    launch, sync = by[("runtime", 2)], by[("runtime", 3)]
    assert get_attr(copy, "tensor_size") == 4096 and get_attr(copy, "copy_kind") == "HtoD"
    assert by[("runtime", 1)].id in copy.data_deps
    assert launch.id in kernel.data_deps and copy.id in kernel.data_deps
    assert get_attr(sync, "sync") == "stream" and kernel.id in sync.data_deps
    assert get_attr(kernel, "layer") == "forward"
    assert get_attr(sync, "tid") == get_attr(launch, "tid")
    assert validate_traces([trace]).ok


def test_bad_records_name_the_line(tmp_path, run_cli):
    path = tmp_path / "bad.json"
    path.write_text(
        '{"kind": "RUNTIME", "name": "cudaFree", "start": 1, "end": 2, "processId": 1, "threadId": 1}\n'
        '{"kind": "KERNEL", "name": "k", "start": 1, "end": 2}\n'
    )
    with pytest.raises(TraceFormatError, match=r"line 2.*KERNEL.*streamId"):
        cupti.convert_records([path], tmp_path / "o")
    path.write_text('{"kind": "RUNTIME", "name": "x", "start": 1, "end": 2, "processId": 1, "threadId": 1}\n{oops\n')
    res = run_cli("convert", "cupti", str(path), "-o", str(tmp_path / "o"))
    assert res.exit_code == 1 and "line 2" in res.stderr and "bad JSON" in res.stderr
    path.write_text('{"kind": "TEXTURE", "start": 1}\n')
    with pytest.raises(TraceFormatError, match="unknown kind"):
        cupti.convert_records([path], tmp_path / "o")
    assert not list(tmp_path.glob("o.*"))


def test_records_without_cuda_activity(tmp_path):
    path = tmp_path / "empty.json"
    path.write_text('{"kind": "DEVICE", "deviceId": 0, "name": "GPU"}\n')
    with pytest.raises(TraceFormatError, match=r"empty\.json.*no CUDA activity"):
        cupti.convert_records([path], tmp_path / "o")


def test_sniff_rejects_other_json(tmp_path):
    other = tmp_path / "trace.json"
    other.write_text('{"traceEvents": [{"ph": "X", "name": "k"}]}')
    assert detect(other) == ["kineto"]


def test_bundled_records_are_a_fresh_export_of_the_real_report(run_cli, samples_dir, tmp_path):
    """The sample the README converts is what `convert nsys --cupti-records` makes of the real report."""
    report = samples_dir / "nsys" / "testcuda_nsys2026.1_report2.sqlite"
    bundled = samples_dir / "cupti" / "testcuda_nsys2026.1_report2.cupti.jsonl"
    out = tmp_path / "records.jsonl"
    res = run_cli("convert", "nsys", str(report), "--cupti-records", str(out))
    assert res.exit_code == 0, res.stderr
    assert "77 CUPTI records" in res.stderr and not list(tmp_path.glob("*.et"))
    assert out.read_bytes() == bundled.read_bytes()
    # Both paths give the same graph: the report straight, and its records.
    a = run_cli("convert", "nsys", str(report), "-o", str(tmp_path / "a"), "--json")
    b = run_cli("convert", "cupti", str(bundled), "-o", str(tmp_path / "b"), "--json")
    ra, rb = orjson.loads(a.stdout)["ranks"][0], orjson.loads(b.stdout)["ranks"][0]
    assert (ra["nodes"], ra["tasks"], ra["span_us"]) == (rb["nodes"], rb["tasks"], rb["span_us"])
    assert ra["nodes"] == 92 and ra["tasks"]["kernel"] == 4


def test_cupti_records_option_usage(run_cli, samples_dir, tmp_path):
    reports = sorted((samples_dir / "nsys").glob("*.sqlite"))
    res = run_cli("convert", "nsys", *map(str, reports), "--cupti-records", str(tmp_path / "r.jsonl"))
    assert res.exit_code == 2 and "one report" in res.stderr
    res = run_cli("convert", "nsys", str(reports[0]))
    assert res.exit_code == 2 and "--cupti-records" in res.stderr
    # With -o as well: the records and the traces, from one run.
    res = run_cli(
        "convert", "nsys", str(reports[0]), "--cupti-records", str(tmp_path / "r.jsonl"), "-o", str(tmp_path / "t")
    )
    assert res.exit_code == 0, res.stderr
    assert (tmp_path / "r.jsonl").is_file() and (tmp_path / "t.0.et").is_file()

"""The JSON form is lossless (byte-identical round trips), schema-checked, and reads the official form."""

from __future__ import annotations

import math

import jsonschema
import orjson
import pytest

from chakra.errors import TraceFormatError
from chakra.io import read_trace, write_trace
from chakra.jsonform import json_schema, trace_to_document
from chakra.schema import NodeType, pb
from chakra.trace import Trace, make_metadata, make_node


def every_arm_trace() -> Trace:
    md = make_metadata(schema="1.1.1-chakra.0.0.4", pid=2**64 - 1, start_ts=12)
    nodes = []
    n = make_node(
        2**64 - 2,
        'weird <name> "q" | {x}',
        NodeType.COMM_COLL_NODE,
        ctrl_deps=[2**63 + 5],
        data_deps=[0],
        duration_micros=2**64 - 1,
        start_time_micros=1,
        attrs={"comm_type": 0, "comm_size": 2**62, "is_cpu_op": False, "involved_dim": [True, False, True]},
    )
    n.inputs.SetInParent()  # present but empty: one tag byte on the wire
    n.outputs.values = "[[1, 2]]"
    a = n.attr
    a.add(name="d", double_val=math.nan)
    a.add(name="d2", double_val=-math.inf)
    a.add(name="f", float_val=0.1)
    a.add(name="i32", int32_val=-(2**31))
    a.add(name="s32", sint32_val=-5)
    a.add(name="s64", sint64_val=-(2**63))
    a.add(name="fx32", fixed32_val=2**32 - 1)
    a.add(name="fx64", fixed64_val=2**64 - 1)
    a.add(name="sf32", sfixed32_val=-1)
    a.add(name="sf64", sfixed64_val=-2)
    a.add(name="u32", uint32_val=7)
    a.add(name="b", bytes_val=b"\x00\xff")
    a.add(name="doc", doc_string="has a doc", string_val="v")
    a.add(name="empty_list").int64_list.SetInParent()
    a.add(name="dl").double_list.values.extend([1.5, math.inf])
    a.add(name="fl").float_list.values.extend([0.25])
    a.add(name="bl").bytes_list.values.extend([b"a", b""])
    a.add(name="sl").string_list.values.extend(["x", "ü"])
    a.add(name="ul").uint64_list.values.extend([2**64 - 1])
    a.add(name="noarm")
    nodes.append(n)
    nodes.append(pb.Node())  # all defaults: zero bytes
    unknown = pb.Node(id=9, name="from a newer schema")
    unknown.MergeFromString(b"\x5a\x03abc")  # field 11 (the proposed StorageInfo), length-delimited
    nodes.append(unknown)
    return Trace(metadata=md, nodes=nodes, rank=3)


def test_every_field_and_arm_round_trips_byte_identically(tmp_path):
    et = tmp_path / "a.3.et"
    write_trace(et, every_arm_trace())
    js = tmp_path / "a.3.json"
    write_trace(js, read_trace(et))
    back = tmp_path / "b.3.et"
    write_trace(back, read_trace(js))
    assert back.read_bytes() == et.read_bytes()
    doc = orjson.loads(js.read_bytes())
    jsonschema.validate(doc, json_schema())
    assert doc["nodes"][0]["id"] == 2**64 - 2 and doc["nodes"][0]["duration_micros"] == 2**64 - 1
    assert doc["rank"] == 3


def test_gzip_json(tmp_path):
    t = every_arm_trace()
    write_trace(tmp_path / "x.0.json.gz", t)
    assert read_trace(tmp_path / "x.0.json.gz").nodes == t.nodes


def test_samples_round_trip_through_json(samples_dir, tmp_path):
    for src in sorted((samples_dir / "astrasim" / "all_reduce_8npus_1MB").glob("*.et")):
        js = tmp_path / (src.stem + ".json")
        write_trace(js, read_trace(src))
        out = tmp_path / src.name
        write_trace(out, read_trace(js))
        assert out.read_bytes() == src.read_bytes()


def test_official_json_form(samples_dir):
    t = read_trace(samples_dir / "et" / "official_small_chakra.0.json")
    raw = orjson.loads((samples_dir / "et" / "official_small_chakra.0.json").read_bytes())["workload_graph"]
    assert [n.id for n in t.nodes] == [item["Id"] for item in raw]
    assert [n.duration_micros for n in t.nodes] == [item["runtime"] for item in raw]
    assert [list(n.data_deps) for n in t.nodes] == [item["data_deps"] for item in raw]
    by_id = t.by_id()
    assert by_id[435].type == NodeType.COMM_COLL_NODE
    # ctrlDeps naming nodes outside the file are dropped (the official reader ignores ctrlDeps).
    assert all(d in by_id for n in t.nodes for d in n.ctrl_deps)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b'{"format": "chakra-et-json/1", "metadata": {}, "nodes": [', "not valid JSON"),
        (b"[1, 2]", "not a Chakra JSON trace"),
        (b'{"format": "chakra-et-json/1", "metadata": {}, "nodes": [{"id": -1}]}', "at nodes/0/id"),
        (
            b'{"format": "chakra-et-json/1", "metadata": {}, "nodes": '
            b'[{"id": 1}, {"id": 2, "attr": [{"name": "x", "int32_val": "no"}]}]}',
            "at nodes/1/attr/0/int32_val",
        ),
        (b'{"format": "chakra-et-json/1", "metadata": {}, "nodes": [{"idd": 1}]}', "nodes/0"),
    ],
)
def test_bad_json_names_the_file_and_place(tmp_path, content, expected):
    path = tmp_path / "bad.0.json"
    path.write_bytes(content)
    with pytest.raises(TraceFormatError) as info:
        read_trace(path)
    assert str(path) in str(info.value) and expected in str(info.value)


def test_document_shape_matches_schema():
    doc = trace_to_document(every_arm_trace())
    jsonschema.validate(orjson.loads(orjson.dumps(doc)), json_schema())

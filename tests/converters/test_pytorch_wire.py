"""The PyTorch converter's byte-level node encoder writes exactly what protobuf would.

`converters/pytorch/wire.py` builds Node messages from cached byte strings for speed; any reader
parses them with the generated classes, so every field and arm it writes must match
`pb.Node.SerializeToString()` bit for bit, including negative int32/int64 (ten-byte varints),
large timestamps (multi-group varints) and empty-but-present strings.
"""

from __future__ import annotations

import pytest

from chakra.converters.pytorch import wire
from chakra.schema import NodeType, pb
from chakra.schema.attrs import make_attr

VALUES = [0, 1, 127, 128, 16383, 16384, 2**21, 2**28 - 1, 2**28, 2**35, 2**42, 2**49 + 7, 2**56, 2**63 - 1]


@pytest.mark.parametrize("value", VALUES)
def test_varint_matches_protobuf(value):
    expected = pb.AttributeProto(uint64_val=value).SerializeToString()[1:]  # drop the tag byte of field 13
    assert wire.varint(value) == expected


@pytest.mark.parametrize("value", [-1, -2, -(2**31), -(2**63)])
def test_negative_int64_is_a_ten_byte_varint(value):
    attr = pb.AttributeProto(int64_val=value).SerializeToString()
    assert attr == wire._ARM_TAGS["int64_val"] + wire.varint(value)
    assert len(wire.varint(value)) == 10


def test_varint_table():
    table = wire.varint_table(40000)
    assert [table[i] for i in (0, 127, 16383, 16384, 39999)] == [wire.varint(i) for i in (0, 127, 16383, 16384, 39999)]


@pytest.mark.parametrize(
    ("name", "arm", "value"),
    [
        ("tid", "int64_val", 7),
        ("tid", "int64_val", -3),
        ("rf_id", "int64_val", 2**40 + 5),
        ("comm_src", "int32_val", -1),
        ("comm_tag", "int32_val", 2**31 - 1),
        ("tensor_size", "uint64_val", 2**63 + 9),
        ("is_cpu_op", "bool_val", False),
        ("is_cpu_op", "bool_val", True),
        ("pg_name", "string_val", ""),
        ("op_schema", "string_val", "aten::mm(Tensor self, Tensor mat2) -> Tensor ü"),
    ],
)
def test_attribute_entries_match_protobuf(name, arm, value):
    enc = wire.AttrEncoder(name, arm)
    node = pb.Node()
    node.attr.append(make_attr(name, value, arm))
    assert enc[value] == node.SerializeToString()
    assert enc.encode(value) == enc[value]


def test_whole_node_matches_protobuf():
    io = pb.IOInfo(values="[[1, 2], 3]", shapes="[[2, 2], []]", types="")
    node = pb.Node(
        id=300,
        name="aten::addmm",
        type=NodeType.COMP_NODE,
        ctrl_deps=[1, 200, 2**33],
        data_deps=[299],
        start_time_micros=1_795_332_132_000_162,
        duration_micros=5283,
        inputs=io,
    )
    node.attr.append(make_attr("is_cpu_op", True))
    node.attr.append(make_attr("num_ops", 2**31))
    built = b"".join(
        [
            wire.NODE_ID + wire.varint(300),
            wire.length_delimited(wire.NODE_NAME, b"aten::addmm"),
            wire.NODE_TYPE + wire.varint(int(NodeType.COMP_NODE)),
            wire.packed(wire.NODE_CTRL, [1, 200, 2**33]),
            wire.packed(wire.NODE_DATA, [299]),
            wire.NODE_START + wire.varint(1_795_332_132_000_162),
            wire.NODE_DUR + wire.varint(5283),
            wire.length_delimited(wire.NODE_INPUTS, wire.io_info(b"[[1, 2], 3]", b"[[2, 2], []]", b"")),
            wire.AttrEncoder("is_cpu_op", "bool_val")[True],
            wire.AttrEncoder("num_ops", "int64_val")[2**31],
        ]
    )
    assert built == node.SerializeToString()
    assert wire.packed(wire.NODE_CTRL, []) == b""

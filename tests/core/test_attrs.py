"""Conventional attributes land in the arm consumers read; readers accept any arm."""

from __future__ import annotations

import pytest

from chakra.schema import pb
from chakra.schema.attrs import get_attr, get_int, misplaced_attrs, set_attr, set_attrs


def arm(node: pb.Node, name: str) -> str:
    return next(a.WhichOneof("value") for a in node.attr if a.name == name)


def test_writers_use_the_conventional_arms():
    node = pb.Node(id=1)
    set_attrs(
        node,
        {
            "is_cpu_op": False,
            "num_ops": 10,
            "tensor_size": 4096,
            "comm_type": 0,
            "comm_size": 1 << 20,
            "comm_src": 0,
            "comm_dst": 1,
            "comm_tag": 7,
            "pg_name": "0",
            "involved_dim": [True, False],
        },
    )
    expected = {
        "is_cpu_op": "bool_val",
        "num_ops": "int64_val",
        "tensor_size": "uint64_val",
        "comm_type": "int64_val",
        "comm_size": "int64_val",
        "comm_src": "int32_val",
        "comm_dst": "int32_val",
        "comm_tag": "int32_val",
        "pg_name": "string_val",
        "involved_dim": "bool_list",
    }
    assert {name: arm(node, name) for name in expected} == expected
    assert list(misplaced_attrs(node)) == []


def test_readers_accept_any_numeric_arm():
    node = pb.Node()
    node.attr.add(name="comm_size", uint64_val=123)  # e.g. an older producer
    node.attr.add(name="comm_src", int64_val=3)  # the old FlexFlow converter's arm
    assert get_int(node, "comm_size") == 123
    assert get_attr(node, "comm_src") == 3
    assert list(misplaced_attrs(node)) == [
        ("comm_size", "uint64_val", "int64_val"),
        ("comm_src", "int64_val", "int32_val"),
    ]


def test_set_attr_replaces_and_range_checks():
    node = pb.Node()
    set_attr(node, "comm_tag", 5)
    set_attr(node, "comm_tag", 6)
    assert len(node.attr) == 1 and get_attr(node, "comm_tag") == 6
    with pytest.raises(ValueError):
        set_attr(node, "comm_tag", 2**40)  # would not fit int32_val
    set_attr(node, "big", 2**64 - 1)
    assert arm(node, "big") == "uint64_val" and get_attr(node, "big") == 2**64 - 1


def test_as_int_is_the_one_integer_coercion():
    from chakra.schema.attrs import as_int

    assert [as_int(True), as_int(7), as_int(2.9), as_int(-1.5)] == [1, 7, 2, -1]
    # What the official feeder reads as 0 (strings, lists, absent) and what int() cannot take.
    assert [as_int("3", 0), as_int([1], 0), as_int(None, 0), as_int(float("nan"), 0)] == [0, 0, 0, 0]

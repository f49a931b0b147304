"""The schema is wire-compatible with Chakra 0.0.4 and the committed generated module is fresh."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from chakra.schema import CollectiveType, NodeType, pb

REPO = Path(__file__).resolve().parents[2]


def test_generated_module_is_not_stale():
    if importlib.util.find_spec("grpc_tools") is None:
        pytest.fail("grpcio-tools (dev extra) is needed to check the generated module")
    proc = subprocess.run(
        [sys.executable, str(REPO / "tools" / "gen_proto.py"), "--check"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr


def test_generated_module_has_no_runtime_version_pin():
    text = (REPO / "chakra" / "schema" / "et_def_pb2.py").read_text()
    assert "ValidateProtobufRuntimeVersion" not in text


def test_field_numbers_match_chakra_004():
    node = {f.name: f.number for f in pb.Node.DESCRIPTOR.fields}
    assert node == {
        "id": 1,
        "name": 2,
        "type": 3,
        "ctrl_deps": 4,
        "data_deps": 5,
        "start_time_micros": 6,
        "duration_micros": 7,
        "inputs": 8,
        "outputs": 9,
        "attr": 10,
    }
    attr = {f.name: f.number for f in pb.AttributeProto.DESCRIPTOR.fields}
    assert attr["double_val"] == 3 and attr["int64_val"] == 9 and attr["uint64_val"] == 13
    assert attr["bool_val"] == 27 and attr["bool_list"] == 28 and attr["string_val"] == 29 and attr["bytes_list"] == 32
    assert {f.name: f.number for f in pb.GlobalMetadata.DESCRIPTOR.fields} == {"version": 1, "attr": 2}
    assert pb.Node.DESCRIPTOR.file.package == "ChakraProtoMsg"
    assert NodeType.COMM_COLL_NODE == 7 and CollectiveType.BARRIER == 9 and CollectiveType.ALL_TO_ALL == 6


def test_packed_deps_on_the_wire():
    # proto3 packs repeated varints: field 4, wire type 2 -> tag 0x22, then length, then varints.
    data = pb.Node(id=5, ctrl_deps=[1, 300]).SerializeToString()
    assert data == bytes([0x08, 0x05, 0x22, 0x03, 0x01, 0xAC, 0x02])

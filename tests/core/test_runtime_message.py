"""The message types chakra defines at run time (`chakra.io.runtime_message`: `NodeBatch`, the
checks' `AttrViews`): their FileDescriptorProto, written by chakra.io itself, is byte for byte the
one protobuf's descriptor_pb2 builds, and the classes read the wire form they are made for."""

from __future__ import annotations

import subprocess
import sys

from google.protobuf import descriptor_pb2

from chakra.io import BYTES, MESSAGE, REPEATED, NodeBatch, _file_descriptor
from chakra.schema import pb
from chakra.trace import make_node

F = descriptor_pb2.FieldDescriptorProto


def _reference(path: str, dependency: list[str], messages: list[tuple[str, list[dict]]]) -> bytes:
    fdp = descriptor_pb2.FileDescriptorProto(
        name=path, package="chakra_internal", dependency=dependency, syntax="proto3"
    )
    for name, fields in messages:
        msg = fdp.message_type.add(name=name)
        for field in fields:
            msg.field.add(**field)
    return fdp.SerializeToString()


def test_descriptors_are_protobufs_own():
    node_batch = _file_descriptor(
        "chakra_internal/nodebatch.proto",
        [pb.DESCRIPTOR.name],
        [("NodeBatch", (("nodes", 1, REPEATED, MESSAGE, ".ChakraProtoMsg.Node"),))],
    )
    assert node_batch == _reference(
        "chakra_internal/nodebatch.proto",
        [pb.DESCRIPTOR.name],
        [("NodeBatch", [dict(name="nodes", number=1, label=F.LABEL_REPEATED, type=F.TYPE_MESSAGE,
                             type_name=".ChakraProtoMsg.Node")])],
    )  # fmt: skip
    views = _file_descriptor(
        "chakra_internal/attrviews.proto",
        [],
        [
            ("AttrView", (("attr", 10, REPEATED, BYTES, ""),)),
            ("AttrViews", (("nodes", 1, REPEATED, MESSAGE, ".chakra_internal.AttrView"),)),
        ],
    )
    assert views == _reference(
        "chakra_internal/attrviews.proto",
        [],
        [
            ("AttrView", [dict(name="attr", number=10, label=F.LABEL_REPEATED, type=F.TYPE_BYTES)]),
            ("AttrViews", [dict(name="nodes", number=1, label=F.LABEL_REPEATED, type=F.TYPE_MESSAGE,
                                type_name=".chakra_internal.AttrView")]),
        ],
    )  # fmt: skip


def test_node_batch_and_attr_views_read_framed_nodes():
    from chakra.export.astrasim import _attr_views

    nodes = [make_node(i, f"n{i}", pb.COMP_NODE, duration_micros=i, data_deps=[i - 1] if i else []) for i in range(3)]
    nodes[1].attr.add(name="comm_size", int64_val=4096)
    wire = b"".join(b"\x0a" + bytes([len(m)]) + m for m in (n.SerializeToString() for n in nodes))
    assert list(NodeBatch.FromString(wire).nodes) == nodes
    views = _attr_views().FromString(wire).nodes
    assert [list(v.attr) for v in views] == [[a.SerializeToString() for a in n.attr] for n in nodes]


def test_reading_traces_does_not_build_descriptor_proto():
    script = "import sys, chakra.io; print('google.protobuf.descriptor_pb2' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"

"""The Chakra 0.0.4 schema: generated messages plus Python enums for node and collective types.

`pb` is the generated module (`ChakraProtoMsg`); its message classes are the node type used
everywhere (no wrapper objects on hot paths).
"""

from __future__ import annotations

from enum import IntEnum
from operator import itemgetter

from chakra.schema import et_def_pb2 as pb

Node = pb.Node
GlobalMetadata = pb.GlobalMetadata
AttributeProto = pb.AttributeProto
IOInfo = pb.IOInfo

#: `whole(field)`: a repeated field of a decoded message as a list, in one C call. protobuf's upb
#: containers have no `__iter__`: a loop, `*field`, `chain` or `list()` over one steps through
#: `__getitem__` until an IndexError, whose message is formatted each time (about 300 ns per
#: field, an empty one included: on a million nodes' dependency lists, over half a second).
whole = itemgetter(slice(None))

SCHEMA_VERSION = "0.0.4"


class NodeType(IntEnum):
    INVALID_NODE = 0
    METADATA_NODE = 1
    MEM_LOAD_NODE = 2
    MEM_STORE_NODE = 3
    COMP_NODE = 4
    COMM_SEND_NODE = 5
    COMM_RECV_NODE = 6
    COMM_COLL_NODE = 7


class CollectiveType(IntEnum):
    ALL_REDUCE = 0
    REDUCE = 1
    ALL_GATHER = 2
    GATHER = 3
    SCATTER = 4
    BROADCAST = 5
    ALL_TO_ALL = 6
    REDUCE_SCATTER = 7
    REDUCE_SCATTER_BLOCK = 8
    BARRIER = 9


COMM_NODE_TYPES = frozenset({NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE, NodeType.COMM_COLL_NODE})
MEM_NODE_TYPES = frozenset({NodeType.MEM_LOAD_NODE, NodeType.MEM_STORE_NODE})


def node_type_name(value: int) -> str:
    """Enum name for a node type number; unknown numbers stay readable instead of raising."""
    try:
        return NodeType(value).name
    except ValueError:
        return f"UNKNOWN_NODE_{value}"


def collective_name(value: int) -> str:
    try:
        return CollectiveType(value).name
    except ValueError:
        return f"UNKNOWN_COLLECTIVE_{value}"


# Checked once at import: our enums must mirror the generated ones exactly.
assert {e.name: e.value for e in NodeType} == dict(pb.NodeType.items())
assert {e.name: e.value for e in CollectiveType} == dict(pb.CollectiveCommType.items())

__all__ = [
    "pb",
    "Node",
    "GlobalMetadata",
    "AttributeProto",
    "IOInfo",
    "NodeType",
    "CollectiveType",
    "COMM_NODE_TYPES",
    "MEM_NODE_TYPES",
    "SCHEMA_VERSION",
    "node_type_name",
    "collective_name",
]

"""What kind of work a node is: the one classification every part of chakra uses.

The node type alone does not say where a node runs: a COMP_NODE is CPU work when its `is_cpu_op`
attribute is true and device (GPU) work otherwise, including when the attribute is absent, which
is how ASTRA-sim and the official feeder read it. Visualizers colour by kind, the what-if
transforms and the analysis group by the resource a kind occupies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from chakra.schema import CollectiveType, NodeType, pb
from chakra.schema.attrs import attr_value

if TYPE_CHECKING:  # numpy is imported where the vectorised helper runs
    import numpy as np

# Kind names, in legend order.
CPU, GPU, COLL, SEND, RECV, MEM, META, INVALID = "cpu", "gpu", "coll", "send", "recv", "mem", "meta", "invalid"
KINDS = (CPU, GPU, COLL, SEND, RECV, MEM, META, INVALID)
COMM_KINDS = frozenset({COLL, SEND, RECV})

_TYPE_KIND = {
    NodeType.METADATA_NODE: META,
    NodeType.MEM_LOAD_NODE: MEM,
    NodeType.MEM_STORE_NODE: MEM,
    NodeType.COMM_SEND_NODE: SEND,
    NodeType.COMM_RECV_NODE: RECV,
    NodeType.COMM_COLL_NODE: COLL,
}

#: Collective types the simulator models (ASTRA-sim's four); the rest (BROADCAST, ...) are
#: replayed from their recorded durations. validate's deadlock check follows the same split.
MODELLED_COLLECTIVES = frozenset(
    int(c)
    for c in (
        CollectiveType.ALL_REDUCE,
        CollectiveType.ALL_GATHER,
        CollectiveType.REDUCE_SCATTER,
        CollectiveType.ALL_TO_ALL,
    )
)

#: The execution resource of each kind (what one rank can run at a time per resource):
#: cpu, gpu, comm, mem; metadata and invalid nodes take no resource ("meta").
RESOURCES = ("cpu", "gpu", "comm", "mem", "meta")
KIND_RESOURCE = {
    CPU: "cpu",
    GPU: "gpu",
    COLL: "comm",
    SEND: "comm",
    RECV: "comm",
    MEM: "mem",
    META: "meta",
    INVALID: "meta",
}


def kind_of(node_type: int, is_cpu_op: Optional[bool]) -> str:
    """The kind of a node from its type number and `is_cpu_op` (None when absent)."""
    if node_type == NodeType.COMP_NODE:
        return CPU if is_cpu_op else GPU
    return _TYPE_KIND.get(node_type, INVALID)


def is_cpu_op(node: pb.Node) -> Optional[bool]:
    """The node's `is_cpu_op` attribute in any numeric arm, or None when it has none."""
    for attr in node.attr:
        if attr.name == "is_cpu_op":
            return bool(attr_value(attr))
    return None


def node_kind(node: pb.Node) -> str:
    """The kind of a node (one of KINDS)."""
    t = node.type
    return kind_of(t, is_cpu_op(node)) if t == NodeType.COMP_NODE else _TYPE_KIND.get(t, INVALID)


def resource_of(node: pb.Node) -> str:
    """Which execution resource runs a node: cpu, gpu, comm, mem or meta."""
    return KIND_RESOURCE[node_kind(node)]


def kind_codes(types: np.ndarray, is_cpu: np.ndarray) -> np.ndarray:
    """Vectorised `kind_of` for a whole rank (the simulator's compiler, the feeder's columns):
    one int8 per node, the index of its kind in KINDS."""
    import numpy as np

    codes = np.full(len(types), KINDS.index(INVALID), dtype=np.int8)
    comp = types == NodeType.COMP_NODE
    codes[comp & (is_cpu != 0)] = KINDS.index(CPU)
    codes[comp & (is_cpu == 0)] = KINDS.index(GPU)
    for node_type, kind in _TYPE_KIND.items():
        codes[types == node_type] = KINDS.index(kind)
    return codes

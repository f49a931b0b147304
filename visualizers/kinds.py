"""How each kind of node looks, and which timeline track it takes.

The kinds themselves (CPU/GPU compute, collective, send, receive, memory, metadata) are defined
once in `chakra.schema.kinds`; here they get the colours, shapes and legend texts the graph and
the timeline share, so the two agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chakra.schema import NodeType, collective_name, pb
from chakra.schema.attrs import SIMULATOR_ATTRS, attr_value

# The kinds themselves live in the core (chakra.schema.kinds); here is how they look.
from chakra.schema.kinds import (
    COLL,
    CPU,
    GPU,
    INVALID,
    MEM,
    META,
    RECV,
    SEND,
)

#: Timeline resources and their base thread ids (the Chakra paper's memory / compute / comm split).
MEMORY, COMPUTE, COMMUNICATION = "memory", "compute", "communication"
RESOURCE_TID = {MEMORY: 1, COMPUTE: 2, COMMUNICATION: 3}
KIND_TRACK = {
    CPU: COMPUTE,
    GPU: COMPUTE,
    META: COMPUTE,
    INVALID: COMPUTE,
    COLL: COMMUNICATION,
    SEND: COMMUNICATION,
    RECV: COMMUNICATION,
    MEM: MEMORY,
}


@dataclass(frozen=True)
class Style:
    """How a kind looks in Graphviz: fill colour, shape and the legend text."""

    fill: str
    shape: str
    legend: str


STYLES: dict[str, Style] = {
    CPU: Style("#cfe2f3", "box", "compute on CPU (is_cpu_op)"),
    GPU: Style("#b6d7a8", "box", "compute on GPU / accelerator"),
    COLL: Style("#f9cb9c", "hexagon", "collective (COMM_COLL)"),
    SEND: Style("#ea9999", "rarrow", "send (COMM_SEND)"),
    RECV: Style("#d5a6bd", "larrow", "receive (COMM_RECV)"),
    MEM: Style("#ffe599", "cylinder", "memory load / store"),
    META: Style("#e6e6e6", "note", "metadata"),
    INVALID: Style("#ffffff", "box", "invalid / unknown type"),
}

#: Which kind wins the colour of a collapsed box holding several kinds (most telling first).
KIND_PRIORITY = (COLL, SEND, RECV, MEM, GPU, CPU, META, INVALID)

# Attributes the visualizers show; read in one pass over a node's attrs.
_WANTED = frozenset(SIMULATOR_ATTRS) - {"comm_priority", "involved_dim"}


def node_facts(node: pb.Node) -> dict[str, Any]:
    """The displayed attributes of a node (any arm accepted), one pass over its attr list."""
    out: dict[str, Any] = {}
    for attr in node.attr:
        if attr.name in _WANTED:
            out[attr.name] = attr_value(attr)
    return out


def describe_comm(node_type: int, facts: dict[str, Any]) -> str:
    """A short comm description ("ALL_REDUCE 1.0 MiB", "send to 3, 64 KiB"), or "" for non-comm nodes."""
    from chakra.units import fmt_bytes

    parts = []
    if node_type == NodeType.COMM_COLL_NODE:
        ctype = facts.get("comm_type")
        parts.append(collective_name(int(ctype)) if isinstance(ctype, (int, float)) else "collective")
    elif node_type == NodeType.COMM_SEND_NODE and isinstance(facts.get("comm_dst"), int):
        parts.append(f"to {facts['comm_dst']}")
    elif node_type == NodeType.COMM_RECV_NODE and isinstance(facts.get("comm_src"), int):
        parts.append(f"from {facts['comm_src']}")
    size = facts.get("comm_size")
    if node_type in (NodeType.MEM_LOAD_NODE, NodeType.MEM_STORE_NODE):
        size = facts.get("tensor_size")
    if isinstance(size, (int, float)) and not isinstance(size, bool) and size > 0:
        parts.append(fmt_bytes(size))
    return " ".join(parts)


# Names users may give to --type: kinds, groups of kinds, and NodeType names with or without _NODE.
_TYPE_ALIASES: dict[str, frozenset[str]] = {
    "cpu": frozenset({CPU}),
    "gpu": frozenset({GPU}),
    "comp": frozenset({CPU, GPU}),
    "compute": frozenset({CPU, GPU}),
    "coll": frozenset({COLL}),
    "collective": frozenset({COLL}),
    "send": frozenset({SEND}),
    "recv": frozenset({RECV}),
    "comm": frozenset({COLL, SEND, RECV}),
    "mem": frozenset({MEM}),
    "memory": frozenset({MEM}),
    "meta": frozenset({META}),
    "metadata": frozenset({META}),
    "invalid": frozenset({INVALID}),
    "mem_load": frozenset({MEM}),
    "mem_store": frozenset({MEM}),
    "comm_send": frozenset({SEND}),
    "comm_recv": frozenset({RECV}),
    "comm_coll": frozenset({COLL}),
}


def parse_types(values: list[str]) -> frozenset[str]:
    """Turn --type values (comma lists allowed) into a set of kinds; ValueError names a bad one."""
    kinds: set[str] = set()
    for value in values:
        for item in value.split(","):
            key = item.strip().lower()
            if not key:
                continue
            if key.endswith("_node"):
                key = key[: -len("_node")]
            if key not in _TYPE_ALIASES:
                known = ", ".join(sorted(k for k in _TYPE_ALIASES if "_" not in k))
                raise ValueError(f"unknown node type {item.strip()!r}; use one of: {known} (or a NodeType name)")
            kinds |= _TYPE_ALIASES[key]
    return frozenset(kinds)

"""The in-memory trace of one rank: GlobalMetadata plus a list of protobuf Nodes.

Nodes are the generated messages themselves (upb-backed): no second Python object per node.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from chakra.schema import SCHEMA_VERSION, NodeType, pb
from chakra.schema.attrs import set_attr, set_attrs


def make_node(
    node_id: int,
    name: str,
    node_type: int,
    *,
    ctrl_deps: Iterable[int] = (),
    data_deps: Iterable[int] = (),
    duration_micros: int = 0,
    start_time_micros: int = 0,
    attrs: Optional[Mapping[str, Any]] = None,
    inputs: Optional[Mapping[str, str]] = None,
    outputs: Optional[Mapping[str, str]] = None,
) -> pb.Node:
    """A Node with conventional attributes in their conventional arms."""
    node = pb.Node(
        id=node_id,
        name=name,
        type=int(node_type),
        duration_micros=int(duration_micros),
        start_time_micros=int(start_time_micros),
    )
    if ctrl_deps:
        node.ctrl_deps.extend(ctrl_deps)
    if data_deps:
        node.data_deps.extend(data_deps)
    if attrs:
        set_attrs(node, attrs)
    if inputs:
        node.inputs.CopyFrom(pb.IOInfo(**inputs))
    if outputs:
        node.outputs.CopyFrom(pb.IOInfo(**outputs))
    return node


def make_metadata(version: str = SCHEMA_VERSION, **attrs: Any) -> pb.GlobalMetadata:
    md = pb.GlobalMetadata(version=version)
    for name, value in attrs.items():
        if value is not None:
            set_attr(md, name, value)
    return md


@dataclass
class Trace:
    """One rank's trace. `rank` and `path` are bookkeeping, not stored in the file."""

    metadata: pb.GlobalMetadata = field(default_factory=make_metadata)
    nodes: list[pb.Node] = field(default_factory=list)
    rank: Optional[int] = None
    path: Optional[Path] = None

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self) -> Iterator[pb.Node]:
        return iter(self.nodes)

    def next_id(self) -> int:
        return max((n.id for n in self.nodes), default=-1) + 1

    def add(
        self,
        name: str,
        node_type: int = NodeType.COMP_NODE,
        *,
        node_id: Optional[int] = None,
        **kwargs: Any,
    ) -> pb.Node:
        """Append a new node (id = next free id unless given) and return it."""
        node = make_node(self.next_id() if node_id is None else node_id, name, node_type, **kwargs)
        self.nodes.append(node)
        return node

    def by_id(self) -> dict[int, pb.Node]:
        return {n.id: n for n in self.nodes}


def rank_set_problem(ranks: Sequence[Optional[int]]) -> Optional[str]:
    """Why a set of ranks is not a job (ranks 0..N-1, each once), or None: the one wording that
    validate, stats, simulate and export use."""
    got = sorted(r for r in ranks if r is not None)
    if len(got) == len(ranks) and got == list(range(len(got))):
        return None
    shown = ", ".join(str(r) for r in got[:10]) + (", ..." if len(got) > 10 else "")
    return f"rank numbers must be 0..{len(ranks) - 1} without gaps or repeats, got [{shown}]"

"""Build a rank's node list once, stamp it onto every rank with the same shape.

In a data/tensor/pipeline-parallel job most ranks run the same program: ranks in the same
pipeline stage differ only in which process groups their collectives use and which peers their
sends and receives talk to. A `Program` records that program with *roles* ("tp", "dp", "next")
instead of concrete groups and peers; `stamp` then binds the roles for one rank. Compute nodes
are shared between ranks (the same message object in every rank's list: they are identical and
never mutated after stamping); only communication nodes are copied and completed. That makes a
1,024-rank job cost about as much as its few distinct rank shapes plus serialization.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Optional

from chakra.dsl.device import Device
from chakra.dsl.workload import DSLError, ProcessGroup
from chakra.schema import CollectiveType, NodeType, pb
from chakra.schema.attrs import set_attrs
from chakra.trace import make_node

_COLL = 0
_SEND = 1
_RECV = 2


class Program:
    """One rank shape: node ids 1..n (0 is left for the process-group METADATA node)."""

    def __init__(self, device: Optional[Device] = None) -> None:
        self.device = device
        self.nodes: list[pb.Node] = []
        # (index in nodes, kind, role): the role is a group role for collectives, a peer role for P2P.
        self._slots: list[tuple[int, int, str]] = []
        self.flops = 0

    def _add(self, node: pb.Node) -> int:
        node.id = len(self.nodes) + 1
        self.nodes.append(node)
        return node.id

    @property
    def last(self) -> Optional[int]:
        return self.nodes[-1].id if self.nodes else None

    def compute(self, name: str, flops: float, nbytes: float, after: Iterable[Optional[int]] = ()) -> int:
        flops_i = int(round(flops))
        duration = self.device.duration_us(flops, nbytes) if self.device else 0
        node = make_node(
            0,
            name,
            NodeType.COMP_NODE,
            data_deps=[d for d in after if d is not None],
            duration_micros=duration,
            attrs={"is_cpu_op": False, "num_ops": flops_i, "tensor_size": int(round(nbytes))},
        )
        self.flops += flops_i
        return self._add(node)

    def collective(
        self,
        kind: CollectiveType,
        size: float,
        group_role: str,
        after: Iterable[Optional[int]] = (),
        name: Optional[str] = None,
        involved_dim: Optional[Sequence[bool]] = None,
    ) -> int:
        attrs = {"is_cpu_op": False, "comm_type": int(kind), "comm_size": int(round(size))}
        if involved_dim is not None:
            attrs["involved_dim"] = [bool(x) for x in involved_dim]
        node = make_node(
            0,
            name or kind.name.lower(),
            NodeType.COMM_COLL_NODE,
            data_deps=[d for d in after if d is not None],
            attrs=attrs,
        )
        nid = self._add(node)
        self._slots.append((nid - 1, _COLL, group_role))
        return nid

    def send(
        self, peer_role: str, size: float, tag: int, after: Iterable[Optional[int]] = (), name: str = "send"
    ) -> int:
        return self._p2p(NodeType.COMM_SEND_NODE, _SEND, peer_role, size, tag, after, name)

    def recv(
        self, peer_role: str, size: float, tag: int, after: Iterable[Optional[int]] = (), name: str = "recv"
    ) -> int:
        return self._p2p(NodeType.COMM_RECV_NODE, _RECV, peer_role, size, tag, after, name)

    def _p2p(self, node_type, kind, peer_role, size, tag, after, name) -> int:
        attrs = {"is_cpu_op": False, "comm_size": int(round(size)), "comm_tag": int(tag)}
        node = make_node(0, name, node_type, data_deps=[d for d in after if d is not None], attrs=attrs)
        nid = self._add(node)
        self._slots.append((nid - 1, kind, peer_role))
        return nid

    def roles(self) -> tuple[set[str], set[str]]:
        """(group roles, peer roles) this program needs bound."""
        groups = {role for _, kind, role in self._slots if kind == _COLL}
        peers = {role for _, kind, role in self._slots if kind != _COLL}
        return groups, peers

    def stamp(self, rank: int, groups: Mapping[str, ProcessGroup], peers: Mapping[str, int]) -> list[pb.Node]:
        """The node list of `rank`: shared compute nodes, fresh comm nodes with roles bound."""
        out = list(self.nodes)
        for index, kind, role in self._slots:
            node = pb.Node()
            node.CopyFrom(self.nodes[index])
            if kind == _COLL:
                pg = groups.get(role)
                if pg is None:
                    raise DSLError(f"rank {rank}: no process group bound to role {role!r}")
                if rank not in pg:
                    raise DSLError(f"rank {rank} is not a member of {pg.desc} (role {role!r})")
                set_attrs(node, {"pg_name": pg.pg_name})
            else:
                peer = peers.get(role)
                if peer is None:
                    raise DSLError(f"rank {rank}: no peer bound to role {role!r}")
                src, dst = (rank, peer) if kind == _SEND else (peer, rank)
                set_attrs(node, {"comm_src": src, "comm_dst": dst})
            out[index] = node
        return out

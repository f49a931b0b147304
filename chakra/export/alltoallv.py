"""Uneven all-to-alls exported as ASTRA-sim custom collective algorithms.

ASTRA-sim models an all-to-all as an even split of `comm_size` (docs/astra-sim.md); it has no
all-to-all-v. It does run a collective from a custom algorithm: per-rank Chakra traces of send,
receive and compute nodes (astra-sim/system/astraccl/custom_collectives/CustomAlgorithm.cc),
named either for every collective of a type (`all-to-all-implementation-custom`) or per workload
node (`per-node-custom-implementation`: a YAML file mapping a node id to a file prefix; the lookup
in CollectiveImplLookup.cc tries it first). The export writes, for each all-to-all with per-peer
sizes (balanced or not: `chakra simulate` runs both the same way):

- `OUT.a2av.<k>.<position>.et`: one file per member, with a send of exactly [i][j] bytes to every
  peer j and a receive of [j][i] bytes from every peer (no dependencies: all peers at once, the
  direct algorithm); pairs of 0 bytes get no message (ASTRA-sim asserts on 0-byte chunks), and a
  member with no message at all gets one 1 ns compute node (an algorithm that issues nothing
  never ends);
- the collective node gets one id, the same on every rank and above every id in the job, so the
  one YAML mapping (`OUT.a2av.yaml`, named by the system JSON) picks it on every rank and no
  other node;
- `comm_size` is left to the planner (members are made to agree); the custom algorithm ignores it.

Facts this relies on, read in ASTRA-sim's source: the algorithm file is PREFIX.<position in the
group>.et; its send/recv nodes name algorithm ranks, which are real ranks for the world group;
`duration_micros` of a compute node is its runtime (0 means 1 ns); a process subgroup caches the
first plan of a collective type (CommunicatorGroup::get_collective_plan), so per-node algorithms
only hold on the world group: an uneven all-to-all on a subgroup stays the native even one.
"""

from __future__ import annotations

from dataclasses import dataclass

from chakra.commgroups import WORLD_NAMES
from chakra.schema import NodeType
from chakra.schema.attrs import get_attr
from chakra.sim.alltoallv import (
    RECV_ATTR,
    Matrix,
    by_collective,
    byte_matrix,
    clean_splits,
    node_splits,
    recv_mismatches,
)
from chakra.trace import Trace, make_metadata

#: tags of the algorithms' messages: one per exported collective, far from the small tags
#: workloads use for their own sends, so two algorithms in flight never take each other's messages
TAG_BASE = 1 << 20


@dataclass
class UnevenAllToAll:
    index: int  # k in OUT.a2av.<k>
    pg: str
    seq: int  # position among the group's collectives (the rendezvous order)
    members: tuple[int, ...]
    matrix: Matrix
    nodes: dict[int, int]  # rank -> the collective's node id on that rank
    new_id: int = -1


def find(traces: list[Trace]) -> tuple[list[UnevenAllToAll], list[str]]:
    """The all-to-alls with per-peer sizes of a job on its world group, and one line for each one
    that stays an even split."""
    n = len(traces)
    out: list[UnevenAllToAll] = []
    notes: list[str] = []
    for (pg, k), by_rank in sorted(by_collective(traces).items()):
        if pg not in WORLD_NAMES:
            notes.append(
                f"all-to-all #{k} on process group {pg!r}: per-peer sizes are exported on the world group only "
                "(ASTRA-sim caches one algorithm per subgroup and collective type); it runs as an even split"
            )
            continue
        members = tuple(range(n))
        matrix = byte_matrix([node_splits(by_rank[r]) if r in by_rank else None for r in members])
        if matrix is None:
            notes.append(f"all-to-all #{k}: not every rank records {n} per-peer sizes; it runs as an even split")
            continue
        bad = recv_mismatches(matrix, [clean_splits(get_attr(by_rank[r], RECV_ATTR)) for r in members])
        if bad:
            i, j = bad[0]
            notes.append(
                f"all-to-all #{k}: rank {j}'s receive list disagrees with what rank {i} sends ({matrix[i][j]} B); "
                "the senders' lists are used"
            )
        out.append(UnevenAllToAll(len(out), pg, k, members, matrix, {r: by_rank[r].id for r in members}))
    return out, notes


def algorithm(coll: UnevenAllToAll, position: int) -> Trace:
    """Member `position`'s custom-algorithm trace: its sends and receives of this collective."""
    me = coll.members[position]
    t = Trace(metadata=make_metadata(collective="alltoallv"), rank=position)
    tag = TAG_BASE + coll.index
    for j, peer in enumerate(coll.members):
        if j == position:
            continue
        size = coll.matrix[position][j]
        if size > 0:
            t.add(
                f"send {size} B to rank {peer}",
                NodeType.COMM_SEND_NODE,
                attrs={"comm_src": me, "comm_dst": peer, "comm_size": size, "comm_tag": tag},
            )
    for j, peer in enumerate(coll.members):
        if j == position:
            continue
        size = coll.matrix[j][position]
        if size > 0:
            t.add(
                f"recv {size} B from rank {peer}",
                NodeType.COMM_RECV_NODE,
                attrs={"comm_src": peer, "comm_dst": me, "comm_size": size, "comm_tag": tag},
            )
    if not t.nodes:
        t.add("nothing to move", NodeType.COMP_NODE, duration_micros=0)
    return t


def renumber(traces: list[Trace], colls: list[UnevenAllToAll]) -> list[Trace]:
    """Give each exported collective one id on every rank, above every id of the job."""
    if not colls:
        return traces
    top = max((n.id for t in traces for n in t.nodes), default=-1)
    for c in colls:
        c.new_id = top + 1 + c.index
    out = []
    for pos, t in enumerate(traces):
        r = t.rank if t.rank is not None else pos
        change = {c.nodes[r]: c.new_id for c in colls if r in c.nodes}
        nodes = []
        for node in t.nodes:
            deps = (*node.data_deps, *node.ctrl_deps)
            if node.id not in change and not any(d in change for d in deps):
                nodes.append(node)
                continue
            new = type(node)()
            new.CopyFrom(node)
            new.id = change.get(node.id, node.id)
            for fld in (new.data_deps, new.ctrl_deps):
                kept = [change.get(d, d) for d in fld]
                del fld[:]
                fld.extend(kept)
            nodes.append(new)
        out.append(Trace(metadata=t.metadata, nodes=nodes, rank=t.rank, path=t.path))
    return out


def yaml_text(colls: list[UnevenAllToAll], prefix: str) -> str:
    """The `per-node-custom-implementation` file: node id -> algorithm prefix."""
    lines = ["# written by chakra export astra-sim: all-to-alls with per-peer sizes as custom algorithms"]
    for c in colls:
        lines.append(f'{c.new_id}: "{prefix}.a2av.{c.index}"')
    return "\n".join(lines) + "\n"

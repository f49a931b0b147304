"""All-to-all with per-peer sizes (all-to-all-v): the byte matrix of one collective.

A rank's all-to-all node may carry `comm_send_bytes` (and `comm_recv_bytes`): the bytes it sends to
(receives from) each member of its process group, in group-rank order, as PyTorch's
`all_to_all_single` records its split lists. Row i of the matrix is member i's send list; entry
[i][j] is what i sends to j (the diagonal stays local). Any all-to-all whose members all carry
lists runs by them (the simulator's `PeerAlg`, the export's custom algorithm), balanced or not, so
that an uneven routing and its rebalanced twin differ in their bytes only; one without lists is
the even split of `comm_size` it always was.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

from chakra.schema.attrs import RECV_BYTES, SEND_BYTES, get_attr

SEND_ATTR = SEND_BYTES
RECV_ATTR = RECV_BYTES

Matrix = tuple[tuple[int, ...], ...]


def node_splits(node: Any) -> Optional[tuple[int, ...]]:
    """A node's send list (bytes per group rank), None when it has none or it is malformed."""
    return clean_splits(get_attr(node, SEND_ATTR))


def clean_splits(value: Any) -> Optional[tuple[int, ...]]:
    """A list attribute value as a tuple of non-negative ints, else None."""
    if value is None or isinstance(value, (str, bytes)):
        return None
    try:
        items = list(value)
    except TypeError:
        return None
    if not items or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in items):
        return None
    return tuple(items)


def byte_matrix(rows: Sequence[Optional[Sequence[int]]]) -> Optional[Matrix]:
    """The byte matrix of one collective from its members' send lists (in member order), or None
    when any member lacks a list of the group's size (the collective then runs as an even split of
    `comm_size`)."""
    n = len(rows)
    if n < 2 or any(r is None or len(r) != n for r in rows):
        return None
    return tuple(tuple(int(v) for v in r) for r in rows)  # type: ignore[union-attr]


def is_uniform(matrix: Matrix) -> bool:
    """Every pair moves the same bytes (a balanced routing)."""
    first = matrix[0][0]
    return all(v == first for r in matrix for v in r)


def uniform_lists(total: int, n: int) -> tuple[int, ...]:
    """One member's list when `total` bytes are spread evenly over the n x n pairs (the remainder
    of the division goes to the first pairs, so the total is kept)."""
    base, extra = divmod(total, n * n)
    return tuple(base + (1 if k < extra else 0) for k in range(n))


def by_collective(traces: Sequence[Any]) -> dict[tuple[str, int], dict[int, Any]]:
    """(process group, position among the group's collectives) -> rank -> node, for the
    all-to-alls that carry per-peer sizes. Positions count a rank's collectives in node-id order,
    the order the converter and the generators write them in (and the rendezvous meets them)."""
    from collections import defaultdict

    from chakra.schema import CollectiveType, NodeType

    found: dict[tuple[str, int], dict[int, Any]] = defaultdict(dict)
    for pos, t in enumerate(traces):
        r = t.rank if t.rank is not None else pos
        seq: dict[str, int] = defaultdict(int)
        for node in sorted(t.nodes, key=lambda x: x.id):
            if node.type != NodeType.COMM_COLL_NODE:
                continue
            pg = str(get_attr(node, "pg_name", "") or "")
            k = seq[pg]
            seq[pg] += 1
            if get_attr(node, "comm_type") == CollectiveType.ALL_TO_ALL and node_splits(node) is not None:
                found[(pg, k)][r] = node
    return dict(found)


def recv_mismatches(matrix: Matrix, recv_rows: Sequence[Optional[Sequence[int]]]) -> list[tuple[int, int]]:
    """(sender, receiver) pairs where a receiver's own list disagrees with the sender's."""
    out = []
    for j, rr in enumerate(recv_rows):
        if rr is None or len(rr) != len(matrix):
            continue
        for i in range(len(matrix)):
            if i != j and rr[i] != matrix[i][j]:
                out.append((i, j))
    return out


def moved_bytes(matrix: Matrix) -> int:
    """Bytes that cross the network (the diagonal stays on its rank)."""
    return sum(v for i, row in enumerate(matrix) for j, v in enumerate(row) if i != j)

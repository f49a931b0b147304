"""All-to-all with per-peer sizes (all-to-all-v): the byte matrix of one collective.

A rank's all-to-all node may carry `comm_send_bytes` (and `comm_recv_bytes`): the bytes it sends to
(receives from) each member of its process group, in group-rank order, as PyTorch's
`all_to_all_single` records its split lists. Row i of the matrix is member i's send list; entry
[i][j] is what i sends to j (the diagonal stays local). An all-to-all whose rows are all equal
splits of the same size is the even collective every simulator already models; only an uneven
one needs the matrix (the simulator's per-peer direct algorithm, the export's custom algorithm).
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


def uneven_matrix(rows: Sequence[Optional[Sequence[int]]]) -> Optional[Matrix]:
    """The byte matrix of one collective from its members' send lists (in member order), or None
    when it is an even all-to-all (every entry equal) or any member lacks a list of the group's
    size (then the collective runs as an even split of `comm_size`)."""
    n = len(rows)
    if n < 2 or any(r is None or len(r) != n for r in rows):
        return None
    matrix = tuple(tuple(int(v) for v in r) for r in rows)  # type: ignore[union-attr]
    first = matrix[0][0]
    if all(v == first for r in matrix for v in r):
        return None
    return matrix


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

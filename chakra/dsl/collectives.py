"""Textbook collective algorithms (and ones described in YAML) written as ASTRA-sim custom collectives.

Each algorithm is built on a `Builder`: the buffer is cut into chunks, every message names the
chunks it carries, and dependencies come from the data: a send waits for the last write of each
chunk it carries (the receive that brought it, or the reduction after that receive); a receive
waits until the chunks it overwrites have been read and written by earlier nodes. A reducing
receive (all-reduce / reduce-scatter data arriving to be summed in) is followed by a COMP node,
the reduction, lasting `reduce_us` (ASTRA-sim takes 0 as 1 ns).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Callable, Optional

from chakra.collective_algorithm import COLLECTIVES, COMP, RECV, SEND, Algorithm, Op
from chakra.configfile import load_mapping
from chakra.errors import ConfigError

ALGORITHMS = ("ring", "direct", "halving-doubling", "binary-tree", "double-binary-tree", "hierarchical-2d")


class Builder:
    def __init__(self, collective: str, ranks: int, chunk_count: int, size: int, reduce_us: int = 0) -> None:
        if collective not in COLLECTIVES:
            raise ConfigError(f"unknown collective {collective!r} (use {', '.join(COLLECTIVES)})")
        if ranks < 2:
            raise ConfigError(f"a collective algorithm needs at least 2 ranks, got {ranks}")
        self.collective = collective
        self.p = ranks
        self.chunk_count = chunk_count
        self.chunk_bytes = max(1, size // chunk_count)
        self.reduce_us = reduce_us
        self.reducing = collective in ("all-reduce", "reduce-scatter")
        self.ops: list[list[Op]] = [[] for _ in range(ranks)]
        self.writer: list[dict[int, int]] = [{} for _ in range(ranks)]  # chunk -> last node writing it
        self.readers: list[dict[int, list[int]]] = [{} for _ in range(ranks)]  # chunk -> sends since
        self.tag = 0
        self.step = 0

    def _add(self, rank: int, **kw: Any) -> int:
        nid = len(self.ops[rank])
        self.ops[rank].append(Op(nid, step=self.step, **kw))
        return nid

    def send(self, src: int, dst: int, chunks: Sequence[int], reduce: Optional[bool] = None) -> None:
        """Move `chunks` from src to dst in this step; the receiver reduces them in when the
        collective reduces (or `reduce`), else keeps them."""
        chunks = tuple(chunks)
        if not chunks:
            return
        size = self.chunk_bytes * len(chunks)
        tag = self.tag
        self.tag += 1
        w = self.writer[src]
        deps = sorted({w[c] for c in chunks if c in w})
        s = self._add(src, kind=SEND, peer=dst, size=size, tag=tag, deps=tuple(deps), chunks=chunks)
        for c in chunks:
            self.readers[src].setdefault(c, []).append(s)
        wd, rd = self.writer[dst], self.readers[dst]
        deps = sorted({wd[c] for c in chunks if c in wd} | {x for c in chunks for x in rd.get(c, ())})
        r = self._add(dst, kind=RECV, peer=src, size=size, tag=tag, deps=tuple(deps), chunks=chunks)
        last = r
        if self.reducing if reduce is None else reduce:
            last = self._add(dst, kind=COMP, us=self.reduce_us, deps=(r,))
        for c in chunks:
            wd[c] = last
            rd.pop(c, None)

    def next_step(self) -> None:
        self.step += 1

    def build(self, name: str) -> Algorithm:
        return Algorithm(self.collective, self.ops, self.chunk_count, name=name)


# ---- building blocks over a list of members (positions) and their pieces (tuples of chunks) ----


def ring_reduce_scatter(b: Builder, members: Sequence[int], pieces: Sequence[tuple], reduce: bool = True) -> None:
    """After it, members[j] holds pieces[j] reduced over the members."""
    n = len(members)
    for s in range(n - 1):
        for j in range(n):
            b.send(members[j], members[(j + 1) % n], pieces[(j - s - 1) % n], reduce=reduce)
        b.next_step()


def ring_all_gather(b: Builder, members: Sequence[int], pieces: Sequence[tuple]) -> None:
    """members[j] starts with pieces[j]; after it, every member holds all of them."""
    n = len(members)
    for s in range(n - 1):
        for j in range(n):
            b.send(members[j], members[(j + 1) % n], pieces[(j - s) % n], reduce=False)
        b.next_step()


def _pieces(b: Builder) -> list[tuple]:
    k = b.chunk_count // b.p
    return [tuple(range(r * k, (r + 1) * k)) for r in range(b.p)]


def ring(b: Builder) -> None:
    members, pieces = list(range(b.p)), _pieces(b)
    if b.collective == "all-to-all":
        p = b.p
        for s in range(1, p):  # chunks still travelling pass one hop clockwise per step
            for r in range(p):
                o = (r - s + 1) % p
                b.send(r, (r + 1) % p, [o * p + (o + j) % p for j in range(s, p)], reduce=False)
            b.next_step()
        return
    if b.collective in ("all-reduce", "reduce-scatter"):
        ring_reduce_scatter(b, members, pieces)
    if b.collective in ("all-reduce", "all-gather"):
        ring_all_gather(b, members, pieces)


def direct(b: Builder) -> None:
    p, pieces = b.p, _pieces(b)
    if b.collective == "all-to-all":
        for r in range(p):
            for k in range(1, p):
                d = (r + k) % p
                b.send(r, d, [r * p + d], reduce=False)
        return
    if b.collective in ("all-reduce", "reduce-scatter"):
        for r in range(p):
            for k in range(1, p):
                d = (r + k) % p
                b.send(r, d, pieces[d])
        b.next_step()
    if b.collective in ("all-reduce", "all-gather"):
        for r in range(p):
            for k in range(1, p):
                b.send(r, (r + k) % p, pieces[r], reduce=False)


def _power_of_two(b: Builder, what: str) -> None:
    if b.p & (b.p - 1):
        raise ConfigError(f"{what} needs a power-of-two number of ranks, got {b.p}")


def halving_doubling(b: Builder) -> None:
    _power_of_two(b, "halving-doubling")
    p, pieces = b.p, _pieces(b)
    if b.collective == "all-to-all":
        raise ConfigError("halving-doubling has no all-to-all (use ring or direct)")
    lo = [0] * p
    span = p
    if b.collective in ("all-reduce", "reduce-scatter"):
        dist = p // 2
        while dist >= 1:  # recursive halving: keep the half of the range holding yourself
            for r in range(p):
                partner = r ^ dist
                half = lo[r] + (span // 2 if (partner - lo[r]) >= span // 2 else 0)
                b.send(r, partner, [c for q in range(half, half + span // 2) for c in pieces[q]])
            for r in range(p):
                if r - lo[r] >= span // 2:
                    lo[r] += span // 2
            span //= 2
            dist //= 2
            b.next_step()
    if b.collective in ("all-reduce", "all-gather"):
        span, dist = 1, 1
        lo = list(range(p))
        while dist < p:  # recursive doubling: swap everything held so far
            for r in range(p):
                b.send(r, r ^ dist, [c for q in range(lo[r], lo[r] + span) for c in pieces[q]], reduce=False)
            lo = [min(lo[r], lo[r ^ dist]) for r in range(p)]
            span *= 2
            dist *= 2
            b.next_step()


def _tree_all_reduce(b: Builder, parent: Callable[[int], int], order: Sequence[int], chunks: tuple) -> None:
    """Reduce `chunks` up the tree (children before parents), then broadcast them down."""
    depth = {}
    for r in order:
        depth[r] = 0 if parent(r) < 0 else depth[parent(r)] + 1
    top = max(depth.values())
    for level in range(top, 0, -1):
        for r in order:
            if depth[r] == level:
                b.send(r, parent(r), chunks)
        b.next_step()
    for level in range(1, top + 1):
        for r in order:
            if depth[r] == level:
                b.send(parent(r), r, chunks, reduce=False)
        b.next_step()


def _only_all_reduce(b: Builder, name: str) -> None:
    if b.collective != "all-reduce":
        raise ConfigError(f"{name} is an all-reduce algorithm (use ring or direct for {b.collective})")


def binary_tree(b: Builder) -> None:
    _only_all_reduce(b, "binary-tree")
    _tree_all_reduce(b, lambda r: (r - 1) // 2 if r else -1, range(b.p), tuple(range(b.chunk_count)))


def double_binary_tree(b: Builder) -> None:
    """Two trees, each reducing half of the buffer: the second is the first mirrored (rank r in
    place of p-1-r), so the first tree's inner ranks are the second's leaves."""
    _only_all_reduce(b, "double-binary-tree")
    p, half = b.p, b.chunk_count // 2
    step0 = b.step
    _tree_all_reduce(b, lambda r: (r - 1) // 2 if r else -1, range(p), tuple(range(half)))
    b.step = step0

    def mirrored(r: int) -> int:
        m = p - 1 - r
        return -1 if m == 0 else p - 1 - (m - 1) // 2

    _tree_all_reduce(b, mirrored, [p - 1 - m for m in range(p)], tuple(range(half, b.chunk_count)))


def hierarchical_2d(b: Builder, dims: Optional[tuple[int, int]] = None) -> None:
    """Rows of `a` ranks (rank = row * a + column): reduce-scatter along rows, all-reduce down each
    column on the piece its position owns, all-gather along rows."""
    p = b.p
    a, rows = dims or _square(p)
    if a * rows != p or a < 2 or rows < 2:
        raise ConfigError(f"hierarchical-2d needs ranks = columns x rows with both >= 2 (got {p} as {a} x {rows})")
    per = b.chunk_count // a
    col_pieces = [tuple(range(j * per, (j + 1) * per)) for j in range(a)]
    row_members = [[i * a + j for j in range(a)] for i in range(rows)]
    reduce = b.collective in ("all-reduce", "reduce-scatter")
    if b.collective == "all-to-all":
        raise ConfigError("hierarchical-2d has no all-to-all (use ring or direct)")
    if b.collective != "all-reduce":
        raise ConfigError("hierarchical-2d is an all-reduce algorithm (use ring or direct for the others)")
    start = b.step
    for members in row_members:
        b.step = start
        ring_reduce_scatter(b, members, col_pieces, reduce=reduce)
    mid = b.step
    for j in range(a):
        b.step = mid
        column = [i * a + j for i in range(rows)]
        piece = col_pieces[j]
        k = len(piece) // rows
        sub = [piece[i * k : (i + 1) * k] for i in range(rows)]
        ring_reduce_scatter(b, column, sub)
        ring_all_gather(b, column, sub)
    end = b.step
    for members in row_members:
        b.step = end
        ring_all_gather(b, members, col_pieces)


def _square(p: int) -> tuple[int, int]:
    a = int(math.isqrt(p))
    while a > 1 and p % a:
        a -= 1
    return (p // a, a)


def chunk_count(algorithm: str, collective: str, p: int, dims: Optional[tuple[int, int]] = None) -> int:
    if collective == "all-to-all":
        return p * p
    if algorithm == "double-binary-tree":
        return p * 2 if p % 2 else p
    return p


def generate(
    algorithm: str,
    ranks: int,
    collective: str = "all-reduce",
    size: int = 1 << 20,
    reduce_us: int = 0,
    dims: Optional[tuple[int, int]] = None,
) -> Algorithm:
    """One of ALGORITHMS for `ranks` members moving a `size`-byte buffer."""
    if algorithm not in ALGORITHMS:
        raise ConfigError(f"unknown algorithm {algorithm!r} (use {', '.join(ALGORITHMS)})")
    c = chunk_count(algorithm, collective, ranks, dims)
    b = Builder(collective, ranks, c, size if collective != "all-to-all" else size * ranks, reduce_us)
    if collective == "all-to-all":
        b.chunk_bytes = max(1, size // ranks)  # size = each rank's buffer, one piece per peer
    if size < (ranks if collective == "all-to-all" else c):
        raise ConfigError(f"{size} B cannot be cut into {c} chunks")
    builders = {
        "ring": ring,
        "direct": direct,
        "halving-doubling": halving_doubling,
        "binary-tree": binary_tree,
        "double-binary-tree": double_binary_tree,
    }
    if algorithm == "hierarchical-2d":
        hierarchical_2d(b, dims)
    else:
        builders[algorithm](b)
    return b.build(f"{algorithm}-{collective}-{ranks}")


def system_line(collective: str, prefix: str) -> str:
    """The system-config entry that makes ASTRA-sim run the algorithm written at `prefix`."""
    return f'"{collective}-implementation-custom": ["{prefix}"]'


# ---- a small YAML description -------------------------------------------------------------------


def from_description(path: Any, size: Optional[int] = None, reduce_us: Optional[int] = None) -> Algorithm:
    """An algorithm described as steps of transfers::

        collective: all-reduce
        ranks: 4
        chunks: 4            # the buffer is cut into this many pieces
        size: 1048576        # bytes of the whole buffer (chunk bytes = size / chunks)
        reduce_us: 0
        steps:
          - [{from: 0, to: 1, chunks: [0]}, {from: 1, to: 0, chunks: [1]}]
          - ...

    A transfer may say `reduce: false` to overwrite instead of summing (all-reduce's second half
    is found on its own: data already reduced over more ranks than the receiver holds replaces).
    """
    where = str(path)
    doc = load_mapping(path, "collective description")
    try:
        collective = str(doc.get("collective", "all-reduce"))
        p = int(doc["ranks"])
        c = int(doc.get("chunks", p))
        total = int(size if size is not None else doc.get("size", 1 << 20))
        us = int(reduce_us if reduce_us is not None else doc.get("reduce_us", 0))
        steps = doc["steps"]
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(
            f"{where}: needs ranks (int), steps (list) and optional collective/chunks/size: {exc}"
        ) from None
    if not isinstance(steps, list):
        raise ConfigError(f"{where}: steps must be a list of lists of transfers")
    b = Builder(collective, p, c, total, us)
    reducing = b.reducing
    held: list[dict[int, int]] = [{} for _ in range(p)]  # for auto reduce/overwrite: chunk -> ranks summed
    for r in range(p):
        for x in range(c):
            held[r][x] = 1
    for s, step in enumerate(steps):
        if not isinstance(step, list):
            raise ConfigError(f"{where}: step {s} must be a list of transfers")
        moves = []
        for t, tr in enumerate(step):
            try:
                src, dst = int(tr["from"]), int(tr["to"])
                chunks = [int(x) for x in tr["chunks"]]
            except (KeyError, TypeError, ValueError):
                raise ConfigError(f"{where}: step {s} transfer {t}: needs from, to and chunks (list of ints)") from None
            if not (0 <= src < p and 0 <= dst < p) or src == dst:
                raise ConfigError(f"{where}: step {s} transfer {t}: from/to must be two different ranks of 0..{p - 1}")
            bad = [x for x in chunks if not 0 <= x < (p * p if collective == "all-to-all" else c)]
            if bad:
                raise ConfigError(f"{where}: step {s} transfer {t}: chunk {bad[0]} out of range")
            red = tr.get("reduce")
            if red is None:
                red = reducing and all(
                    held[dst].get(x, 0) + held[src].get(x, 0) <= p and held[src].get(x, 0) < p for x in chunks
                )
            moves.append((src, dst, chunks, bool(red)))
        for src, dst, chunks, red in moves:
            b.send(src, dst, chunks, reduce=red)
        for src, dst, chunks, red in moves:
            for x in chunks:
                held[dst][x] = held[dst].get(x, 0) + held[src].get(x, 0) if red else held[src].get(x, 0)
        b.next_step()
    return b.build(str(doc.get("name", "described")))

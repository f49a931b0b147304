"""The order in which one rank's collectives meet their group: the rule that the simulator's
rendezvous (`chakra.sim.rendezvous`) and `chakra validate` both apply, so a trace that validate
calls OK is one the simulator can replay on every run and config.

Members meet per (process group, sequence number on that group): every rank must issue a group's
collectives in the same order. A rank issues a group's collectives in whatever order its
dependencies let them start, so two collectives of one group that no dependency path orders may
meet in different orders on different ranks; when they differ (`meet_key`), the rendezvous refuses
the trace on some runs and not on others.
"""

from __future__ import annotations

from collections.abc import Sequence


def meet_key(ctype: int, size: int) -> tuple[int, int]:
    """What must be equal for members' nodes at one position of a group to form one collective."""
    return (ctype, size)


def order_conflicts(
    parents: Sequence[Sequence[int]], order: Sequence[int], colls: dict[int, tuple[str, tuple[int, int]]]
) -> list[tuple[str, int, int]]:
    """Pairs of one rank's collectives whose issue order on their group can differ from run to run.

    `parents`: node index -> parent indices (indices are positions in the file); `order`: the node
    indices in a dependency-respecting order; `colls`: node index -> (process group, `meet_key`)
    of the collectives that rendezvous. Returns (group, earlier, later) node indices, at most one
    pair per group. When none is returned, every run issues each group's collectives in one order
    (up to collectives with equal keys, which are interchangeable).

    A rank issues a collective the moment its last dependency completes (ASTRA-sim and this
    simulator alike: communication waits for no hardware resource). So X is issued before Y on
    every run when a dependency path leads from X to Y, and also when every dependency of X is an
    ancestor of Y (X is ready no later than Y) and X comes first in the file (same-instant nodes
    are issued in file order, which the cross-rank check compares): siblings released by the same
    node, or a layer's gradient all-reduce and the next layer's, hanging off one compute chain.
    Any other pair of a group with different keys can be issued either way round.
    """
    gates = {p for c in colls for p in parents[c]}
    bit = {i: 1 << k for k, i in enumerate(c for c in order if c in colls or c in gates)}
    at = {b: i for i, b in bit.items()}
    anc: list[int] = [0] * len(parents)  # bit mask of the collectives and gates each node follows
    seen: dict[str, int] = {}  # group -> mask of its collectives so far
    same: dict[tuple[str, tuple[int, int]], int] = {}  # (group, key) -> mask of those collectives
    out: dict[str, tuple[str, int, int]] = {}

    def gate_mask(i: int) -> int:
        m = 0
        for p in parents[i]:
            m |= bit[p]
        return m

    for i in order:
        ps = parents[i]
        if len(ps) == 1:  # the common case keeps the parent's int (no new object per node)
            p = ps[0]
            m = anc[p] | bit[p] if p in bit else anc[p]
        else:
            m = 0
            for p in ps:
                m |= anc[p] | bit.get(p, 0)
        anc[i] = m
        c = colls.get(i)
        if c is None:
            continue
        pg = c[0]
        open_ = seen.get(pg, 0) & ~same.get(c, 0) & ~m
        if open_ and pg not in out:
            while open_:
                b = open_ & -open_
                open_ ^= b
                x = at[b]
                first, then = (x, i) if x < i else (i, x)
                if gate_mask(first) & ~anc[then] == 0:
                    continue  # `first` is ready no later than `then` and wins the tie: one order
                out[pg] = (pg, x, i)
                break
        seen[pg] = seen.get(pg, 0) | bit[i]
        same[c] = same.get(c, 0) | bit[i]
    return list(out.values())

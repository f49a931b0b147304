"""Collective rendezvous: which members' nodes form one collective, and when each member finishes.

Members meet per (process group, sequence number on that group): every rank must issue a group's
collectives in the same order (ASTRA-sim matches them by stream tag, which counts the same way); a
different type or size at the same position is an error naming both nodes.

The rule is shared with `chakra validate` (`meet_key`, `order_conflicts`): a rank issues a group's
collectives in whatever order its dependencies let them start, so two collectives of one group
that no dependency path orders may meet in different orders on different ranks; when they differ
(`meet_key`), the rendezvous refuses the trace on some runs and configs and not on others.

Two modes, chosen per simulation:

- isolated (default): when the last member issues, the collective model gives every member's
  finish time from every member's own issue time, and the completions are booked at once. The
  model memoises by shape and arrival offsets, so data-parallel steps cost one computation.
- live (congestion-aware network with point-to-point traffic or several process groups, or the
  rendezvous protocol): each member starts its part on the shared clock the moment it issues, and
  its messages queue on the same links as everything else.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chakra.schema import collective_name
from chakra.sim.core import Clock, SimDeadlock
from chakra.sim.messages import Messenger


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


class Rendezvous:
    __slots__ = ("engines", "model", "clock", "messenger", "live", "pending")

    def __init__(self, engines: list, model: Any, clock: Clock, messenger: Messenger, live: bool) -> None:
        self.engines = engines
        self.model = model
        self.clock = clock
        self.messenger = messenger
        self.live = live
        # (pg, seq) -> [type, size, [(rank, row), ...], live run or None, members finished, members]
        self.pending: dict[tuple, list] = {}

    def join(self, r: int, x: int) -> None:
        """Rank r issues its collective node x now."""
        e = self.engines[r]
        ctype, size, pg, members, inv = e.info[x]
        sq = e.coll_seq.get(pg, 0)
        e.coll_seq[pg] = sq + 1
        key = (pg, sq)
        p = self.pending.get(key)
        if p is None:
            run = None
            if self.live:
                run = self.model.live(ctype, size, members, inv, self.clock, self.messenger, key, self._finisher(key))
            p = self.pending[key] = [ctype, size, [], run, 0, members]
        elif meet_key(p[0], p[1]) != meet_key(ctype, size):
            r0, x0 = p[2][0]
            raise SimDeadlock(
                f"collective #{sq} on process group {pg or 'all'!r} does not match: rank {r0} node "
                f"{int(self.engines[r0].ids[x0])} is {collective_name(p[0])} {p[1]} B, rank {r} node "
                f"{int(e.ids[x])} is {collective_name(ctype)} {size} B (every rank must issue a group's "
                "collectives in the same order)"
            )
        p[2].append((r, x))
        if self.live:
            if p[3] is None:  # nothing to run on: ASTRA-sim never finishes it; 0 ns here
                self._finisher(key)(r)
            else:
                p[3].issue(r)
            return
        if len(p[2]) == len(members):
            del self.pending[key]
            rows = dict(p[2])
            starts = [self.engines[m].start[rows[m]] for m in members]
            for m, done in zip(members, self.model.finish(ctype, size, members, inv, starts)):
                self.clock.schedule(done, m, rows[m])

    def _finisher(self, key: tuple) -> Any:
        def finished(rank: int) -> None:
            p = self.pending[key]
            row = next(x for r, x in p[2] if r == rank)
            self.clock.schedule(self.clock.now, rank, row)
            p[4] += 1
            if p[4] == len(p[5]):
                del self.pending[key]

        return finished

    def waiting(self, limit: int = 4) -> list[str]:
        """Deadlock report lines: collectives some members never reached."""
        out = []
        for (pg, sq), p in list(self.pending.items()):
            ctype, _size, arrivals = p[0], p[1], p[2]
            if not arrivals:
                continue
            r0, x0 = arrivals[0]
            members = self.engines[r0].info[x0][3]
            here = sorted(r for r, _ in arrivals)
            missing = [m for m in members if m not in here]
            if not missing:
                continue
            nodes = ", ".join(f"rank {r} node {int(self.engines[r].ids[x])}" for r, x in arrivals[:3])
            out.append(
                f"{collective_name(ctype)} #{sq} on group {pg or 'all'!r}: {nodes} wait(s) for rank(s) "
                f"{missing[:8]}{'...' if len(missing) > 8 else ''}"
            )
            if len(out) >= limit:
                break
        return out

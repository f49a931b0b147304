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

from typing import Any

from chakra.collective_order import meet_key
from chakra.schema import collective_name
from chakra.sim.core import Clock, SimDeadlock
from chakra.sim.fold import FoldRefused
from chakra.sim.messages import Messenger


def _what(ctype: int, size: int, per_peer: bool) -> str:
    return f"{collective_name(ctype)} " + ("with per-peer sizes" if per_peer else f"{size} B")


class Rendezvous:
    __slots__ = (
        "engines",
        "model",
        "clock",
        "messenger",
        "live",
        "pending",
        "takes_peers",
        "takes_issue_order",
        "fold",
        "verified",
    )

    def __init__(self, engines: list, model: Any, clock: Clock, messenger: Messenger, live: bool) -> None:
        self.engines = engines
        self.model = model
        self.clock = clock
        self.messenger = messenger
        self.live = live
        # (pg, seq) -> [type, size, [(rank, row), ...], live run or None, members finished, members,
        # rank -> (send, receive) byte lists of an all-to-all with per-peer sizes, else None]
        self.pending: dict[tuple, list] = {}
        # what the collective model understands (a caller's model may not)
        self.takes_peers = bool(getattr(model, "takes_peers", False))
        self.takes_issue_order = bool(getattr(model, "takes_issue_order", False))
        self.fold: Any = None  # a chakra.sim.fold.Fold when only one slice of the ranks runs
        self.verified: set[tuple] = set()  # folded local collectives whose copies were computed once

    def join(self, r: int, x: int) -> None:
        """Rank r issues its collective node x now."""
        e = self.engines[r]
        ctype, size, pg, members, inv = e.info[x]
        if self.fold is not None and members in self.fold.replica:
            self._join_replica(r, x, ctype, size, members, inv)
            return
        # an all-to-all with per-peer sizes: members' totals differ, their byte lists say it all
        lists = e.peers.get(x) if self.takes_peers else None
        sq = e.coll_seq.get(pg, 0)
        e.coll_seq[pg] = sq + 1
        key = (pg, sq)
        p = self.pending.get(key)
        if p is None:
            run = None
            peers: Any = {} if lists is not None else None
            if self.live:
                more = {"peers": peers} if peers is not None else {}
                run = self.model.live(
                    ctype, size, members, inv, self.clock, self.messenger, key, self._finisher(key), **more
                )
            p = self.pending[key] = [ctype, size, [], run, 0, members, peers]
            if self.messenger.traffic is not None:
                self.messenger.traffic.collective(key, ctype, size, int(e.ids[x]), len(members))
        elif p[0] == ctype and p[1] == size and (p[6] is None) == (lists is None):
            pass  # the same type and size as the first member's: one collective (the common case)
        elif meet_key(p[0], -1 if p[6] is not None else p[1]) != meet_key(ctype, -1 if lists is not None else size):
            r0, x0 = p[2][0]
            raise SimDeadlock(
                f"collective #{sq} on process group {pg or 'all'!r} does not match: rank {r0} node "
                f"{int(self.engines[r0].ids[x0])} is {_what(p[0], p[1], p[6] is not None)}, rank {r} node "
                f"{int(e.ids[x])} is {_what(ctype, size, lists is not None)} (every rank must issue a group's "
                "collectives in the same order)"
            )
        elif (p[6] is None) != (lists is None):
            r0, x0 = p[2][0]
            raise SimDeadlock(
                f"all-to-all #{sq} on process group {pg or 'all'!r}: rank {r0} node {int(self.engines[r0].ids[x0])} "
                f"{'has' if p[6] is not None else 'has no'} per-peer sizes, rank {r} node {int(e.ids[x])} "
                f"{'has' if lists is not None else 'has no'} (members must agree)"
            )
        if lists is not None:
            p[6][r] = lists
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
            more = {"peers": tuple(p[6][m] for m in members)} if p[6] is not None else {}
            issued = [r for r, _ in p[2]]
            held = self.model.held(members, starts) if self.fold is not None else ()
            ends, order = self._finish(ctype, size, members, inv, starts, issued, **more)
            if self.fold is not None:
                self._check_copies(ctype, size, members, inv, starts, issued, held, ends, order)
            schedule = self.clock.schedule
            for i in sorted(order, key=ends.__getitem__):
                m = members[i]
                schedule(ends[i], m, rows[m])

    def _finish(
        self, ctype: int, size: int, members: tuple, inv: Any, starts: list, issued: list, **more: Any
    ) -> tuple[list[int], Any]:
        """Every member's finish from the model, and the order in which members ending at the
        same ns complete (the model's, when it gives one; else the members' order)."""
        if self.takes_issue_order:
            ends = self.model.finish(ctype, size, members, inv, starts, issued=issued, **more)
        else:
            ends = self.model.finish(ctype, size, members, inv, starts, **more)
        order = getattr(self.model, "finish_order", ())
        return ends, order if len(order) == len(members) else range(len(members))

    # -- a folded run (chakra.sim.fold): slice 0 runs, every entry standing for its copies --
    def _join_replica(self, r: int, x: int, ctype: int, size: int, members: tuple, inv: Any) -> None:
        """Rank r's copies join their replica group, each when its own copy of this entry runs
        (`FoldedClock.burst`); the last one to join computes every member's finish, as the full
        run's last joiner would, and books them all in the model's order."""
        clock = self.clock
        model = self.model

        def last_joined(copies: list) -> None:
            starts = [clock.now] * len(members)
            ends, order = self._finish(ctype, size, members, inv, starts, [members[k] for k in copies])
            if len(set(ends)) != 1:
                raise FoldRefused("a replica group's members would end at different ns")
            if model.alternates_trees:
                raise FoldRefused("double-binary trees alternate across every rank's collectives")
            clock.put_burst(ends[0], r, x, order)  # type: ignore[attr-defined]

        clock.burst(last_joined)  # type: ignore[attr-defined]

    def _check_copies(
        self,
        ctype: int,
        size: int,
        members: tuple,
        inv: Any,
        starts: list,
        issued: list,
        held: tuple,
        ends: list,
        order: Any,
    ) -> None:
        """A slice-0 group's collective stands for its shifted copies: the model must give them
        the same finishes (computed once per distinct call); their per-rank model state follows."""
        fold = self.fold
        model = self.model
        if model.alternates_trees:
            raise FoldRefused("double-binary trees alternate across every rank's collectives")
        key = (ctype, size, members, inv, tuple(s - starts[0] for s in starts), tuple(issued), held)
        if key not in self.verified:
            for k in range(1, fold.copies):
                off = k * fold.stride
                got, got_order = self._finish(
                    ctype, size, fold.shifted(members, k), inv, starts, [m + off for m in issued]
                )
                if got != ends or tuple(got_order) != tuple(order):
                    raise FoldRefused("the collective model answers a shifted group differently")
            self.verified.add(key)
            return
        for k in range(1, fold.copies):
            model.copy_rank_state(members, k * fold.stride)

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

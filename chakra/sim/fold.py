"""Folding replica ranks: one slice of the ranks simulated, each entry standing for its copies.

Data-parallel ranks (and often the ranks of one tensor-parallel group) run one trace: rank `m` is
copy `k = (m // stride) % copies` of the slice rank `m - k * stride`. `find_fold` takes that as
given only where the compiled ranks say so: the same nodes and times, point-to-point peers
shifted by `k * stride` (and as far apart on the network), every process group either the shifted
copy of a slice group ("local") or a slice rank's orbit `(r, r + stride, ...)` ("replica": a
data-parallel gradient all-reduce); and only with the built-in models on the congestion-unaware
backend with isolated collectives.

Exact to the ns takes more than equal timelines: the order in which a rank's same-ns entries run
decides its issue loop, and ASTRA-sim's order is the order of booking. So the full run's queue is
kept entry for entry: its entry `(rank, payload)` is `(slice rank, payload, copy, record)` here,
in the same place. The first copy of an entry to come up runs for real, as that copy, and records
what it books; the others replay those bookings as their own, in their own places (a few list
operations instead of the node's processing). That is the full run's queue because every booking
is made by the entry being processed, so a copy's entries keep one order in every copy (and the
first copies of two entries come up in that order too, so the joins and messages run for real
meet as in each copy's own run). The exception: a replica group's completions are booked by its
last member to join, for every copy at once, in the model's order; here too, when the last copy
of the joining entry comes up, the model computing every member's finish from the copies' join
order.

Where that exception could give copies different orders, the fold is refused (`FoldRefused`) and
every rank runs: a replica completion booked in the same time step and for the same ns as any
other entry. So are a replica group whose members would end at different ns, a slice group whose
shifted copy the collective model answers differently (checked once per distinct call), trees
that alternate across all ranks' collectives, unmatched messages and deadlocks (the full run
words them). `docs/simulator.md` ("Folding replica ranks") has the figures.
"""

from __future__ import annotations

import heapq
from typing import Any, Optional

from chakra.sim.compiler import K_COLL, K_MEM, K_RECV, K_SEND, RankEngine
from chakra.sim.core import Clock


class FoldRefused(Exception):
    """The folded run cannot stand for the full one: run every rank."""


class Fold:
    """Rank `m` is copy `k = (m // stride) % copies` of `m - k * stride`, a rank of the slice (k = 0)."""

    __slots__ = ("stride", "copies", "replica", "reps", "expect")

    def __init__(self, n: int, stride: int, copies: int) -> None:
        self.stride = stride
        self.copies = copies
        self.replica: set[tuple[int, ...]] = set()  # member tuples of the replica groups (orbits)
        self.reps = [m for m in range(n) if not (m // stride) % copies]
        self.expect: dict[tuple, tuple] = {}  # (slice group, copy) -> its copy's members (() if not one)

    def copy_of(self, m: int) -> int:
        return (m // self.stride) % self.copies

    def orbit(self, rep: int) -> tuple[int, ...]:
        """A slice rank and its copies, in copy order (empty for a rank that is a copy)."""
        if self.copy_of(rep):
            return ()
        return tuple(range(rep, rep + self.stride * self.copies, self.stride))

    def shifted(self, members: tuple[int, ...], k: int) -> tuple[int, ...]:
        off = k * self.stride
        return tuple(m + off for m in members)


def find_fold(engines: list[RankEngine], net: Any, colls: Any) -> Optional[Fold]:
    """The widest fold the ranks allow, or None. Candidates come from the process groups whose
    members are evenly spaced (a data-parallel group: rank r and its copies, `stride` apart).

    Only the built-in collective model on the congestion-unaware network, without custom
    algorithms or a shared memory bus, without memory nodes or per-peer all-to-alls: everything
    else either sees the ranks' own numbers or runs on the main clock."""
    from chakra.sim.collective_run import CollectiveRunner
    from chakra.sim.network import Network

    n = len(engines)
    if (
        n < 2
        or type(colls) is not CollectiveRunner
        or type(net) is not Network
        or net.aware
        or colls.loggp is not None
        or colls.sys.custom_implementation
        or colls.rendezvous
        or any(e.peers or K_MEM in e.kind for e in engines)
    ):
        return None
    groups: set[tuple[int, ...]] = set()
    seen_info: set[int] = set()
    for e in engines:
        if id(e.info) in seen_info:
            continue
        seen_info.add(id(e.info))
        groups.update(item[3] for row, item in e.info.items() if e.kind[row] == K_COLL)
    candidates = set()
    for members in groups:
        size = len(members)
        if size < 2 or n % size:
            continue
        stride = members[1] - members[0]
        if (
            stride > 0
            and not n % (stride * size)
            and members == tuple(range(members[0], members[0] + stride * size, stride))
        ):
            candidates.add((size, stride))
    for copies, stride in sorted(candidates, reverse=True)[:_CANDIDATES]:
        fold = _fold_of(engines, net, stride, copies)
        if fold is not None:
            return fold
    return None


_CANDIDATES = 4  # spacings tried, most copies first: a mismatch shows within a few ranks


def _fold_of(engines: list[RankEngine], net: Any, stride: int, copies: int) -> Optional[Fold]:
    fold = Fold(len(engines), stride, copies)
    for r in fold.reps:
        rep = engines[r]
        for k in range(1, copies):
            if not _copy_of(rep, engines[r + k * stride], k, fold):
                return None
    # a message between copies must take as long as the representative's
    for r in fold.reps:
        e = engines[r]
        for row, item in e.info.items():
            if e.kind[row] == K_SEND:
                peer, _tag, nbytes = item
                base = net.p2p_time(r, peer, nbytes)
                for k in range(1, copies):
                    off = k * stride
                    if net.p2p_time(r + off, peer + off, nbytes) != base:
                        return None
    return fold


def _copy_of(rep: RankEngine, other: RankEngine, k: int, fold: Fold) -> bool:
    """Whether `other` runs `rep`'s trace as its copy k (see module doc)."""
    if other.n != rep.n or other.gpu_sum != rep.gpu_sum or other.replayed != rep.replayed:
        return False
    for name in ("kind", "slot", "delay", "ptr", "cidx", "ids"):
        a, b = getattr(rep, name), getattr(other, name)
        if a is not b and not _same_array(a, b):
            return False
    if rep.static[0] != other.static[0] or rep.static[2] != other.static[2]:
        return False
    off = k * fold.stride
    if rep.info is not other.info and rep.info.keys() != other.info.keys():
        return False
    kind = rep.kind
    copy_of = fold.copy_of
    expect = fold.expect
    other_info = other.info
    for row, item in rep.info.items():
        got = other_info[row]
        if got == item:  # a replica group's row, or a row without peers
            if kind[row] == K_COLL and item[3] not in fold.replica:
                if item[3] != fold.orbit(item[3][0]):
                    return False
                fold.replica.add(item[3])
            elif kind[row] in (K_SEND, K_RECV):
                return False  # a peer that is not shifted
            continue
        code = kind[row]
        if code == K_COLL:  # a slice group's copy: the same collective, the members shifted
            members = item[3]
            key = (members, k)
            shifted = expect.get(key)
            if shifted is None:
                local = not any(copy_of(m) for m in members)
                shifted = expect[key] = fold.shifted(members, k) if local else ()
            if not shifted or got[3] != shifted or got[0] != item[0] or got[1] != item[1] or got[4] != item[4]:
                return False
        elif code in (K_SEND, K_RECV):
            peer, tag, nbytes = item
            if copy_of(peer) or got != (peer + off, tag, nbytes):
                return False
        else:
            return False
    return True


def _same_array(a: Any, b: Any) -> bool:
    if len(a) != len(b):
        return False
    try:
        return bool((a == b).all()) if hasattr(a, "all") else a == b
    except (TypeError, ValueError):
        return False


def expand(engines: list[RankEngine], fold: Fold) -> None:
    """Give every copy its representative's times (the arrays are shared: read-only from here)."""
    for m, e in enumerate(engines):
        k = fold.copy_of(m)
        if k:
            rep = engines[m - k * fold.stride]
            e.start = rep.start
            e.end = rep.end
            e.remaining = rep.remaining


class FoldedClock(Clock):
    """The clock of a folded run: entries are `(rank, payload, copy, record)`, `rank` a slice
    rank; `record` = [what the entry books, in order; the copies processed so far, in order],
    shared by the entry's copies (see module doc).

    The first copy of an entry to come up runs for real, as that copy (its bookings are that
    copy's); the others replay its bookings as their own. The first copies of two entries come up
    in the order every copy sees those entries (a copy's entries keep one order in every copy), so
    the joins and messages run for real meet in the order of each copy's own run."""

    __slots__ = ("fold", "record", "copy", "burst_at", "plain_at")

    def __init__(self, fold: Fold) -> None:
        super().__init__()
        self.fold = fold
        self.record: list = [[], []]  # of the entry running for real
        self.copy = 0  # the copy it runs as
        self.burst_at: set[int] = set()  # target times of this time step's bookings: bursts
        self.plain_at: set[int] = set()  # and everything else

    def kick(self, n: int) -> None:
        """Every rank's issue loop at 0, in rank order as the full run books them: each rank as
        its copy of its slice rank."""
        fold = self.fold
        records: dict[int, list] = {}
        due = []
        for m in range(n):
            k = fold.copy_of(m)
            rep = m - k * fold.stride
            due.append((rep, -1, k, records.setdefault(rep, [[], []])))
        self.due[0] = due
        heapq.heappush(self.heap, 0)

    def _put(self, time: int, entry: tuple) -> None:
        entries = self.due.get(time)
        if entries is None:
            self.due[time] = [entry]
            heapq.heappush(self.heap, time)
        else:
            entries.append(entry)

    def _book(self, time: int, rank: int, payload: Any) -> None:
        record: list = [[], []]
        self._put(time, (rank, payload, self.copy, record))
        self.record[0].append((0, time, rank, payload, record))
        self.plain_at.add(time)

    def complete_at_rank(self, rank: int, time: int, row: int) -> None:
        key = (rank, time, self.copy)
        batch = self.batches.get(key)  # type: ignore[call-overload]
        if batch is not None:
            batch.append(row)
            self.record[0].append((1, rank, time, row))
            return
        self.batches[key] = []  # type: ignore[index]
        self._book(time, rank, -2 - row)

    def at_rank(self, rank: int, delay: int, fn: Any, arg: Any = None) -> None:
        raise FoldRefused("per-rank batches of callbacks")  # memory and live collectives only

    def burst(self, fn: Any) -> None:
        """A replica group joined by the entry running: `fn(copies in the order they joined)`
        books every member's completion when the entry's last copy has joined."""
        self.record[0].append((2, fn))

    def put_burst(self, time: int, rank: int, row: int, copies: Any) -> None:
        """Book the completion of `rank`'s node `row` at `time` for each copy, in that order."""
        record: list = [[], []]
        for k in copies:
            self._put(time, (rank, row, k, record))
        self.burst_at.add(time)

    def _replay(self, acts: list, k: int, seen: list) -> None:
        for act in acts:
            tag = act[0]
            if tag == 0:
                _, time, rank, payload, record = act
                self._put(time, (rank, payload, k, record))
                if rank >= 0 and payload < -1:
                    self.batches[(rank, time, k)] = []  # type: ignore[index]
                self.plain_at.add(time)
            elif tag == 1:
                batch = self.batches.get((act[1], act[2], k))  # type: ignore[call-overload]
                if batch is None:
                    raise FoldRefused("a copy's batch differs from its representative's")
                batch.append(act[3])
            elif len(seen) == self.fold.copies:
                act[1](seen)

    def run(self, on_node: Any = None) -> None:
        self.on_node = on_node
        heap = self.heap
        while heap:
            self._run_time(heap[0])
            if self.burst_at:
                if not self.burst_at.isdisjoint(self.plain_at):
                    raise FoldRefused("a replica completion shares its ns with an entry booked with it")
                self.burst_at.clear()
            self.plain_at.clear()

    def _run_time(self, t: int) -> None:
        # `_replay` and `_put` inline for the bookings of kind 0 (nearly all): about 100,000 copies
        # of entries replay at 1,024 ranks, and two calls each were most of the run
        on_node = self.on_node
        batches = self.batches
        heap = self.heap
        due = self.due
        plain_at = self.plain_at
        copies = self.fold.copies
        self.now = t
        entries = due[t]
        i = 0
        while i < len(entries):
            r, payload, k, record = entries[i]
            i += 1
            seen = record[1]
            seen.append(k)
            if len(seen) > 1:
                for act in record[0]:
                    if act[0] == 0:
                        _, time, rank, pay, rec = act
                        booked = due.get(time)
                        if booked is None:
                            due[time] = [(rank, pay, k, rec)]
                            heapq.heappush(heap, time)
                        else:
                            booked.append((rank, pay, k, rec))
                        if rank >= 0 and pay < -1:
                            batches[(rank, time, k)] = []  # type: ignore[index]
                        plain_at.add(time)
                    else:
                        self._replay((act,), k, seen)
                if len(seen) == copies:
                    record[0] = ()  # every copy has booked what it books
                if r >= 0 and payload < -1:
                    del batches[(r, t, k)]  # type: ignore[arg-type]
            else:
                self.record = record
                self.copy = k
                if r < 0:
                    payload[0](payload[1])
                elif payload >= -1:
                    on_node(t, r, payload)  # type: ignore[misc]
                else:
                    on_node(t, r, -2 - payload)  # type: ignore[misc]
                    key = (r, t, k)
                    rows = batches[key]  # type: ignore[index]
                    j = 0
                    while j < len(rows):  # rows joining while these run run too
                        on_node(t, r, rows[j])  # type: ignore[misc]
                        j += 1
                    del batches[key]  # type: ignore[arg-type]
            if heap[0] != t:
                while heap[0] != t:
                    self._run_time(heap[0])
                self.now = t
        heapq.heappop(heap)
        del due[t]

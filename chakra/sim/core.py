"""The simulator's core: one integer-ns clock and its event queue.

Everything that happens later is an entry `(rank, payload)` booked for a time; entries run in time
order, and those of one time in the order they were booked (as ASTRA-sim's event queue, whose
same-time entries run first come first). Two kinds of entries:

- node completions, `rank >= 0` and `payload` = the node's row in that rank's compiled trace
  (-1: no node, only the rank's issue loop): plain tuples of ints, no per-event objects (the hot
  path; `run` hands them to `on_node`); a payload `-2 - row` opens that rank's batch for the time
  (see `at_rank`) with that node;
- callbacks, `rank == -1` and `payload` = `(fn, arg)`: `fn(arg)` runs at that time (collective
  packets, memory-bus hops, messages crossing links).

`schedule` books a completion, `at` a callback; `run` runs entries until none is left. The same
clock drives a whole simulation and, on its own, one isolated collective.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any, Optional

from chakra.errors import ChakraError

OnNode = Callable[[int, int, int], None]  # (time, rank, row)


class SimDeadlock(ChakraError):
    """The event queue ran dry with nodes left: names who waits on what."""


class Clock:
    """Entries are kept per time: `heap` holds each pending time once, `due[time]` that time's
    entries in booking order, so the heap compares plain ints and steps once per time, not once
    per entry. Lockstep ranks finish together: a 1,024-rank 3-D step books about 100,000 entries
    on fewer than 700 distinct times."""

    __slots__ = ("heap", "due", "now", "batches", "on_node")

    def __init__(self) -> None:
        self.heap: list[int] = []
        self.due: dict[int, list[tuple[int, Any]]] = {}  # time -> [(rank, payload), ...]
        self.now = 0
        self.batches: dict[tuple[int, int], list] = {}
        self.on_node: Optional[OnNode] = None

    def _book(self, time: int, rank: int, payload: Any) -> None:
        entries = self.due.get(time)
        if entries is None:
            self.due[time] = [(rank, payload)]
            heapq.heappush(self.heap, time)
        else:
            entries.append((rank, payload))

    def schedule(self, time: int, rank: int, row: int) -> None:
        """Node `row` of `rank` completes at `time` (absolute ns, not before now)."""
        self._book(time, rank, row)

    def at(self, delay: int, fn: Callable[[Any], None], arg: Any = None) -> None:
        """Run `fn(arg)` `delay` ns from now."""
        self._book(self.now + delay, -1, (fn, arg))

    def at_rank(self, rank: int, delay: int, fn: Callable[[Any], None], arg: Any = None) -> None:
        """Run `fn(arg)` `delay` ns from now in `rank`'s batch for that time. ASTRA-sim's system
        layer keeps one event list per NPU and tick: the first event booked there puts one entry on
        the global queue, and later ones (even ones booked while the list runs) join that list, so
        they run together at the first one's place in the same-time order."""
        key = (rank, self.now + delay)
        batch = self.batches.get(key)
        if batch is not None:
            batch.append((fn, arg))
            return
        self.batches[key] = [(fn, arg)]
        self._book(key[1], -1, (self._run_batch, key))

    def complete_at_rank(self, rank: int, time: int, row: int) -> None:
        """Node `row` of `rank` completes at `time`, booked in the rank's batch for that time (as
        ASTRA-sim books compute and memory completions: see `at_rank`). A new batch's first node is
        the entry itself (row stored as -2 - row): most batches hold one compute completion."""
        key = (rank, time)
        batch = self.batches.get(key)
        if batch is not None:
            batch.append(row)
            return
        self.batches[key] = []  # what joins it later
        self._book(time, rank, -2 - row)

    def _run_batch(self, key: tuple[int, int]) -> None:
        batch = self.batches[key]
        i = 0
        while i < len(batch):  # entries appended while it runs run too
            entry = batch[i]
            if entry.__class__ is int:
                self.on_node(key[1], key[0], entry)  # type: ignore[misc]
            else:
                entry[0](entry[1])
            i += 1
        del self.batches[key]

    def run(self, on_node: Optional[OnNode] = None) -> None:
        """Run entries in (time, booking) order until none is left."""
        self.on_node = on_node
        heap = self.heap
        while heap:
            self._run_time(heap[0])

    def _run_time(self, t: int) -> None:
        """Run the entries of time `t` (the earliest pending), then forget it."""
        on_node = self.on_node
        batches = self.batches
        heap = self.heap
        self.now = t
        entries = self.due[t]
        i = 0
        while i < len(entries):  # entries booked at t while these run join the list
            r, payload = entries[i]
            i += 1
            if r < 0:
                payload[0](payload[1])
            elif payload >= -1:
                on_node(t, r, payload)  # type: ignore[misc]
            else:  # inline: the hot path of compute completions
                on_node(t, r, -2 - payload)  # type: ignore[misc]
                key = (r, t)
                joined = batches.pop(key)
                if joined:  # (rarely) others joined it: they run with the batch still open
                    batches[key] = joined
                    self._run_batch(key)
            if heap[0] != t:  # booked before now (a finish the model dates earlier): that runs first
                while heap[0] != t:
                    self._run_time(heap[0])
                self.now = t
        heapq.heappop(heap)
        del self.due[t]


class Completion:
    """A callback that completes node `row` of `rank` at the clock's now (kept inspectable, so a
    deadlock report can name the node a pending receive belongs to)."""

    __slots__ = ("clock", "rank", "row")

    def __init__(self, clock: Clock, rank: int, row: int) -> None:
        self.clock = clock
        self.rank = rank
        self.row = row

    def __call__(self) -> None:
        c = self.clock
        c._book(c.now, self.rank, self.row)

"""The simulator's core: one integer-ns clock and one event heap.

Everything that happens later is an entry `(time, seq, rank, payload)` on one heap; `seq` is a
global counter, so events at the same time run in the order they were scheduled (as ASTRA-sim's
event queue). Two kinds of entries:

- node completions, `rank >= 0` and `payload` = the node's row in that rank's compiled trace:
  plain tuples of ints, no per-event objects (the hot path; `run` hands them to `on_node`);
- callbacks, `rank == -1` and `payload` = `(fn, arg)`: `fn(arg)` runs at that time (collective
  packets, memory-bus hops, messages crossing links).

`schedule` books a completion, `at` a callback; `step` runs the next entry, `run` until the heap
is empty. The same clock drives a whole simulation and, on its own, one isolated collective.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from itertools import count
from typing import Any, Optional

from chakra.errors import ChakraError

OnNode = Callable[[int, int, int], None]  # (time, rank, row)


class SimDeadlock(ChakraError):
    """The event queue ran dry with nodes left: names who waits on what."""


class Clock:
    __slots__ = ("heap", "now", "nxt", "batches", "on_node")

    def __init__(self) -> None:
        self.heap: list[tuple[int, int, int, Any]] = []
        self.now = 0
        self.nxt = count().__next__
        self.batches: dict[tuple[int, int], list] = {}
        self.on_node: Optional[OnNode] = None

    def schedule(self, time: int, rank: int, row: int) -> None:
        """Node `row` of `rank` completes at `time` (absolute ns, not before now)."""
        heapq.heappush(self.heap, (time, self.nxt(), rank, row))

    def at(self, delay: int, fn: Callable[[Any], None], arg: Any = None) -> None:
        """Run `fn(arg)` `delay` ns from now."""
        heapq.heappush(self.heap, (self.now + delay, self.nxt(), -1, (fn, arg)))

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
        heapq.heappush(self.heap, (key[1], self.nxt(), -1, (self._run_batch, key)))

    def complete_at_rank(self, rank: int, time: int, row: int) -> None:
        """Node `row` of `rank` completes at `time`, booked in the rank's batch for that time (as
        ASTRA-sim books compute and memory completions: see `at_rank`)."""
        key = (rank, time)
        batch = self.batches.get(key)
        if batch is not None:
            batch.append(row)
            return
        self.batches[key] = [row]
        heapq.heappush(self.heap, (time, self.nxt(), -1, (self._run_batch, key)))

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

    def step(self, on_node: Optional[OnNode] = None) -> bool:
        """Run the next entry; False when there is none."""
        if not self.heap:
            return False
        t, _, r, payload = heapq.heappop(self.heap)
        self.now = t
        if r < 0:
            payload[0](payload[1])
        elif on_node is not None:
            on_node(t, r, payload)
        return True

    def run(self, on_node: Optional[OnNode] = None) -> None:
        """Run entries in (time, seq) order until the heap is empty."""
        self.on_node = on_node
        heap = self.heap
        pop = heapq.heappop
        while heap:
            t, _, r, payload = pop(heap)
            self.now = t
            if r < 0:
                payload[0](payload[1])
            else:
                on_node(t, r, payload)  # type: ignore[misc]


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
        heapq.heappush(c.heap, (c.now, c.nxt(), self.rank, self.row))

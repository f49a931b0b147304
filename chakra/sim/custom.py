"""Custom collective algorithms (`*-implementation-custom`) run as ASTRA-sim's CustomAlgorithm runs them.

The collective becomes one stream with one phase on the first queue, whatever its size and the
network's dimensions (ASTRA-sim skips chunking for it). Within the phase every member walks its
own algorithm file (`chakra.collective_algorithm`): dependency-free nodes are issued in ascending
id order; a send goes to the network at once (no memory-bus crossing, no endpoint delay) and is
done when its data arrives; a receive is done when its data has arrived and it is posted; a COMP
node is a reduction of `duration_micros` x 1000 ns (1 ns when 0), booked on the member's event
list. When nothing runs and nothing is ready, the member's phase ends.
"""

from __future__ import annotations

from collections.abc import Sequence
from heapq import heappop, heappush
from pathlib import Path
from typing import Any

from chakra.collective_algorithm import COMP, SEND, Algorithm, load
from chakra.errors import ConfigError


class CustomAlg:
    __slots__ = ("run_", "member", "stream", "id", "ops", "children", "waiting", "running", "ready", "real", "final")

    def __init__(self, run: Any, member: Any, stream: Any, alg: Algorithm, position: int, real: Sequence[int]) -> None:
        self.run_ = run
        self.member = member
        self.stream = stream
        self.id = member.rank
        self.final = 0
        self.real = real
        ops = alg.ranks[position]
        self.ops = ops
        index = {op.id: i for i, op in enumerate(ops)}
        self.children: list[list[int]] = [[] for _ in ops]
        self.waiting = [0] * len(ops)
        for i, op in enumerate(ops):
            for d in op.deps:
                j = index.get(d)
                if j is None:
                    raise ConfigError(
                        f"{alg.path}.{position}.et: node {op.id} depends on absent node {d} (ASTRA-sim aborts)"
                    )
                self.children[j].append(i)
                self.waiting[i] += 1
        self.ready: list[tuple[int, int]] = [(op.id, i) for i, op in enumerate(ops) if self.waiting[i] == 0]
        self.ready.sort()
        self.running = 0

    def on_init(self) -> None:
        if not self.ops:
            return  # ASTRA-sim never ends a member with an empty algorithm: it waits forever
        self._issue_ready()

    def _issue_ready(self) -> None:
        ready = self.ready
        while ready:
            _, i = heappop(ready)
            self._issue(i)

    def _issue(self, i: int) -> None:
        op = self.ops[i]
        run = self.run_
        self.running += 1
        if op.kind == COMP:
            run.clock.at_rank(self.id, op.runtime_ns, self._done, i)
            return
        if not 0 <= op.peer < len(self.real):
            raise ConfigError(f"{run.where}: custom algorithm node {op.id} names rank {op.peer} of {len(self.real)}")
        peer = self.real[op.peer]
        if op.kind == SEND:
            key = (run.tag, "custom", self.id, peer, op.tag, op.size)
            run.messenger.send(self.id, peer, op.size, key, lambda: self._done(i))
        else:
            key = (run.tag, "custom", peer, self.id, op.tag, op.size)
            run.messenger.recv(peer, self.id, op.size, key, lambda: self._done(i))

    def _done(self, i: int) -> None:
        self.running -= 1
        for c in self.children[i]:
            self.waiting[c] -= 1
            if self.waiting[c] == 0:
                heappush(self.ready, (self.ops[c].id, c))
        self._issue_ready()
        if self.running == 0 and not self.ready:
            self.run_.phase_done(self.member, self.stream)


class CustomAlgorithms:
    """The algorithm files a run uses, read once per prefix."""

    def __init__(self) -> None:
        self._loaded: dict[tuple[str, int], Algorithm] = {}

    def get(self, prefix: str, members: int) -> Algorithm:
        key = (prefix, members)
        alg = self._loaded.get(key)
        if alg is None:
            alg = self._loaded[key] = load(Path(prefix), members)
        return alg

    def factory(self, prefix: str, members: tuple[int, ...], full: bool) -> Any:
        """(run, member, stream) -> CustomAlg; members are the collective's ranks in group order
        (algorithm rank k is members[k]; in the whole-job group, rank k itself)."""
        alg = self.get(prefix, len(members))
        position = {r: (r if full else k) for k, r in enumerate(members)}
        real = tuple(range(len(members))) if full else members

        def make(run: Any, m: Any, s: Any) -> CustomAlg:
            return CustomAlg(run, m, s, alg, position[m.rank], real)

        return make

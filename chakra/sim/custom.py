"""Custom collective algorithms (`*-implementation-custom`) run as ASTRA-sim's CustomAlgorithm runs them.

The collective becomes one stream with one phase on the first queue, whatever its size and the
network's dimensions (ASTRA-sim skips chunking for it). Within the phase every member walks its
own algorithm file (`chakra.collective_algorithm`): dependency-free nodes are issued in the order
ASTRA-sim's unordered dependency sets hold them (`stdhash`); a send goes to the network at once
(no memory-bus crossing, no endpoint delay) and is done when its data arrives; a receive is done
when its data has arrived and it is posted; a COMP node is a reduction of `duration_micros` x
1000 ns (1 ns when 0), booked on the member's event list. When nothing runs and nothing is
ready, the member's phase ends.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from chakra.collective_algorithm import COMP, SEND, Algorithm, load
from chakra.errors import ConfigError
from chakra.sim.stdhash import StdHashSet


class Resolver:
    """ASTRA-sim's (feeder v3) dependency layer for one member's algorithm file: which nodes are
    free, in the order its unordered containers hold them (`stdhash`)."""

    __slots__ = ("parents", "children", "free")

    def __init__(self, alg: Algorithm, position: int) -> None:
        ops = alg.ranks[position]
        ids = {op.id for op in ops}
        keys = StdHashSet()  # the keys of its child -> parents map, in map order
        parents: dict[int, set[int]] = {}
        children: dict[int, StdHashSet] = {}

        def allocate(nid: int) -> None:
            if nid not in parents:
                keys.insert(nid)
                parents[nid] = set()
                children[nid] = StdHashSet()

        for op in ops:
            allocate(op.id)
            for d in StdHashSet(op.deps):
                if d not in ids:
                    raise ConfigError(
                        f"{alg.path}.{position}.et: node {op.id} depends on absent node {d} (ASTRA-sim aborts)"
                    )
                allocate(d)
                parents[op.id].add(d)
                children[d].insert(op.id)
        self.parents = parents
        self.children = children
        self.free = StdHashSet(k for k in keys if not parents[k])

    def finish(self, nid: int) -> None:
        for c in self.children.pop(nid):
            ps = self.parents[c]
            ps.discard(nid)
            if not ps:
                self.free.insert(c)


class CustomAlg:
    __slots__ = ("run_", "member", "stream", "id", "ops", "deps", "running", "real", "final")

    def __init__(self, run: Any, member: Any, stream: Any, alg: Algorithm, position: int, real: Sequence[int]) -> None:
        self.run_ = run
        self.member = member
        self.stream = stream
        self.id = member.rank
        self.final = 0
        self.real = real
        self.ops = {op.id: op for op in alg.ranks[position]}
        self.deps = Resolver(alg, position)
        self.running = 0

    def on_init(self) -> None:
        self._issue_ready()

    def _issue_ready(self) -> None:
        free = self.deps.free
        for nid in list(free):  # ASTRA-sim walks a copy of the set, taking each node out
            free.erase(nid)
            self._issue(nid)

    def _issue(self, nid: int) -> None:
        op = self.ops[nid]
        run = self.run_
        self.running += 1
        if op.kind == COMP:
            run.clock.at_rank(self.id, op.runtime_ns, self._done, nid)
            return
        if not 0 <= op.peer < len(self.real):
            raise ConfigError(f"{run.where}: custom algorithm node {op.id} names rank {op.peer} of {len(self.real)}")
        peer = self.real[op.peer]
        if peer == self.id:
            raise ConfigError(
                f"{run.where}: custom algorithm: rank {self.id} would {op.kind} node {op.id} to itself (algorithm rank "
                f"{op.peer} is rank {peer}; ASTRA-sim numbers a group's files by sorted rank but maps peers in the "
                "group's listed order) - ASTRA-sim aborts"
            )
        if op.kind == SEND:
            key = (run.tag, "custom", self.id, peer, op.tag, op.size)
            run.messenger.send(self.id, peer, op.size, key, lambda: self._done(nid))
        else:
            key = (run.tag, "custom", peer, self.id, op.tag, op.size)
            run.messenger.recv(peer, self.id, op.size, key, lambda: self._done(nid))

    def _done(self, nid: int) -> None:
        self.running -= 1
        self.deps.finish(nid)
        self._issue_ready()
        if self.running == 0 and not len(self.deps.free):
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
        # ASTRA-sim: a group member reads the file of its position among the *sorted* members,
        # while algorithm rank k is the k-th member in the group's listed order
        ranked = sorted(members)
        position = {r: (r if full else ranked.index(r)) for r in members}
        real = tuple(range(len(members))) if full else members

        def make(run: Any, m: Any, s: Any) -> CustomAlg:
            return CustomAlg(run, m, s, alg, position[m.rank], real)

        return make

"""Collective timing as ASTRA-sim's system layer builds it: chunks, phases, per-dimension algorithms.

A collective of `size` bytes over a group is cut into chunks (`preferred-dataset-splits`); each
chunk walks a list of phases, one per network dimension (hierarchical: e.g. localBWAware all-reduce
= RS(d0) .. RS(d_k-1), AR(d_k), AG(d_k-1) .. AG(d0)); each phase is one 1-D algorithm (ring, direct,
halvingDoubling, doubleBinaryTree) run on that dimension's queue, at most
`active-chunks-per-dimension` chunks at a time, FIFO (docs/astra-sim.md §3.4-3.6).

A phase is a sequence of steps; in a step every member sends one or more messages and then
processes what it received. With ed = endpoint delay and red(m) = 3 * floor(m / local-mem-bw)
(two reads and a write, only on reducing steps), one phase on one chunk takes

    T = ed + sum over steps (net(step) + ed + red)

which is exactly ASTRA-sim's closed forms for rings (e.g. AR: ed + net + (p-1)(ed+red+net) +
(p-2)(ed+net) + ed) and gives 4 x 29,445 = 117,780 ns for the regression case.

Results are cached per (group, type, size): identical collectives across ranks and steps are
computed once. Every member of a group finishes at the same time, `start + T`, where `start` is the
time the last member issued the collective (the engine's rendezvous).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

from chakra.errors import ConfigError
from chakra.schema import CollectiveType
from chakra.sim.config import SystemConfig
from chakra.sim.network import Network

AR, AG, RS, A2A = (
    int(CollectiveType.ALL_REDUCE),
    int(CollectiveType.ALL_GATHER),
    int(CollectiveType.REDUCE_SCATTER),
    int(CollectiveType.ALL_TO_ALL),
)
MODELLED = frozenset({AR, AG, RS, A2A})
_IMPL_KEY = {AR: "all_reduce", AG: "all_gather", RS: "reduce_scatter", A2A: "all_to_all"}
_SUBGROUP_FAST_DELAY = 10  # ASTRA-sim's "Local" logical ring uses a fixed 10-cycle bus delay


@dataclass(frozen=True)
class Step:
    kind: str  # "offset": i -> i+o for each o; "xor": i <-> i^o; "up"/"down": tree level o
    arg: tuple
    size: int
    reduce: bool


def _parse_alg(name: str, p: int) -> tuple[str, int]:
    """('direct', window) etc.; `directN` and `oneDirectN` carry a window size."""
    base = name.rstrip("0123456789")
    window = int(name[len(base) :]) if len(base) < len(name) else 0
    if base.startswith("one"):
        base = base[3].lower() + base[4:]
    return base, window or max(p - 1, 1)


def algorithm_steps(alg: str, coll: int, p: int, data: int, where: str) -> tuple[list[Step], int]:
    """The steps of one phase and the data size leaving it (per member)."""
    base, window = _parse_alg(alg, p)
    if p <= 1:
        return [], data
    if base == "ring":
        if coll == AR:
            m = data // p
            return [Step("offset", (1,), m, i < p - 1) for i in range(2 * (p - 1))], data
        if coll == RS:
            m = data // p
            return [Step("offset", (1,), m, True) for _ in range(p - 1)], m
        if coll == AG:
            return [Step("offset", (1,), data, False) for _ in range(p - 1)], data * p
        m = data // p
        return [Step("offset", (1,), m, False) for _ in range(p * (p - 1) // 2)], data
    if base == "direct":
        offsets = list(range(1, p))
        rounds = [tuple(offsets[i : i + window]) for i in range(0, len(offsets), window)]
        m = data // p
        if coll == AR:
            return [Step("offset", r, m, True) for r in rounds] + [Step("offset", r, m, False) for r in rounds], data
        if coll == RS:
            return [Step("offset", r, m, True) for r in rounds], m
        if coll == AG:
            return [Step("offset", r, data, False) for r in rounds], data * p
        return [Step("offset", r, m, False) for r in rounds], data
    if base == "halvingDoubling":
        if p & (p - 1):
            raise ConfigError(f"{where}: halvingDoubling needs a power-of-two dimension size, got {p}")
        k = p.bit_length() - 1
        if coll == A2A:
            raise ConfigError(f"{where}: halvingDoubling does not implement all-to-all (ASTRA-sim exits too)")
        rs = [Step("xor", (p >> (i + 1),), data >> (i + 1), True) for i in range(k)]
        if coll == RS:
            return rs, data // p
        if coll == AG:
            return [Step("xor", (1 << i,), data << i, False) for i in range(k)], data * p
        ag = [Step("xor", (1 << i,), data >> (k - i), False) for i in range(k)]
        return rs + ag, data
    if base == "doubleBinaryTree":
        if coll != AR:
            raise ConfigError(f"{where}: doubleBinaryTree implements all-reduce only")
        depth = p.bit_length() - 1  # levels below the root in a heap-numbered binary tree
        up = [Step("up", (lvl,), data, True) for lvl in range(depth, 0, -1)]
        down = [Step("down", (lvl,), data, False) for lvl in range(1, depth + 1)]
        return up + down, data
    raise ConfigError(f"{where}: unknown collective algorithm {alg!r}")


def step_messages(step: Step, members: Sequence[int]) -> list[tuple[int, int, int]]:
    p = len(members)
    m = step.size
    if step.kind == "offset":
        return [(members[i], members[(i + o) % p], m) for o in step.arg for i in range(p)]
    if step.kind == "xor":
        o = step.arg[0]
        return [(members[i], members[i ^ o], m) for i in range(p) if (i ^ o) < p]
    lvl = step.arg[0]
    lo, hi = (1 << lvl) - 1, min((1 << (lvl + 1)) - 1, p)
    pairs = [(i, (i - 1) // 2) for i in range(lo, hi)]
    if step.kind == "up":
        return [(members[c], members[par], m) for c, par in pairs]
    return [(members[par], members[c], m) for c, par in pairs]


class CollectiveModel:
    """Durations of collectives for one network + system config; memoised."""

    def __init__(self, net: Network, system: SystemConfig, *, compat: bool = True) -> None:
        self.net = net
        self.sys = system
        self.compat = compat
        self.ed = int(system.endpoint_delay * system.injection_scale)
        self._phase_cache: dict[tuple, int] = {}
        self._coll_cache: dict[tuple, int] = {}
        self._step_cache: dict[tuple, int] = {}
        self.all_ranks = tuple(range(net.cfg.total_npus))
        self._lines = [tuple(k * net.strides[d] for k in range(net.counts[d])) for d in range(len(net.counts))]

    def red(self, m: int) -> int:
        lmbw = self.sys.local_mem_bw
        if lmbw <= 0:
            where = self.sys.path or "<system>"
            raise ConfigError(f"{where}: local-mem-bw must be > 0 for reducing collectives (ASTRA-sim divides by it)")
        return 3 * int(m / lmbw)

    def phase_time(self, alg: str, coll: int, members: tuple[int, ...], data: int, ed: int) -> tuple[int, int]:
        """(time of one chunk through this phase, data size after it)."""
        key = (alg, coll, members, data, ed)
        hit = self._phase_cache.get(key)
        if hit is not None:
            return hit  # type: ignore[return-value]
        steps, out = algorithm_steps(alg, coll, len(members), data, str(self.sys.path or "<system>"))
        t = ed if steps else 0
        for st in steps:
            skey = (st, members)
            net = self._step_cache.get(skey)
            if net is None:
                net = self.net.step_time(step_messages(st, members))
                self._step_cache[skey] = net
            t += net + ed + (self.red(st.size) if st.reduce else 0)
        self._phase_cache[key] = (t, out)  # type: ignore[assignment]
        return t, out

    def phases(
        self, coll: int, members: tuple[int, ...], involved: Optional[Sequence[bool]]
    ) -> list[tuple[object, str, int, tuple[int, ...], int]]:
        """[(queue, algorithm, phase collective, members, endpoint delay)] for one chunk."""
        where = str(self.sys.path or "<system>")
        algs = self.sys.implementation(_IMPL_KEY[coll])
        if not algs:
            raise ConfigError(f"{where}: no {_IMPL_KEY[coll].replace('_', '-')}-implementation in the system config")
        full = len(members) == len(self.all_ranks) and set(members) == set(self.all_ranks)
        if not full:
            # ASTRA-sim: a subgroup always runs a 1-D ring over its member list (docs/astra-sim.md §1.8).
            ed = _SUBGROUP_FAST_DELAY if self.compat else self.ed
            alg = "ring" if self.compat else algs[0]
            return [("sub", alg, coll, members, ed)]
        if algs[0].startswith("one"):
            return [("flat", algs[0], coll, self.all_ranks, self.ed)]
        ndims = len(self.net.counts)
        inv = list(involved) if involved else [True] * 4
        dims = [d for d in range(ndims) if self.net.counts[d] > 1 and d < len(inv) and inv[d]]
        if not dims:
            return []
        if len(algs) < ndims:
            raise ConfigError(
                f"{where}: {_IMPL_KEY[coll].replace('_', '-')}-implementation lists {len(algs)} algorithm(s) "
                f"but the network has {ndims} dimensions"
            )
        line = self._lines

        def ph(d: int, c: int) -> tuple:
            return (d, algs[d], c, line[d], self.ed)

        if coll == AR:
            if self.sys.collective_optimization == "localBWAware" and len(dims) > 1:
                first = [ph(d, RS) for d in dims[:-1]]
                return first + [ph(dims[-1], AR)] + [ph(d, AG) for d in reversed(dims[:-1])]
            return [ph(d, AR) for d in dims]
        if coll == AG:
            return [ph(d, AG) for d in reversed(dims)]
        return [ph(d, coll) for d in dims]

    def duration(
        self, coll: int, size: int, members: tuple[int, ...], involved: Optional[tuple[bool, ...]] = None
    ) -> int:
        """ns from the (last member's) issue to the end of the collective."""
        key = (coll, size, members, involved)
        t = self._coll_cache.get(key)
        if t is None:
            t = self._compute(coll, size, members, involved)
            self._coll_cache[key] = t
        return t

    def _compute(self, coll: int, size: int, members: tuple[int, ...], involved: Optional[tuple[bool, ...]]) -> int:
        phases = self.phases(coll, members, involved)
        if not phases:
            return 0
        splits = self.sys.preferred_dataset_splits
        chunk = size // splits
        if coll != AG and len(members) > chunk:
            chunk = len(members)  # ASTRA-sim inflates tiny collectives to splits x NPUs bytes (docs/astra-sim.md §3.4)
            size = splits * len(members)
        chunk = max(chunk, 1)
        n = max(1, -(-size // chunk))
        sizes = [chunk] * (n - 1) + [max(size - chunk * (n - 1), 1)]
        active = self.sys.active_chunks_per_dimension
        if self.net.aware and active > 1 and n > 1:
            return self._concurrent_aware(phases, sizes, active)
        # Duration of each phase for each distinct chunk size.
        plans: dict[int, list[tuple[object, int]]] = {}
        for c in set(sizes):
            data = c
            plan = []
            for queue, alg, pc, mem, ed in phases:
                t, data = self.phase_time(alg, pc, mem, data, ed)
                plan.append((queue, t))
            plans[c] = plan
        return pipeline([plans[c] for c in sizes], self.sys.active_chunks_per_dimension)

    def _concurrent_aware(self, phases: list, sizes: list[int], active: int) -> int:
        """Congestion-aware chunks that run at the same time on one dimension share its links.

        Chunks walk their phases through the per-dimension FIFO queues as in `pipeline`, but each
        step's messages are booked on links shared by every chunk in flight (step by step, in time
        order), so two active chunks on a Switch queue behind each other on its uplinks.
        """
        where = str(self.sys.path or "<system>")
        plans = []  # per chunk: [(queue, ed, [(messages, reduce delay)])]
        for c in sizes:
            data = c
            plan = []
            for queue, alg, pc, members, ed in phases:
                steps, data_out = algorithm_steps(alg, pc, len(members), data, where)
                plan.append(
                    (
                        queue,
                        ed,
                        [(step_messages(st, members), self.red(st.size) if st.reduce else 0) for st in steps],
                    )
                )
                data = data_out
            plans.append(plan)
        free: dict[tuple, int] = {}
        busy: dict[object, int] = {}
        waiting: dict[object, deque] = {}
        events: list[tuple[int, int, int, int, int]] = []  # (time, seq, chunk, phase, step to inject)
        seq = 0
        end = 0

        def enter(t: int, c: int, k: int) -> None:
            nonlocal seq
            q = plans[c][k][0]
            if busy.get(q, 0) < active:
                busy[q] = busy.get(q, 0) + 1
                steps = plans[c][k][2]
                heapq.heappush(events, (t + (plans[c][k][1] if steps else 0), seq, c, k, 0))
                seq += 1
            else:
                waiting.setdefault(q, deque()).append((c, k))

        for c in range(len(plans)):
            enter(0, c, 0)
        while events:
            t, _, c, k, j = heapq.heappop(events)
            q, ed, steps = plans[c][k]
            if j < len(steps):
                msgs, red = steps[j]
                arrival = self.net.reserve(msgs, t, free)
                heapq.heappush(events, (arrival + ed + red, seq, c, k, j + 1))
                seq += 1
                continue
            end = max(end, t)
            busy[q] -= 1
            wq = waiting.get(q)
            if wq:
                c2, k2 = wq.popleft()
                enter(t, c2, k2)
            if k + 1 < len(plans[c]):
                enter(t, c, k + 1)
        return end


def pipeline(chunks: list[list[tuple[object, int]]], active: int) -> int:
    """Finish time of chunks walking their phases through FIFO queues with `active` slots each."""
    busy: dict[object, int] = {}
    waiting: dict[object, deque] = {}
    events: list[tuple[int, int, int, int]] = []  # (time, seq, chunk, phase index finished)
    seq = 0
    end = 0

    def enter(t: int, c: int, k: int) -> None:
        nonlocal seq
        q = chunks[c][k][0]
        if busy.get(q, 0) < active:
            busy[q] = busy.get(q, 0) + 1
            heapq.heappush(events, (t + chunks[c][k][1], seq, c, k))
            seq += 1
        else:
            waiting.setdefault(q, deque()).append((c, k))

    for c in range(len(chunks)):
        enter(0, c, 0)
    while events:
        t, _, c, k = heapq.heappop(events)
        end = max(end, t)
        q = chunks[c][k][0]
        busy[q] -= 1
        wq = waiting.get(q)
        if wq:
            c2, k2 = wq.popleft()
            enter(t, c2, k2)
        if k + 1 < len(chunks[c]):
            enter(t, c, k + 1)
    return end

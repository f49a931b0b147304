"""Ring collectives without the message loop (congestion-unaware network): lockstep closed form.

The message-level run (`chakra.sim.collective_run`) costs members x steps events: a data-parallel
all-reduce over 1,024 ranks is 8 million messages. When every member issues at the same ns and
every hop of the ring costs the same, no member ever waits longer than another, and the run
reduces to arithmetic; this module gives that arithmetic, and declines (None) every other case,
which then runs message by message.

Per member and stream, ASTRA-sim's ring (one packet in flight) alternates: a packet crosses the
memory bus (B ns, plus the reduction when it carries data to reduce), is sent, and the packet
received from the ring predecessor D ns later (D = the network delay of one message; the receive
was posted when the member sent, which is never later) is the next one to cross the bus. With
K sends per stream and K + 1 bus crossings, a stream takes (K + 1) B + (reducing crossings) x
reduction + K x D; a queue runs `threshold` streams at once, so the member finishes after
ceil(chunks / threshold) such waves.

When members issue at different times (a collective between pipeline stages, ranks of a real
trace) or the hops differ, the same steps are a recurrence over all members: member m's k-th
receive completes at max(its own k-th send, its predecessor's k-th send + hop). Its solution is a
longest path around the ring, found with two running maxima per ring and wave (`_skewed`), so the
cost grows with the members, not members x sends (a 1,024-member all-reduce has 2,046 sends).
Times never depend on the order of same-ns events here; the order members end in does, so this
path answers only when every member ends at its own ns.

Members that end at the same ns complete in the order the event queue runs them: the members
issue in a given order; every event of a member is booked by its own previous one, except a
receive, booked by its predecessor's send, so each send moves the order one place along the ring
(a member takes its predecessor's place). That order is part of the result (it decides same-ns
ties of later collectives).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from chakra.sim.collective_run import A2A, AR, FAST_BUS_NS, RS, reduction_ns
from chakra.sim.network import Network


def _base(name: str) -> str:
    """The algorithm a configured name runs (`ring`, `oneRing`, `direct8` ...), as the runner reads it."""
    base = name.rstrip("0123456789")
    if base.startswith("one"):
        base = base[3].lower() + base[4:]
    return base


def _sends_and_reductions(ctype: int, p: int) -> tuple[int, int, int]:
    """(sends per stream, bus crossings that reduce, message size divisor) of ASTRA-sim's ring.

    Bus crossings go in rounds of p: the first of a round carries fresh data (no reduction), the
    next p - 1 carry received data, reduced in a reduce-scatter and in the even rounds of an
    all-reduce (the first half)."""
    if ctype == AR:
        sends = 2 * (p - 1)
    elif ctype == A2A:
        sends = p * (p - 1) // 2
    else:
        sends = p - 1
    crossings = sends + 1
    reducing = 0
    if ctype in (AR, RS):
        full, rest = divmod(crossings, p)
        for j in range(full + (1 if rest else 0)):
            nonzero = (p if j < full else rest) - 1
            if ctype == RS or j % 2 == 0:
                reducing += nonzero
    return sends, reducing, (p if ctype in (AR, RS, A2A) else 1)


def lockstep_ring(
    owner: Any,
    ctype: int,
    members: tuple[int, ...],
    involved: Any,
    offsets: Sequence[int],
    order: Optional[Sequence[int]],
    n: int,
    chunk: int,
) -> Optional[tuple]:
    """The runner's `_run` result for a lockstep ring collective, or None when it is not one.

    `owner` is the `CollectiveRunner`; `n` streams of `chunk` bytes each."""
    net = owner.net
    if type(net) is not Network or net.aware or owner.rendezvous or owner.loggp is not None or owner.queues != 1:
        return None
    threshold = -(-owner.sys.active_chunks_per_dimension // owner.queues)
    if threshold < 1:
        return None
    got = owner.layout(ctype, members, involved)
    if got is None:
        return None
    dims, phases = got
    if len(phases) != 1:
        return None
    i, c, how = phases[0]
    d, ring, name = dims[i]
    if _base(name) != "ring" or how == "last":  # "last" turns the ring anticlockwise
        return None
    # every member's ring successor, and its ring size (one ring, or one per line of dimension d)
    succ: dict[int, int] = {}
    if ring is not None:
        ids = ring.ids
        p = len(ids)
        local = ring.local
        for k, r in enumerate(ids):
            succ[r] = ids[(k + 1) % p]
    else:
        p = owner.counts[d]
        local = False
        for r in members:
            if r not in succ:
                line = owner.line_of(d, r)
                for k, x in enumerate(line):
                    succ[x] = line[(k + 1) % p]
    if len(succ) != len(members):
        return None
    sends, reducing, div = _sends_and_reductions(c, p)
    msg = chunk // div
    bus = FAST_BUS_NS if (local and owner.compat) else owner.ed
    hops = [net.p2p_time(r, succ[r], msg) for r in members]
    if bus <= 0 or min(hops) <= 0:
        return None
    red = 0
    if reducing:
        if owner.sys.local_mem_bw <= 0:
            return None  # the message-level run raises the configuration error
        red = reduction_ns(owner.sys.local_mem_bw, msg)
    waves = -(-n // threshold)
    queue = d * owner.queues
    if any(o != offsets[0] for o in offsets) or any(h != hops[0] for h in hops):
        ends = _skewed(members, succ, hops, offsets, sends, (sends + 1) * bus + reducing * red, waves)
        if ends is None:
            return None
        owner._plan_trees = {}
        return (
            tuple(ends),
            (),
            (),
            owner._alloc_state(members),
            tuple(sorted(range(len(members)), key=ends.__getitem__)),
            tuple([queue] * len(members)),
        )
    stream = (sends + 1) * bus + reducing * red + sends * hops[0]
    end = offsets[0] + waves * stream
    owner._plan_trees = {}
    # finish order: issue order, each member's place taken by its ring successor once per send
    index = {r: k for k, r in enumerate(members)}
    issued = list(order) if order is not None else list(range(len(members)))
    shift = (waves * sends) % p
    finished = _shifted(members, issued, succ, shift, index)
    return (
        tuple([end] * len(members)),
        (),
        (),
        owner._alloc_state(members),
        tuple(finished),
        tuple([queue] * len(members)),
    )


def _shifted(members: tuple[int, ...], issued: list[int], succ: dict[int, int], shift: int, index: dict) -> list:
    """Position in `members` of succ^shift(member), for each issued member: one walk per ring."""
    target: dict[int, int] = {}
    for cycle in _rings(members, succ):
        m = len(cycle)
        for k, r in enumerate(cycle):
            target[r] = cycle[(k + shift) % m]
    return [index[target[members[k]]] for k in issued]


def _rings(members: tuple[int, ...], succ: dict[int, int]) -> list[list[int]]:
    """The rings of the successor map, each in ring order from its first member in `members`."""
    seen: set[int] = set()
    rings = []
    for r in members:
        if r in seen:
            continue
        ring = [r]
        x = succ[r]
        while x != r:
            ring.append(x)
            x = succ[x]
        seen.update(ring)
        rings.append(ring)
    return rings


def _cycles(members: tuple[int, ...], succ: dict[int, int]) -> Optional[list[list[int]]]:
    """`_rings`, or None when they differ in length."""
    cycles = _rings(members, succ)
    if any(len(c) != len(cycles[0]) for c in cycles):
        return None
    return cycles


def _skewed(
    members: tuple[int, ...],
    succ: dict[int, int],
    hops: list[int],
    offsets: Sequence[int],
    sends: int,
    step_total: int,
    waves: int,
) -> Optional[list[int]]:
    """Finish offsets of a ring collective whose members issue at different times or whose hops
    differ; None when two members end at the same ns (their order would need the event queue's).

    The per-send recurrence: member m's k-th receive completes at max(its k-th send, its
    predecessor's k-th send + hop) (the receive is posted with the send, and the k-th message from
    the predecessor is the k-th to arrive), and its next send follows one bus crossing (and
    reduction) later. Every member crosses the bus the same way at the same step, so with the
    crossings' ns taken out, s_k(m) = max(s_k-1(m), s_k-1(pred m) + hop into m): a longest path
    that stays or moves one place along the ring per send. After K sends,

        s_K(m) = max over j = 0..K of start(pred^j m) + (hops of the j places into m),

    and since a whole turn of the ring only adds its (positive) hops, only the last p values of j
    (one per ring place) can be the largest (K >= p - 1 for every ring collective). With the
    places of a ring numbered 0..p-1, Q the prefix sums of the hops into them and T a turn's
    hops, the start at place e (e < 0: turns before) counts start(e mod p) - Q(e) + Q(i), and the
    window of p places [i - K, i - K + p - 1] is one suffix and one prefix of a single turn: one
    running maximum each way per wave, O(members) instead of O(members x sends)."""
    cycles = _cycles(members, succ)
    if cycles is None:
        return None
    p = len(cycles[0])
    index = {r: k for k, r in enumerate(members)}
    place = np.array([[index[x] for x in cycle] for cycle in cycles], dtype=np.int64)  # (rings, p)
    hop_in = np.roll(np.asarray(hops, dtype=np.int64)[place], 1, axis=1)  # into place i from i - 1
    turn = hop_in.sum(axis=1, keepdims=True)
    q = np.cumsum(hop_in, axis=1) - hop_in[:, :1]  # hops into places 1..i
    first = np.arange(p) - sends  # each place's window starts this many places back
    col, turns = first % p, first // p
    floor = np.full((len(cycles), 1), np.iinfo(np.int64).min // 4, dtype=np.int64)
    start = np.asarray(offsets, dtype=np.int64)[place]
    for _ in range(waves):
        w = start - q
        suffix = np.maximum.accumulate(w[:, ::-1], axis=1)[:, ::-1]  # places col.. of the first turn
        prefix = np.concatenate([floor, np.maximum.accumulate(w, axis=1)[:, :-1]], axis=1)  # ..col-1, a turn on
        start = q - turn * turns + np.maximum(suffix[:, col], prefix[:, col] - turn) + step_total
    ends = np.empty(len(members), dtype=np.int64)
    ends[place.ravel()] = start.ravel()
    out = ends.tolist()
    if len(set(out)) != len(out):
        return None
    return out

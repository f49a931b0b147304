"""The rank engines on one clock: completions free resources and children, the issue loop starts nodes.

Each rank's compiled trace (`chakra.sim.compiler.RankEngine`) keeps four ready heaps, one per
resource class: CPU op, GPU compute op, communication op (one of each in flight, as ASTRA-sim's
HardwareResource) and "exempt" (receives; with the corrected model also METADATA/INVALID nodes).
After every completion the rank runs its issue loop, which with the default policy takes the
smallest ready id of every class whose slot is free (ASTRA-sim scans the ready set in ascending id
and issues every node whose resource is free: the same set).

Issuing a node hands it to its model: compute and replayed nodes complete after their fixed
delay; collectives go to the rendezvous (`chakra.sim.rendezvous`) and the collective model; sends
and receives to the matcher (`chakra.sim.messages`) on the network model; memory nodes to the
memory model. The models are plain objects behind the Protocols of `chakra.sim.models`, so
`simulate()` can take replacements.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any, Optional

from chakra.errors import ChakraError
from chakra.sim.compiler import (  # noqa: F401 (re-exported: the kind codes are part of this module's API)
    K_COLL,
    K_CPU,
    K_GPU,
    K_MEM,
    K_RECV,
    K_REPLAY,
    K_SEND,
    K_ZERO,
    KIND_NAMES,
    S_FREE,
    RankEngine,
    needs_live,
    runs_in_lines,
)
from chakra.sim.core import Clock, Completion, SimDeadlock
from chakra.sim.fold import FoldedClock, FoldRefused, expand
from chakra.sim.messages import Messenger
from chakra.sim.rendezvous import Rendezvous

Policy = Callable[[list[int], int], int]


class Simulation:
    """Runs every rank's engine on one clock; see `chakra.sim.simulate` for the public entry point."""

    def __init__(
        self,
        engines: list[RankEngine],
        network: Any,
        colls: Any,
        memory: Any,
        *,
        policy: Optional[Policy] = None,
        log: Optional[Callable[[tuple], None]] = None,
        live: Optional[bool] = None,
        traffic: Any = None,
        fold: Any = None,
    ) -> None:
        """`live`: force live mode on (True) or decide from the network and traces (None).
        `traffic`: a `chakra.sim.traffic.TrafficRecorder` to note every message (forces live mode:
        isolated collectives run on their own clocks and are memoised, so their messages would be
        missed or counted once). `fold`: a `chakra.sim.fold.Fold` (from `find_fold`): only its
        slice of ranks runs, each entry standing for its copies; `FoldRefused` when the run
        cannot (the caller then runs every rank)."""
        self.engines = engines
        self.net = network
        self.colls = colls
        self.memory = memory
        self.policy = policy
        self.log = log
        self.events = 0
        self.warnings: list[str] = []
        # Live mode (congestion-aware network with point-to-point traffic or several process groups,
        # or the rendezvous protocol): collectives run on the main clock and share links with
        # everything else. Otherwise each collective runs alone when its last member arrives
        # (memoised; exact, since nothing else can touch its links).
        self.rendezvous = bool(getattr(colls, "rendezvous", False))
        # A remote memory serving requests first come sees the order of same-ns events, which only
        # the main clock gives (an isolated run cannot see the events its members have booked).
        first_come = bool(getattr(memory, "first_come", False)) and any(K_MEM in e.kind for e in engines)
        self.live = hasattr(colls, "live") and (
            bool(live)
            or traffic is not None
            or self.rendezvous
            or first_come
            or bool(getattr(colls, "needs_live", False))
            or runs_in_lines(engines)
            or (bool(getattr(network, "aware", False)) and needs_live(engines))
        )
        self.fold = fold
        if fold is not None:
            if self.live or policy is not None or log is not None:
                raise FoldRefused("collectives on the main clock, a policy or a log see every rank")
            self.clock: Clock = FoldedClock(fold)
        else:
            self.clock = Clock()
        self.messenger = Messenger(self.clock, network, self.rendezvous)
        self.messenger.traffic = traffic
        self.meet = Rendezvous(engines, colls, self.clock, self.messenger, self.live)
        self.meet.fold = fold

    def run(self) -> None:
        engines = self.engines
        clock = self.clock
        push = heapq.heappush
        pop = heapq.heappop
        messenger = self.messenger
        join = self.meet.join
        memory = self.memory
        log = self.log
        policy = self.policy
        complete_at_rank = clock.complete_at_rank
        batches = clock.batches
        batches_get = batches.get
        due = clock.due
        due_get = due.get
        heap = clock.heap
        plain = clock.__class__ is Clock  # a folded clock books its own way
        # A queued remote-memory request is served when the one ahead of it completes: ASTRA-sim
        # books its completion then, in the batch of the rank whose request completed (see
        # Clock.at_rank), which decides the order of same-ns events later on.
        served: set[tuple[int, int]] = set()  # (rank, end) of requests served
        waiting: dict[tuple[int, int], tuple] = {}  # (rank, end) of the request ahead -> request

        def serve(req: tuple) -> None:
            r, end, x = req
            complete_at_rank(r, end, x)
            served.add((r, end))
            nxt_req = waiting.pop((r, end), None)
            if nxt_req is not None:
                clock.at_rank(r, end - clock.now, serve, nxt_req)

        # each rank's arrays in one tuple: one unpack per event instead of ten attribute loads
        # (they stay the same objects for the whole run)
        arrays = [(e.ready, e.busy, e.end, e.slot, e.ptr, e.cidx, e.left, e.kind, e.start, e.delay) for e in engines]
        # nodes left per rank in one list for the run (written back after it): a completion then
        # touches no engine object, one memory line fewer per event across thousands of ranks
        remaining = [e.remaining for e in engines]

        def on_node(t: int, r: int, row: int) -> None:
            ready, busy, end, slot, ptr, cidx, left, kind, start, delay = arrays[r]
            issued: Any = None
            if row >= 0:  # a completion: free its slot, release its children
                end[row] = t
                s = slot[row]
                if s != S_FREE:
                    busy[s] += 1
                remaining[r] -= 1
                if log is not None:
                    e = engines[r]
                    log(("callback", r, t, int(e.ids[row]), e.names[row] if e.names else ""))
                # After every issue loop each slot has no free capacity or nothing ready (and the
                # exempt list is empty), so a completion changes only its own slot and its
                # children's: where the freed slot has nothing waiting, the loop below would
                # issue at most the one child this completion made ready (the chains of kernels
                # that are most nodes), and that is decided here without it.
                idle = policy is None and (s == S_FREE or not ready[s])
                a = ptr[row]
                b = ptr[row + 1]
                if b - a == 1:  # one child: a chain of kernels, the common case
                    c = cidx[a]
                    k = left[c] - 1
                    left[c] = k
                    if k == 0:
                        sc = slot[c]
                        if idle and (sc == S_FREE or (busy[sc] and not ready[sc])):
                            if sc != S_FREE:
                                busy[sc] -= 1
                            issued = (c,)
                        else:
                            push(ready[sc], c)
                    elif idle:
                        return
                elif a != b:
                    for c in cidx[a:b]:
                        k = left[c] - 1
                        left[c] = k
                        if k == 0:
                            push(ready[slot[c]], c)
                elif idle:
                    return
            # ---- issue loop (unless the completion above decided it) ----
            if issued is None and policy is None:
                issued = []
                # CPU, GPU compute, comm: while a slot is free, the smallest ready id (unrolled: hot)
                if busy[0] and ready[0]:
                    q = ready[0]
                    while busy[0] and q:
                        issued.append(pop(q))
                        busy[0] -= 1
                if busy[1] and ready[1]:
                    q = ready[1]
                    while busy[1] and q:
                        issued.append(pop(q))
                        busy[1] -= 1
                if busy[2] and ready[2]:
                    q = ready[2]
                    while busy[2] and q:
                        issued.append(pop(q))
                        busy[2] -= 1
                if ready[3]:
                    issued.extend(ready[3])
                    ready[3].clear()
                if not issued:
                    return
                if len(issued) > 1:
                    issued.sort()
            elif issued is None:
                issued = self._issue_by_policy(engines[r], r)
                if not issued:
                    return
            for x in issued:
                start[x] = t
                if log is not None:
                    e = engines[r]
                    log(("issue", r, t, int(e.ids[x]), e.names[x] if e.names else ""))
                k = kind[x]
                if k <= K_CPU or k >= K_ZERO:
                    if not plain:
                        complete_at_rank(r, t + delay[x], x)
                        continue
                    # Clock.complete_at_rank inline: every compute node comes here
                    due_t = t + delay[x]
                    key = (r, due_t)
                    batch = batches_get(key)
                    if batch is not None:
                        batch.append(x)
                        continue
                    batches[key] = []
                    entries = due_get(due_t)
                    if entries is None:
                        due[due_t] = [(r, -2 - x)]
                        push(heap, due_t)
                    else:
                        entries.append((r, -2 - x))
                elif k == K_COLL:
                    join(r, x)
                elif k == K_SEND:
                    dst, tag, size = engines[r].info[x]
                    messenger.send(r, dst, size, ("p2p", r, dst, tag), Completion(clock, r, x))
                elif k == K_RECV:
                    src, tag, size = engines[r].info[x]
                    messenger.recv(src, r, size, ("p2p", src, r, tag), Completion(clock, r, x))
                else:  # K_MEM
                    e = engines[r]
                    size, local = e.info[x]
                    where = f"{e.path} node {int(e.ids[x])}"
                    end = memory.access(r, size, local, t, where)
                    behind = getattr(memory, "waits_behind", None)
                    if behind is None:
                        serve((r, end, x))
                    elif behind in served:
                        clock.at_rank(behind[0], behind[1] - t, serve, (r, end, x))
                    else:
                        waiting[behind] = (r, end, x)

        if self.fold is not None:
            clock.kick(len(engines))  # type: ignore[attr-defined]
        else:
            for r in range(len(engines)):
                clock.schedule(0, r, -1)  # kick: issue the initially ready nodes
        try:
            clock.run(on_node)
        finally:
            for e, left_over in zip(engines, remaining):
                e.remaining = left_over
        if self.fold is not None:
            if messenger.mismatched or any(engines[r].remaining for r in self.fold.reps):
                raise FoldRefused("unmatched messages or a deadlock: the full run words them")
            expand(engines, self.fold)
        self.events = sum(e.n - e.remaining for e in engines)  # nodes completed
        if messenger.mismatched:
            self.warnings.append(
                f"send/recv of different sizes ({len(messenger.mismatched)} pair(s)): ASTRA-sim never matches them "
                "and hangs; here they are matched on (src, dst, tag)"
            )
        self._check_drained()

    def _issue_by_policy(self, e: RankEngine, r: int) -> list[int]:
        """Slow path for a custom policy: repeatedly ask it which ready node (whose slot is free) goes next."""
        issued: list[int] = []
        ready = e.ready
        busy = e.busy
        ids = e.ids
        while True:
            cand = list(ready[3])
            for s in (0, 1, 2):
                if busy[s] > 0:
                    cand.extend(ready[s])
            if not cand:
                return issued
            by_id = {int(ids[x]): x for x in cand}
            choice = self.policy(sorted(by_id), r)  # type: ignore[misc]
            x = by_id.get(int(choice)) if choice is not None else None
            if x is None:
                raise ChakraError(f"scheduling policy returned node {choice!r}, not one of the ready nodes on rank {r}")
            s = e.slot[x]
            ready[s].remove(x)
            heapq.heapify(ready[s])
            if s != S_FREE:
                busy[s] -= 1
            issued.append(x)

    def _check_drained(self) -> None:
        stuck = [e for e in self.engines if e.remaining]
        if not stuck:
            return
        parts = self.meet.waiting()
        for key, w in list(self.messenger.posted.items()):
            if w and key[0] == "p2p" and isinstance(w[0][1], Completion) and len(parts) < 8:
                _, src, dst, tag = key
                r, x = w[0][1].rank, w[0][1].row
                parts.append(
                    f"rank {r} recv node {int(self.engines[r].ids[x])} waits for a send {src}->{dst} tag {tag}"
                )
        for e in stuck[:4]:
            blocked = [int(e.ids[i]) for i in range(e.n) if e.left[i] > 0][:3]
            if blocked and not parts:
                parts.append(f"rank {e.rank}: node(s) {blocked} wait on parents that never finish")
        ranks = [e.rank for e in stuck]
        raise SimDeadlock(
            f"deadlock: {len(stuck)} rank(s) {ranks[:8]}{'...' if len(ranks) > 8 else ''} cannot finish; "
            + "; ".join(parts or ["nodes wait on dependencies that never complete"])
        )

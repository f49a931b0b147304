"""The discrete-event core: one integer-ns clock, one heap of completion events, one engine per rank.

Each rank pulls nodes from its trace's feeder index (`chakra.feeder.NodeTable`: ids, types,
durations, CSR children, dependency counts) and keeps four ready heaps, one per resource class:
CPU op, GPU compute op, communication op (one of each in flight, as ASTRA-sim's
HardwareResource) and "exempt" (receives; with the corrected model also METADATA/INVALID nodes).
Only completions are events: issuing a node computes (or, for collectives and receives, arranges)
its completion time. After every completion the rank runs its issue loop, which with the default
policy takes the smallest ready id of every class whose slot is free (ASTRA-sim scans the ready set
in ascending id and issues every node whose resource is free: the same set).

Per-node bookkeeping lives in flat arrays (array('q'), bytes) and heap entries are plain tuples
`(time, seq, rank, row)`; there are no per-event Python objects. Collectives rendezvous per
(process group, sequence number on that group): when the last member issues, every member
completes at `now + T`, with T from `CollectiveModel` (cached per group, type and size).
"""

from __future__ import annotations

import heapq
from array import array
from collections import deque
from collections.abc import Callable
from itertools import count
from typing import Any, Optional

import numpy as np

from chakra.errors import ChakraError, ConfigError
from chakra.schema import CollectiveType, NodeType, collective_name
from chakra.sim.collectives import MODELLED
from chakra.sim.groups import GroupTable
from chakra.sim.memory import MemoryModel
from chakra.sim.messages import Messenger
from chakra.sim.network import Network

# Collective types ASTRA-sim's workload layer rejects ("Unsupported collective comm type"): the
# rank then never finishes there. BROADCAST is replayed by ASTRA-sim itself.
UNSUPPORTED = frozenset(
    int(c)
    for c in (
        CollectiveType.REDUCE,
        CollectiveType.GATHER,
        CollectiveType.SCATTER,
        CollectiveType.BARRIER,
        CollectiveType.REDUCE_SCATTER_BLOCK,
    )
)
K_GPU, K_CPU, K_COLL, K_SEND, K_RECV, K_MEM, K_ZERO, K_REPLAY = range(8)
S_CPU, S_GPU, S_COMM, S_FREE = range(4)
KIND_NAMES = ("gpu_comp", "cpu_comp", "collective", "send", "recv", "memory", "zero", "replay_comm")

Policy = Callable[[list[int], int], int]


class SimDeadlock(ChakraError):
    """The event queue ran dry with nodes left: names who waits on what."""


class RankEngine:
    """One rank's compiled trace plus its run-time state (flat arrays; see module doc)."""

    __slots__ = (
        "rank",
        "ids",
        "names",
        "kind",
        "slot",
        "delay",
        "ptr",
        "cidx",
        "left",
        "ready",
        "busy",
        "start",
        "end",
        "info",
        "coll_seq",
        "remaining",
        "n",
        "gpu_sum",
        "path",
        "replayed",
        "shareable",
        "static",
        "warnings",
    )

    def __init__(
        self,
        rank: int,
        table: Any,
        *,
        system: Any,
        comm_mode: str,
        compat: bool,
        names: bool,
        slots: tuple[int, int, int] = (1, 1, 1),
    ) -> None:
        self.rank = rank
        self.path = str(table.path) if table.path is not None else f"<rank {rank}>"
        n = len(table)
        self.n = n
        self.ids = table.ids
        self.names = table.names if names else None
        types = table.types.astype(np.int16)
        is_cpu = table.is_cpu if table.is_cpu is not None else np.zeros(n, np.int8)
        dur = table.dur_us
        replay_ns = np.where(dur > 0, dur * 1000, 1).astype(np.int64)
        kind = np.full(n, K_ZERO, dtype=np.int8)
        comp = types == NodeType.COMP_NODE
        kind[comp & (is_cpu != 0)] = K_CPU
        kind[comp & (is_cpu == 0)] = K_GPU
        kind[(types == NodeType.MEM_LOAD_NODE) | (types == NodeType.MEM_STORE_NODE)] = K_MEM
        kind[types == NodeType.COMM_SEND_NODE] = K_SEND
        kind[types == NodeType.COMM_RECV_NODE] = K_RECV
        kind[types == NodeType.COMM_COLL_NODE] = K_COLL
        delay = np.zeros(n, dtype=np.int64)
        delay[comp] = replay_ns[comp]
        if system.roofline_enabled:
            gpu = comp & (is_cpu == 0)
            ops = table.num_ops.astype(np.float64)
            tsz = table.tensor_size.astype(np.float64)
            with np.errstate(divide="ignore", invalid="ignore"):
                oi = np.where(tsz > 0, ops / np.where(tsz > 0, tsz, 1), 0.0)
                perf = np.minimum(system.local_mem_bw * 1e9 * oi, system.peak_perf * 1e12)
                roof = np.where((tsz > 0) & (perf > 0), np.floor(ops / np.where(perf > 0, perf, 1) * 1e9), 0)
            delay[gpu] = roof[gpu].astype(np.int64)
        # Situations where ASTRA-sim stops or aborts (we still answer; the caller prints one line each).
        self.warnings: list[str] = []
        if int((types == NodeType.METADATA_NODE).sum()):
            self.warnings.append(
                "METADATA node(s): ASTRA-sim 2.x aborts at t=0 on them ('Invalid node_type'); here they take 0 ns"
            )
        # Communication attributes (sparse: only comm/mem nodes carry them).
        info: dict[int, tuple] = {}
        replay_all = system.replay_only or comm_mode == "replay"
        replayed = 0
        for row, attrs in table.sparse.items():
            k = int(kind[row])
            nid = int(table.ids[row])
            where = f"{self.path} node {nid}"
            if k == K_COLL:
                ctype = _int(attrs.get("comm_type"), None)
                if ctype in UNSUPPORTED and not replay_all:
                    self.warnings.append(
                        f"{collective_name(ctype)} collective(s): ASTRA-sim does not implement them and never "
                        "finishes the rank; here they are replayed from duration_micros"
                    )
                if replay_all or ctype not in MODELLED or "comm_size" not in attrs:
                    # BROADCAST (as ASTRA-sim), other types ASTRA-sim cannot simulate, and
                    # collectives without comm_type/comm_size are replayed from duration_micros.
                    kind[row] = K_REPLAY
                    delay[row] = replay_ns[row]
                    replayed += 0 if replay_all else 1
                    continue
                pg = attrs.get("pg_name")
                pg = "" if pg is None or isinstance(pg, (list, bytes)) else str(pg)
                inv = attrs.get("involved_dim")
                inv_t = tuple(bool(x) for x in inv) if isinstance(inv, list) and inv else None
                # members are filled in by resolve_groups once every rank's METADATA is known
                info[row] = (ctype, max(0, _int(attrs.get("comm_size"), 0)), pg, (), inv_t)
            elif k in (K_SEND, K_RECV):
                if replay_all:
                    kind[row] = K_REPLAY
                    delay[row] = replay_ns[row]
                    continue
                if k == K_SEND:
                    peer = _int(attrs.get("comm_dst"), None)
                    src = _int(attrs.get("comm_src"), rank)
                    if peer is None:
                        raise ConfigError(f"{where}: COMM_SEND_NODE without comm_dst")
                    if src != rank:
                        raise ConfigError(f"{where}: send with comm_src={src} in rank {rank}'s trace")
                else:
                    peer = _int(attrs.get("comm_src"), None)
                    dst = _int(attrs.get("comm_dst"), rank)
                    if peer is None:
                        raise ConfigError(f"{where}: COMM_RECV_NODE without comm_src")
                    if dst != rank:
                        raise ConfigError(f"{where}: recv with comm_dst={dst} in rank {rank}'s trace")
                info[row] = (peer, _int(attrs.get("comm_tag"), 0), max(0, _int(attrs.get("comm_size"), 0)))
            elif k == K_MEM:
                loc = attrs.get("tensor_loc")
                local = loc in (0, "local", "LOCAL", "Local") or (isinstance(loc, str) and loc.lower() == "local")
                info[row] = (max(0, _int(attrs.get("tensor_size"), 0)), local)
        # Comm/mem nodes without any attribute are malformed; say so with the node id.
        for k, what in ((K_COLL, "COMM_COLL_NODE"), (K_SEND, "COMM_SEND_NODE"), (K_RECV, "COMM_RECV_NODE")):
            for row in np.nonzero(kind == k)[0].tolist():
                if row not in info:
                    if replay_all or k == K_COLL:
                        kind[row] = K_REPLAY
                        delay[row] = replay_ns[row]
                        replayed += 0 if replay_all else 1
                        continue
                    raise ConfigError(
                        f"{self.path} node {int(table.ids[row])}: {what} without comm_src/comm_dst/comm_tag attributes"
                    )
        mem_rows = np.nonzero(kind == K_MEM)[0]
        for row in mem_rows:
            if int(row) not in info:
                info[int(row)] = (int(table.tensor_size[row]) if table.tensor_size is not None else 0, False)
            if system.replay_only:
                kind[row] = K_REPLAY
                delay[row] = replay_ns[row]
        self.replayed = replayed
        slot = np.full(n, S_COMM, dtype=np.int8)
        slot[kind == K_CPU] = S_CPU
        slot[kind == K_GPU] = S_GPU
        slot[kind == K_RECV] = S_FREE
        slot[(kind == K_REPLAY) & (types == NodeType.COMM_RECV_NODE)] = S_FREE
        if not compat:
            slot[kind == K_ZERO] = S_FREE
        self.kind = kind.tobytes()
        self.slot = slot.tobytes()
        self.delay = array("q", delay.tobytes())
        self.gpu_sum = int(delay[kind == K_GPU].sum())
        self.ptr = array("q", table.child_ptr.tobytes())
        self.cidx = array("i", table.child_idx.tobytes())
        self.info = info
        self.shareable = not any(kind == K_SEND) and not any(kind == K_RECV)
        self.static = (table.dep_count.tobytes(), np.nonzero(table.dep_count == 0)[0].tolist(), slots)
        self._reset()

    def _reset(self) -> None:
        """Fresh run-time state (dependency counts, ready heaps, free slots, times)."""
        dep_bytes, ready_rows, slots = self.static
        n = self.n
        self.left = array("i", dep_bytes)
        self.coll_seq: dict[str, int] = {}
        self.remaining = n
        self.start = array("q", bytes(8 * n))
        self.end = array("q", bytes(8 * n))
        ready: list[list[int]] = [[], [], [], []]
        sl = self.slot
        for row in ready_rows:
            ready[sl[row]].append(row)  # ascending rows: each list is already a heap
        self.ready = ready
        # Free slots per class (CPU, GPU compute, comm); "busy" is the historical name of the list.
        self.busy = [_cap(c) for c in slots]

    def for_rank(self, rank: int) -> RankEngine:
        """Another rank running a byte-identical trace: shares every read-only array, fresh state.

        Only for traces without send/recv (their peers are rank-specific); collective group
        membership is checked for the new rank.
        """
        other = object.__new__(RankEngine)
        for name in ("ids", "names", "kind", "slot", "delay", "ptr", "cidx", "info", "n", "gpu_sum", "path"):
            setattr(other, name, getattr(self, name))
        other.replayed = self.replayed
        other.warnings = self.warnings
        other.shareable = True
        other.static = self.static
        other.rank = rank
        other._reset()
        return other

    def resolve_groups(self, groups: GroupTable, done: dict[int, dict]) -> None:
        """Fill in the member tuple of every collective and check this rank belongs to it.

        Engines sharing one `info` dict (identical traces) resolve it once (`done` by id).
        """
        first_row: dict[str, int] = done.get(id(self.info))  # type: ignore[assignment]
        if first_row is None:
            first_row = {}
            for row, item in self.info.items():
                if len(item) == 5:
                    pg = item[2]
                    if pg not in first_row:
                        first_row[pg] = row
            members = {
                pg: groups.members(pg, f"{self.path} node {int(self.ids[row])}") for pg, row in first_row.items()
            }
            for row, item in self.info.items():
                if len(item) == 5:
                    # A named process group runs on every dimension: ASTRA-sim ignores involved_dim there.
                    inv = item[4] if item[2] in ("", "0") else None
                    self.info[row] = (item[0], item[1], item[2], members[item[2]], inv)
            done[id(self.info)] = first_row
        for pg, row in first_row.items():
            item = self.info[row]
            if self.rank not in item[3]:
                raise ConfigError(
                    f"{self.path} node {int(self.ids[row])}: rank {self.rank} is not a member of process group "
                    f"{pg!r} {list(item[3])}"
                )


def needs_live(engines: list[RankEngine]) -> bool:
    """Whether any traffic could share a link with a collective: a send, or two process groups."""
    groups = set()
    for e in engines:
        if not e.shareable:  # has sends/receives
            return True
        for item in e.info.values():
            if len(item) == 5:
                groups.add(item[2] if item[2] not in ("", "0") else "")
    return len(groups) > 1


def _cap(count: int) -> int:
    """Slot capacity: 0 or less means unlimited."""
    return count if count > 0 else 1 << 60


def _int(value: Any, default: Any) -> Any:
    if value is None or isinstance(value, (list, str, bytes)):
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                return default
        return default
    return int(value)


class _Done:
    """Live mode: the callback that completes node `x` of rank `r` now (kept inspectable for deadlock reports)."""

    __slots__ = ("clock", "r", "x")

    def __init__(self, clock: _EngineClock, r: int, x: int) -> None:
        self.clock = clock
        self.r = r
        self.x = x

    def __call__(self) -> None:
        c = self.clock
        heapq.heappush(c.heap, (c.now, c.nxt(), self.r, self.x))


class _EngineClock:
    """The engine's heap seen as a clock by live collectives and messages: `at(delay, fn, arg)`
    pushes `(now + delay, seq, -1, (fn, arg))`, which the main loop runs as a plain callback."""

    __slots__ = ("heap", "nxt", "now")

    def __init__(self, heap: list, nxt: Callable[[], int]) -> None:
        self.heap = heap
        self.nxt = nxt
        self.now = 0

    def at(self, delay: int, fn: Callable[[Any], None], arg: Any = None) -> None:
        heapq.heappush(self.heap, (self.now + delay, self.nxt(), -1, (fn, arg)))


class Simulation:
    """Runs every rank's engine on one clock; see `chakra.sim.simulate` for the public entry point."""

    def __init__(
        self,
        engines: list[RankEngine],
        network: Network,
        colls: Any,
        memory: MemoryModel,
        *,
        policy: Optional[Policy] = None,
        log: Optional[Callable[[tuple], None]] = None,
    ) -> None:
        self.engines = engines
        self.net = network
        self.colls = colls
        self.runner = colls
        self.memory = memory
        self.policy = policy
        self.log = log
        self.events = 0
        self.warnings: list[str] = []
        # Live mode (congestion-aware network with point-to-point traffic or several process groups):
        # collectives run on the main clock and share links with everything else. Otherwise each
        # collective runs alone when its last member arrives (memoised; exact, since nothing else
        # can touch its links).
        self.rendezvous = bool(getattr(colls, "rendezvous", False))
        self.live = self.rendezvous or (bool(getattr(network, "aware", False)) and needs_live(engines))
        self.messenger: Optional[Messenger] = None

    def run(self) -> None:
        engines = self.engines
        heap: list[tuple[int, int, int, int]] = []
        push = heapq.heappush
        pop = heapq.heappop
        seq = count()
        nxt = seq.__next__
        pending: dict[tuple, list] = {}
        arrived: dict[tuple, deque] = {}
        waiting: dict[tuple, deque] = {}
        runner = self.runner
        p2p = self.net.p2p_time
        memory = self.memory
        log = self.log
        policy = self.policy
        events = 0
        live = self.live
        clock = _EngineClock(heap, nxt)
        messenger = Messenger(clock, self.net, self.rendezvous)
        self.messenger = messenger
        runs: dict[tuple, tuple] = {}  # live collectives: (pg, seq) -> (run, type, size, {rank: row})

        def completer(r: int, x: int) -> _Done:
            return _Done(clock, r, x)

        for r in range(len(engines)):
            push(heap, (0, nxt(), r, -1))  # kick: issue the initially ready nodes
        while heap:
            t, _, r, row = pop(heap)
            if r < 0:  # live mode: a collective's or a message's own event
                clock.now = t
                row[0](row[1])
                continue
            clock.now = t
            e = engines[r]
            kind = e.kind
            ready = e.ready
            busy = e.busy
            if row >= 0:
                events += 1
                e.end[row] = t
                s = e.slot[row]
                if s != S_FREE:
                    busy[s] += 1
                e.remaining -= 1
                if log is not None:
                    log(("callback", r, t, int(e.ids[row]), e.names[row] if e.names else ""))
                ptr = e.ptr
                a, b = ptr[row], ptr[row + 1]
                if a != b:
                    left = e.left
                    slot = e.slot
                    for c in e.cidx[a:b]:
                        k = left[c] - 1
                        left[c] = k
                        if k == 0:
                            push(ready[slot[c]], c)
            # ---- issue loop -------------------------------------------------------------
            if policy is None:
                issued = []
                if busy[0] and ready[0]:
                    issued.append(pop(ready[0]))
                    busy[0] -= 1
                    while busy[0] and ready[0]:
                        issued.append(pop(ready[0]))
                        busy[0] -= 1
                if busy[1] and ready[1]:
                    issued.append(pop(ready[1]))
                    busy[1] -= 1
                    while busy[1] and ready[1]:
                        issued.append(pop(ready[1]))
                        busy[1] -= 1
                if busy[2] and ready[2]:
                    issued.append(pop(ready[2]))
                    busy[2] -= 1
                    while busy[2] and ready[2]:
                        issued.append(pop(ready[2]))
                        busy[2] -= 1
                if ready[3]:
                    issued.extend(ready[3])
                    ready[3].clear()
                if not issued:
                    continue
                if len(issued) > 1:
                    issued.sort()
            else:
                issued = self._issue_by_policy(e, r)
                if not issued:
                    continue
            start = e.start
            delay = e.delay
            for x in issued:
                start[x] = t
                if log is not None:
                    log(("issue", r, t, int(e.ids[x]), e.names[x] if e.names else ""))
                k = kind[x]
                if k <= K_CPU or k >= K_ZERO:
                    push(heap, (t + delay[x], nxt(), r, x))
                elif k == K_COLL:
                    ctype, size, pg, members, inv = e.info[x]
                    sq = e.coll_seq.get(pg, 0)
                    e.coll_seq[pg] = sq + 1
                    key = (pg, sq)
                    if live:
                        self._join_live(runs, key, r, x, ctype, size, members, inv, clock, messenger)
                        continue
                    p = pending.get(key)
                    if p is None:
                        p = pending[key] = [ctype, size, []]
                    elif p[0] != ctype or p[1] != size:
                        other = p[2][0]
                        first_id = int(engines[other[0]].ids[other[1]])
                        raise SimDeadlock(
                            f"collective #{sq} on process group {pg or 'all'!r} does not match: rank {other[0]} node "
                            f"{first_id} is {collective_name(p[0])} {p[1]} B, rank {r} node "
                            f"{int(e.ids[x])} is {collective_name(ctype)} {size} B (every rank must issue a group's "
                            "collectives in the same order)"
                        )
                    p[2].append((r, x))
                    if len(p[2]) == len(members):
                        del pending[key]
                        arrivals = {r2: x2 for r2, x2 in p[2]}
                        starts = [engines[m].start[arrivals[m]] for m in members]
                        for m, done in zip(members, runner.finish(ctype, size, members, inv, starts)):
                            push(heap, (done, nxt(), m, arrivals[m]))
                elif k == K_SEND:
                    dst, tag, size = e.info[x]
                    if live:
                        messenger.send(r, dst, size, ("p2p", r, dst, tag), completer(r, x))
                        continue
                    arrival = t + p2p(r, dst, size)
                    push(heap, (arrival, nxt(), r, x))
                    key = (r, dst, tag)
                    w = waiting.get(key)
                    if w:
                        r2, x2 = w.popleft()
                        if engines[r2].info[x2][2] != size:
                            self._size_mismatch(r, x, r2, x2)
                        push(heap, (arrival, nxt(), r2, x2))
                    else:
                        q = arrived.get(key)
                        if q is None:
                            q = arrived[key] = deque()
                        q.append((arrival, size, x))
                elif k == K_RECV:
                    src, tag, size = e.info[x]
                    if live:
                        messenger.recv(src, r, size, ("p2p", src, r, tag), completer(r, x))
                        continue
                    key = (src, r, tag)
                    q = arrived.get(key)
                    if q:
                        a, sent_size, sx = q.popleft()
                        if sent_size != size:
                            self._size_mismatch(src, sx, r, x)
                        push(heap, (a if a > t else t, nxt(), r, x))
                    else:
                        w = waiting.get(key)
                        if w is None:
                            w = waiting[key] = deque()
                        w.append((r, x))
                else:  # K_MEM
                    size, local = e.info[x]
                    where = f"{e.path} node {int(e.ids[x])}"
                    push(heap, (memory.access(r, size, local, t, where), nxt(), r, x))
        self.events = events
        if messenger.mismatched and not any("different sizes" in w for w in self.warnings):
            self.warnings.append(
                f"send/recv of different sizes ({len(messenger.mismatched)} pair(s)): ASTRA-sim never matches them "
                "and hangs; here they are matched on (src, dst, tag)"
            )
        self._check_drained(pending, waiting)

    def _join_live(
        self, runs: dict, key: tuple, r: int, x: int, ctype: int, size: int, members: tuple, inv: Any, clock: Any,
        messenger: Messenger,
    ) -> None:  # fmt: skip
        """Live mode: rank r issues its part of collective `key` now; it runs on the shared clock and links."""
        entry = runs.get(key)
        if entry is None:
            rows: dict[int, int] = {}
            heap, nxt = clock.heap, clock.nxt

            def finished(rank: int) -> None:
                heapq.heappush(heap, (clock.now, nxt(), rank, rows.pop(rank)))

            run = self.runner.live(ctype, size, members, inv, clock, messenger, key, finished)
            entry = runs[key] = (run, ctype, size, rows)
        run, ctype0, size0, rows = entry
        if (ctype0, size0) != (ctype, size):
            raise SimDeadlock(
                f"collective #{key[1]} on process group {key[0] or 'all'!r} does not match: rank {r} node "
                f"{int(self.engines[r].ids[x])} is {collective_name(ctype)} {size} B, an earlier member's is "
                f"{collective_name(ctype0)} {size0} B (every rank must issue a group's collectives in the same order)"
            )
        if run is None:  # nothing to run on: ASTRA-sim never finishes it; 0 ns here
            heapq.heappush(clock.heap, (clock.now, clock.nxt(), r, x))
            return
        rows[r] = x
        run.issue(r)

    def _size_mismatch(self, sr: int, sx: int, rr: int, rx: int) -> None:
        """ASTRA-sim matches send and receive on (tag, src, dst, size): different sizes never meet."""
        if not any("different sizes" in w for w in self.warnings):
            self.warnings.append(
                f"send/recv of different sizes (rank {sr} node {int(self.engines[sr].ids[sx])} -> rank {rr} node "
                f"{int(self.engines[rr].ids[rx])}): ASTRA-sim never matches them and hangs; here they are matched "
                "on (src, dst, tag)"
            )

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

    def _check_drained(self, pending: dict, waiting: dict) -> None:
        stuck = [e for e in self.engines if e.remaining]
        if not stuck:
            return
        parts = []
        for (pg, sq), (ctype, _size, arrivals) in list(pending.items())[:4]:
            here = sorted(r for r, _ in arrivals)
            members = arrivals and self.engines[arrivals[0][0]].info[arrivals[0][1]][3]
            missing = [m for m in members if m not in here]
            nodes = ", ".join(f"rank {r} node {int(self.engines[r].ids[x])}" for r, x in arrivals[:3])
            parts.append(
                f"{collective_name(ctype)} #{sq} on group {pg or 'all'!r}: {nodes} wait(s) for rank(s) "
                f"{missing[:8]}{'...' if len(missing) > 8 else ''}"
            )
        if self.messenger is not None:
            for key, w in list(self.messenger.posted.items()):
                if w and key[0] == "p2p" and isinstance(w[0][1], _Done):
                    waiting.setdefault(key[1:], deque()).append((w[0][1].r, w[0][1].x))
        for (src, dst, tag), w in list(waiting.items())[:4]:
            if w:
                r, x = w[0]
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

"""One collective, message by message, as ASTRA-sim's system layer runs it (astra-sim.md §3.4-3.5).

Every member runs its own copy of the algorithm from the time *it* issued the collective (ASTRA-sim
schedules a rank's chunk streams as soon as that rank issues: early members send their first
messages and wait for their peers), so members may finish at different times. The pieces, each in
its own words here:

- chunking: `chunk = size // preferred-dataset-splits` (tiny non-all-gather collectives are inflated
  to splits x NPUs bytes); `ceil(size / chunk)` streams, **every one a full chunk** (the remainder
  of a size the splits do not divide is rounded up to a whole chunk);
- phases per stream (one per active network dimension, or one over the member ring for a process
  subgroup), each on its dimension's queue; a queue runs `active-chunks-per-dimension` streams at a
  time, the rest wait in arrival order;
- per phase, the algorithm's packet state machine (ring, direct, halving-doubling): each packet
  crosses the member's memory bus (`endpoint-delay`, or a fixed 10 ns on a subgroup's local ring)
  and, when it carries data to reduce, waits `3 x floor(size / local-mem-bw)` more;
- messages travel on the analytical network: unaware = one closed-form delay per message; aware =
  store-and-forward over FIFO links private to this collective. A receive posted after its data
  arrived completes at once.

Results are relative to the first member's issue time and memoised per (shape, arrival offsets):
data-parallel steps where every rank issues at the same time cost one run.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from typing import Any, Callable, Optional

from chakra.errors import ConfigError
from chakra.schema import CollectiveType
from chakra.schema.kinds import MODELLED_COLLECTIVES
from chakra.sim.config import NetworkConfig, SystemConfig
from chakra.sim.core import Clock
from chakra.sim.custom import CustomAlgorithms
from chakra.sim.membus import SharedBus, shared_bus
from chakra.sim.messages import NOOP, Messenger
from chakra.sim.network import Network

AR, AG, RS, A2A = (
    int(CollectiveType.ALL_REDUCE),
    int(CollectiveType.ALL_GATHER),
    int(CollectiveType.REDUCE_SCATTER),
    int(CollectiveType.ALL_TO_ALL),
)
MODELLED = MODELLED_COLLECTIVES  # simulated; BROADCAST and the rest are replayed
IMPL_KEY = {AR: "all_reduce", AG: "all_gather", RS: "reduce_scatter", A2A: "all_to_all"}
FAST_BUS_NS = 10  # a subgroup's "local" ring crosses the memory bus in a fixed 10 ns
CW, ACW = 1, -1


def reduction_ns(local_mem_bw: float, size: int) -> int:
    """ns to reduce a received packet of `size` bytes: three passes over local memory (GB/s)."""
    return 3 * int(size / (local_mem_bw * 1e9) * 1e9)


#: What ASTRA-sim does when a collective's algorithm splits its chunk into empty messages (a
#: collective of a few bytes over many ranks, halvingDoubling of 1 B): ChunkIdGenerator's
#: create_send_chunk_id asserts `chunk_size > 0` and the binary aborts (both backends).
ZERO_MESSAGE = (
    "a collective too small for its chunks: an algorithm step sends 0 bytes, and ASTRA-sim aborts on it "
    "(ChunkIdGenerator::create_send_chunk_id: Assertion `chunk_size > 0'); here the step takes no time"
)


class OverlapsEarlierTraffic(Exception):
    """An isolated collective on the aware network would start while an earlier one still holds
    links: the simulation must run every collective on the shared clock instead."""


class Ring:
    """A logical ring over `ids` (one network dimension's line, or a subgroup's sorted members)."""

    __slots__ = ("ids", "index", "local")

    def __init__(self, ids: Sequence[int], local: bool) -> None:
        self.ids = tuple(ids)
        self.index = {r: i for i, r in enumerate(self.ids)}
        self.local = local

    def __len__(self) -> int:
        return len(self.ids)

    def step(self, rank: int, direction: int, k: int = 1) -> int:
        return self.ids[(self.index[rank] + direction * k) % len(self.ids)]


# ---- algorithms: per member, per phase -----------------------------------------------------------


class RingAlg:
    """Ring: each received packet is forwarded to the next member after the bus (and reduction)."""

    def __init__(self, run: CollectiveRun, member: Member, stream: Stream, ctype: int, ring: Ring, data: int,
                 direction: int) -> None:  # fmt: skip
        self.run_ = run
        self.member = member
        self.stream = stream
        self.ctype = ctype
        self.ring = ring
        self.id = member.rank
        self.p = p = len(ring)
        self.direction = direction
        self.receiver = ring.step(self.id, direction)
        self.sender = ring.step(self.id, -direction)
        self.parallel = 1
        self.stream_count = 2 * (p - 1) if ctype == AR else (p * (p - 1) // 2 if ctype == A2A else p - 1)
        self.msg = data // p if ctype in (AR, RS, A2A) else data
        self.final = data * p if ctype == AG else (data // p if ctype == RS else data)
        self.free = 0
        self.zero = 0
        self.nonzero = 0
        self.toggle = False
        self.packets: deque = deque()
        self.received = 0
        self.per_msg = 1
        self.fast = ring.local and run.compat
        self.bus = FAST_BUS_NS if self.fast else run.ed

    def nonzero_packets(self) -> int:
        return (self.p - 1) * self.parallel

    def on_init(self) -> None:
        for _ in range(self.parallel):
            self.insert()

    def on_general(self) -> None:
        self.free += 1
        self.ready()
        self.iterate()

    def on_received(self) -> None:
        self.received += 1
        self.insert()

    def insert(self) -> None:
        if self.zero == 0 and self.nonzero == 0:
            self.zero = self.parallel
            self.nonzero = self.nonzero_packets()
            self.toggle = not self.toggle
        if self.zero > 0:
            self.packets.append(self.packet())
            self.zero -= 1
            self.release(False, False, True)  # first packet of a round: NPU -> memory, nothing to reduce
            return
        if self.nonzero > 0:
            self.packets.append(self.packet())
            processed = self.ctype == RS or (self.ctype == AR and self.toggle)
            send_back = self.nonzero > self.parallel
            self.nonzero -= 1
            self.release(processed, send_back, False)
            return
        raise AssertionError("ring: nothing to inject")

    def packet(self) -> tuple[int, int, int]:
        return (self.receiver, self.sender, self.msg)

    def release(self, processed: bool, send_back: bool, to_memory: bool) -> None:
        self.run_.bundle(self, self.msg, processed, send_back, to_memory)
        self.after_release()

    def after_release(self) -> None:
        pass

    def ready(self) -> bool:
        if not self.packets or self.stream_count == 0 or self.free == 0:
            return False
        dst, src, size = self.packets[0]
        self.run_.send(self, self.id, dst, size)
        self.run_.recv(self, src, self.id, size)
        if self.per_msg > 0:
            self.per_msg -= 1
        if self.per_msg == 0 and self.stream_count > 0:
            self.stream_count -= 1
            if self.stream_count > 0:
                self.per_msg = 1
        self.packets.popleft()
        self.free -= 1
        return True

    def iterate(self) -> None:
        if self.stream_count == 0 and self.free == self.parallel:
            self.run_.phase_done(self.member, self.stream)


class DirectAlg(RingAlg):
    """ASTRA-sim's `direct` (its AllToAll class): a window of peers at once, walking the ring."""

    def __init__(self, run, member, stream, ctype, ring, data, direction, window: int) -> None:  # type: ignore[no-untyped-def]
        super().__init__(run, member, stream, ctype, ring, data, direction)
        self.middle = self.p - 1
        self.parallel = self.p - 1 if window < 0 else min(window, self.p - 1)
        if ctype == A2A:
            self.stream_count = self.p - 1

    def nonzero_packets(self) -> int:
        return (self.p - 1) * self.parallel if self.ring.local else self.parallel

    def on_general(self) -> None:
        self.free += 1
        if self.ctype == AR and self.stream_count <= self.middle:
            if self.received < self.middle:
                return
            for _ in range(self.parallel):
                self.ready()
        else:
            self.ready()
        self.iterate()

    def after_release(self) -> None:
        ring, me, d = self.ring, self.id, self.direction
        self.receiver = ring.step(self.receiver, d)
        if self.receiver == me:
            self.receiver = ring.step(self.receiver, d)
        self.sender = ring.step(self.sender, -d)
        if self.sender == me:
            self.sender = ring.step(self.sender, -d)


class HalvingDoublingAlg(RingAlg):
    """Recursive halving (reduce-scatter) then doubling (all-gather) over partners at ring offsets."""

    def __init__(self, run, member, stream, ctype, ring, data, direction) -> None:  # type: ignore[no-untyped-def]
        super().__init__(run, member, stream, ctype, ring, data, direction)
        p = self.p
        lg = int(math.log2(p))
        if ctype == A2A:
            raise ConfigError(
                f"{run.where}: halvingDoubling has no all-to-all (ASTRA-sim exits: unknown communication type)"
            )
        self.stream_count = 2 * lg if ctype == AR else lg
        self.lg = lg
        if ctype == AG:
            self.msg, self.offset, self.mult = data, p // 2, 0.5
        else:
            self.msg, self.offset, self.mult = data // 2, 1, 2.0
        self.final = data * p if ctype == AG else (data // p if ctype == RS else data)
        self.receiver = self.partner()
        self.sender = self.receiver

    def partner(self) -> int:
        if self.offset == 0:
            direction = CW
        else:
            direction = CW if (self.ring.index[self.id] // self.offset) % 2 == 0 else ACW
        return self.ring.step(self.id, direction, self.offset)

    def nonzero_packets(self) -> int:
        return self.lg - self.parallel

    def after_release(self) -> None:
        self.offset = int(self.offset * self.mult)
        self.msg = int(self.msg / self.mult)
        if self.offset == self.p and self.ctype == AR:
            self.mult = 0.5
            self.offset = int(self.offset * self.mult)
            self.msg = int(self.msg / self.mult)
        self.receiver = self.partner()
        self.sender = self.receiver


class PeerAlg:
    """An all-to-all with per-peer sizes, as ASTRA-sim runs the custom algorithm `chakra export
    astra-sim` writes for it (CustomAlgorithm.cc): when the member's one stream starts, every send
    and every receive is issued at once, straight onto the network (no memory-bus crossing); the
    member is done when the last of them completes. Pairs of 0 bytes move nothing; a member with
    nothing to move takes 1 ns (the algorithm's one compute node of runtime 0)."""

    def __init__(self, run: CollectiveRun, member: Member, stream: Stream, members: Sequence[int],
                 sends: Sequence[int], recvs: Sequence[int]) -> None:  # fmt: skip
        self.run_ = run
        self.member = member
        self.stream = stream
        self.id = member.rank
        me = self.id
        self.sends = [(p, b) for p, b in zip(members, sends) if p != me and b > 0]
        self.recvs = [(p, b) for p, b in zip(members, recvs) if p != me and b > 0]
        self.left = 0

    def on_init(self) -> None:
        run, me = self.run_, self.id
        self.left = len(self.sends) + len(self.recvs)
        if self.left == 0:
            run.clock.at_rank(me, 1, self._done_after)
            return
        # one message per pair: the key leaves the size out, so a receive list that disagrees with
        # its sender's (a malformed trace) still meets the message the sender's list sends, as in
        # the export's algorithm (the messenger reports the disagreement)
        for peer, size in self.sends:
            run.messenger.send(me, peer, size, (run.tag, "a2av", me, peer), self._one)
        for peer, size in self.recvs:
            run.messenger.recv(peer, me, size, (run.tag, "a2av", peer, me), self._one)

    def _done_after(self, _: Any = None) -> None:
        self.run_.phase_done(self.member, self.stream)

    def _one(self) -> None:
        self.left -= 1
        if self.left == 0:
            self.run_.phase_done(self.member, self.stream)


def _subtree(ids: Sequence[int], parent: int, out: dict[int, list[int]]) -> int:
    """A complete binary tree over `ids` numbered in order; fills out[node] = [parent, left, right]."""
    mid = len(ids) // 2
    me = ids[mid]
    out[me] = [parent, -1, -1]
    if mid:
        out[me][1] = _subtree(ids[:mid], me, out)
        out[me][2] = _subtree(ids[mid + 1 :], me, out)
    return me


def binary_tree(ids: Sequence[int], root_max: bool) -> dict[int, list[int]]:
    """ASTRA-sim's double-binary-tree halves: a root with one child above a complete binary tree,
    numbered in order along `ids`; the "max" tree puts the root last (left child), "min" first."""
    out: dict[int, list[int]] = {}
    if root_max:
        root, rest = ids[-1], ids[:-1]
        out[root] = [-1, _subtree(rest, root, out), -1]
    else:
        root, rest = ids[0], ids[1:]
        out[root] = [-1, -1, _subtree(rest, root, out)]
    return out


class DoubleBinaryTreeAlg:
    """All-reduce up one binary tree and back down; consecutive chunks alternate the two trees."""

    def __init__(
        self, run: CollectiveRun, member: Member, stream: Stream, ring: Ring, data: int, root_max: bool
    ) -> None:
        p = len(ring)
        if p & (p - 1):
            raise ConfigError(f"{run.where}: doubleBinaryTree needs a power-of-two dimension size, got {p}")
        self.run_ = run
        self.member = member
        self.stream = stream
        self.id = member.rank
        self.parent, self.left, self.right = binary_tree(ring.ids, root_max)[self.id]
        self.kind = "root" if self.parent < 0 else ("leaf" if self.left < 0 and self.right < 0 else "mid")
        self.state = "begin"
        self.reductions = 0
        self.data = data
        self.final = data
        self.fast = False
        self.bus = run.ed

    def on_init(self) -> None:
        self.step("init")

    def on_general(self) -> None:
        self.step("general")

    def on_received(self) -> None:
        self.step("received")

    def _bundle(self, processed: bool, send_back: bool = False, to_memory: bool = False) -> None:
        self.run_.bundle(self, self.data, processed, send_back, to_memory)

    def _send(self, dst: int) -> None:
        self.run_.send(self, self.id, dst, self.data)

    def _recv(self, src: int) -> None:
        self.run_.recv(self, src, self.id, self.data)

    def step(self, event: str) -> None:
        st, kind = self.state, self.kind
        if kind == "leaf":
            if st == "begin":
                self._bundle(False, to_memory=True)
                self.state = "to_parent"
            elif st == "to_parent":
                self._send(self.parent)
                self._recv(self.parent)
                self.state = "from_parent"
            elif st == "from_parent":
                self._bundle(False)
                self.state = "end"
            elif st == "end":
                self.run_.phase_done(self.member, self.stream)
        elif kind == "mid":
            if st == "begin":
                self.state = "two_children"
                self._recv(self.left)
                self._recv(self.right)
            elif st == "two_children" and event == "received":
                self._bundle(True)
                self.state = "one_child"
            elif st == "one_child" and event == "received":
                self._bundle(True, True)
                self.state = "to_parent"
            elif self.reductions < 1 and event == "general":
                self.reductions += 1  # the first reduction's completion only counts
            elif st == "to_parent":
                self.state = "from_parent"
                self._send(self.parent)
                self._recv(self.parent)
            elif st == "from_parent" and event == "received":
                self._bundle(True, True)
                self.state = "to_children"
            elif st == "to_children":
                self._send(self.left)
                self._send(self.right)
                self.run_.phase_done(self.member, self.stream)
        else:
            only = self.left if self.left >= 0 else self.right
            if st == "begin":
                self.state = "one_child"
                self._recv(only)
            elif st == "one_child":
                self._bundle(True, True)
                self.state = "to_children"
            elif st == "to_children":
                self._send(only)
                self.run_.phase_done(self.member, self.stream)


# ---- streams, queues, members ------------------------------------------------------------------


class Stream:
    __slots__ = ("phases", "queue", "alg", "index", "initialized")

    def __init__(self, phases: list[tuple]) -> None:
        self.phases = phases  # [(queue, factory(member, stream) -> algorithm)]
        self.queue = -1
        self.alg: Any = None
        self.index = -1
        self.initialized = False


class Member:
    __slots__ = ("rank", "active", "running", "left", "finish", "held")

    def __init__(self, rank: int, streams: int) -> None:
        self.rank = rank
        self.held = -1  # a queue whose streams wait until the member's streams are all created
        self.active: dict[int, list[Stream]] = {}
        self.running: dict[int, int] = {}
        self.left = streams
        self.finish = -1


class CollectiveRun:
    """One collective: members join with `issue(rank)` (at the clock's now) and run on their own;
    `on_finish(rank)` is called when a member's last chunk is done."""

    def __init__(
        self,
        owner: CollectiveRunner,
        phase_plan: Callable[[int], list],
        chunks: int,
        clock: Any,
        messenger: Messenger,
        tag: Any = None,
        on_finish: Optional[Callable[[int], None]] = None,
        held: Optional[dict[int, int]] = None,
    ) -> None:
        self.net = owner.net
        self.ed = owner.ed
        self.compat = owner.compat
        self.lmbw = owner.sys.local_mem_bw
        self.where = owner.where
        # streams a queue runs at once: active chunks per dimension over its queues, rounded up
        self.threshold = -(-owner.sys.active_chunks_per_dimension // owner.queues)
        self.clock = clock
        self.members: dict[int, Member] = {}
        self.phase_plan = phase_plan
        self.chunks = chunks
        self.messenger = messenger
        self.owner = owner
        self.held = held
        self.ended_on: dict[int, int] = {}  # member -> queue its last stream ended on
        self.tag = tag
        self.on_finish = on_finish
        self.loggp = owner.loggp  # (L, o, g, G, local-reduction-delay) when the shared bus is modelled
        # LogGP memory buses per member: a live run shares the runner's (ASTRA-sim keeps one bus per
        # NPU across collectives); an isolated run, on its own clock, starts with fresh ones
        self.buses: dict[int, SharedBus] = owner.live_buses if held is None else {}
        self.finished: list[int] = []  # members in the order their last chunk ended (ties included)

    # -- system layer --
    def issue(self, rank: int) -> None:
        m = self.members[rank] = Member(rank, self.chunks)
        # Issued by the end of this rank's previous collective, at the same ns: in ASTRA-sim that
        # collective's last stream still holds its queue while the new streams are created (the
        # workload issues from inside proceed_to_next_vnet_baseline, before the old stream leaves
        # its queue), so new streams of that queue start after those of the other queues.
        if self.held is not None:  # an isolated run: the runner worked it out from absolute times
            m.held = self.held.get(rank, -1)
        else:
            last = self.owner.last_end.get(rank)
            if last is not None and last[0] == self.clock.now:
                m.held = last[1]
        for c in range(self.chunks):
            s = Stream(self.phase_plan(rank, c))
            s.index = c
            self.next_phase(m, s)
        if m.held >= 0:
            q, m.held = m.held, -1
            self.fill(m, q, released=False)

    def next_phase(self, m: Member, s: Stream) -> None:
        prev = s.queue
        if prev >= 0:
            m.active[prev].remove(s)
        if not s.phases:
            s.alg = None  # break the stream <-> algorithm cycle: simulate() runs with the cyclic GC off
            m.left -= 1
            if m.left == 0:
                m.finish = self.clock.now
                self.finished.append(m.rank)
                self.ended_on[m.rank] = prev
                if self.held is None:
                    self.owner.last_end[m.rank] = (self.clock.now, prev)
                if self.on_finish is not None:
                    self.on_finish(m.rank)
            self.fill(m, prev, released=True)
            return
        q, factory = s.phases.pop(0)
        s.queue = q
        s.alg = factory(self, m, s)
        s.initialized = False
        m.active.setdefault(q, []).append(s)
        if prev >= 0:
            self.fill(m, prev, released=True)
        self.fill(m, q, released=False)

    def fill(self, m: Member, q: int, released: bool) -> None:
        if released:
            m.running[q] -= 1
        if q == m.held:
            return
        run = m.running.get(q, 0)
        lst = m.active.get(q, [])
        i = run
        while i < len(lst) and run < self.threshold:
            s = lst[i]
            s.initialized = True
            s.alg.on_init()
            run += 1
            i += 1
        m.running[q] = run

    def phase_done(self, m: Member, s: Stream) -> None:
        self.next_phase(m, s)

    def bundle(self, alg: RingAlg, size: int, processed: bool, send_back: bool, to_memory: bool) -> None:
        """A packet crosses the memory bus, then (if it carries data to reduce) the reduction.
        `send_back` / `to_memory` only matter to the LogGP shared bus (which direction the bundle
        starts in, and whether it comes back)."""

        def after_bus(_: Any = None) -> None:
            if processed:
                self.clock.at_rank(alg.id, self.reduction(size), lambda _a: alg.on_general())
            else:
                alg.on_general()

        if self.loggp is None or alg.fast:
            self.clock.at_rank(alg.id, alg.bus, after_bus)
            return
        bus = self.buses.get(alg.id)
        if bus is None:
            bus = self.buses[alg.id] = SharedBus(self.clock, *self.loggp)
        (bus.to_memory if to_memory else bus.to_npu)(size, processed, send_back, after_bus)

    def reduction(self, size: int) -> int:
        if self.lmbw <= 0:
            raise ConfigError(
                f"{self.where}: local-mem-bw must be > 0 for reducing collectives (ASTRA-sim divides by it)"
            )
        return reduction_ns(self.lmbw, size)

    # -- network: one key per (collective, chunk, pair, size), as ASTRA-sim's stream tags --
    def send(self, alg: RingAlg, src: int, dst: int, size: int) -> None:
        if size <= 0:
            self.owner.zero_message(size)
        self.messenger.send(src, dst, size, (self.tag, alg.stream.index, src, dst, size), NOOP)

    def recv(self, alg: RingAlg, src: int, dst: int, size: int) -> None:
        self.messenger.recv(src, dst, size, (self.tag, alg.stream.index, src, dst, size), alg.on_received)


class CollectiveRunner:
    """Per-member finish offsets of collectives on one network + system config, memoised."""

    takes_issue_order = True  # `finish(..., issued=)` is understood
    takes_peers = True  # `finish(..., peers=)` and `live(..., peers=)`: all-to-all with per-peer sizes

    @property
    def needs_live(self) -> bool:
        """The LogGP memory buses (`model-shared-bus`) keep their state from one collective to the
        next, as ASTRA-sim's per-NPU MemBus does: only runs on the one clock can share them."""
        return self.loggp is not None

    def __init__(
        self,
        net: Network,
        system: SystemConfig,
        *,
        compat: bool = True,
        rendezvous: bool = False,
        topology: Optional[NetworkConfig] = None,
        queues_per_dim: int = 1,
        closed_form: bool = True,
    ) -> None:
        """`topology`: the network's dimensions (default: `net.cfg`, so any network model works
        when it is given)."""
        self.net = net
        cfg = topology if topology is not None else net.cfg
        self.counts = [int(c) for c in cfg.npus_count]
        self.strides = [math.prod(self.counts[:d]) for d in range(len(self.counts))]
        self.compat = compat
        self.rendezvous = rendezvous
        self.sys = system
        self.where = str(system.path or "<system>")
        self.ed = int(system.endpoint_delay * system.injection_scale)
        self.loggp = shared_bus(system)
        self.total = math.prod(self.counts)
        # Ring collectives whose members move in lockstep are computed in closed form
        # (`chakra.sim.lockstep`); False runs every collective message by message (tests compare).
        self.closed_form = closed_form
        self._cache: dict[tuple, tuple[int, ...]] = {}
        self.warnings: list[str] = []
        self.link_free: dict[tuple, int] = {}  # aware links: when each is free (isolated runs)
        self._trees: dict[tuple[int, int], int] = {}  # (collective type, dim) -> tree phases created
        self._plan_trees: dict[int, int] = {}  # dim -> tree phases per chunk, of the last plan
        # Queues per dimension (ASTRA-sim's --num-queues-per-dim) and, per NPU and dimension, its
        # queue allocators (round robin, first half, second half), which run on across the
        # collectives that NPU takes part in (every NPU has its own in ASTRA-sim).
        self.queues = max(1, int(queues_per_dim))
        self.live_buses: dict[int, SharedBus] = {}  # the LogGP buses of live runs, per rank
        self.last_end: dict[int, tuple[int, int]] = {}  # rank -> (ns, queue) its last collective ended at
        self._alloc: dict[int, dict[int, list[int]]] = {}
        # Positions (in `members`) of the last `finish()` call's members, in the order they ended:
        # members ending at the same ns complete in this order, as ASTRA-sim's event queue runs them
        # (a remote memory served first-come, for one, sees the difference).
        self.finish_order: tuple[int, ...] = ()
        self.custom = CustomAlgorithms()

    def held(self, members: Sequence[int], starts: Sequence[int]) -> tuple[int, ...]:
        """Per member, the queue its previous collective ended on if it issues at that very ns
        (it then waits for that queue), else -1."""
        out = []
        for r, start in zip(members, starts):
            end, q = self.last_end.get(r, (-1, -1))
            out.append(q if end == start else -1)
        return tuple(out)

    @property
    def alternates_trees(self) -> bool:
        """Whether a double-binary-tree phase was created: their alternation counts on across
        every rank's collectives, so the copies of a folded run would not see the same trees."""
        return bool(self._trees)

    def copy_rank_state(self, ranks: Sequence[int], offset: int) -> None:
        """Give `rank + offset` the per-rank state of each rank (when its last collective ended,
        its queue allocators): the copies of a folded run (`chakra.sim.fold`) take part in no
        call of their own."""
        for r in ranks:
            got = self.last_end.get(r)
            if got is not None:
                self.last_end[r + offset] = got
            alloc = self._alloc.get(r)
            if alloc is not None:
                self._alloc[r + offset] = {d: list(v) for d, v in alloc.items()}

    def chunks(self, ctype: int, size: int) -> tuple[int, int]:
        """(number of streams, bytes per stream), as ASTRA-sim's determine_chunk_size."""
        splits = self.sys.preferred_dataset_splits
        if IMPL_KEY[ctype] in self.sys.custom_implementation:
            self._custom_streams(ctype, size)
            return 1, size  # a custom algorithm is one stream; its files say the bytes
        chunk = size // splits
        if ctype != AG and self.total > chunk:
            chunk = self.total
            size = splits * chunk
        if chunk <= 0:
            raise ConfigError(
                f"{self.where}: an all-gather of {size} B is smaller than preferred-dataset-splits "
                f"({splits}): ASTRA-sim divides by zero"
            )
        return -(-size // chunk), chunk

    def _custom_streams(self, ctype: int, size: int) -> None:
        """ASTRA-sim sizes a custom collective's data set by the usual chunking but creates one
        stream: with more than one expected, the collective never completes (measured)."""
        splits = self.sys.preferred_dataset_splits
        chunk = size // splits
        if ctype != AG and self.total > chunk:
            chunk, size = self.total, splits * self.total
        streams = -(-size // chunk) if chunk > 0 else 0
        if streams != 1:
            key = IMPL_KEY[ctype].replace("_", "-")
            raise ConfigError(
                f"{self.where}: {key}-implementation-custom with preferred-dataset-splits "
                f"{splits}: ASTRA-sim waits for {streams} streams of a {size}-byte collective and creates one, so "
                "it never finishes (set preferred-dataset-splits to 1)"
            )

    def finish(
        self,
        ctype: int,
        size: int,
        members: tuple[int, ...],
        involved: Optional[tuple[bool, ...]],
        starts: Sequence[int],
        issued: Optional[Sequence[int]] = None,
        peers: Optional[tuple] = None,
    ) -> list[int]:
        """Finish time of each member (same order as `members`) given each one's issue time;
        `issued`: the members in the order they issued (members issuing at the same ns start in
        this order, which decides same-ns ties later on), default `members` order; `peers`: per
        member, its (send, receive) byte lists of an all-to-all with per-peer sizes (`PeerAlg`)."""
        t0 = min(starts)
        offsets = tuple(s - t0 for s in starts)
        if issued is not None:
            index = {r: i for i, r in enumerate(members)}
            order = tuple(index[r] for r in issued)
        else:
            order = tuple(range(len(members)))
        # Aware links still busy with an earlier collective's messages (a tree's last sends to its
        # children, in flight when the sender is done; a late member still working while early ones
        # start the next collective): the two interleave on the links, which only live mode models.
        if self.net.aware and any(f > t0 for f in self.link_free.values()):
            raise OverlapsEarlierTraffic()
        held = self.held(members, starts)
        key = (
            ctype,
            size,
            members,
            involved,
            offsets,
            order,
            held,
            self._tree_parities(ctype),
            self._alloc_state(members),
            peers,
        )
        hit = self._cache.get(key)
        if hit is None:
            hit = self._run(ctype, size, members, involved, offsets, order, held, peers)
            self._cache[key] = hit
        out, used, trees, alloc, order, ended_on = hit
        self.finish_order = order
        for r, x, q in zip(members, out, ended_on):
            self.last_end[r] = (t0 + x, q)
        self._advance_trees(ctype, trees)
        for r, state in alloc:
            self._alloc[r] = {d: list(v) for d, v in state}
        free = self.link_free
        for k, f in used:
            if t0 + f > free.get(k, 0):
                free[k] = t0 + f
        return [t0 + x for x in out]

    # ASTRA-sim alternates a double-binary-tree dimension's two trees on every phase it creates there,
    # counting on across collectives; one counter per collective type and dimension (its topology
    # objects are per type). Every rank creates the same phases, so one count serves all.
    def _tree_parities(self, ctype: int) -> tuple:
        return tuple(sorted((d, v % 2) for (c, d), v in self._trees.items() if c == ctype))

    def _alloc_state(self, members: Sequence[int]) -> tuple:
        if self.queues == 1:
            return ()
        return tuple((r, tuple(sorted((d, tuple(v)) for d, v in self._alloc.get(r, {}).items()))) for r in members)

    def _next_queue(self, rank: int, d: int, how: str) -> tuple[int, int]:
        """(queue id, ring direction) for a new phase on dimension d, as ASTRA-sim's queue levels
        hand them out: "level" round robin (the second half of the queues turn anticlockwise),
        "first" the first half clockwise, "last" the second half anticlockwise."""
        n = self.queues
        a = self._alloc.setdefault(rank, {}).setdefault(d, [0, 0, n // 2])
        if how == "first":
            q, direction = a[1], CW
            a[1] = 0 if a[1] + 1 >= n // 2 else a[1] + 1
        elif how == "last":
            q, direction = a[2], ACW
            a[2] = n // 2 if a[2] + 1 >= n else a[2] + 1
        else:
            q, direction = a[0], (ACW if n > 1 and a[0] >= n // 2 else CW)
            a[0] = 0 if a[0] + 1 >= n else a[0] + 1
        return d * n + q, direction

    def _advance_trees(self, ctype: int, trees: tuple) -> None:
        for d, k in trees:
            self._trees[(ctype, d)] = self._trees.get((ctype, d), 0) + k

    def live(
        self, ctype: int, size: int, members: tuple[int, ...], involved: Any, clock: Any, messenger: Messenger,
        tag: Any, on_finish: Callable[[int], None], peers: Optional[dict] = None,
    ) -> Optional[CollectiveRun]:  # fmt: skip
        """A collective that runs on the caller's clock and links; members join with `issue`.
        `peers` (all-to-all with per-peer sizes): rank -> its (send, receive) byte lists, filled
        in by the caller before each member issues."""
        if peers is not None:
            return CollectiveRun(self, self.peer_plan(members, peers), 1, clock, messenger, tag, on_finish)
        n, chunk = self.chunks(ctype, size)
        plan = self.plan(ctype, members, involved, chunk, n)
        if plan is None:
            self._no_dims()
            return None
        self._advance_trees(ctype, tuple((d, n * k) for d, k in self._plan_trees.items()))
        return CollectiveRun(self, plan, n, clock, messenger, tag, on_finish)

    def _no_dims(self) -> None:
        self._warn(
            "a collective with no network dimension to run on (involved_dim all false or size-1 dimensions): "
            "ASTRA-sim never finishes it (and then no rank finishes); here it takes 0 ns"
        )

    def zero_message(self, size: int) -> None:
        """A collective's step sends an empty message: ASTRA-sim's network front end asserts on it."""
        self._warn(ZERO_MESSAGE)

    def _warn(self, msg: str) -> None:
        if msg not in self.warnings:
            self.warnings.append(msg)

    def peer_plan(self, members: tuple[int, ...], lists: Any) -> Callable:
        """The one stream of each member of an all-to-all with per-peer sizes: one `PeerAlg`
        phase on the first queue (where ASTRA-sim puts a custom algorithm's phase)."""

        def stream_phases(rank: int, chunk_index: int) -> list:
            sends, recvs = lists[rank]

            def build(run: CollectiveRun, m: Member, s: Stream) -> PeerAlg:
                return PeerAlg(run, m, s, members, sends, recvs)

            return [(0, build)]

        return stream_phases

    def _run(self, ctype, size, members, involved, offsets, order=None, held=None, peers=None) -> tuple:  # type: ignore[no-untyped-def]
        """((finish offset per member), ((link, free offset), ...)) of one run from t0 = 0."""
        if peers is not None:
            n, plan = 1, self.peer_plan(members, dict(zip(members, peers)))
            self._plan_trees = {}
        else:
            n, chunk = self.chunks(ctype, size)
            # A custom algorithm runs its own sends; the closed form is for the built-in rings.
            if self.closed_form and IMPL_KEY[ctype] not in self.sys.custom_implementation:
                from chakra.sim.lockstep import lockstep_ring  # it builds on this module

                got = lockstep_ring(self, ctype, members, involved, offsets, order, n, chunk)
                if got is not None:
                    return got
            plan = self.plan(ctype, members, involved, chunk, n)
        if plan is None:
            self._no_dims()
            return tuple(offsets), (), (), self._alloc_state(members), tuple(range(len(members))), ()
        clock = Clock()
        messenger = Messenger(clock, self.net, self.rendezvous)
        run = CollectiveRun(self, plan, n, clock, messenger, held=dict(zip(members, held or ())))
        for i in sorted(order or range(len(members)), key=lambda i: offsets[i]):
            clock.at(offsets[i], run.issue, members[i])
        clock.run()
        out = []
        for r in members:
            f = run.members[r].finish
            if f < 0:
                raise ConfigError(f"{self.where}: collective did not finish on rank {r} (ASTRA-sim hangs too)")
            out.append(f)
        trees = tuple((d, n * k) for d, k in self._plan_trees.items())
        index = {r: i for i, r in enumerate(members)}
        order = tuple(index[r] for r in run.finished)
        ended_on = tuple(run.ended_on[r] for r in members)
        return tuple(out), tuple(messenger.free.items()), trees, self._alloc_state(members), order, ended_on

    # -- phases -------------------------------------------------------------------------------
    def algorithm(self, name: str, ctype: int) -> Callable:
        base = name.rstrip("0123456789")
        window = int(name[len(base) :]) if len(base) < len(name) else -1
        if base.startswith("one"):
            base = base[3].lower() + base[4:]
        if base == "ring":
            return lambda run, m, s, c, ring, data, d: RingAlg(run, m, s, c, ring, data, d)
        if base == "direct":
            return lambda run, m, s, c, ring, data, d: DirectAlg(run, m, s, c, ring, data, d, window)
        if base == "halvingDoubling":
            return lambda run, m, s, c, ring, data, d: HalvingDoublingAlg(run, m, s, c, ring, data, d)
        if base == "doubleBinaryTree":
            # ASTRA-sim runs its tree all-reduce whatever the phase's collective (the data is kept).
            return "tree"
        raise ConfigError(f"{self.where}: unknown collective algorithm {name!r}")

    @staticmethod
    def _tree_factory(d: int, base: int, occ: int, per_chunk: dict[int, int]) -> Callable:
        """Chunk c's phase uses tree number base + c x (tree phases per chunk on d) + occ; even = "max"."""

        def make(run, m, s, c, ring, data, direction):  # type: ignore[no-untyped-def]
            return DoubleBinaryTreeAlg(run, m, s, ring, data, (base + s.index * per_chunk[d] + occ) % 2 == 0)

        return make

    def layout(self, ctype: int, members: tuple[int, ...], involved) -> Optional[tuple[list, list]]:  # type: ignore[no-untyped-def]
        """(dims, phases) of a collective: dims = [(network dim, Ring or None = that dim's lines,
        algorithm name)], phases = [(dims index, collective type, queue allocator)] of every chunk,
        in order; None when no phase is left."""
        algs = self.sys.implementation(IMPL_KEY[ctype])
        if not algs:
            raise ConfigError(
                f"{self.where}: no {IMPL_KEY[ctype].replace('_', '-')}-implementation in the system config"
            )
        counts = self.counts
        full = len(members) == self.total
        if not full:
            # A process subgroup: one "local" ring over its members in the listed order (measured:
            # ASTRA-sim's ring follows the comm-group file's order); a multi-dimensional algorithm
            # list becomes a plain ring, a single one is kept.
            name = algs[0] if len(algs) == 1 else "ring"
            ring = Ring(members, local=True)
            if name == "doubleBinaryTree":
                self._warn(
                    "doubleBinaryTree on a process subgroup: ASTRA-sim builds it on a ring and stops with no rank "
                    "finished; here the tree is built over the group's members"
                )
            dims = [(0, ring, name)]
            inv = [True]
        else:
            dims = []
            for d, name in enumerate(algs):
                if name.startswith("one"):
                    dims.append((d, Ring(range(self.total), local=False), name))
                    break
                if d >= len(counts):
                    raise ConfigError(f"{self.where}: {len(algs)} algorithms for a {len(counts)}-D network")
                dims.append((d, None, name))
            inv = list(involved) if involved is not None else [True] * 16
        sizes = [len(ring) if ring is not None else counts[d] for d, ring, _ in dims]
        active = [i for i, (d, _, _) in enumerate(dims) if sizes[i] > 1 and (d < len(inv) and inv[d])]
        if not active:
            return None
        phases: list[tuple[int, int, str]] = []  # (dims index, collective, queue allocator)
        if ctype == AR and not self.sys.collective_optimization:
            raise ConfigError(
                f"{self.where}: missing key collective-optimization, which ASTRA-sim reads for every ALL_REDUCE "
                "it plans natively (it has no default: undefined behaviour); only custom implementations go without it"
            )
        if ctype == AR and self.sys.collective_optimization == "localBWAware":
            last = active[-1]
            phases = [(i, RS, "first") for i in active if i < last] + [(last, AR, "first")]
            phases += [(i, AG, "last") for i in reversed(active) if i < last]
        elif ctype == AG:
            phases = [(i, AG, "level") for i in reversed(active)]
        else:
            phases = [(i, ctype, "level") for i in active]
        return dims, phases

    def line_of(self, d: int, rank: int) -> list[int]:
        """The ranks of network dimension d's line through `rank`, in ring order."""
        stride = self.strides[d]
        base = rank - ((rank // stride) % self.counts[d]) * stride
        return [base + k * stride for k in range(self.counts[d])]

    def plan(self, ctype: int, members: tuple[int, ...], involved, chunk: int, n: int = 1) -> Optional[Callable]:  # type: ignore[no-untyped-def]
        """(member rank, chunk index) -> [(queue, factory)] for that stream, or None when no phase is left."""
        prefix = self.sys.custom_implementation.get(IMPL_KEY[ctype])
        if prefix is not None:
            # ASTRA-sim: one phase on queue 0 over the whole group, the network's dimensions unused
            make = self.custom.factory(prefix, tuple(members), len(members) == self.total)
            self._plan_trees = {}
            return lambda rank, chunk_index: [(0, make)]
        got_layout = self.layout(ctype, members, involved)
        if got_layout is None:
            return None
        dims, phases = got_layout
        counts, strides = self.counts, self.strides

        lines: dict[tuple[int, int], Ring] = {}  # one Ring per network line, shared by its members

        def line(i: int, rank: int) -> Ring:
            d, ring, _ = dims[i]
            if ring is not None:
                return ring
            stride = strides[d]
            base = rank - ((rank // stride) % counts[d]) * stride
            got = lines.get((d, base))
            if got is None:
                got = lines[(d, base)] = Ring(self.line_of(d, rank), local=False)
            return got

        # queue and direction of every phase of every chunk, handed out by the member's own queue
        # allocators when it issues (a member's collectives may be created by other members in
        # another order than the one it issues them in)
        assign: dict[int, list] = {}

        def queues_of(rank: int) -> list:
            got = assign.get(rank)
            if got is None:
                got = assign[rank] = [
                    [self._next_queue(rank, dims[i][0], how) for i, _, how in phases] for _ in range(n)
                ]
            return got

        factories: list = []
        per_chunk: dict[int, int] = {}
        for i, c, _ in phases:
            fac = self.algorithm(dims[i][2], c)
            if fac == "tree":
                d = dims[i][0]
                base, occ = self._trees.get((ctype, d), 0), per_chunk.get(d, 0)
                per_chunk[d] = occ + 1
                fac = self._tree_factory(d, base, occ, per_chunk)
            factories.append(fac)
        self._plan_trees = per_chunk

        def stream_phases(rank: int, chunk_index: int) -> list:
            out = []
            data = [chunk]

            def make(i: int, c: int, direction: int, fac: Callable) -> Callable:
                def build(run: CollectiveRun, m: Member, s: Stream) -> RingAlg:
                    alg = fac(run, m, s, c, line(i, rank), data[0], direction)
                    data[0] = alg.final
                    return alg

                return build

            for (i, c, _), fac, (queue, direction) in zip(phases, factories, queues_of(rank)[chunk_index]):
                out.append((queue, make(i, c, direction, fac)))
            return out

        return stream_phases

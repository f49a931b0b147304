"""Timeline segmentation and dependencies: from timed Ops to graph items.

Host threads: operators are nested, and simulators add up the durations of every node, so a
thread becomes ONE chain of segments in start order: each operator owns the time from its
start to the next boundary (its first child's start, or its own end), and the time an operator
spends between and after its children becomes an explicit gap node (`gap`, attr `gap_of` = the
operator's id); time outside any operator on the main thread becomes an `idle` node. Gaps
shorter than `gap_min_ns` are folded into the segment before them. Replaying the chain
therefore reproduces the thread's wall time exactly (CPU gaps kept as explicit nodes, official
issue #220), while leaf operators keep their measured durations.

Executors (GPU streams, gloo run-loop threads, and per-process-group comm queues without
timing) are chains of their own: a node depends on the previous one on its stream (ctrl) and on
the host segment that launched it (data). When it started later than both allow, the delay
becomes a `queue` node. A host segment that was blocked until an executor finished (a gap or a
wait/sync op containing the executor's end) depends on it (data) and keeps only the part of
its time after the wake-up, which is also its emitted start (`wait_from`), so a faster network
or GPU shortens the step in a simulation and no edge ever points from a node that ends after
its dependent starts.

Collectives keep their recorded order per process group: NCCL and gloo run a communicator's
collectives in the order they were issued, and every replay (ours, ASTRA-sim's) matches the k-th
collective a rank issues on a group with the k-th of every other member. Executors do not give
that order by themselves (gloo runs a group's collectives on two worker threads, so two of them
overlap on two chains, and an executor follows only what had finished when it started), so each
collective also depends (ctrl) on the previous one of its group in issue order (`_order_collectives`);
one that ran alongside the previous keeps only its time after it, as a blocked segment does.

Edge kinds: ctrl_deps = program order within a thread/stream or process group; data_deps =
launch, wait/sync, cross-thread hand-offs.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from operator import attrgetter
from typing import Any, Optional

from chakra.converters.pytorch.comms import RECV, SEND
from chakra.converters.pytorch.ops import COMM, CPU, GPU, META, Op

GAP = "gap"
IDLE = "idle"
QUEUE = "queue"

_WAITLIKE = ("wait", "synchronize", "Synchronize", "barrier", "_local_scalar_dense", "aten::item", "record_param_comms")
SYNC_RUNTIME = frozenset(
    {"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaMemcpy", "hipDeviceSynchronize",
     "hipStreamSynchronize", "hipEventSynchronize", "hipMemcpy"}
)  # fmt: skip


_ID = attrgetter("id")
_TS = attrgetter("ts")
_END = attrgetter("end")
_START = attrgetter("start")


class Item:
    """One emitted node: an op segment or a gap/idle/queue segment."""

    __slots__ = ("id", "op", "kind", "owner", "start", "end", "ctrl", "data", "wait_from", "seq", "chain", "on_gpu")

    def __init__(self, op: Optional[Op], start: Optional[int], kind: str = "", owner: int = 0) -> None:
        self.id = op.id if op is not None else 0
        self.op = op
        self.kind = kind  # "" for op segments, else GAP / IDLE / QUEUE
        self.owner = owner
        self.start = start
        self.end = start
        self.ctrl: list[int] = []
        self.data: Any = ()  # a list once it has a data dependency (rare: most items have none)
        self.wait_from = start
        self.seq = 0  # index in its thread chain
        self.chain: Any = None  # key of its host thread chain (None for executors)
        self.on_gpu = False  # a queue item of a GPU stream: device time, not a CPU task


class Builder:
    def __init__(self, ops: dict[int, Op], timed: bool, gap_min_ns: int, stats: dict[str, Any]) -> None:
        self.ops = ops
        self.timed = timed
        self.gap_min = gap_min_ns
        self.stats = stats
        self.items: list[Item] = []
        self.next_id = max(ops, default=1) + 1
        self.op_item: dict[int, Item] = {}
        self.chains: dict[Any, list[Item]] = {}
        self.starts: dict[Any, list[int]] = {}
        self.wait_edges: list[tuple[Item, Item]] = []
        self._gpu_index: Optional[dict] = None
        self._comm_index: Optional[tuple[list[int], list[Item]]] = None
        self._gap_nodes = self._gap_ns = self._queue_nodes = 0  # counted as they are made, for the summary
        #: every dependency precedes its dependent in (start or 0, id) order: the emitter's sort is
        #: then topological without checking. Kept by `_ctrl`/`_data` (and inline in the host-chain loop).
        self.edges_in_order = True

    def new_item(self, op: Optional[Op], start: Optional[int], kind: str = "", owner: int = 0) -> Item:
        it = Item(op, start, kind, owner)
        if op is None:
            it.id = self.next_id
            self.next_id += 1
        else:
            self.op_item[op.id] = it
        self.items.append(it)
        return it

    def _ctrl(self, it: Item, dep: Item) -> None:
        """`it` follows `dep` (ctrl_deps)."""
        it.ctrl.append(dep.id)
        if (dep.start or 0, dep.id) > (it.start or 0, it.id):
            self.edges_in_order = False  # see __init__

    def _data(self, it: Item, dep: Item) -> None:
        """`it` waits for `dep` (data_deps)."""
        if it.data:
            it.data.append(dep.id)
        else:
            it.data = [dep.id]
        if (dep.start or 0, dep.id) > (it.start or 0, it.id):
            self.edges_in_order = False

    # ------------------------------------------------------------------ host threads
    def build(self, sync_events: list = ()) -> list[Item]:
        threads: dict[Any, list[Op]] = defaultdict(list)
        execs: dict[Any, list[Op]] = defaultdict(list)
        for op in self.ops.values():
            if op.kind == META:
                self.new_item(op, op.ts)
            elif op.kind == CPU:
                threads[op.thread if op.ts is not None else ("et", op.tid)].append(op)
            else:
                key = op.thread
                if key is None or op.ts is None:
                    key = ("pg", op.comm.pg_name if op.comm is not None else "")
                execs[key].append(op)
        main = _main_thread(threads)
        for key, ops in threads.items():
            timed = self.timed and ops[0].ts is not None
            chain = self._host_chain(ops, timed, key, idle_nodes=key == main)
            self.chains[key] = chain
            starts = list(map(_START, chain))
            if None in starts:
                starts = [t if t is not None else 0 for t in starts]
            self.starts[key] = starts
        self.stats["gap_nodes"] = self._gap_nodes
        self.stats["gap_us"] = round(self._gap_ns / 1000, 1) if self.timed else 0.0
        for key, ops in execs.items():
            self._exec_chain(key, ops)
        self._order_collectives()
        if main is not None and self.timed:
            self._handoffs(main)
        for ev in sync_events:
            self._sync(ev)
        self.stats["queue_nodes"] = self._queue_nodes
        return self.items

    def _host_chain(self, ops: list[Op], timed: bool, key: Any, idle_nodes: bool) -> list[Item]:
        """The thread's items in order; each item's `chain` is `key`."""
        chain: list[Item] = []
        if not timed:
            for op in sorted(ops, key=lambda o: o.id):
                it = self.new_item(op, None)
                it.chain = key
                if chain:
                    self._ctrl(it, chain[-1])
                it.seq = len(chain)
                chain.append(it)
            return chain
        # Order (ts, -end, id), from three stable sorts on plain attributes (cheaper than tuple keys).
        ops.sort(key=_ID)
        ops.sort(key=_END, reverse=True)
        ops.sort(key=_TS)
        stack: list[Op] = []
        gap_min = self.gap_min
        add_item = self.items.append
        add_link = chain.append
        pending_gap: Optional[tuple[int, int]] = None  # (start, owner id or 0)
        # A secondary thread's short pauses inside a burst of work (autograd's engine between its
        # nodes) fold into the segment before them, as short gaps do, so that a replay keeps the
        # burst's length; longer idle time (the thread waiting for work) belongs to no node.
        burst_gap = gap_min * 50

        def flush_gap(until: int) -> None:
            nonlocal pending_gap
            if pending_gap is None:
                return
            start, owner = pending_gap
            pending_gap = None
            if until - start >= gap_min and (owner or idle_nodes):
                it = Item(None, start, GAP if owner else IDLE, owner)  # new_item and append, inlined
                it.id = self.next_id
                self.next_id += 1
                add_item(it)
                it.end = until
                it.chain = key
                if chain:
                    prev = chain[-1]
                    it.ctrl.append(prev.id)
                    if prev.start > start or (prev.start == start and prev.id > it.id):
                        self.edges_in_order = False
                it.seq = len(chain)
                add_link(it)
                self._gap_nodes += 1
                self._gap_ns += until - start
            elif not owner and chain:
                last = chain[-1]
                if until - start >= burst_gap:
                    if last.end is None:
                        last.end = start  # idle time on a secondary thread belongs to no node
                elif last.end == start:
                    last.end = until  # a short pause folds into the segment before it (a gap node)

        # The hot loop (once per host op): new_item and the chain append are inlined.
        op_item = self.op_item
        # A pause inside an operator shorter than `gap_min` makes no node: dropped here without
        # calling `flush_gap` (nearly every pause between two ops is one).
        for op in ops:
            ts = op.ts
            while stack and stack[-1].end <= ts:
                top = stack.pop()
                if pending_gap is not None:
                    if pending_gap[1] and top.end - pending_gap[0] < gap_min:
                        pending_gap = None
                    else:
                        flush_gap(top.end)
                pending_gap = (top.end, stack[-1].id if stack else 0)
            if pending_gap is not None:
                if pending_gap[1] and ts - pending_gap[0] < gap_min:
                    pending_gap = None
                else:
                    flush_gap(ts)
            item = Item(op, ts)
            item.end = None  # set below: the next item's start, unless idle time cuts it short
            item.chain = key
            op_item[op.id] = item
            add_item(item)
            if chain:
                prev = chain[-1]
                item.ctrl.append(prev.id)
                if prev.start > ts or (prev.start == ts and prev.id > item.id):  # `_ctrl`, inlined
                    self.edges_in_order = False
            item.seq = len(chain)
            add_link(item)
            stack.append(op)
        while stack:
            top = stack.pop()
            flush_gap(top.end)
            pending_gap = (top.end, stack[-1].id if stack else 0)
        last_end = pending_gap[0] if pending_gap else (chain[-1].start if chain else 0)
        # Segment ends: the next item's start (folded short gaps included), the last closes the thread.
        for a, b in zip(chain, chain[1:]):
            if a.end is None:
                a.end = b.start
        if chain and chain[-1].end is None:
            chain[-1].end = last_end
        return chain

    # ------------------------------------------------------------------ executors
    def _launch_item(self, op: Op) -> Optional[Item]:
        launcher = op.launcher
        if launcher is None:
            return None
        if not self.timed or launcher.ts is None or op.ts is None:
            return self.op_item.get(launcher.id)
        own = self.op_item.get(launcher.id)
        key = own.chain if own is not None else None
        chain = self.chains.get(key)
        if not chain:
            return own
        t = launcher.end
        launch_ns = (op.extra or {}).get("launch_ns")
        if isinstance(launch_ns, int):
            t = launch_ns
        t = min(t, op.ts)
        idx = bisect_left(self.starts[key], t) - 1
        if idx < 0:
            return own
        if own is not None and idx < own.seq:
            idx = own.seq
        # The executor may start while its launching segment still runs (the launch sits inside it):
        # then depend on the last segment that had ended by then, so the replay never starts it late.
        while idx > 0 and chain[idx].end is not None and chain[idx].end > op.ts:
            idx -= 1
        return chain[idx]

    def _exec_chain(self, key: Any, ops: list[Op]) -> None:
        timed = self.timed and all(o.ts is not None for o in ops)
        ops.sort(key=(lambda o: (o.ts, o.id)) if timed else (lambda o: o.id))
        chain: list[Item] = []
        for op in ops:
            launch = self._launch_item(op)
            prev: Optional[Item] = chain[-1] if chain else None
            if timed:
                # Work on one executor may overlap (gloo runs isend/irecv concurrently): follow the
                # latest item that had finished when this one started, so overlap stays overlap.
                prev = next((c for c in reversed(chain[-16:]) if c.end <= op.ts), None)
                # a launcher Kineto did not time (no matching event) has no end: it imposes no wait
                launched = launch.end if launch is not None and launch.end is not None else 0
                ready = max(prev.end if prev is not None else 0, launched)
                if prev is not None or launch is not None:
                    delay = op.ts - ready
                    if delay >= self.gap_min:
                        q = self.new_item(None, ready, QUEUE, op.id)
                        # the stream waited for its launch: GPU-side time that takes no CPU
                        q.on_gpu = isinstance(key, tuple) and key[0] == "stream"
                        self._queue_nodes += 1
                        q.end = op.ts
                        if prev is not None:
                            self._ctrl(q, prev)
                        if launch is not None:
                            self._data(q, launch)
                        chain.append(q)
                        prev = q
            it = self.new_item(op, op.ts)
            it.end = op.end
            if prev is not None:
                self._ctrl(it, prev)
            if launch is not None:
                self._data(it, launch)
            chain.append(it)
            if launch is not None and op.kind != GPU:
                # A collective's caller may block on it; a kernel's does not: a host gap that
                # contains a kernel's end is dispatch work, and a real wait on the GPU is a sync
                # call (`_sync`), so that a faster GPU never shortens the CPU's own time.
                self._wait(it, launch, op)

    def _order_collectives(self) -> None:
        """Each collective of a process group depends on the one issued before it on that group.

        Issue order is the order of the calls that launched them (their start, then id), else of
        the executors themselves; p2p is matched by (peer, tag) instead and keeps its overlap.
        """
        by_pg: dict[str, list[tuple[int, int, Item]]] = defaultdict(list)
        for op in self.ops.values():
            info = op.comm
            if op.kind != COMM or info is None or info.coll in (SEND, RECV):
                continue
            it = self.op_item.get(op.id)
            if it is None:
                continue
            call = op.launcher if op.launcher is not None and op.launcher.ts is not None else op
            by_pg[info.pg_name].append((call.ts if call.ts is not None else 0, call.id, it))
        added = 0
        for colls in by_pg.values():
            colls.sort(key=lambda c: (c[0], c[1]))
            for (_, _, prev), (_, _, it) in zip(colls, colls[1:]):
                if prev.id not in it.ctrl:
                    self._ctrl(it, prev)
                    added += 1
                if prev.end is not None and it.start is not None and it.end is not None and prev.end > it.start:
                    # gloo ran the two at once (two worker threads): like a blocked host segment, this
                    # one keeps only its time after the previous ended, so a replay of recorded
                    # durations still ends it when it ended.
                    it.wait_from = max(it.wait_from or 0, min(prev.end, it.end))
        if len(by_pg) > 1 and self.timed:
            added += self._order_across_groups([c for colls in by_pg.values() for c in colls])
        self.stats["collective_order_edges"] = added

    def _order_across_groups(self, colls: list[tuple[int, int, Item]]) -> int:
        """A collective also follows every collective of another group that ended before it started.

        Replays that run one collective at a time per rank (ASTRA-sim; `chakra simulate` by default)
        otherwise issue whichever is ready first: with a modelled network a rank could start its
        data-parallel reduce-scatter before the tensor-parallel all-reduce it issued earlier, while
        its TP peer waits in that all-reduce, and so round the mesh (a deadlock the recording never
        had). Collectives that ran at once keep their overlap (no edge), and no edge changes a
        recorded time: each points from an end to a later start. Returns the edges added."""
        colls = sorted(colls, key=lambda c: (c[0], c[1]))
        frontier: list[Item] = []  # collectives no later one follows yet
        added = 0
        for _, _, it in colls:
            if it.start is None:
                continue
            keep = []
            for prev in frontier:
                if prev.end is not None and prev.end <= it.start:
                    if prev.id not in it.ctrl:
                        self._ctrl(it, prev)
                        added += 1
                else:
                    keep.append(prev)
            keep.append(it)
            frontier = keep
        return added

    def _wait(self, ex: Item, launch: Item, op: Op) -> None:
        """The host segment blocked until this executor finished depends on it."""
        key = launch.chain
        chain = self.chains.get(key)
        if not chain:
            return
        if not self.timed or ex.end is None:
            # Without times: a synchronous collective (async_op=False) blocks the next host segment.
            if op.comm is not None and _is_sync_call(launch.op) and launch.seq + 1 < len(chain):
                nxt = chain[launch.seq + 1]
                self._data(nxt, ex)
            return
        e = ex.end
        idx = bisect_left(self.starts[key], e) - 1
        if idx <= launch.seq:
            return
        seg = chain[idx]
        if seg.end is None or seg.end < e:
            return
        if seg.kind in (GAP, IDLE) or (seg.op is not None and any(w in seg.op.name for w in _WAITLIKE)):
            self._blocked(seg, ex)

    def _sync(self, ev: Any) -> None:
        """A CUDA sync event: the host segment active when the awaited GPU work ended depends on it."""
        key = ev.tid
        chain = self.chains.get(key)
        if not chain:
            return
        args = ev.args
        stream = args.get("wait_on_stream", args.get("stream", -1))
        if not isinstance(stream, int) or stream < 0:
            stream = -1  # device / context sync: every stream
        ends, gitems = self._gpu_by_stream().get(stream, ((), ()))
        i = bisect_right(ends, ev.end + 1000) - 1
        if i < 0:
            return
        gpu = gitems[i]
        t = max(gpu.end, ev.ts)
        idx = bisect_left(self.starts[key], t) - 1
        if idx < 0:
            return
        # The segment active then; if it ended before the GPU work did (the sync event may end up to
        # 1 µs before it), the thread's next segment is the one that resumed after the wake-up.
        while idx + 1 < len(chain) and chain[idx].end is not None and chain[idx].end < gpu.end:
            idx += 1
        seg = chain[idx]
        if seg.end is None or seg.end < gpu.end:
            return
        launch = self._launch_item(gpu.op)
        if launch is not None and launch.chain == key and seg.seq <= launch.seq:
            return
        self._blocked(seg, gpu)

    def _blocked(self, seg: Item, dep: Item) -> None:
        """`seg` (a host segment whose end is at or after `dep`'s) was blocked until `dep` finished.

        It depends on `dep` and keeps only its time after the wake-up: `wait_from` becomes its
        emitted start, so the edge never points from a node that ends after its dependent starts.
        """
        self._data(seg, dep)
        if dep.end > (seg.start or 0):
            seg.wait_from = max(seg.wait_from or 0, dep.end)
        self.wait_edges.append((dep, seg))

    def _gpu_by_stream(self) -> dict:
        """stream -> (ends, items) of GPU work sorted by end; key -1 holds every stream."""
        if self._gpu_index is None:
            groups: dict[int, list[Item]] = defaultdict(list)
            for it in self.items:
                op = it.op
                on_stream = op is not None and isinstance(op.thread, tuple) and op.thread[0] == "stream"
                if on_stream and op.kind in (GPU, COMM) and it.end is not None:
                    groups[op.stream].append(it)
                    groups[-1].append(it)
            self._gpu_index = {}
            for k, lst in groups.items():
                lst.sort(key=lambda it: it.end)
                self._gpu_index[k] = ([it.end for it in lst], lst)
        return self._gpu_index

    def _handoffs(self, main: Any) -> None:
        """First op of each burst on a secondary host thread depends on the main-thread segment
        before it; a main-thread wait that spans one helper thread's bursts depends on them (`_join`)."""
        mchain = self.chains[main]
        mstarts = self.starts[main]
        n = joins = 0
        waits: dict[int, list[tuple[Any, Item, Item, Optional[Item]]]] = defaultdict(list)
        for key, chain in self.chains.items():
            if key == main or not chain or chain[0].start is None:
                continue
            bursts: list[tuple[Item, Item, Optional[Item]]] = []  # (first, last, main segment before)
            for it in chain:
                if not bursts or it.start - bursts[-1][1].end >= self.gap_min * 50:  # a new burst (_host_chain)
                    idx = bisect_left(mstarts, it.start) - 1
                    while idx >= 0 and mchain[idx].end > it.start:
                        idx -= 1
                    before = mchain[idx] if idx >= 0 else None
                    if before is not None:
                        self._data(it, before)
                        n += 1
                    if bursts:
                        self._woken_by_device(bursts[-1][1], it)
                    bursts.append((it, it, before))
                else:
                    bursts[-1] = (bursts[-1][0], it, bursts[-1][2])
            for first, last, before in bursts:
                seg = self._waiting_segment(mchain, mstarts, first, last)
                if seg is not None:
                    waits[seg.seq].append((key, first, last, before))
        for seq, bursts_in in waits.items():
            # Several helper threads inside one wait (DDP: the autograd thread and gloo's workers):
            # the main thread woke when the last of them was done, so it joins every one of them
            # (a join only adds a wait that the recording satisfied). The hand-off delay belongs to
            # the thread the main thread handed the work to, the first to start; the others were
            # started by that one (their work depends on what launched it), not by the main thread.
            handed_to = min(bursts_in, key=lambda b: b[1].start)[0]
            handed: Optional[Item] = None
            for key, first, last, before in bursts_in:
                self._blocked(mchain[seq], last)
                joins += 1
                if key != handed_to:
                    continue
                if before is not handed:  # a fresh hand-off, not the thread resuming its own work
                    self._handoff_delay(first, before)
                handed = before
        self.stats["handoff_edges"] = n
        self.stats["join_edges"] = joins

    def _woken_by_device(self, prev: Item, first: Item) -> None:
        """A helper thread idle between two bursts, outside any operator, was blocked in an
        unrecorded wait (DDP's reducer waits for a bucket's all-reduce, then copies the gradients
        back): when a collective ended while it was idle, the burst follows the last one, so a
        replay in which it ends later (or earlier) moves the burst with it. Only collectives: a
        thread idle while kernels ran was not waiting for them (the host never blocks on a plain
        kernel without a recorded sync)."""
        if prev.end is None or first.start is None or (first.op is not None and first.op.kind == COMM):
            return
        ends, items = self._comm_by_end()
        i = bisect_right(ends, first.start) - 1
        if i >= 0 and ends[i] > prev.end:
            self._data(first, items[i])

    def _comm_by_end(self) -> tuple[list[int], list[Item]]:
        """(ends, items) of the collectives and transfers run by executors (gloo's run loop), by end."""
        if self._comm_index is None:
            # not one that overtook the collective issued before it (_order_collectives): it is
            # emitted after that one, so its recorded end is not when it is done in a replay
            lst = sorted(
                (
                    it
                    for it in self.items
                    if it.op is not None
                    and it.op.kind == COMM
                    and it.end is not None
                    and (it.wait_from is None or it.wait_from < it.end)
                ),
                key=lambda it: it.end,
            )
            self._comm_index = ([it.end for it in lst], lst)
        return self._comm_index

    def _waiting_segment(self, mchain: list[Item], mstarts: list[int], first: Item, last: Item) -> Optional[Item]:
        """The main-thread gap or wait-like segment that spans a secondary thread's whole burst
        (`first`..`last`), if one does: the main thread waited, doing nothing, for it (CUDA runs
        backward on the device's autograd thread while `loss.backward()` blocks its caller).

        That segment then depends on the burst's end and keeps only its time after it, as a blocked
        segment does; otherwise a replay that runs one CPU task at a time would add the burst to
        the wait that already spans it."""
        e = last.end
        if e is None:
            return None
        idx = bisect_left(mstarts, e) - 1
        if idx < 0:
            return None
        seg = mchain[idx]
        if seg.end is None or seg.end < e or seg.start > first.start:
            return None
        if seg.kind in (GAP, IDLE) or (seg.op is not None and any(w in seg.op.name for w in _WAITLIKE)):
            return seg
        return None

    def _handoff_delay(self, first: Item, before: Optional[Item]) -> None:
        """The time from the hand-off to the burst's first op (the caller setting the work up, the
        thread waking) as a queue node before it, so that a replay starts the burst when it started."""
        if before is None or before.end is None or first.start - before.end < self.gap_min:
            return
        q = self.new_item(None, before.end, QUEUE, first.id)
        q.end = first.start
        q.chain = None
        self._queue_nodes += 1
        self._data(q, before)
        self._ctrl(first, q)


def _main_thread(threads: dict[Any, list[Op]]) -> Any:
    """The thread that drives the steps: the one that records `ProfilerStep#N`, else the one with
    the most ops (a GPU step with a fused optimizer has more ops on autograd's thread)."""
    for key, ops in threads.items():
        if any(op.name.startswith("ProfilerStep#") for op in ops):
            return key
    return max(threads, key=lambda k: len(threads[k]), default=None)


def _is_sync_call(op: Optional[Op]) -> bool:
    """c10d calls carry `async_op` as a Bool argument; False means the caller blocks."""
    if op is None or not op.inputs:
        return False
    for v, t in zip(op.inputs[0], op.inputs[2]):
        if t == "Bool":
            return v is False
    return False

"""Turning collective calls into comm nodes: pairing each call with the work that executed it.

A *call* is a `c10d::<op>` (or, without one, a `record_param_comms`); an *executor* is what moved
the data: an NCCL kernel (Kineto), a `gloo:<op>` run-loop op, or `nccl:<op>` when the trace has no
kernels (ET alone). Each call with executors becomes ONE comm node placed on its first executor
(later executors of the same call, e.g. the two `gloo:all_reduce` of a gloo reduce_scatter, are
merged into it). A call without any executor still gets a comm node, synthesised after the call,
so an ET-only NCCL trace keeps all its collectives.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, fields
from operator import attrgetter
from typing import Any, Optional

from chakra.converters.pytorch import comms
from chakra.converters.pytorch.comms import RECV, SEND, CommInfo
from chakra.converters.pytorch.gloogroups import Coll, Survey, candidates, solve
from chakra.converters.pytorch.ops import COMM, CPU, GPU, Op
from chakra.schema import CollectiveType

_ID = attrgetter("id")

# executor collective -> c10d collectives it can execute
_COMPATIBLE = {
    CollectiveType.ALL_REDUCE: {CollectiveType.ALL_REDUCE, CollectiveType.REDUCE_SCATTER},
    CollectiveType.ALL_GATHER: {CollectiveType.ALL_GATHER},
}


#: names of the ops `map_comms` reads: calls (c10d::, record_param_comms) and executors (gloo:, nccl:)
_COMM_PREFIXES = ("c10d::", "record_param_comms", "gloo:", "nccl:")


def _tensor_keys(value: Any, out: set) -> None:
    if isinstance(value, list):
        if len(value) == 6 and isinstance(value[0], int) and isinstance(value[5], str):
            out.add((value[0], value[1]))
        else:
            for v in value:
                _tensor_keys(v, out)


def _keys(op: Op) -> set:
    keys: set = set()
    if op.inputs:
        _tensor_keys(op.inputs[0], keys)
    if op.outputs:
        _tensor_keys(op.outputs[0], keys)
    return keys


class Call:
    __slots__ = ("op", "info", "executors", "keys", "tensor_done")

    def __init__(self, op: Op, info: CommInfo) -> None:
        self.op = op
        self.info = info
        self.executors: list[Op] = []
        self.keys: Optional[set] = None
        # a gloo executor on the call's own tensor claimed it: a gloo op whose ET parent is this
        # call but that shares no tensor with it ran another call (gloo ops get the op the main
        # thread was in as parent, e.g. an async all-reduce still running while later calls run)
        self.tensor_done = False


@dataclass
class CommStats:
    """What `map_comms` found, for the rank's conversion summary (`as_dict()` gives its keys)."""

    collectives: dict[str, dict[str, int]] = field(default_factory=dict)
    comm_calls: int = 0
    comm_synthesized: int = 0
    p2p_split_from_batches: int = 0
    comm_executors_merged: int = 0
    comm_pg_defaulted: int = 0
    unknown: dict[str, int] = field(default_factory=dict)
    #: collectives whose group a functional collective (`_c10d_functional::<op>`) names
    comm_pg_from_functional: int = 0
    #: gloo collectives placed on their group by the job-wide thread -> group solution (gloogroups)
    comm_pg_from_threads: int = 0
    #: NCCL kernels whose launch links to no call, paired with the ET's calls by order (`_pair_by_order`)
    comm_kernels_matched_by_order: int = 0
    #: executors merged into their call's comm node: the caller drops them
    merged: list[Op] = field(default_factory=list, repr=False)
    #: the rank's gloo threads and groups, for the job-wide solution (gloogroups.Survey)
    survey: Optional[Survey] = field(default=None, repr=False)
    #: what placing gloo collectives on groups could not settle (for the summary's warnings)
    group_warnings: list[str] = field(default_factory=list, repr=False)

    def as_dict(self) -> dict[str, Any]:
        """The summary keys, in field order."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _NOT_SUMMARY}


_NOT_SUMMARY = ("merged", "survey", "group_warnings")


def map_comms(
    ops: dict[int, Op],
    rank: int,
    pgs: list[dict],
    thread_groups: Optional[dict[int, str]] = None,
    world: int = 0,
    p2p_groups: Optional[dict[int, str]] = None,
) -> CommStats:
    """Mark comm executors (kind COMM, .comm set) and synthesise comm nodes for calls without one.

    Five phases: find the calls, find the executors, pair each executor with its call, give every
    call one comm node, then settle process groups and p2p peers. `CommStats.merged` lists the ops
    merged away (to drop). `thread_groups` (gloo thread -> pg_name, from `gloogroups.solve` over
    every rank's `CommStats.survey`) places the gloo collectives no record names a group for, and
    `p2p_groups` (op id -> pg_name, `gloogroups.solve_p2p`) the point-to-point calls."""
    # Only NCCL kernels are COMM so far; every other op that matters has a comm name prefix.
    # (filtered first, then sorted by id: a big trace has ~100k ops and a handful of comm ones)
    order = sorted((op for op in ops.values() if op.kind == COMM or op.name.startswith(_COMM_PREFIXES)), key=_ID)
    unknown: Counter = Counter()
    calls = _find_calls(order, ops, unknown)
    executors = _find_executors(order)
    call_list = sorted(calls.values(), key=lambda c: c.op.id)
    by_order: dict[Call, Op] = {}
    batch_kernels = _pair_executors(executors, ops, calls, call_list, unknown, by_order)
    split_p2p = _split_batches(batch_kernels, call_list, unknown)
    merged = [k for k in batch_kernels if k.kind == COMM]
    functional = _functional_groups(call_list, ops)
    synthesized = _place_comm_nodes(call_list, split_p2p, by_order, ops, merged)
    stats = CommStats(
        comm_calls=len(call_list),
        comm_synthesized=synthesized,
        p2p_split_from_batches=len(split_p2p),
        comm_executors_merged=len(merged),
        comm_pg_from_functional=functional,
        merged=merged,
    )
    if by_order:
        stats.comm_kernels_matched_by_order = len(by_order)
        streams = sorted({str(k.stream) for k in by_order.values()})
        stats.group_warnings.append(
            f"{len(by_order)} NCCL kernel(s) link to no collective call: matched to the ET's calls by order "
            f"(stream {', '.join(streams)}); each collective keeps its call's type, size and place in the graph "
            "and takes its kernel's duration"
        )
    stats.survey = _survey(ops, rank, pgs, world, merged)
    _settle_groups(ops, rank, pgs, stats, thread_groups, p2p_groups or {})
    stats.unknown = dict(unknown)
    return stats


def _find_calls(order: list[Op], ops: dict[int, Op], unknown: Counter) -> dict[int, Call]:
    """Phase 1: the collective calls (`c10d::<op>`, else `record_param_comms`), by op id.

    A `record_param_comms` under a c10d call refines that call's info instead of being one."""
    calls: dict[int, Call] = {}
    for op in order:
        if op.kind != CPU:
            continue
        name = op.name
        if name.startswith("c10d::"):
            info = comms.from_c10d(op)
            if info is None and op.kargs:
                info = comms.from_kineto_args(op.kargs)
            if info is None:
                if comms.coll_from_word(name[6:].rstrip("_")) is None and name[6:] not in (
                    "wait",
                    "allreduce_coalesced_",
                ):
                    unknown[name] += 1
                continue
            calls[op.id] = Call(op, info)
        elif name == "record_param_comms":
            info = comms.from_record_param_comms(op)
            if info is None and op.kargs:
                info = comms.from_kineto_args(op.kargs)
            if info is None:
                continue
            anc = _call_ancestor(op, ops, calls)
            if anc is not None:
                _refine(anc.info, info)
            else:
                calls[op.id] = Call(op, info)
    return calls


def _find_executors(order: list[Op]) -> list[Op]:
    """Phase 2: what moved the data: NCCL kernels, gloo:/nccl: ops (those become COMM)."""
    has_kernels = any(op.kind == COMM for op in order)
    executors: list[Op] = []
    for op in order:
        if op.kind == COMM:  # NCCL kernels (set by add_gpu_ops)
            executors.append(op)
        elif op.kind == CPU and comms.is_executor_name(op.name):
            if op.name.startswith("nccl:") and has_kernels:
                continue  # with kernels present, nccl:<op> is only the host-side launch
            op.kind = COMM
            executors.append(op)
    return executors


def _pair_executors(
    executors: list[Op],
    ops: dict[int, Op],
    calls: dict[int, Call],
    call_list: list[Call],
    unknown: Counter,
    by_order: dict[Call, Op],
) -> list[Op]:
    """Phase 3: each executor joins its call; one without a call stands alone when it says what it
    does, else goes back to compute (counted unknown). Kernels matched to their calls by order go
    to `by_order`. Returns the batched send/recv kernels left for `_split_batches`."""
    batch_kernels: list[Op] = []
    orphans: list[Op] = []
    for ex in executors:
        call = _find_call(ex, ops, calls, call_list)
        if call is not None:
            call.executors.append(ex)
        elif ex.kind == COMM and isinstance(ex.thread, tuple):  # an NCCL kernel: matched by order below
            orphans.append(ex)
        else:
            _stand_alone(ex, ops, batch_kernels, unknown)
    for ex in _pair_by_order(orphans, call_list, by_order):
        _stand_alone(ex, ops, batch_kernels, unknown)
    return batch_kernels


def _stand_alone(ex: Op, ops: dict[int, Op], batch_kernels: list[Op], unknown: Counter) -> None:
    """An executor without a call: it stands alone when it says what it does, a send/recv kernel
    waits for `_split_batches`, anything else goes back to compute (counted unknown)."""
    info = _standalone_info(ex)
    if info is None:
        if comms.executor_coll(ex.name) == "sendrecv":
            batch_kernels.append(ex)
            return
        ex.kind = GPU if ex.thread and isinstance(ex.thread, tuple) else CPU
        unknown[ex.name] += 1
        return
    ex.comm = info
    ex.launcher = ex.launcher or _cpu_parent(ex, ops)


#: collectives NCCL runs as grouped send/recv (one `SendRecv` kernel per call)
_BY_SENDRECV = frozenset({CollectiveType.ALL_TO_ALL, CollectiveType.GATHER, CollectiveType.SCATTER})


def _pair_by_order(kernels: list[Op], call_list: list[Call], by_order: dict[Call, Op]) -> list[Op]:
    """NCCL kernels whose launch links to no call, matched to the calls no kernel ran, by order.

    NCCL runs a process group's collectives on one stream in issue order, so when a stream's
    unclaimed kernels and one group's unclaimed calls are the same sequence of collective types
    (SendRecv for all-to-all), the k-th kernel ran the k-th call. That is the case of an ET and a
    Kineto trace taken over different iterations of the same loop (no launch links to its call,
    yet every iteration issues the same collectives). Only where linking found nothing: a group
    with a call that reached its kernel through the launch, or a stream with such a kernel, is
    left alone (there an unclaimed kernel is one whose call lies outside the trace, and the other
    way round). A stream and a group are paired only when each fits the other alone. Fills
    `by_order` (call -> kernel); returns the kernels left. A paired call keeps its place in the
    ET's graph and takes its kernel's duration: the kernel's own time is another iteration's (see
    `_place_comm_nodes`)."""
    if not kernels:
        return []
    linked_groups, linked_streams = set(), set()
    for call in call_list:
        for ex in call.executors:
            if ex.kind == COMM and isinstance(ex.thread, tuple):
                linked_groups.add(call.info.pg_name)
                linked_streams.add(ex.thread)
    waiting: dict[str, list[Call]] = {}
    for call in call_list:
        coll, pg = call.info.coll, call.info.pg_name
        if not call.executors and coll not in (SEND, RECV) and not isinstance(coll, str) and pg not in linked_groups:
            waiting.setdefault(pg, []).append(call)
    streams: dict[Any, list[Op]] = {}
    for k in kernels:
        streams.setdefault(k.thread, []).append(k)
    fits: dict[Any, list[str]] = {}
    for stream, ks in streams.items():
        ks.sort(key=lambda k: (k.ts or 0, k.id))
        if stream not in linked_streams:
            fits[stream] = [pg for pg, cs in waiting.items() if _same_sequence(ks, cs)]
    fitted = Counter(pg for pgs in fits.values() for pg in pgs)
    left: list[Op] = []
    for stream, ks in streams.items():
        pgs = fits.get(stream, [])
        if len(pgs) != 1 or fitted[pgs[0]] != 1:
            left.extend(ks)
            continue
        for k, call in zip(ks, waiting[pgs[0]]):
            by_order[call] = k
    return left


def _same_sequence(kernels: list[Op], calls: list[Call]) -> bool:
    if len(kernels) != len(calls):
        return False
    for k, call in zip(kernels, calls):
        coll = comms.executor_coll(k.name)
        if coll == "sendrecv":
            if call.info.coll not in _BY_SENDRECV:
                return False
        elif coll in (None, "unknown") or call.info.coll not in _COMPATIBLE.get(coll, {coll}):
            return False
    return True


def _place_comm_nodes(
    call_list: list[Call], split_p2p: dict, by_order: dict[Call, Op], ops: dict[int, Op], merged: list[Op]
) -> int:
    """Phase 4: every call gets ONE comm node: its first executor (the others are appended to
    `merged`), a node per send/recv of a batch kernel, a synthesised one lasting as long as the
    kernel matched to it by order (merged away), or a synthesised one. Returns how many were
    synthesised without any executor."""
    synthesized = 0
    next_id = max(ops, default=1) + 1
    for call in call_list:
        kernel = by_order.get(call)
        if kernel is not None:
            syn = ops[next_id] = _synthesize(call, next_id, None)
            next_id += 1
            if syn.ts is not None and kernel.ts is not None and kernel.end is not None:
                syn.end = syn.ts + (kernel.end - kernel.ts)
            merged.append(kernel)
            continue
        if not call.executors or call in split_p2p:
            kernel = split_p2p.get(call)
            ops[next_id] = _synthesize(call, next_id, kernel)
            next_id += 1
            synthesized += kernel is None
        else:
            merged.extend(_merge_executors(call))
    return synthesized


def _synthesize(call: Call, node_id: int, kernel: Optional[Op]) -> Op:
    syn = Op(node_id, _syn_name(call), call.op.id, COMM)
    syn.comm = call.info
    syn.launcher = call.op
    syn.tid = call.op.tid
    if kernel is not None:
        # One node per send/recv of the batch, all spanning the batch kernel, in parallel.
        syn.ts, syn.end, syn.stream, syn.device = kernel.ts, kernel.end, kernel.stream, kernel.device
        syn.thread = (*kernel.thread, "p2p", syn.id) if isinstance(kernel.thread, tuple) else None
        syn.launcher = kernel.launcher or call.op
    elif call.op.end is not None:
        syn.ts = syn.end = call.op.end
    return syn


def _merge_executors(call: Call) -> list[Op]:
    """The call's earliest executor carries its comm info (completed from the executor) and spans
    to the last one's end; returns the others, merged away."""
    exs = sorted(call.executors, key=lambda e: (e.ts if e.ts is not None else 0, e.id))
    head = exs[0]
    info = call.info
    ex_coll = comms.executor_coll(head.name)
    if info.size == 0 and head.kargs:
        kinfo = comms.from_kineto_args(head.kargs)
        if kinfo is not None:
            _refine(info, kinfo)
    if info.size == 0 and head.inputs:
        info.size = comms.tensor_bytes(head.inputs[0])
    if info.coll is None and ex_coll not in (None, "unknown", "sendrecv"):
        info.coll = ex_coll
    head.comm = info
    if head.launcher is None:
        head.launcher = call.op
    for other in exs[1:]:
        if other.ts is not None and head.end is not None and other.end is not None:
            head.end = max(head.end, other.end)
    return exs[1:]


def _settle_groups(
    ops: dict[int, Op],
    rank: int,
    pgs: list[dict],
    stats: CommStats,
    thread_groups: Optional[dict[int, str]],
    p2p_groups: dict[int, str],
) -> None:
    """Phase 5: a process group for every comm node (a gloo collective's from its thread, else the
    default), p2p source/destination ranks, and per-collective counts and bytes."""
    default_pg = str(pgs[0].get("pg_name", "0")) if len(pgs) == 1 else "0"
    pg_ranks = {str(g.get("pg_name")): list(g.get("ranks") or []) for g in pgs}
    pool_pg: dict = {}
    if thread_groups is not None:
        pool_pg = thread_groups
    elif len(pgs) > 1 and stats.survey is not None and stats.survey.threads:
        # this rank alone (no job-wide solution): the same rules, without the other ranks' evidence
        solution, alone_warnings = solve([stats.survey])
        stats.group_warnings.extend(alone_warnings)
        pool_pg = solution.get(rank, {})
        if len(candidates(stats.survey)) > 1:
            stats.group_warnings.append(
                "gloo collectives placed on process groups from this rank's trace alone (several placements "
                "fit it): convert every rank of the job together to place them from all ranks"
            )
    counts: Counter = Counter()
    sizes: Counter = Counter()
    for op in ops.values():
        info = op.comm
        if op.kind != COMM or info is None:
            continue
        if not info.pg_name:
            placed = p2p_groups.get(op.id) if info.coll in (SEND, RECV) else pool_pg.get(op.thread)
            info.pg_name = placed or default_pg
            if placed is None:
                stats.comm_pg_defaulted += 1
            else:
                stats.comm_pg_from_threads += 1
        label = info.coll if isinstance(info.coll, str) else CollectiveType(info.coll).name
        counts[label] += 1
        sizes[label] += info.size
        if info.coll in (SEND, RECV):
            members = pg_ranks.get(info.pg_name) or []
            peer = members[info.peer] if 0 <= info.peer < len(members) else info.peer
            op.extra = dict(op.extra or {}, comm_src=rank if info.coll == SEND else peer,
                            comm_dst=peer if info.coll == SEND else rank)  # fmt: skip
    stats.collectives = {k: {"count": counts[k], "bytes": sizes[k]} for k in sorted(counts)}


#: the op namespaces of functional collectives (DTensor, DeviceMesh, torch.compile): their last
#: string argument is the group's name (`all_reduce(Tensor, str reduce_op, str group_name)`)
_FUNCTIONAL = ("_c10d_functional::", "c10d_functional::", "_c10d_functional_autograd::")


def _functional_groups(call_list: list[Call], ops: dict[int, Op]) -> int:
    """Give a call issued by a functional collective that collective's group; returns how many."""
    found = 0
    for call in call_list:
        if call.info.pg_name:
            continue
        parent = ops.get(call.op.parent)
        for _ in range(3):  # the functional op is the call's parent (or a wrapper or two above)
            if parent is None or parent.kind != CPU:
                break
            if parent.name.startswith(_FUNCTIONAL):
                name = _group_name_arg(parent)
                if name:
                    call.info.pg_name = name
                    found += 1
                break
            parent = ops.get(parent.parent) if parent.parent != parent.id else None
    return found


def _group_name_arg(op: Op) -> str:
    if not op.inputs:
        return ""
    values, _, types = op.inputs
    for v, t in zip(reversed(values), reversed(types)):
        if t == "String" and isinstance(v, str):
            return v
    return ""


def _survey(ops: dict[int, Op], rank: int, pgs: list[dict], world: int, merged: list[Op]) -> Optional[Survey]:
    """The rank's gloo threads with their collectives (issue order, type, size, span, named group)
    and its groups in creation order; None when gloo ran nothing on threads of its own."""
    gone = {m.id for m in merged}
    threads: dict[int, list[Coll]] = {}
    p2p: list[tuple[int, str, int, int, int]] = []
    for op in ops.values():
        info = op.comm
        if (
            op.kind == COMM
            and info is not None
            and info.coll in (SEND, RECV)
            and not info.pg_name
            and op.id not in gone
        ):
            p2p.append((op.id, info.coll, info.peer, info.tag, info.size))
            continue
        if op.kind != COMM or info is None or not op.name.startswith("gloo:") or op.id in gone:
            continue
        if not isinstance(op.thread, int) or info.coll in (SEND, RECV) or isinstance(info.coll, str):
            continue
        order = op.launcher.id if op.launcher is not None else op.id
        size = -1 if info.coll == CollectiveType.ALL_TO_ALL else info.size
        threads.setdefault(op.thread, []).append(Coll(order, int(info.coll), size, op.ts, op.end, info.pg_name))
    groups = []
    for g in pgs:
        ranks = g.get("ranks") or []
        if not ranks:
            ranks = list(range(world or int(g.get("group_size") or g.get("pg_size") or 0)))
        groups.append((str(g.get("pg_name")), tuple(int(r) for r in ranks)))
    if not groups:
        return None
    return Survey(rank, groups, threads, sorted(p2p))


def _split_batches(kernels: list[Op], call_list: list[Call], unknown: Counter) -> dict:
    """Batched p2p (NCCL `batch_isend_irecv`): one `ncclDevKernel_SendRecv` runs every send/recv the
    batch's `c10d::send`/`c10d::recv_` calls queued. Those calls found no executor of their own;
    each takes the kernel that follows them. Returns call -> kernel; claimed kernels become COMM
    (then dropped as merged), unclaimed ones stay GPU compute, counted as unknown."""
    out: dict = {}
    waiting = [c for c in call_list if not c.executors and c.info.coll in (SEND, RECV)]
    for k in sorted(kernels, key=lambda k: (k.ts or 0, k.id)):
        limit = k.launcher.id if k.launcher is not None else k.id
        claimed = [c for c in waiting if c.op.id < limit]
        if not claimed:
            k.kind = GPU
            unknown[k.name] += 1
            continue
        waiting = [c for c in waiting if c.op.id >= limit]
        for c in claimed:
            out[c] = k
        k.kind = COMM
    return out


def _syn_name(call: Call) -> str:
    coll = call.info.coll
    word = coll if isinstance(coll, str) else CollectiveType(coll).name.lower()
    return f"comm:{word}"


def _refine(base: CommInfo, better: CommInfo) -> None:
    """Fill `base` from a more precise record (record_param_comms / Kineto args)."""
    if better.coll is not None and better.source in ("record_param_comms", "kineto"):
        # keep p2p direction / rooted types from c10d when the record only says e.g. 'coalesced'
        base.coll = better.coll
    if better.size:
        base.size = better.size
    if better.pg_name:
        base.pg_name = better.pg_name
    if better.peer >= 0:
        base.peer = better.peer
    if better.dtype:
        base.dtype = better.dtype
    if better.send_splits and not base.send_splits:
        base.send_splits, base.recv_splits = better.send_splits, better.recv_splits


def _call_ancestor(op: Op, ops: dict[int, Op], calls: dict[int, Call]) -> Optional[Call]:
    seen = 0
    p = op.parent
    while p and seen < 64:
        c = calls.get(p)
        if c is not None:
            return c
        parent = ops.get(p)
        if parent is None or parent.parent == p:
            return None
        p = parent.parent
        seen += 1
    return None


def _cpu_parent(op: Op, ops: dict[int, Op]) -> Optional[Op]:
    parent = ops.get(op.parent)
    return parent if parent is not None and parent.kind == CPU else None


def _find_call(ex: Op, ops: dict[int, Op], calls: dict[int, Call], call_list: list[Call]) -> Optional[Call]:
    gloo = ex.name.startswith("gloo:")
    if gloo:
        # gloo runs its ops on its own threads, and the ET gives each the op the main thread was in
        # as parent (often the NEXT collective call): the tensor it works on is the reliable link.
        call = _call_by_tensor(ex, call_list)
        if call is not None:
            return call
    # 1. Through the tree: the kernel's launcher, or the nccl:/gloo: op's ET parent.
    start = ex.launcher.id if ex.launcher is not None else ex.parent
    if start in calls:
        if not (gloo and calls[start].tensor_done):
            return calls[start]
    elif start in ops:
        anc = _call_ancestor(ops[start], ops, calls)
        if anc is not None and _compatible(ex, anc) and not (gloo and anc.tensor_done):
            return anc
    if not gloo:
        return None
    # 2. gloo without a shared tensor: the latest compatible call before it.
    for call in reversed(call_list):
        if ex.id - call.op.id > 5000:
            break
        if call.op.id < ex.id and _compatible(ex, call):
            return call
    return None


def _call_by_tensor(ex: Op, call_list: list[Call]) -> Optional[Call]:
    """The call before `ex` that shares a tensor with it: the earliest one no executor has claimed
    yet (a tensor all-reduced twice in a row is two calls, executed in order), else the latest."""
    keys = _keys(ex)
    if not keys:
        return None
    latest = unclaimed = None
    for call in reversed(call_list):
        if ex.id - call.op.id > 5000:
            break
        if call.op.id >= ex.id or not _compatible(ex, call):
            continue
        if call.keys is None:
            call.keys = _keys(call.op)
        if keys & call.keys:
            latest = latest or call
            if not call.executors:
                unclaimed = call
    found = unclaimed or latest
    if found is not None:
        found.tensor_done = True
    return found


def _compatible(ex: Op, call: Call) -> bool:
    coll = comms.executor_coll(ex.name)
    if coll in (None, "unknown", "sendrecv"):
        return True
    return call.info.coll in _COMPATIBLE.get(coll, {coll})


def _standalone_info(ex: Op) -> Optional[CommInfo]:
    if ex.kargs:
        info = comms.from_kineto_args(ex.kargs)
        if info is not None:
            return info
    coll = comms.executor_coll(ex.name)
    if coll in (None, "unknown", "sendrecv"):
        return None
    info = CommInfo(coll, source="executor")
    if ex.inputs:
        info.size = comms.tensor_bytes(ex.inputs[0])
    return info

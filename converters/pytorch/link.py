"""Linking ET operators to Kineto events, building ops from Kineto alone, and attaching GPU work.

Key (docs/input-formats.md §A.8): ET `rf_id` == Kineto `Record function id`; traces from before that
arg existed link `rf_id` to `External id`. Every link is checked by name and the match rate is
reported, because a pair captured over different iterations links by number but not by name.
GPU activities reach their launching operator through the runtime call with the same
`correlation`, whose `External id` is that of the innermost enclosing cpu_op.
"""

from __future__ import annotations

from bisect import bisect_right
from operator import attrgetter
from typing import Any, Optional

from chakra.converters.kineto.trace import KinetoFile
from chakra.converters.pytorch.comms import nccl_kernel_coll
from chakra.converters.pytorch.ops import COMM, CPU, GPU, Op


def link_et(ops: dict[int, Op], kf: KinetoFile, stats: dict[str, Any]) -> dict[int, Op]:
    """Give linked ET ops their Kineto times/thread/args; return External id -> op (for GPU launchers)."""
    use_rf = any("Record function id" in e.args for e in kf.cpu[:2000]) or any(
        "Record function id" in e.args for e in kf.cpu
    )
    key = "Record function id" if use_rf else "External id"
    by_key: dict[Any, Any] = {e.args.get(key): e for e in kf.cpu}  # a later event wins, as in the ET
    by_key.pop(None, None)
    linked = mismatched = candidates = 0
    ext_to_op: dict[int, Op] = {}
    used = set()
    get_event = by_key.get
    gpu = bool(kf.gpu)  # External id -> op only finds GPU launchers: not needed without GPU events
    for op in ops.values():
        rf_id = op.rf_id
        if not rf_id:
            continue
        candidates += 1
        e = get_event(rf_id)
        if e is None:
            continue
        if e.name != op.name:
            mismatched += 1
            continue
        linked += 1
        used.add(id(e))
        op.ts = e.ts
        op.end = e.end
        op.thread = e.tid
        args = e.args
        if "Collective name" in args:  # only comm args are read later
            op.kargs = args
        if gpu:
            ext = args.get("External id")
            if ext is not None:
                ext_to_op[ext] = op
    stats["link_key"] = key
    stats["et_ops_with_rf_id"] = candidates
    stats["linked"] = linked
    stats["link_name_mismatch"] = mismatched
    stats["link_rate"] = round(linked / candidates, 4) if candidates else 0.0
    stats["kineto_cpu_events_unlinked"] = len(kf.cpu) - len(used)  # `used` holds kf.cpu events only
    _place_unlinked(ops)
    return ext_to_op


_TS = attrgetter("ts")


def _place_unlinked(ops: dict[int, Op]) -> None:
    """Unlinked ET ops take a zero-length slot right after the previous linked op of their ET thread."""
    if None not in map(_TS, ops.values()):
        return  # every op is timed: nothing to place
    linked_tids = {op.tid for op in ops.values() if op.ts is not None}
    last: dict[int, Op] = {}
    pending: dict[int, list[Op]] = {}
    for oid in sorted(ops):
        op = ops[oid]
        if op.ts is not None:
            if pending:
                for p in pending.pop(op.tid, ()):  # ops before the first linked one on this thread
                    p.ts = p.end = op.ts
                    p.thread = op.thread
            last[op.tid] = op
            continue
        if op.tid not in linked_tids:
            continue  # thread never linked: stays untimed
        prev = last.get(op.tid)
        if prev is None:
            pending.setdefault(op.tid, []).append(op)
        else:
            op.ts = op.end = prev.ts
            op.thread = prev.thread


def ops_from_kineto(kf: KinetoFile) -> tuple[dict[int, Op], dict[int, Op]]:
    """Kineto-only mode: one CPU op per cpu_op/user_annotation event, parents by time nesting."""
    events = sorted(kf.cpu, key=lambda e: (e.ts, -e.end))
    ops: dict[int, Op] = {}
    ext_to_op: dict[int, Op] = {}
    stacks: dict[Any, list[Op]] = {}
    for i, e in enumerate(events, start=2):
        stack = stacks.setdefault(e.tid, [])
        while stack and stack[-1].end <= e.ts:
            stack.pop()
        op = Op(i, e.name, stack[-1].id if stack else 0, CPU)
        op.ts, op.end, op.thread, op.kargs = e.ts, e.end, e.tid, e.args
        op.rf_id = e.args.get("Record function id", 0) or 0
        seq = e.args.get("Sequence number")
        if isinstance(seq, int):
            op.seq_id = seq
        ops[i] = op
        stack.append(op)
        ext = e.args.get("External id")
        if ext is not None:
            ext_to_op[ext] = op
    return ops, ext_to_op


def _innermost(ops: list[Op], starts: list[int], t: int) -> Optional[Op]:
    """The latest-starting op on a thread that contains time t (the runtime call's enclosing op)."""
    i = bisect_right(starts, t) - 1
    for j in range(i, max(i - 256, -1), -1):
        if ops[j].end >= t:
            return ops[j]
    return None


def add_gpu_ops(ops: dict[int, Op], kf: KinetoFile, ext_to_op: dict[int, Op], stats: dict[str, Any]) -> list[Op]:
    """One GPU (or NCCL COMM) op per kernel/memcpy/memset, with its launcher when known."""
    runtime_by_corr = {}
    for r in kf.runtime:
        c = r.args.get("correlation")
        if c is not None:
            runtime_by_corr[c] = r
    next_id = max(ops, default=1) + 1
    out = []
    no_launcher = 0
    by_thread: dict[Any, list[Op]] = {}
    for op in ops.values() if kf.gpu else ():  # host ops by thread, to find launchers (none to find on CPU runs)
        if op.ts is not None and op.kind == CPU:
            by_thread.setdefault(op.thread, []).append(op)
    for lst in by_thread.values():
        lst.sort(key=lambda o: (o.ts, -o.end))
    starts = {k: [o.ts for o in v] for k, v in by_thread.items()}
    recorded_by = _graph_recorders(kf, runtime_by_corr, stats)
    for e in sorted(kf.gpu, key=lambda e: (e.ts, e.end)):
        args = e.args
        op = Op(next_id, e.name, 0, GPU)
        next_id += 1
        op.ts, op.end, op.kargs = e.ts, e.end, args
        op.stream = int(args.get("stream", e.tid) if isinstance(args.get("stream", e.tid), int) else -1)
        op.device = int(args.get("device", e.pid) if isinstance(args.get("device", e.pid), int) else 0)
        op.thread = ("stream", op.device, op.stream)
        runtime = runtime_by_corr.get(args.get("correlation"))
        ext = runtime.args.get("External id") if runtime is not None else args.get("External id")
        recorder = recorded_by.get(id(e))
        if recorder is not None:  # replayed by cudaGraphLaunch: the call that recorded it in the capture
            ext = recorder.args.get("External id")
        launcher: Optional[Op] = ext_to_op.get(ext) if ext is not None else None
        if launcher is None and recorder is not None and recorder.tid in by_thread:
            launcher = _innermost(by_thread[recorder.tid], starts[recorder.tid], recorder.ts)
        if launcher is None and runtime is not None and runtime.tid in by_thread:
            launcher = _innermost(by_thread[runtime.tid], starts[runtime.tid], runtime.ts)
        if launcher is None:
            no_launcher += 1
        op.launcher = launcher
        op.extra = {"launch_ns": runtime.end if runtime is not None else None, "cat": e.cat}
        if e.cat == "kernel" and nccl_kernel_coll(e.name) is not None:
            op.kind = COMM
        ops[op.id] = op
        out.append(op)
    stats["gpu_ops"] = len(out)
    stats["gpu_ops_without_launcher"] = no_launcher
    return out


#: Runtime/driver calls that put one kernel, memset or memcpy on a stream; while the stream is
#: being captured they record a graph node instead, which every `cudaGraphLaunch` replays.
_KERNEL_CALLS = frozenset({"cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx",
                           "cudaLaunchCooperativeKernel", "hipLaunchKernel", "hipExtLaunchKernel"})  # fmt: skip
_MEMSET_CALLS = frozenset({"cudaMemsetAsync", "cuMemsetD8Async", "cuMemsetD16Async", "cuMemsetD32Async"})
_MEMCPY_CALLS = frozenset({"cudaMemcpyAsync", "cuMemcpyAsync", "cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync"})
_GRAPH_LAUNCH = frozenset({"cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch"})


def _call_class(name: str) -> Optional[str]:
    if name in _KERNEL_CALLS:
        return "kernel"
    if name in _MEMSET_CALLS:
        return "gpu_memset"
    if name in _MEMCPY_CALLS:
        return "gpu_memcpy"
    return None


def _graph_recorders(kf: KinetoFile, runtime_by_corr: dict, stats: dict[str, Any]) -> dict[int, Any]:
    """id(GPU event) -> the runtime call that recorded it, for work replayed by a CUDA graph.

    A graph's replayed kernels carry the correlation of the `cudaGraphLaunch`, and Kineto keeps no
    graph node id, so they are matched by order: the k-th kernel (memset, memcpy) a launch ran is
    the k-th kernel launch (memset, memcpy call) issued between `cudaStreamBeginCapture` and
    `cudaStreamEndCapture` (on any thread: autograd's thread records the backward kernels into
    the same capturing stream). That holds for a graph captured from one stream (a chain). The
    capture used is the latest one before the launch whose counts per class equal the launch's; a
    launch that fits none keeps its cudaGraphLaunch as launcher.
    """
    launches = {c: r for c, r in runtime_by_corr.items() if r.name in _GRAPH_LAUNCH}
    if not launches:
        return {}
    rt = sorted(kf.runtime, key=lambda r: r.ts)
    captures: list[tuple[int, dict[str, list]]] = []  # (end of capture, class -> calls in order)
    calls: Optional[dict[str, list]] = None
    for r in rt:
        if r.name in ("cudaStreamBeginCapture", "cuStreamBeginCapture", "hipStreamBeginCapture"):
            calls = {"kernel": [], "gpu_memset": [], "gpu_memcpy": []}
        elif r.name in ("cudaStreamEndCapture", "cuStreamEndCapture", "hipStreamEndCapture"):
            if calls is not None:
                captures.append((r.end, calls))
            calls = None
        elif calls is not None:  # any thread: backward records its kernels from the autograd thread
            cls = _call_class(r.name)
            if cls is not None:
                calls[cls].append(r)
    replayed: dict[Any, dict[str, list]] = {}
    for e in kf.gpu:
        c = e.args.get("correlation")
        if c in launches:
            replayed.setdefault(c, {}).setdefault(e.cat, []).append(e)
    out: dict[int, Any] = {}
    matched = unmatched = 0
    for c, by_cls in replayed.items():
        counts = {k: len(v) for k, v in by_cls.items()}
        t = launches[c].ts
        fit = None
        for end, recorded in reversed(captures):
            if end <= t and all(len(recorded.get(k, ())) == n for k, n in counts.items()):
                fit = recorded
                break
        if fit is None:
            unmatched += sum(counts.values())
            continue
        for cls, evs in by_cls.items():
            evs.sort(key=lambda e: (e.ts, e.end))
            for ev, call in zip(evs, fit[cls]):
                out[id(ev)] = call
            matched += len(evs)
    stats["graph_launches"] = len(replayed)
    stats["graph_ops_attributed"] = matched
    stats["graph_ops_unattributed"] = unmatched
    return out

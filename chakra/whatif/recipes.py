"""What-if recipes: common optimizations expressed only with the primitives of `transforms`.

Each recipe takes the traces (one per rank) and options, edits copies of them and returns a
`WhatIf` (new traces, maybe a new network config, and notes saying what was changed). The
modelling follows Daydream §5:

- `amp`: device kernels that are compute-bound (arithmetic intensity num_ops/tensor_size at or
  above the ridge point, or gemm/conv-like names) run 3x faster, memory-bound ones 2x; CPU tasks
  are unchanged; with `on="cpu", measure=True` a CPU run's bf16 autocast is predicted from each
  operator timed on this host in fp32 and bf16 (chakra.whatif.cpu_rates);
- `fused-optimizer`: all tasks of each optimizer step are replaced by one fused task whose
  duration is the sum of the removed compute kernels (device kernels, or on a CPU-only trace the
  operators that carry num_ops); CPU launch/dispatch overhead disappears;
- `scale-compute F`: compute F times faster (durations / F);
- `network-bandwidth F`: every network dimension's bandwidth times F (and recorded comm
  durations / F for `comm_mode="replay"`);
- `data-parallel N`: from a one-rank trace, gradients (AccumulateGrad nodes) are grouped into
  DDP buckets in the order they become ready, one ALL_REDUCE per bucket is inserted after the
  bucket's last gradient, the optimizer step waits for them, and the rank is copied N times;
  with `cores=C` the ranks share C CPU cores (`share_cores`: compute x N/C, collectives
  serialized with compute, or only their measured CPU share);
- `drop-comm`: communication removed, dependencies bridged (the ideal-network bound);
- `rebalance-routing`: every all-to-all with per-peer sizes (MoE dispatch/combine) moves the same
  bytes spread evenly over its pairs (a balanced router); compute unchanged.
- `straggler R F`: rank R's compute durations times F, the other ranks unchanged: the
  simulation shows the slow rank's delay reaching the others through their collectives.
"""

from __future__ import annotations

import bisect
import copy
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from chakra.errors import InputError
from chakra.footprint import is_tensor_value
from chakra.schema import CollectiveType, NodeType, pb
from chakra.schema.attrs import get_attr
from chakra.schema.kinds import resource_of
from chakra.sim.steps import count_steps, overhead_record, step_time, timebase
from chakra.trace import Trace
from chakra.whatif import memory_recipes
from chakra.whatif.transforms import TIME_ORDER, Graph, by_name, by_resource, by_type, graphs, scaled_us, span_us

#: Names Daydream (and the cuDNN/cuBLAS naming) marks as compute-bound or memory-bound kernels.
COMPUTE_BOUND = r"gemm|conv|matmul|\bmm\b|::mm$|addmm|bmm|linear|baddbmm|attention|cutlass|xmma|wgrad|dgrad"
MEMORY_BOUND = r"elementwise|pointwise|relu|norm|softmax|dropout|copy|add|mul|div|sub|fill|cat|index|reduce|sum|mean"
OPTIMIZER = r"Optimizer\.step"
GRAD_READY = r"AccumulateGrad"


@dataclass
class WhatIf:
    """A recipe's result: edited traces, the network to simulate them on (None = unchanged)."""

    recipe: str
    traces: list[Trace]
    network: Any = None
    notes: list[str] = field(default_factory=list)
    changed: dict[str, int] = field(default_factory=dict)


def clone(traces: Sequence[Trace]) -> list[Trace]:
    """Deep copies (recipes never edit their input)."""
    out = []
    for pos, t in enumerate(traces):
        md = pb.GlobalMetadata()
        md.CopyFrom(t.metadata)
        nodes = []
        for n in t.nodes:
            c = pb.Node()
            c.CopyFrom(n)
            nodes.append(c)
        out.append(Trace(metadata=md, nodes=nodes, rank=t.rank if t.rank is not None else pos, path=t.path))
    return out


def _finish(name: str, gs: Sequence[Graph], **kw: Any) -> WhatIf:
    log = {"scaled": 0, "inserted": 0, "removed": 0, "fused": 0}
    for g in gs:
        for k in log:
            log[k] += getattr(g.log, k)
    return WhatIf(name, [g.to_trace() for g in gs], changed={k: v for k, v in log.items() if v}, **kw)


# ----------------------------------------------------------------------------- amp


def intensity(node: pb.Node) -> Optional[float]:
    """FLOPs per byte from num_ops / tensor_size, None when either is missing or zero."""
    ops = get_attr(node, "num_ops", None)
    size = get_attr(node, "tensor_size", None)
    if not ops or not size:
        return None
    return float(ops) / float(size)


def amp(
    traces: Sequence[Trace],
    *,
    compute_speedup: float = 3.0,
    memory_speedup: float = 2.0,
    ridge: float = 10.0,
    on: str = "gpu",
    keep_optimizer: bool = True,
    pattern: str = OPTIMIZER,
    grad_scaler: bool = False,
    measure: bool = False,
    threads: Optional[int] = None,
    quiet: bool = True,
) -> WhatIf:
    """Automatic mixed precision: compute-bound kernels / 3, memory-bound / 2, CPU unchanged.

    `on="cpu"` with `measure` (a CPU training run switched to bf16 autocast): every operator whose
    dtypes autocast changes is rebuilt with torch and timed on this host in fp32 and in bf16
    (`chakra.whatif.cpu_rates`, with `threads` torch threads); without `measure` the fixed factors
    below apply and the note says the CPU prediction is unmeasured.

    A kernel is compute-bound when num_ops/tensor_size >= `ridge` FLOP/byte, memory-bound when
    below; kernels without those attributes are classified by name (gemm/conv-like vs
    elementwise-like); anything else stays. `on` picks the resource the kernels run on (gpu; cpu
    only for CPU-only experiments, which Daydream's model does not cover).

    With `keep_optimizer` (default) the optimizer step's kernels (regions named by `pattern`) keep
    their time: autocast leaves the weights, gradients and optimizer state in fp32, so the step
    moves the same bytes (measured on an H200: 1.56 ms per step in fp32 and 1.57 under AMP).
    `compute_speedup` may come from measured peaks (fp16 / fp32 matmul FLOP/s) instead of 3.

    `grad_scaler` (fp16 training with `torch.amp.GradScaler`): the scaler's `step` reads its
    inf/NaN flag back to the host (`.item()`) before the optimizer runs, so each optimizer step
    waits for the device to finish backward: the first host task of every optimizer region
    depends on the last device task launched before it. (The scaler's unscale kernel, one pass
    over the gradients, and autocast's weight casts are not inserted; on the H200 runs they are
    0.1-1 ms of a 15 ms step.)
    """
    if compute_speedup <= 0 or memory_speedup <= 0:
        raise InputError("amp speedups must be > 0")
    if measure and on != "cpu":
        raise InputError("amp --measure times operators on this CPU: it needs --on cpu")
    gs = graphs(clone(traces))
    if measure:
        from chakra.whatif.cpu_rates import apply_measured, stderr_progress

        return _finish("amp", gs, notes=apply_measured(gs, threads=threads, progress=stderr_progress(quiet)))
    comp_rx = re.compile(COMPUTE_BOUND, re.I)
    mem_rx = re.compile(MEMORY_BOUND, re.I)
    pred = by_type(NodeType.COMP_NODE) & by_resource(on)
    counts = {"compute_bound": 0, "memory_bound": 0, "unclassified": 0, "optimizer": 0}
    rx = re.compile(pattern)
    synced = 0
    for g in gs:
        regions = _regions(g, rx)
        kept = {n.id for _a, ms in regions for n in ms} if keep_optimizer else set()
        if grad_scaler:
            synced += _sync_before(g, regions)
        for n in g.select(pred):
            if n.id in kept:
                counts["optimizer"] += 1
                continue
            ai = intensity(n)
            if ai is not None:
                cls = "compute_bound" if ai >= ridge else "memory_bound"
            elif comp_rx.search(n.name):
                cls = "compute_bound"
            elif mem_rx.search(n.name):
                cls = "memory_bound"
            else:
                cls = "unclassified"
            counts[cls] += 1
            if cls == "compute_bound":
                g.scale([n], 1.0 / compute_speedup)
            elif cls == "memory_bound":
                g.scale([n], 1.0 / memory_speedup)
    notes = [
        f"{counts['compute_bound']} compute-bound kernels / {compute_speedup:g}, {counts['memory_bound']} memory-bound "
        f"/ {memory_speedup:g}, {counts['unclassified']} unclassified unchanged ({on} nodes, ridge {ridge:g} FLOP/B)"
    ]
    if counts["optimizer"]:
        notes.append(f"{counts['optimizer']} optimizer-step kernels unchanged (fp32 state under autocast)")
    if not any(counts.values()):
        notes.append(f"no {on} compute node: nothing to speed up (a CPU-only trace needs --on cpu)")
    if grad_scaler:
        notes.append(f"{synced} optimizer step(s) wait for the device (GradScaler's inf check)")
    if on == "gpu":
        notes.append(
            "autocast's own host work (a cast per weight and input, their backward, its dispatch) is not "
            "modelled: where the host sets the step once the kernels are faster, this speedup is an upper bound "
            "(H200, launch-bound models: 0.55-0.93x for real against 1.00x predicted)"
        )
    if on == "cpu":
        notes.append("CPU bf16 prediction unmeasured (GPU factors); --measure times each operator on this host")
    return _finish("amp", gs, notes=notes)


def _sync_before(g: Graph, regions: list[tuple[pb.Node, list[pb.Node]]]) -> int:
    """Each region's first host task waits for the last device task recorded to start before it."""
    device = sorted(
        (n for n in g.nodes.values() if resource_of(n) == "gpu" and n.name != "queue"),
        key=lambda n: n.start_time_micros,
    )
    starts = [n.start_time_micros for n in device]
    done = 0
    for anchor, members in regions:
        host = [n for n in members if resource_of(n) == "cpu"] or [anchor]
        first = min(host, key=TIME_ORDER)
        inside = {n.id for n in members}
        i = bisect.bisect_left(starts, first.start_time_micros) - 1
        while i >= 0 and device[i].id in inside:
            i -= 1
        if i >= 0:
            last = max(device[: i + 1], key=lambda n: n.start_time_micros + n.duration_micros)
            g.add_dep(first.id, last.id, data=True)
            done += 1
    return done


# ----------------------------------------------------------------------------- fused optimizer


def _regions(g: Graph, anchor_rx: re.Pattern) -> list[tuple[pb.Node, list[pb.Node]]]:
    """(anchor, members) per optimizer-step region: nodes recorded inside the anchor's window."""
    anchors = sorted((n for n in g.nodes.values() if anchor_rx.search(n.name)), key=lambda n: n.start_time_micros)
    # Outermost anchors only (Optimizer.step may nest a second record_function of the same name).
    outer: list[pb.Node] = []
    for a in anchors:
        if outer and a.start_time_micros < outer[-1].start_time_micros + span_us(outer[-1]):
            continue
        outer.append(a)
    if not outer:
        return []
    by_start = sorted(g.nodes.values(), key=lambda n: n.start_time_micros)
    launched = _launched_by(g)
    out = []
    k = 0
    for a in outer:
        s, e = a.start_time_micros, a.start_time_micros + span_us(a)
        members = []
        while k < len(by_start) and by_start[k].start_time_micros < s:
            k += 1
        j = k
        while j < len(by_start) and by_start[j].start_time_micros < e:
            n = by_start[j]
            if n.start_time_micros + n.duration_micros <= e and resource_of(n) != "comm":
                members.append(n)
            j += 1
        if a not in members:
            members.append(a)
        if launched:
            # Device work belongs to the step that launched it, not to the window it ran in: a GPU
            # behind its CPU (compute-bound) still runs backward's kernels during the step.
            cpu = [n for n in members if resource_of(n) != "gpu"]
            members = cpu + [d for n in cpu for d in launched.get(n.id, ())]
        out.append((a, members))
    return out


def _launched_by(g: Graph) -> dict[int, list[pb.Node]]:
    """Host node id -> the device nodes it launched (`launcher` attr, as the PyTorch converter writes
    it), each with the queue node (the stream waiting for that launch) before it; empty when no
    device node names its launcher."""
    queues: dict[int, list[pb.Node]] = {}
    out: dict[int, list[pb.Node]] = {}
    for n in g.nodes.values():
        if resource_of(n) != "gpu":
            continue
        q = get_attr(n, "queue_of", None)
        if q is not None:
            queues.setdefault(int(q), []).append(n)
            continue
        launcher = get_attr(n, "launcher", None)
        if launcher is not None:
            out.setdefault(int(launcher), []).append(n)
    for lst in out.values():
        lst.extend([q for n in list(lst) for q in queues.get(n.id, ())])
    return out


def unique_tensor_bytes(nodes: Sequence[pb.Node]) -> int:
    """Bytes of the distinct device tensors the nodes' inputs and outputs name (ET tensor values
    [id, storage id, offset, numel, itemsize, device], lists of them for tensor lists), each
    counted once by (storage, offset)."""
    seen: dict[tuple[int, int], int] = {}

    def walk(v: Any) -> None:
        if isinstance(v, list):
            if is_tensor_value(v):
                if v[5] != "cpu":
                    seen[(v[1], v[2])] = v[3] * v[4]
                return
            for x in v:
                walk(x)

    for n in nodes:
        for text in (n.inputs.values, n.outputs.values):
            if text:
                try:
                    walk(json.loads(text))
                except ValueError:
                    continue
    return sum(seen.values())


def per_byte_cost(nodes: Sequence[pb.Node]) -> tuple[float, float]:
    """(fixed µs per operator, µs per byte) fitted by least squares (duration = c0 + c1*bytes)
    over operators with a tensor_size: the BigSim-style model that separates the per-call
    overhead (dispatch, launch, profiler) from the data-proportional work."""
    from chakra.whatif.interpolate import Model, Samples, fit

    pts = [(float(get_attr(n, "tensor_size", 0) or 0), float(n.duration_micros)) for n in nodes]
    pts = [p for p in pts if p[0] > 0]
    if len(pts) < 3:
        raise InputError("the bytes model needs >= 3 optimizer operators with tensor_size")
    f = fit(Samples("ops", {"bytes": [p[0] for p in pts]}, [p[1] for p in pts]), Model("c0 + c1*bytes"))
    assert f is not None
    return max(0.0, f.coefs["c0"]), max(0.0, f.coefs["c1"])


def fused_optimizer(
    traces: Sequence[Trace],
    *,
    pattern: str = OPTIMIZER,
    launch_us: Optional[float] = None,
    cost: str = "sum",
    bytes_per_s: Optional[float] = None,
) -> WhatIf:
    """Fuse every optimizer step (region named by `pattern`) into one task (Daydream's FusedAdam).

    On a trace with device kernels, the step's kernels become one kernel (duration = their sum) and
    its CPU tasks one launch task of `launch_us` (default: the median duration of the CPU tasks
    that launch a kernel in the step). On a CPU-only trace, the step becomes one CPU task whose
    duration is the sum of its compute operators (those with num_ops > 0), or with
    `cost="bytes"` the data-proportional part only: a least-squares fit duration = c0 + c1*bytes
    over those operators (all steps) gives the per-call overhead c0 that fusion removes, and the
    fused task lasts c0 + c1 * (their total bytes).

    With `cost="roofline"` (device kernels, `bytes_per_s` = the device's memory bandwidth) the
    fused kernel moves every tensor its step touches once, read and written (a fused AdamW reads
    parameter, gradient and both moments and writes three of them, 28 of these 32 bytes per fp32
    parameter), instead of once per elementwise pass of the unfused step: the unique device
    tensors of the step's operators (ET tensor values: storage, offset, numel, itemsize) x 2 /
    `bytes_per_s`.
    """
    if cost not in ("sum", "bytes", "roofline"):
        raise InputError(f"--cost must be sum, bytes or roofline, not {cost!r}")
    if cost == "roofline" and not bytes_per_s:
        raise InputError("--cost roofline needs the device's memory bandwidth (bytes_per_s)")
    try:
        rx = re.compile(pattern)
    except re.error as exc:
        raise InputError(f"bad --pattern {pattern!r}: {exc}") from None
    gs = graphs(clone(traces))
    steps = 0
    before_us = 0
    after_us = 0
    regions = [(g, members) for g in gs for _a, members in _regions(g, rx)]
    c0 = c1 = 0.0
    if cost == "bytes" and regions:
        ops = [n for _g, ms in regions for n in ms if int(get_attr(n, "num_ops", 0) or 0) > 0]
        c0, c1 = per_byte_cost(ops)
    for g, members in regions:
        steps += 1
        before_us += sum(n.duration_micros for n in members)
        gpu = [n for n in members if resource_of(n) == "gpu"]
        if gpu:
            cpu = [n for n in members if resource_of(n) != "gpu"]
            # a queue node is the stream waiting for a launch, not kernel time
            kernel_us = sum(n.duration_micros for n in gpu if get_attr(n, "queue_of", None) is None)
            if cost == "roofline":
                assert bytes_per_s is not None
                kernel_us = int(round(2 * unique_tensor_bytes(cpu) / bytes_per_s * 1e6))
            gpu_ids = {n.id for n in gpu}
            launchers = [n for n in cpu if g.children[n.id] & gpu_ids]
            lu = launch_us
            if lu is None:
                ds = sorted(n.duration_micros for n in launchers) or [0]
                lu = ds[len(ds) // 2]
            g.fuse(gpu, "fused_optimizer_kernel", duration_us=kernel_us, attrs={"is_cpu_op": False})
            if cpu:
                g.fuse(cpu, "fused_optimizer_launch", duration_us=lu, attrs={"is_cpu_op": True})
            after_us += kernel_us + (lu if cpu else 0)
        else:
            ops = [n for n in members if int(get_attr(n, "num_ops", 0) or 0) > 0]
            if cost == "bytes":
                compute_us = int(round(c0 + c1 * sum(float(get_attr(n, "tensor_size", 0) or 0) for n in ops)))
            else:
                compute_us = sum(n.duration_micros for n in ops)
            g.fuse(members, "fused_optimizer_step", duration_us=compute_us, attrs={"is_cpu_op": True})
            after_us += compute_us
    if not steps:
        raise InputError(f"no optimizer step found (no node name matches {pattern!r}); set --pattern")
    how = {
        "sum": "sum of compute kernels",
        "bytes": f"bytes model: {c0:.3g} µs + {c1 * 1e6:.4g} µs/MB",
        "roofline": f"each tensor read and written once at {(bytes_per_s or 0) / 1e9:.4g} GB/s",
    }[cost]
    notes = [f"{steps} optimizer step(s) fused: {before_us:,} µs of tasks -> {after_us:,} µs ({how})"]
    w = _finish("fused-optimizer", gs, notes=notes)
    w.changed.update(steps=steps, region_us=before_us, fused_us=after_us)
    return w


# ----------------------------------------------------------------------------- scaling


def scale_compute(traces: Sequence[Trace], *, factor: float, on: str = "all") -> WhatIf:
    """Compute `factor` times faster: COMP durations / factor (`on`: all, cpu or gpu)."""
    if factor <= 0:
        raise InputError(f"--factor must be > 0, got {factor}")
    gs = graphs(clone(traces))
    pred = by_type(NodeType.COMP_NODE) if on == "all" else by_type(NodeType.COMP_NODE) & by_resource(on)
    for g in gs:
        g.scale(g.select(pred), 1.0 / factor)
    return _finish("scale-compute", gs, notes=[f"{on} compute durations / {factor:g}"])


#: Device kernels a captured single-tensor Adam/AdamW step launches per parameter beyond the
#: uncaptured one: `capturable=True` keeps the step counter on the device and computes the bias
#: corrections there (torch 2.11; counted on eight models recorded both ways on an H200, 14 on each).
CAPTURABLE_ADAM_KERNELS = 14
_PER_PARAM_ADAM = re.compile(r"^aten::addcdiv_$")
_CAPTURABLE_SIGN = re.compile(r"^aten::pow")  # bias corrections as device tensors
_MULTI_TENSOR = re.compile(r"^aten::_(foreach|fused)_")


def _uncaptured_adam_params(g: Graph) -> list[pb.Node]:
    """The per-parameter update (`aten::addcdiv_`) of every single-tensor Adam/AdamW step in the
    trace that was not recorded capturable: capturing it in a graph needs `capturable=True`."""
    out: list[pb.Node] = []
    for _anchor, members in _regions(g, re.compile(OPTIMIZER)):
        host = [n for n in members if resource_of(n) == "cpu"]
        if any(_CAPTURABLE_SIGN.search(n.name) or _MULTI_TENSOR.search(n.name) for n in host):
            continue  # already capturable, or foreach/fused (their own device-side steps)
        out.extend(n for n in host if _PER_PARAM_ADAM.search(n.name))
    return out


def _add_spread(nodes: Sequence[pb.Node], each_us: float) -> int:
    """Lengthen each node by `each_us`, which may be a fraction of a µs: the rounding is carried
    from node to node (give them in time order), so the total is what was asked for. Returns µs added."""
    carry = 0.0
    added = 0
    for n in nodes:
        carry += each_us
        whole = int(carry)
        carry -= whole
        n.duration_micros += whole
        added += whole
    return added


def _in_capture_order(g: Graph, kernels: Sequence[pb.Node]) -> int:
    """Each kernel (given in recorded start order) on a stream other than the one before it
    follows that one: a replayed graph runs its kernels in the order they were captured, side
    streams joined by the events the library recorded (cuDNN's RNN kernels run on streams of their
    own). Without the host's launches to space them, kernels that only waited for their launch
    would otherwise all start at once. Returns the edges added."""
    added = 0
    for before, n in zip(kernels, kernels[1:]):
        if get_attr(n, "stream", None) != get_attr(before, "stream", None):
            g.add_dep(n.id, before.id)
            added += 1
    return added


def cuda_graphs(
    traces: Sequence[Trace],
    *,
    launch_us: float = 10.0,
    kernel_gap_us: float = 0.35,
    scalar_kernel_us: float = 1.3,
) -> WhatIf:
    """The whole step captured in a CUDA graph and replayed: the host's per-operator dispatch and
    launch work vanishes and the step becomes the device's time plus one graph launch.

    Every host task lasts 0 except each step's `ProfilerStep#k` node, which becomes the graph
    launch (`launch_us`); the GPU's waits for launches (`queue` nodes) go; each kernel keeps its
    measured time plus `kernel_gap_us`, the device's own gap between two kernels of a replayed
    graph (no host launch to wait for, but the GPU still schedules each kernel: 0.2-0.6 µs on an
    H200, measured on graph replays of seven models). Dependencies and collectives are unchanged,
    so a sync the step ends with still waits for the device.

    A single-tensor Adam/AdamW step recorded without `capturable=True` cannot be captured as it
    is: captured, each parameter's update launches `CAPTURABLE_ADAM_KERNELS` more one-element
    kernels (`scalar_kernel_us` each, plus the gap), added to that update's kernel. On small,
    launch-bound models this doubles the kernels of the step.
    """
    if launch_us < 0 or kernel_gap_us < 0 or scalar_kernel_us < 0:
        raise InputError("cuda-graphs: --launch-us, --kernel-gap-us and --scalar-kernel-us must be >= 0")
    gs = graphs(clone(traces))
    host_us = kernels = params = joined = 0
    for g in gs:
        updates = _uncaptured_adam_params(g)
        launched_by = _launched_by(g) if updates else {}
        host = g.select(by_type(NodeType.COMP_NODE) & by_resource("cpu"))
        host_us += sum(n.duration_micros for n in host)
        g.set_duration(host, 0)
        steps = g.select(by_name(r"^ProfilerStep#\d+$"))
        g.set_duration(steps, launch_us)
        gpu = g.select(by_type(NodeType.COMP_NODE) & by_resource("gpu"))
        g.set_duration([n for n in gpu if n.name == "queue"], 0)
        launched = sorted((n for n in gpu if n.name != "queue"), key=TIME_ORDER)
        _add_spread(launched, kernel_gap_us)
        kernels += len(launched)
        joined += _in_capture_order(g, launched)
        last_kernels = []
        for u in updates:
            ks = [k for k in launched_by.get(u.id, ()) if k.name != "queue"]
            if ks:
                last_kernels.append(max(ks, key=TIME_ORDER))
        _add_spread(sorted(last_kernels, key=TIME_ORDER), CAPTURABLE_ADAM_KERNELS * (scalar_kernel_us + kernel_gap_us))
        params += len(last_kernels)
    notes = [
        f"{host_us:,} µs of host tasks -> one {launch_us:g} µs graph launch per step; {kernels:,} kernels "
        f"+ {kernel_gap_us:g} µs device gap each"
    ]
    if params:
        notes.append(
            f"{params:,} Adam parameter updates made capturable: {CAPTURABLE_ADAM_KERNELS} more kernels of "
            f"{scalar_kernel_us:g} µs each per update (step counter and bias corrections on the device)"
        )
    if joined:
        notes.append(f"{joined:,} kernels follow the kernel recorded before them on another stream (capture order)")
    w = _finish("cuda-graphs", gs, notes=notes)
    w.changed.update(host_us=host_us, kernels=kernels, capturable_updates=params, streams_joined=joined)
    return w


def straggler(traces: Sequence[Trace], *, rank: int, factor: float, on: str = "all") -> WhatIf:
    """One slow rank: rank `rank`'s compute durations times `factor` (`on`: all, cpu or gpu).

    Every other rank is unchanged: simulating the result shows how the slow rank's extra time
    reaches the others through the collectives and messages they share (they wait for it).
    """
    if factor <= 0:
        raise InputError(f"--factor must be > 0, got {factor}")
    if on not in ("all", "cpu", "gpu"):
        raise InputError(f"--on must be all, cpu or gpu for straggler, got {on!r}")
    gs = graphs(clone(traces))
    target = [g for g in gs if g.rank == rank]
    if not target:
        raise InputError(f"--rank {rank}: no such rank (the traces have ranks {', '.join(str(g.rank) for g in gs)})")
    pred = by_type(NodeType.COMP_NODE) if on == "all" else by_type(NodeType.COMP_NODE) & by_resource(on)
    nodes = target[0].select(pred)
    before = sum(n.duration_micros for n in nodes)
    target[0].scale(nodes, factor)
    added_us = sum(n.duration_micros for n in nodes) - before
    what = "compute" if on == "all" else f"{on} compute"
    return _finish(
        "straggler",
        gs,
        notes=[f"rank {rank}: {len(nodes):,} {what} nodes x{factor:g} ({added_us / 1e3:+,.3f} ms of {what})"],
    )


def network_bandwidth(traces: Sequence[Trace], *, factor: float, network: Any = None) -> WhatIf:
    """Network bandwidth times `factor`: a new network config (recorded comm durations / factor too)."""
    if factor <= 0:
        raise InputError(f"--factor must be > 0, got {factor}")
    from chakra.sim import load_network
    from chakra.sim.config import default_network

    net = copy.deepcopy(load_network(network)) if network is not None else default_network(len(traces))
    net.bandwidth = [b * factor for b in net.bandwidth]
    gs = graphs(clone(traces))
    for g in gs:
        g.scale(g.select(by_resource("comm")), 1.0 / factor)
    return _finish(
        "network-bandwidth",
        gs,
        network=net,
        notes=[f"bandwidth x{factor:g}: {', '.join(f'{b:g}' for b in net.bandwidth)} GB/s"],
    )


def drop_comm(traces: Sequence[Trace]) -> WhatIf:
    """Remove every communication node, bridging its dependencies."""
    gs = graphs(clone(traces))
    for g in gs:
        g.remove(g.select(by_resource("comm")))
    return _finish("drop-comm", gs, notes=["communication removed (dependencies bridged)"])


# ----------------------------------------------------------------------------- MoE routing


def rebalance_routing(traces: Sequence[Trace]) -> WhatIf:
    """What if the router were balanced: every all-to-all with per-peer sizes (`comm_send_bytes`)
    moves the same total bytes, spread evenly over all pairs of its group (each member sends and
    receives total / n, total / n^2 to each peer; the remainder of the division goes to the first
    pairs). Only the traffic changes: compute (an overloaded expert's FFN) keeps its duration."""
    from chakra.schema.attrs import RECV_BYTES, SEND_BYTES, set_attr
    from chakra.sim.alltoallv import by_collective, node_splits, uniform_lists

    out = clone(traces)
    done = skipped = 0
    peak_before = peak_after = 0
    for _key, by_rank in sorted(by_collective(out).items()):
        members = sorted(by_rank)
        rows = [node_splits(by_rank[r]) for r in members]
        n = len(rows[0])  # type: ignore[arg-type]
        if len(members) != n or any(len(r) != n for r in rows):  # type: ignore[arg-type]
            skipped += 1
            continue
        total = sum(sum(r) for r in rows)  # type: ignore[arg-type]
        even = uniform_lists(total, n)
        peak_before = max(peak_before, *(sum(r) for r in rows))  # type: ignore[arg-type]
        peak_after = max(peak_after, sum(even))
        for i, r in enumerate(members):
            node = by_rank[r]
            set_attr(node, SEND_BYTES, list(even))
            set_attr(node, RECV_BYTES, [even[i]] * n)
            set_attr(node, "comm_size", sum(even))
        done += 1
    if not done:
        raise InputError("rebalance-routing: no all-to-all with per-peer sizes (comm_send_bytes) in these traces")
    notes = [
        f"{done} all-to-all(s) with per-peer sizes spread evenly over their pairs (same total bytes); "
        f"largest per-rank send {peak_before:,} B -> {peak_after:,} B; compute unchanged"
    ]
    if skipped:
        notes.append(f"{skipped} all-to-all(s) left as they were: not every member of the group records its sizes")
    return WhatIf("rebalance-routing", out, notes=notes, changed={"rebalanced": done})


# ----------------------------------------------------------------------------- data parallel

_TYPE_BYTES = {"float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "long int": 8, "int": 4, "bool": 1}


def grad_bytes(node: pb.Node) -> int:
    """Bytes of the gradient a grad-ready node accumulates (its first tensor input).

    ET tensor values are [tensor id, storage id, offset, numel, itemsize, device]; without them,
    shape x element size of the input type (float when unknown); `tensor_size` as a last resort.
    """
    try:
        values = json.loads(node.inputs.values) if node.inputs.values else []
        v = values[0] if values else None
        if isinstance(v, list) and len(v) >= 5 and all(isinstance(x, int) for x in v[3:5]):
            return int(v[3]) * int(v[4])
    except (ValueError, TypeError):
        pass
    try:
        shapes = json.loads(node.inputs.shapes) if node.inputs.shapes else []
        types = json.loads(node.inputs.types) if node.inputs.types else []
        if shapes and isinstance(shapes[0], list) and all(isinstance(d, int) for d in shapes[0]):
            numel = 1
            for d in shapes[0]:
                numel *= d
            t = types[0] if types else "Tensor(float)"
            inner = t[t.find("(") + 1 : t.rfind(")")] if "(" in t else t
            return numel * _TYPE_BYTES.get(inner, 4)
    except (ValueError, TypeError):
        pass
    return int(get_attr(node, "tensor_size", 0) or 0)


def ddp_buckets(sizes: Sequence[int], cap_bytes: int, first_cap_bytes: int) -> list[list[int]]:
    """Indices of `sizes` (in ready order) per bucket, as DDP's size-based assignment: a bucket
    closes as soon as it reaches its cap; the first bucket's cap is the smaller one."""
    out: list[list[int]] = []
    cur: list[int] = []
    total = 0
    for i, s in enumerate(sizes):
        cur.append(i)
        total += s
        if total >= (first_cap_bytes if not out else cap_bytes):
            out.append(cur)
            cur, total = [], 0
    if cur:
        out.append(cur)
    return out


def data_parallel(
    traces: Sequence[Trace],
    *,
    ranks: int,
    bucket_mb: float = 25.0,
    first_bucket_mb: float = 1.0,
    grad_pattern: str = GRAD_READY,
    sync_pattern: str = OPTIMIZER,
    launch_us: float = 0.0,
    bucket_copies: bool = False,
    copy_pattern: str = r"^aten::copy_$",
    cores: Optional[int] = None,
    serialize_comm: bool = True,
    comm_cpu_fraction: Optional[float] = None,
    network: Any = None,
) -> WhatIf:
    """Scale a one-rank trace to `ranks` data-parallel ranks, as PyTorch DDP does.

    Gradient-ready nodes (name matches `grad_pattern`, with a tensor input) are taken in recorded
    order and cut into steps at each node matching `sync_pattern` (the optimizer step). Within a
    step they fill buckets of `bucket_mb` MiB (the first bucket min(first_bucket_mb, bucket_mb));
    each bucket gets an ALL_REDUCE of its bytes that depends on its last gradient, and the step's
    sync node waits for all of them. With `launch_us` > 0 a CPU task of that length (the
    `allreduce_` call) is spliced into the CPU chain before each collective.

    `bucket_copies` also models DDP's CPU copies (gradient_as_bucket_view=False): each gradient
    is copied into its bucket when ready, and each bucket back into the gradients after its
    all-reduce. Their cost comes from the trace itself (Daydream: inserted CPU tasks take their
    durations from collected traces): a least-squares fit duration = c0 + c1*tensor_size over
    the operators matching `copy_pattern`, where a copy of B bytes has tensor_size 3B (two
    inputs and the output, as the converter counts it). With more than one rank DDP also divides
    each gradient by the world size on its way into the bucket (an `aten::mul` the same size as
    the copy), so the copy into the bucket costs two such passes.

    `cores` models ranks that share `cores` CPU cores (all ranks on one host, a CPU backend such
    as gloo): see `share_cores` (with `serialize_comm`, `comm_cpu_fraction`, `network`), applied
    to the result.
    """
    if len(traces) != 1:
        raise InputError(f"data-parallel starts from a one-rank trace, got {len(traces)} ranks")
    if ranks < 1:
        raise InputError(f"--ranks must be >= 1, got {ranks}")
    try:
        grad_rx, sync_rx = re.compile(grad_pattern), re.compile(sync_pattern)
    except re.error as exc:
        raise InputError(f"bad pattern: {exc}") from None
    (g,) = graphs(clone(traces))
    ordered = sorted(g.nodes.values(), key=TIME_ORDER)
    cap = int(bucket_mb * 2**20)
    first_cap = int(min(first_bucket_mb, bucket_mb) * 2**20)
    segments: list[tuple[list[pb.Node], Optional[pb.Node]]] = []
    cur: list[pb.Node] = []
    for n in ordered:
        if sync_rx.search(n.name):
            if cur:
                segments.append((cur, n))
                cur = []
        elif grad_rx.search(n.name) and resource_of(n) != "comm" and grad_bytes(n) > 0:
            cur.append(n)
    if cur:
        segments.append((cur, None))
    if not segments:
        raise InputError(f"no gradient-ready node (name matching {grad_pattern!r} with a tensor input)")
    c0 = c1 = 0.0
    if bucket_copies:
        copy_rx = re.compile(copy_pattern)
        copies = [n for n in g.nodes.values() if copy_rx.search(n.name)]
        c0, c1 = per_byte_cost(copies)

    def copy_us(nbytes: int) -> float:
        return c0 + c1 * 3 * nbytes

    n_coll = 0
    total_bytes = 0
    copy_total = 0.0
    copied: dict[int, int] = {}
    for grads, sync in segments:
        sizes = [grad_bytes(n) for n in grads]
        if bucket_copies:
            passes = 2 if ranks > 1 else 1  # mul by 1/world_size into the bucket, as DDP does
            for n, size in zip(grads, sizes):
                d = passes * copy_us(size)
                c = g.insert(
                    "ddp: copy grad to bucket", after=[n.id], splice=True, duration_us=d, attrs={"is_cpu_op": True}
                )
                copied[n.id] = c.id
                copy_total += round(d)
        for b in ddp_buckets(sizes, cap, first_cap):
            last = grads[b[-1]]
            nbytes = sum(sizes[i] for i in b)
            after = copied.get(last.id, last.id)
            if launch_us > 0:
                call = g.insert(
                    "ddp: allreduce_ call",
                    NodeType.COMP_NODE,
                    after=[last.id],
                    splice=True,
                    duration_us=launch_us,
                    attrs={"is_cpu_op": True},
                )
                after = call.id
            coll = g.insert(
                f"ddp: all_reduce bucket {n_coll} ({len(b)} grads)",
                NodeType.COMM_COLL_NODE,
                after=[after],
                before=[sync.id] if sync is not None else [],
                attrs={
                    "is_cpu_op": False,
                    "comm_type": int(CollectiveType.ALL_REDUCE),
                    "comm_size": nbytes,
                },
            )
            coll.start_time_micros = last.start_time_micros + last.duration_micros
            if bucket_copies:
                d = sum(copy_us(sizes[i]) for i in b)
                g.insert(
                    "ddp: copy bucket to grads",
                    after=[coll.id],
                    before=[sync.id] if sync is not None else [],
                    duration_us=d,
                    attrs={"is_cpu_op": True},
                )
                copy_total += round(d)
            n_coll += 1
            total_bytes += nbytes
    share_note = None
    if cores:
        share_note = share_cores(
            [g],
            ranks=ranks,
            cores=cores,
            serialize_comm=serialize_comm,
            comm_cpu_fraction=comm_cpu_fraction,
            network=network,
        )
    base = g.to_trace()
    out = []
    for r in range(ranks):
        (t,) = clone([base])
        t.rank = r
        out.append(t)
    notes = [
        f"{len(segments)} step(s), {n_coll} all-reduce bucket(s), {total_bytes:,} bytes of gradients "
        f"(bucket cap {bucket_mb:g} MiB, first {min(first_bucket_mb, bucket_mb):g} MiB), copied to {ranks} ranks"
    ]
    if bucket_copies:
        notes.append(f"bucket copies: {copy_total:,.0f} µs of CPU tasks ({c0:.3g} µs + {c1 * 1e6:.4g} µs/MB)")
    if share_note:
        notes.append(share_note)
    return WhatIf("data-parallel", out, notes=notes, changed={"inserted": g.log.inserted})


def share_cores(
    gs: Sequence[Graph],
    *,
    ranks: int,
    cores: int,
    serialize_comm: bool = True,
    comm_cpu_fraction: Optional[float] = None,
    network: Any = None,
) -> str:
    """Model `ranks` data-parallel ranks that share `cores` CPU cores (edits `gs` in place).

    Each rank runs two threads: its compute thread and the thread that executes its collectives
    (gloo does the reduction, copies and socket calls on the CPU). Under work-conserving processor
    sharing with symmetric ranks, as soon as `ranks >= cores` some thread of every rank is always
    runnable, so every rank gets exactly `cores/ranks` of the cores whenever it has work, and its
    two threads split that share. Two consequences, both derived rather than fitted:

    - compute runs `ranks/cores` times slower than in the one-rank recording (which had a core
      to itself): CPU task durations are multiplied by max(1, ranks/cores);
    - overlapping a collective with compute saves nothing, because the cores are saturated
      either way: each collective is spliced into the CPU chain (the CPU work after its issuing
      task waits for it). Its duration stays the network model's, calibrated on an all-reduce
      microbenchmark run with the same number of ranks on the same cores, which already
      includes that share.

    With `2*ranks <= cores` every thread has a core and nothing changes. In between
    (cores/2 < ranks < cores) the threads only partly compete; the serialized model is then an
    upper bound, which the returned note says.

    `serialize_comm=False` keeps only the compute slowdown and lets collectives overlap compute:
    the bound for collectives whose time is mostly waiting (for the peer, or for the scheduler)
    rather than CPU work.

    `comm_cpu_fraction=f` (with the `network` the collectives will run on) sits between the two:
    only the CPU-busy part of a collective competes with compute. Each collective keeps its
    own resource (overlapping), and a CPU task of f x (its simulated time on `network`) is
    spliced into the CPU chain after its issuing task. f comes from the microbenchmark: the
    all-reduce's CPU time per rank c and wall time w give f = min(1, c * max(1, ranks/cores) / w)
    (c CPU-seconds take c*ranks/cores of wall time on the rank's share of the cores).
    """
    if cores < 1:
        raise InputError(f"--cores must be >= 1, got {cores}")
    if 2 * ranks <= cores:
        return f"{ranks} ranks x 2 threads fit on {cores} cores: no CPU sharing"
    slow = max(1.0, ranks / cores)
    if comm_cpu_fraction is not None:
        if not 0.0 <= comm_cpu_fraction <= 1.0:
            raise InputError(f"comm_cpu_fraction must be within [0, 1], got {comm_cpu_fraction}")
        if network is None:
            raise InputError("comm_cpu_fraction needs the network the collectives run on")
        return _share_comm_cpu(gs, ranks, cores, slow, comm_cpu_fraction, network)
    n_coll = 0
    for g in gs:
        if slow > 1.0:
            g.scale(g.select(by_type(NodeType.COMP_NODE) & by_resource("cpu")), slow)
        for coll in g.select(by_type(NodeType.COMM_COLL_NODE)) if serialize_comm else []:
            for p in [p for p in g.parents(coll.id) if resource_of(g[p]) == "cpu"]:
                # Everything the CPU did after the collective's issuing task now waits for it.
                for c in sorted(g.children[p]):
                    if c != coll.id and resource_of(g[c]) == "cpu" and coll.id not in g.parents(c):
                        kind = g.drop_dep(c, p)
                        g.add_dep(c, coll.id, data=kind == "data")
            n_coll += 1
    note = f"{ranks} ranks share {cores} cores: CPU tasks x{slow:g}, {n_coll} collective(s) serialized with compute"
    if ranks < cores and serialize_comm:
        note += " (upper bound: fewer ranks than cores)"
    return note


def _share_comm_cpu(gs: Sequence[Graph], ranks: int, cores: int, slow: float, frac: float, network: Any) -> str:
    """`share_cores` with only the CPU-busy fraction of each collective taken from compute."""
    from chakra.sim import load_network

    net = load_network(network)
    if net.total_npus != ranks:
        raise InputError(f"the network has {net.total_npus} NPUs, the model {ranks} ranks")
    cache: dict[tuple[int, int], int] = {}
    total = 0.0
    n_coll = 0
    for g in gs:
        if slow > 1.0:
            g.scale(g.select(by_type(NodeType.COMP_NODE) & by_resource("cpu")), slow)
        for coll in g.select(by_type(NodeType.COMM_COLL_NODE)):
            key = (int(get_attr(coll, "comm_type", 0) or 0), int(get_attr(coll, "comm_size", 0) or 0))
            if key not in cache:
                cache[key] = _sim_collective_ns(net, *key)
            d = frac * cache[key] / 1000.0
            cpu_parents = sorted(p for p in g.parents(coll.id) if resource_of(g[p]) == "cpu")
            if not cpu_parents or d <= 0:
                continue
            work = g.insert(
                "gloo: collective CPU work (shared cores)",
                after=cpu_parents[-1:],
                splice=True,
                duration_us=d,
                attrs={"is_cpu_op": True},
            )
            # The splice moved the collective behind the new task too: it starts when issued.
            g.drop_dep(coll.id, work.id)
            g.add_dep(coll.id, cpu_parents[-1])
            total += round(d)
            n_coll += 1
    return (
        f"{ranks} ranks share {cores} cores: CPU tasks x{slow:g}; {n_coll} collective(s) overlap compute, "
        f"their CPU share ({frac:.0%}, {total:,.0f} µs) is spliced into the CPU chain"
    )


# ----------------------------------------------------------------------------- network calibration


def _sim_collective_ns(net: Any, comm_type: int, nbytes: int) -> int:
    """Simulated time of one collective alone on `net` (all NPUs take part)."""
    from chakra.sim import simulate
    from chakra.trace import make_node

    attrs = {"is_cpu_op": False, "comm_type": int(comm_type), "comm_size": int(nbytes)}
    traces = [
        Trace(nodes=[make_node(0, "collective", NodeType.COMM_COLL_NODE, attrs=attrs)], rank=r)
        for r in range(net.total_npus)
    ]
    return simulate(traces, net).finish_ns


def _sim_allreduce_ns(world: int, nbytes: int, bandwidth: float, latency: float, system: Any = None) -> int:
    from chakra.sim import simulate
    from chakra.sim.config import NetworkConfig
    from chakra.trace import make_node

    net = NetworkConfig(topology=["Ring"], npus_count=[world], bandwidth=[bandwidth], latency=[latency])
    attrs = {"is_cpu_op": False, "comm_type": int(CollectiveType.ALL_REDUCE), "comm_size": int(nbytes)}
    traces = [
        Trace(nodes=[make_node(0, "all_reduce", NodeType.COMM_COLL_NODE, attrs=attrs)], rank=r) for r in range(world)
    ]
    return simulate(traces, net, system).finish_ns


def calibrate_network(measured_s: dict[int, float], world: int, *, system: Any = None) -> tuple[Any, dict[str, Any]]:
    """A Ring network whose simulated all-reduce times fit measured ones (bytes -> seconds).

    The measured times are fitted to alpha + beta*bytes by least squares on relative error (so
    small and large messages count alike; pass only the sizes that matter); the simulator's own
    all-reduce time is affine in the link latency and in bytes/bandwidth (whatever its chunking
    and endpoint delay), so two probe simulations give the latency and bandwidth that reproduce
    alpha and beta. Returns (NetworkConfig, report with the fit and per-size simulated vs measured).
    """
    import numpy as np

    from chakra.sim.config import NetworkConfig

    if world < 2 or len(measured_s) < 2:
        raise InputError("calibration needs >= 2 ranks and >= 2 message sizes")
    sizes = sorted(measured_s)
    x = np.array(sizes, dtype=float)
    y = np.array([measured_s[s] * 1e9 for s in sizes])  # ns
    beta, alpha = np.polyfit(x, y, 1, w=1.0 / y)
    if beta <= 0:
        # Times that do not grow with size (noise, or latency-bound): a latency-only fit.
        beta = 1e-6
        alpha = float(np.median(y))
    big, small = max(sizes), min(sizes)
    bw0, lat0 = 1.0, 1000.0
    t_small = _sim_allreduce_ns(world, small, bw0, lat0, system)
    t_big = _sim_allreduce_ns(world, big, bw0, lat0, system)
    b0 = (t_big - t_small) / (big - small)
    a0 = t_small - b0 * small
    t_small2 = _sim_allreduce_ns(world, small, bw0, 2 * lat0, system)
    a1 = t_small2 - b0 * small
    per_lat = (a1 - a0) / lat0
    latency = max(0.0, lat0 + (alpha - a0) / per_lat) if per_lat > 0 else lat0
    bandwidth = bw0 * b0 / beta if beta > 0 else 1e6
    # The simulator is only nearly affine (chunking rounds); refine on the measured sizes themselves.
    for _ in range(4):
        sim = np.array([_sim_allreduce_ns(world, s, bandwidth, latency, system) for s in sizes], dtype=float)
        beta_s, alpha_s = np.polyfit(x, sim, 1, w=1.0 / y)
        if beta_s > 0:
            bandwidth = min(bandwidth * beta_s / beta, 1e6)
        if per_lat > 0:
            latency = max(0.0, latency + (alpha - alpha_s) / per_lat)
    net = NetworkConfig(topology=["Ring"], npus_count=[world], bandwidth=[float(bandwidth)], latency=[float(latency)])
    rows = []
    for s in sizes:
        sim = _sim_allreduce_ns(world, s, net.bandwidth[0], net.latency[0], system)
        rows.append({"bytes": s, "measured_us": measured_s[s] * 1e6, "simulated_us": sim / 1e3})
    report = {
        "world": world,
        "fit_alpha_us": alpha / 1e3,
        "fit_beta_ns_per_byte": beta,
        "bandwidth_GBps": net.bandwidth[0],
        "latency_ns": net.latency[0],
        "sizes": rows,
    }
    return net, report


def write_network_yaml(path: Any, net: Any, comment: str = "") -> None:
    """The network in the ASTRA-sim YAML form `load_network` reads (atomic write)."""
    from chakra.io import atomic_output

    lines = [f"# {line}" for line in comment.splitlines()] if comment else []
    lines += [
        f"topology: [ {', '.join(net.topology)} ]",
        f"npus_count: [ {', '.join(str(n) for n in net.npus_count)} ]",
        f"bandwidth: [ {', '.join(f'{b:.9g}' for b in net.bandwidth)} ]  # GB/s (GB = 2^30 bytes)",
        f"latency: [ {', '.join(f'{x:.6g}' for x in net.latency)} ]  # ns",
    ]
    with atomic_output(path, "w") as fh:
        fh.write("\n".join(lines) + "\n")


# ----------------------------------------------------------------------------- prediction


def simulate_breakdown(
    traces: Sequence[Trace],
    network: Any = None,
    system: Any = None,
    *,
    comm_mode: str = "model",
    comm_groups: Optional[dict[str, list[int]]] = None,
) -> dict[str, Any]:
    """Simulate and break the slowest rank's time down (chakra.analysis.breakdown), all in ns."""
    from chakra.analysis import breakdown, resource_intervals
    from chakra.sim import SimOptions, simulate

    options = SimOptions(record_nodes=True, comm_mode=comm_mode, comm_groups=comm_groups or None)
    res = simulate(list(traces), network, system, options=options)
    times = res.node_times or {}
    worst = max(res.ranks, key=lambda r: res.ranks[r].finish_ns)
    t = next(t for pos, t in enumerate(traces) if (t.rank if t.rank is not None else pos) == worst)
    finish_by_rank = {r: v.finish_ns for r, v in sorted(res.ranks.items())}
    return {
        "finish_ns": res.finish_ns,
        "rank": worst,
        "breakdown": breakdown(resource_intervals(t, times[worst])),
        "finish_by_rank": finish_by_rank,
        "step": step_time(traces, finish_by_rank, times),
    }


def predict(
    baseline: Sequence[Trace],
    whatif: WhatIf,
    *,
    network: Any = None,
    system: Any = None,
    steps: Optional[int] = None,
    comm_mode: str = "model",
    comm_groups: Optional[dict[str, list[int]]] = None,
) -> dict[str, Any]:
    """Simulate the baseline and the what-if; per-step times and breakdowns (ns) side by side.

    The step is `chakra.sim.steps`' (median ProfilerStep# span), the one `chakra simulate`
    prints: the baseline is the replay the user has seen. `steps` (a count) instead divides
    the whole run by it. Breakdowns are the whole run's divided by the step count.

    `comm_groups`: the baseline's process groups from a comm-group file (also used for the
    what-if when it keeps the rank count).

    The baseline runs on `network` unless it has a different rank count (data-parallel starts
    from one rank: its baseline uses a one-NPU ring); the what-if runs on the recipe's network
    if it made one, else on `network`.
    """
    from chakra.sim import load_network

    k = steps or count_steps(baseline)
    net = load_network(network) if network is not None else None
    base_net = net if net is not None and net.total_npus == len(baseline) else None
    new_net = whatif.network if whatif.network is not None else net
    if new_net is not None and new_net.total_npus != len(whatif.traces):
        raise InputError(
            f"the network has {new_net.total_npus} NPUs but the what-if has {len(whatif.traces)} ranks; "
            "give a --network sized for the prediction"
        )
    same = len(whatif.traces) == len(baseline)
    base = simulate_breakdown(baseline, base_net, system, comm_mode=comm_mode, comm_groups=comm_groups)
    new = simulate_breakdown(
        whatif.traces, new_net, system, comm_mode=comm_mode, comm_groups=comm_groups if same else None
    )

    def per_step(d: dict[str, Any]) -> dict[str, Any]:
        st = d["step"]
        step_ns = st.step_ns if steps is None and st.annotated else d["finish_ns"] / k
        per = {key: v / k for key, v in d["breakdown"].items()}
        per["step"] = step_ns  # the table's step row is the step itself
        return {"step_ns": step_ns, "steps_ns": st.steps_ns if steps is None else None, "rank": d["rank"],
                "breakdown_per_step_ns": per}  # fmt: skip

    b, n = per_step(base), per_step(new)
    out = {
        "recipe": whatif.recipe,
        "steps": k,
        "baseline": b,
        "predicted": n,
        "speedup": b["step_ns"] / n["step_ns"] if n["step_ns"] else None,
        "timebase": timebase(overhead_record(baseline[0].metadata)) if baseline else timebase(None),
        "notes": whatif.notes,
        "changed": whatif.changed,
        "units": "ns",
    }
    if same:  # every rank's step before and after: how a change on some ranks reaches the others
        nf = new["finish_by_rank"]
        out["ranks"] = {
            str(r): {"baseline_step_ns": f / k, "predicted_step_ns": nf[r] / k}
            for r, f in base["finish_by_rank"].items()
            if r in nf
        }
    return out


# ----------------------------------------------------------------------------- registry

RECIPES: dict[str, tuple[Callable[..., WhatIf], str]] = {
    "amp": (
        amp,
        "mixed precision: compute-bound kernels /3, memory-bound /2; CPU bf16 timed here with --on cpu --measure",
    ),
    "fused-optimizer": (fused_optimizer, "each optimizer step fused into one kernel (FusedAdam)"),
    "scale-compute": (scale_compute, "compute F times faster"),
    "network-bandwidth": (network_bandwidth, "network bandwidth times F"),
    "data-parallel": (data_parallel, "one-rank trace -> N DDP ranks with bucketed gradient all-reduces"),
    "drop-comm": (drop_comm, "communication removed (ideal network)"),
    "activation-checkpointing": (
        memory_recipes.activation_checkpointing,
        "activations dropped after forward, recomputed before backward (memory: new peak)",
    ),
    "zero": (memory_recipes.zero, "ZeRO stage 1-3: optimizer state, gradients, parameters sharded (memory)"),
    "rebalance-routing": (rebalance_routing, "MoE all-to-alls with per-peer sizes spread evenly (same bytes)"),
    "straggler": (straggler, "one slow rank: rank R's compute durations times F"),
    "cuda-graphs": (cuda_graphs, "the step captured in a CUDA graph: host launch work gone, device time + one launch"),
}
#: Recipes whose point is the memory footprint: `whatif` reports the peak before and after.
MEMORY_RECIPES = ("activation-checkpointing", "zero")


def apply_recipe(name: str, traces: Sequence[Trace], **options: Any) -> WhatIf:
    """Run a recipe by name with only the options it takes (others are ignored)."""
    import inspect

    entry = RECIPES.get(name)
    if entry is None:
        raise InputError(f"unknown recipe {name!r}; choose from {', '.join(RECIPES)}")
    fn = entry[0]
    params = inspect.signature(fn).parameters
    kwargs = {k: v for k, v in options.items() if k in params and v is not None}
    missing = [
        k for k, p in params.items() if p.kind == p.KEYWORD_ONLY and p.default is inspect._empty and k not in kwargs
    ]
    if missing:
        raise InputError(f"recipe {name} needs --{missing[0].replace('_', '-')}")
    return fn(traces, **kwargs)


__all__ = [
    "MEMORY_RECIPES",
    "RECIPES",
    "WhatIf",
    "amp",
    "apply_recipe",
    "calibrate_network",
    "count_steps",  # chakra.sim.steps's, re-exported
    "cuda_graphs",
    "predict",
    "data_parallel",
    "ddp_buckets",
    "drop_comm",
    "rebalance_routing",
    "fused_optimizer",
    "grad_bytes",
    "network_bandwidth",
    "scale_compute",
    "scaled_us",
    "share_cores",
    "straggler",
]

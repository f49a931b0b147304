"""Measure, on this host, how much faster each operator of an fp32 CPU trace runs under bf16 autocast.

`amp --on cpu --measure`: every top-level operator whose dtypes autocast changes
(chakra.whatif.autocast_cpu) is rebuilt with torch from the trace (its `op_schema`, input shapes,
dtypes and scalar values; floating inputs random, integer inputs random indices below the
smallest dimension of the floating inputs, valid for embeddings, class targets and pooling
positions) and timed back to back, interleaved, in fp32 as recorded and as it runs in the bf16
run: under `torch.autocast("cpu", dtype=torch.bfloat16)` in the forward (the casts autocast
inserts are timed with the op), in its inputs' dtypes in backward. Where the op refuses the
propagated dtypes (a statistic or log-sum-exp its forward keeps in fp32), the nearest assignment
that runs is used. Each call reads inputs from outside L2 (rotating input copies, as a training
step's operators do); time is the calling thread's CPU time (a shared host's other processes do
not count), the median of `reps` rounds.

The op's nodes (itself, its nested ops and their `gap` segments) change by the measured
bf16 − fp32 **difference**, spread over them in proportion (a difference, not a ratio: the
rebuilt call's own Python and dispatch overhead cancels, and the trace keeps its fitted time
for what the op did in the recorded run); each gradient autocast casts back (a weight's, an
activation's: autograd's ToCopyBackward0) adds a measured cast plus one autograd node's engine
time (the median of the trace's own backward functions).

Measured once per distinct (op, schema, shapes, dtypes, scalar arguments) within one call.
Ops that cannot be rebuilt (no schema, an argument type not handled, the call fails) keep their
time and are counted in the notes. torch is the `[torch]` extra.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Callable, Optional

from chakra.errors import InputError
from chakra.footprint import is_tensor_value
from chakra.schema.attrs import get_attr
from chakra.schema.kinds import resource_of
from chakra.whatif.autocast_cpu import BACKWARD, BF16, FP32, Unit, io_of, propagate, windows
from chakra.whatif.transforms import Graph

TORCH_MISSING = "amp --on cpu --measure needs torch to time the operators: pip install 'chakra-et[torch]'"

#: ET dtype names -> torch dtype attribute names
_DTYPES = {
    "float": "float32",
    "c10::BFloat16": "bfloat16",
    "double": "float64",
    "c10::Half": "float16",
    "long int": "int64",
    "int": "int32",
    "bool": "bool",
    "unsigned char": "uint8",
    "signed char": "int8",
    "short int": "int16",
}


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise InputError(TORCH_MISSING) from None
    return torch


class Timer:
    """Build and time rebuilt operators; one cache per prediction."""

    def __init__(self, reps: int = 7, target_s: float = 1e-3, progress: Optional[Callable[[str], None]] = None):
        self.torch = _torch()
        self.reps, self.target_s = reps, target_s
        self.cache: dict[Any, Optional[tuple[float, float]]] = {}
        self.progress = progress
        self.failed: dict[str, str] = {}
        self._bound = 1

    # -- rebuilding ---------------------------------------------------------------------------
    def _value(self, v: Any, t: str, shape: Any, dtype: Optional[str]) -> Any:
        torch = self.torch
        if t.startswith("Tensor("):
            if dtype is None or dtype.startswith("nullptr") or not is_tensor_value(v):
                return None
            name = _DTYPES.get(dtype)
            if name is None:
                raise ValueError(f"tensor dtype {dtype}")
            dt = getattr(torch, name)
            size = [int(x) for x in shape] if isinstance(shape, list) else []
            if dt.is_floating_point:
                return torch.randn(size, dtype=torch.float32).to(dt)
            if dt in (torch.int64, torch.int32) and self._bound > 1:
                return torch.randint(0, self._bound, size, dtype=dt)
            return torch.zeros(size, dtype=dt)
        if t.startswith("GenericList["):
            inner = [x.strip() for x in t[len("GenericList[") : -1].split(",") if x.strip()]
            shapes = shape if isinstance(shape, list) and len(shape) == len(v) else [[]] * len(v)
            return [self._value(x, it, s, it[7:-1] if it.startswith("Tensor(") else None)
                    for x, it, s in zip(v, inner, shapes)]  # fmt: skip
        if t == "None":
            return None
        if t in ("Int", "Double", "Bool", "String"):
            return v
        if t == "Device":
            return torch.device(v) if isinstance(v, str) else v
        raise ValueError(f"argument type {t}")

    def _call(self, unit: Unit, dtypes: Sequence[Optional[str]]) -> Callable[[], Any]:
        torch = self.torch
        schema_text = get_attr(unit.node, "op_schema", None)
        if not schema_text:
            raise ValueError("no op_schema")
        vals, types, shapes, _ov, _ot = io_of(unit.node)
        op, schema = _overload(torch, schema_text, len(vals))
        # integer inputs are indices (embedding rows, classes, pooling positions): spread over the
        # smallest dimension of the floating inputs, which every such index may take
        dims = [int(x) for t, sh in zip(types, shapes) if isinstance(t, str) and t in ("Tensor(float)",)
                and isinstance(sh, list) for x in sh if isinstance(x, int) and x > 0]  # fmt: skip
        self._bound = min(dims) if dims else 1
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for a, v, t, s, d in zip(schema.arguments, vals, types, shapes, dtypes):
            x = self._value(v, t, s, d)
            if str(a.type) == "ScalarType" or str(a.type) == "ScalarType?":
                x = None if x is None else _scalar_type(torch, x)
            if a.kwarg_only:
                kwargs[a.name] = x
            else:
                args.append(x)
        return lambda: op(*args, **kwargs)

    def _runnable(self, unit: Unit, shapes: list[Any]) -> list[Optional[str]]:
        """The dtypes of the bf16 call: the propagated ones; where the op refuses them (a statistic or a
        log-sum-exp that autocast's op keeps in fp32: the static propagation cannot see nested
        results), the nearest assignment that runs: 1-D floating inputs in fp32, then one bf16
        input at a time back to fp32."""
        dts = list(unit.in_dtypes)
        bf = [i for i, d in enumerate(dts) if d == BF16]
        flat = [i for i in bf if isinstance(shapes[i], list) and len(shapes[i]) <= 1]
        tries = [dts, [FP32 if i in flat else d for i, d in enumerate(dts)]]
        tries += [[FP32 if i == j else d for i, d in enumerate(dts)] for j in bf]
        err: Optional[Exception] = None
        ctx = self.torch.autocast("cpu", dtype=self.torch.bfloat16, enabled=unit.autocast)
        for cand in tries:
            try:
                f = self._call(unit, cand)
                with self.torch.no_grad(), ctx:
                    f()
                return cand
            except Exception as exc:  # the op checks its dtypes: try the next assignment
                err = err or exc
        assert err is not None
        raise err

    # -- timing -------------------------------------------------------------------------------
    def measure(self, unit: Unit) -> Optional[tuple[float, float]]:
        """(fp32 µs, bf16 µs) per call, or None when the op cannot be rebuilt."""
        vals, types, shapes, _o, _t = io_of(unit.node)
        recorded = [t[7:-1] if isinstance(t, str) and t.startswith("Tensor(") else None for t in types]
        key = (unit.node.name, get_attr(unit.node, "op_schema", ""), repr(shapes), repr(types), repr(unit.in_dtypes),
               repr([v for v in vals if not isinstance(v, list)]), unit.autocast)  # fmt: skip
        if key in self.cache:
            return self.cache[key]
        torch = self.torch
        try:
            if any(t[5] not in ("cpu", "") for t in _flat_tensors(vals)):  # "": an undefined tensor
                raise ValueError("a device tensor: only CPU operators are timed here")
            low = self._runnable(unit, shapes)
            copies = _copies(vals)
            f32 = [self._call(unit, recorded) for _ in range(copies)]
            f16 = [self._call(unit, low) for _ in range(copies)]
            off = torch.autocast("cpu", enabled=False)
            on = torch.autocast("cpu", dtype=torch.bfloat16) if unit.autocast else off

            def run(fs: list[Callable[[], Any]], ctx: Any, n: int) -> float:
                t0 = time.thread_time()
                for i in range(n):
                    with ctx:
                        fs[i % len(fs)]()
                return (time.thread_time() - t0) / n

            with torch.no_grad():
                run(f32, off, 1), run(f16, on, 1)  # warm-up (oneDNN primitives, allocator)
                one = max(run(f32, off, 3), 1e-7)
                n = max(1, min(1000, int(self.target_s / one)))
                a, b = [], []
                for _ in range(self.reps):
                    a.append(run(f32, off, n))
                    b.append(run(f16, on, n))
            res: Optional[tuple[float, float]] = (statistics.median(a) * 1e6, statistics.median(b) * 1e6)
        except Exception as exc:  # an op we cannot rebuild keeps its time; the notes count it
            self.failed[unit.node.name] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"
            res = None
        self.cache[key] = res
        if self.progress is not None and res is not None:
            self.progress(f"{unit.node.name} {unit.phase}: fp32 {res[0]:.1f} µs, bf16 {res[1]:.1f} µs")
        return res

    def cast_us(self, shape: list[int], src: str, dst: str) -> float:
        """One dtype conversion of a tensor of `shape` (`Tensor.to`), µs."""
        key = ("cast", tuple(shape), src, dst)
        if key not in self.cache:
            torch = self.torch
            x = torch.randn([int(s) for s in shape]).to(getattr(torch, _DTYPES[src]))
            to = getattr(torch, _DTYPES[dst])
            x.to(to)
            one = max(_timed(lambda: x.to(to), 3), 1e-7)
            n = max(1, min(1000, int(self.target_s / one)))
            self.cache[key] = (statistics.median(_timed(lambda: x.to(to), n) for _ in range(self.reps)) * 1e6, 0.0)
        return self.cache[key][0]  # type: ignore[index]


def _l2_bytes() -> int:
    """This host's L2 cache per core (sysfs), 1 MiB when it cannot be read."""
    try:
        text = Path("/sys/devices/system/cpu/cpu0/cache/index2/size").read_text().strip()
        return int(text[:-1]) * {"K": 1 << 10, "M": 1 << 20}[text[-1]] if text[-1] in "KM" else int(text)
    except (OSError, ValueError, KeyError, IndexError):
        return 1 << 20


def _flat_tensors(vals: list[Any]) -> list[list[Any]]:
    nested = (([v] if is_tensor_value(v) else v) for v in vals if isinstance(v, list))
    return [t for ts in nested for t in ts if is_tensor_value(t)]


def _copies(vals: list[Any]) -> int:
    """Input sets to rotate through so that each call reads its inputs from outside L2, as an
    operator of a training step does (its inputs were written long before, or by a large op)."""
    size = sum(t[3] * t[4] for t in _flat_tensors(vals))
    return max(1, min(16, -(-2 * _l2_bytes() // max(size, 1))))


def _overload(torch: Any, schema_text: str, nargs: int) -> tuple[Any, Any]:
    """The op overload the recorded call used: the schema's, or (the ET names one overload for
    all of them) the one whose argument count matches the recorded inputs."""
    schema = torch._C.parse_schema(schema_text)
    name, overload = schema.name.partition("::")[2], schema.overload_name
    packet = getattr(torch.ops.aten, name)
    op = getattr(packet, overload or "default", None)
    if op is not None and len(op._schema.arguments) == nargs:
        return op, op._schema
    for ov in packet.overloads():
        cand = getattr(packet, ov)
        if len(cand._schema.arguments) == nargs and not cand._schema.name.endswith("_out") and ov != "out":
            return cand, cand._schema
    raise ValueError("no overload takes the recorded inputs")


def _timed(f: Callable[[], Any], n: int) -> float:
    t0 = time.thread_time()
    for _ in range(n):
        f()
    return (time.thread_time() - t0) / n


def _scalar_type(torch: Any, x: Any) -> Any:
    """An ET ScalarType argument (recorded as its enum number) -> torch dtype."""
    order = ["uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64", "complex32",
             "complex64", "complex128", "bool", "qint8", "quint8", "qint32", "bfloat16"]  # fmt: skip
    if isinstance(x, int) and 0 <= x < len(order):
        return getattr(torch, order[x])
    return x


def _spread(g: Graph, ids: Sequence[int], new_total_us: float) -> None:
    """Give the nodes `ids` durations summing to `new_total_us` (rounded as a running sum, so the
    total stays right), in proportion to their current durations (all on the first when all are 0)."""
    nodes = [g[i] for i in ids if i in g]
    old = [n.duration_micros for n in nodes]
    total = sum(old)
    target = max(0.0, new_total_us)
    weights = [o / total for o in old] if total > 0 else [1.0] + [0.0] * (len(nodes) - 1)
    acc, placed = 0.0, 0
    for n, w in zip(nodes, weights):
        acc += w * target
        d = int(round(acc)) - placed
        placed += d
        n.duration_micros = max(0, d)
    g.log.scaled += len(nodes)


def _engine_us(g: Graph, nodes: Sequence[Any]) -> float:
    """The autograd engine's own time per backward function: median over the trace's
    `evaluate_function` windows of the time not inside an aten op (wrapper, function node, gaps)."""
    parent = windows(nodes)
    ids = {n.id: n for n in nodes}
    per: dict[int, float] = {}
    for n in nodes:
        owner = int(get_attr(n, "gap_of", -1)) if n.name == "gap" else n.id
        if owner not in ids:
            continue
        chain, p = [ids[owner]], parent.get(owner)
        while p is not None:
            chain.append(ids[p])
            p = parent.get(p)
        if any(c.name.startswith("aten::") for c in chain):
            continue
        top = next((c for c in chain if c.name.startswith(BACKWARD)), None)
        if top is not None and "AccumulateGrad" not in top.name:
            per[top.id] = per.get(top.id, 0.0) + g[n.id].duration_micros
    return statistics.median(per.values()) if per else 0.0


def apply_measured(
    gs: Sequence[Graph],
    *,
    reps: int = 7,
    threads: Optional[int] = None,
    progress: Optional[Callable[[str], None]] = None,
) -> list[str]:
    """Scale every changed operator of each graph by its measured bf16 − fp32 time; the notes."""
    torch = _torch()
    old_threads = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    timer = Timer(reps=reps, progress=progress)
    stats = {"measured_us": 0.0, "kept_us": 0.0, "ops": 0, "failed": 0, "casts": 0}
    effect: dict[str, float] = {}
    host_before: list[int] = []
    try:
        for g in gs:
            nodes = list(g.nodes.values())
            host_before.append(sum(n.duration_micros for n in nodes if resource_of(n) == "cpu"))
            us = propagate(nodes)
            engine = _engine_us(g, nodes)
            first_bw: dict[int, Unit] = {}
            for u in us:
                if u.phase == "backward" and u.backward_of is not None:
                    first_bw.setdefault(u.backward_of, u)
            changed = [u for u in us if u.changed and u.phase in ("forward", "backward")]
            if progress:
                progress(f"rank {g.rank}: {len(changed)} operators run differently under bf16 autocast; measuring")
            for u in changed:
                total = sum(g[m].duration_micros for m in u.members if m in g)
                t = timer.measure(u)
                if t is None:
                    stats["kept_us"] += total
                    stats["failed"] += 1
                    continue
                delta = t[1] - t[0]  # a difference, not a ratio: the rebuilt call's own overhead cancels
                stats["measured_us"] += total
                stats["ops"] += 1
                _spread(g, u.members, total + delta)
                effect[u.node.name] = effect.get(u.node.name, 0.0) + max(-total, delta)
                for shape, src, dst in u.backward_casts:
                    cost = engine + timer.cast_us(shape, src, dst)
                    where = first_bw.get(u.node.id, u)
                    wt = sum(g[m].duration_micros for m in where.members if m in g)
                    _spread(g, where.members, wt + cost)
                    stats["casts"] += 1
                    effect["ToCopyBackward0 (gradient casts)"] = (
                        effect.get("ToCopyBackward0 (gradient casts)", 0.0) + cost
                    )
    finally:
        torch.set_num_threads(old_threads)
    top = sorted(effect.items(), key=lambda kv: -abs(kv[1]))[:5]
    host_us = sum(host_before)
    used = threads or torch.get_num_threads()
    notes = [
        f"CPU bf16 autocast measured on this host (torch {torch.__version__}, {used} "
        f"thread(s), median of {reps}): {stats['ops']} operators re-timed ({stats['measured_us'] / 1e3:.2f} ms of host "
        f"time of {host_us / 1e3:.2f} ms), {stats['failed']} could not be rebuilt and keep their time "
        f"({stats['kept_us'] / 1e3:.2f} ms), the rest runs as in fp32; {stats['casts']} gradient casts back added",
        "most changed (ms over the trace, bf16 − fp32): " + ", ".join(f"{k} {v / 1e3:+.2f}" for k, v in top),
    ]
    if timer.failed:
        notes.append("not rebuilt: " + "; ".join(f"{k} ({v})" for k, v in sorted(timer.failed.items())[:5]))
    return notes


def stderr_progress(quiet: bool) -> Optional[Callable[[str], None]]:
    if quiet:
        return None
    return lambda msg: print(f"amp --measure: {msg}", file=sys.stderr, flush=True)


__all__ = ["TORCH_MISSING", "Timer", "apply_measured", "stderr_progress"]

"""Memory footprint of a trace: live tensor bytes per rank, from the tensors its operators read and write.

A converted PyTorch trace keeps each operator's inputs and outputs (`IOInfo.values`), where a
tensor is `[tensor_id, storage_id, offset, numel, itemsize, device]`. An allocation is a storage
on a device; its size is the largest `(offset + numel) * itemsize` of the views seen (views made
by broadcasting ops, whose numel exceeds their storage, are left out). Operators are put in the
order the rank ran them (start time, then position in the file) and each allocation is live:

- from its first use to its last use, when an operator of the trace created it (first seen as
  an output): activations, temporaries, gradients made in backward;
- over the whole trace, when it was first seen as an input: it existed before the traced window
  (parameters, optimizer state, the input batch), so it is resident all along.

The live bytes after each operator give the timeline; its maximum is the peak, with the
allocations live at that point. This is what the trace can see: allocator rounding and caching,
workspace buffers and tensors that never reach an operator's inputs/outputs are not in it, so it
is a lower bound of what an allocator reports (docs/memory.md measures how close it comes).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

import orjson

from chakra.errors import InputError, TraceFormatError
from chakra.schema import pb
from chakra.schema.attrs import get_attr

#: Views whose numel can exceed their storage (stride 0): they never grow an allocation's size.
BROADCASTING = frozenset({"aten::expand", "aten::expand_as", "aten::broadcast_to", "aten::as_strided"})
#: Operators of the backward pass (autograd runs them; names end in Backward<k>).
BACKWARD = re.compile(r"autograd::engine::evaluate_function|Backward\d*$|AccumulateGrad$")
OPTIMIZER = re.compile(r"Optimizer\.step")

_UNITS = {"": 1, "B": 1, "K": 1e3, "KB": 1e3, "M": 1e6, "MB": 1e6, "G": 1e9, "GB": 1e9, "T": 1e12, "TB": 1e12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}  # fmt: skip


def parse_bytes(text: str) -> int:
    """'80GB' -> 80e9, '16GiB' -> 16 * 2**30, '512' -> 512 (decimal units as GPU data sheets use)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?\d+)?)\s*([a-zA-Z]*)\s*", text)
    if m is None or m.group(2).upper() not in _UNITS:
        raise InputError(f"capacity {text!r}: expected a number of bytes with an optional unit (80GB, 16GiB, 512MB)")
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


def is_tensor_value(v: Any) -> bool:
    """Whether an ET input/output value is one tensor: [id, storage id, offset, numel, itemsize, device]."""
    return isinstance(v, list) and len(v) == 6 and isinstance(v[5], str) and all(type(x) is int for x in v[:5])


def tensors(values: Any, types: Any) -> Iterator[tuple[int, int, int, int, int, str]]:
    """Every tensor in one IOInfo (values, types), lists of tensors included."""
    if not isinstance(values, list):
        return
    tlist = types if isinstance(types, list) and len(types) == len(values) else [None] * len(values)
    for v, t in zip(values, tlist):
        if t is not None and (not isinstance(t, str) or "Tensor" not in t):
            continue
        yield from _walk(v)


def _walk(v: Any) -> Iterator[tuple[int, int, int, int, int, str]]:
    if not isinstance(v, list) or not v:
        return
    if is_tensor_value(v):
        yield v[0], v[1], v[2], v[3], v[4], v[5]
        return
    for x in v:
        if isinstance(x, list):
            yield from _walk(x)


@dataclass
class Use:
    """One operator that touches tensors, in the rank's order."""

    start: int
    pos: int
    node_id: int
    name: str
    ins: list[tuple[int, int, int, int, int, str]]
    outs: list[tuple[int, int, int, int, int, str]]
    end: int = 0
    keys: dict = field(default_factory=dict)  # (storage id, device) -> allocation key (`allocations`)


def _io(node: pb.Node, which: str, path: str) -> list:
    io = getattr(node, which)
    if not io.values:
        return []
    try:
        values = orjson.loads(io.values)
        types = orjson.loads(io.types) if io.types else None
    except orjson.JSONDecodeError as exc:
        raise TraceFormatError(path, f"node {node.id} ({node.name}): {which}.values is not JSON ({exc})") from None
    return list(tensors(values, types))


def _end(n: pb.Node) -> int:
    # A converted operator's node covers its time up to its first child; `inclusive_dur` is all of it.
    return n.start_time_micros + max(n.duration_micros, int(get_attr(n, "inclusive_dur", 0) or 0))


def uses_of(nodes: Iterable[pb.Node], path: str = "trace") -> list[Use]:
    """The operators with tensors, sorted as the rank ran them (start time, then file position)."""
    out = []
    for pos, n in enumerate(nodes):
        ins = _io(n, "inputs", path) if n.inputs.values else []
        outs = _io(n, "outputs", path) if n.outputs.values else []
        # (an optimizer step is kept without tensors too: `classify` needs its time window)
        if ins or outs or OPTIMIZER.search(n.name):
            out.append(Use(n.start_time_micros, pos, n.id, n.name, ins, outs, _end(n)))
    out.sort(key=lambda u: (u.start, u.pos))
    return out


@dataclass
class Alloc:
    """One allocation (a storage on a device) and where the trace uses it."""

    storage: int
    device: str
    nbytes: int = 0
    first: int = 0  # index into the sorted uses
    last: int = 0
    resident: bool = False  # first seen as an input: existed before the trace
    first_op: str = ""
    last_op: str = ""
    tensor_ids: set = field(default_factory=set)


def allocations(uses: Sequence[Use]) -> dict[tuple[int, str, int], Alloc]:
    """(storage id, device, generation) -> Alloc; each use's `keys` maps its (storage id, device)
    pairs to those keys.

    The ET numbers storages by address, so a block freed and allocated again keeps its id: an
    operator that outputs a storage it did not take as an input, after that storage's last use,
    made a new allocation (the next generation).
    """
    allocs: dict[tuple[int, str, int], Alloc] = {}
    current: dict[tuple[int, str], tuple[int, str, int]] = {}
    broadcast_views: set[int] = set()
    for k, u in enumerate(uses):
        if u.name in BROADCASTING:
            broadcast_views.update(t[0] for t in u.outs)
        inputs = {(t[1], t[5]) for t in u.ins}
        keys = u.keys = {}
        for is_out, group in ((False, u.ins), (True, u.outs)):
            for tid, sid, offset, numel, itemsize, device in group:
                if numel <= 0 or device == "meta":
                    continue
                sk = (sid, device)
                key = keys.get(sk)
                if key is None:
                    key = current.get(sk)
                    if key is None or (is_out and sk not in inputs and allocs[key].last < k):
                        key = (sid, device, key[2] + 1 if key is not None else 0)
                        current[sk] = key
                        allocs[key] = Alloc(sid, device, first=k, last=k, resident=not is_out, first_op=u.name)
                    keys[sk] = key
                a = allocs[key]
                a.last, a.last_op = k, u.name
                a.tensor_ids.add(tid)
                if tid not in broadcast_views:
                    a.nbytes = max(a.nbytes, (offset + numel) * itemsize)
    return allocs


def main_device(allocs: Iterable[Alloc]) -> Optional[str]:
    """The accelerator when the trace has tensors on one (cuda:0 ...), else cpu."""
    devices = {a.device for a in allocs}
    accel = sorted(d for d in devices if d != "cpu")
    if accel:
        return accel[0]
    return "cpu" if devices else None


def footprint(uses: Sequence[Use], device: Optional[str] = None, top: int = 10, points: int = 200) -> dict[str, Any]:
    """Peak live bytes on `device` (default: `main_device`), the allocations live at the peak
    (largest first), and the timeline (after each operator; at most `points` points, the peak kept)."""
    allocs = allocations(uses)
    if device is None:
        device = main_device(allocs.values())
    mine = [a for a in allocs.values() if a.device == device]
    n = len(uses)
    resident = sum(a.nbytes for a in mine if a.resident)
    delta = [0] * (n + 1)  # change of live bytes at each use (allocated before it, freed after it)
    for a in mine:
        if a.resident:
            continue
        delta[a.first] += a.nbytes
        delta[a.last + 1] -= a.nbytes
    live = resident
    peak, peak_at = resident, -1
    series = []
    for k in range(n):
        live += delta[k]
        series.append(live)
        if live > peak:
            peak, peak_at = live, k
    at_peak = [a for a in mine if a.resident or (peak_at >= 0 and a.first <= peak_at <= a.last)]
    at_peak.sort(key=lambda a: (-a.nbytes, a.storage))
    out: dict[str, Any] = {
        "device": device,
        "peak_bytes": peak,
        "resident_bytes": resident,
        "step_peak_bytes": peak - resident,  # what the traced window itself allocates, at most
        "allocations": len(mine),
        "tensors": sum(len(a.tensor_ids) for a in mine),
        "operators": n,
        "live_at_peak": len(at_peak),
        "peak_op": None,
        "top": [
            {
                "storage": a.storage,
                "bytes": a.nbytes,
                "resident": a.resident,
                "first_op": a.first_op,
                "last_op": a.last_op,
                "first_us": uses[a.first].start if uses else 0,
                "last_us": uses[a.last].end if uses else 0,
            }
            for a in at_peak[:top]
        ],
        "timeline": _timeline(uses, series, peak_at, points),
    }
    if peak_at >= 0:
        u = uses[peak_at]
        out["peak_op"] = {"name": u.name, "id": u.node_id, "start_us": u.start}
    return out


def _timeline(uses: Sequence[Use], series: Sequence[int], peak_at: int, points: int) -> list[list[int]]:
    """[start µs, live bytes] pairs: every operator, or the highest of each of `points` runs."""
    n = len(series)
    if n <= points:
        return [[uses[k].start, series[k]] for k in range(n)]
    out = []
    step = n / points
    for p in range(points):
        lo, hi = int(p * step), min(n, int((p + 1) * step))
        k = max(range(lo, hi), key=series.__getitem__)
        out.append([uses[k].start, series[k]])
    if peak_at >= 0 and all(uses[peak_at].start != t for t, _ in out):
        out.append([uses[peak_at].start, series[peak_at]])
        out.sort()
    return out


def rank_footprints(
    traces: Sequence[Any], device: Optional[str] = None, top: int = 10, capacity: Optional[int] = None
) -> dict[str, Any]:
    """`footprint` of every rank (traces: `Trace` or `chakra.columns.TraceFile`), with the capacity check."""
    ranks: dict[int, Any] = {}
    for pos, t in enumerate(traces):
        rank = t.rank if t.rank is not None else pos
        uses = uses_of(t.nodes, str(getattr(t, "path", None) or f"rank {rank}"))
        r = footprint(uses, device=device, top=top)
        if capacity is not None:
            r["fits"] = r["peak_bytes"] <= capacity
        ranks[rank] = r
    peaks = {r: v["peak_bytes"] for r, v in ranks.items()}
    worst = max(peaks, key=lambda r: (peaks[r], -r)) if peaks else None
    report: dict[str, Any] = {"ranks": ranks, "max_peak_bytes": peaks[worst] if peaks else 0, "max_rank": worst}
    if capacity is not None:
        report["capacity_bytes"] = capacity
        report["over_capacity"] = sorted(r for r, v in ranks.items() if not v["fits"])
    if not any(v["operators"] for v in ranks.values()):
        report["note"] = (
            "no operator lists tensors: convert with the operators' inputs/outputs (not --no-io) from a PyTorch ET"
        )
    return report


# ----------------------------------------------------------------------------- classes of allocations


def classify(uses: Sequence[Use], allocs: dict[tuple[int, str, int], Alloc]) -> dict[tuple[int, str, int], str]:
    """Each allocation's role, from where it is used: `activation` (made outside backward and the
    optimizer, used again in backward), `parameter` (resident, used outside the optimizer and in
    it), `gradient` (used by the optimizer, made in backward), `optimizer_state` (resident, used
    only inside optimizer steps), else `other`."""
    in_bwd = inside(uses, BACKWARD)
    in_opt = inside(uses, OPTIMIZER)
    where: dict[tuple[int, str, int], set[str]] = {}
    made: dict[tuple[int, str, int], str] = {}
    for k, u in enumerate(uses):
        region = "opt" if in_opt[k] else "bwd" if in_bwd[k] else "fwd"
        for is_out, group in ((False, u.ins), (True, u.outs)):
            for t in group:
                key = u.keys.get((t[1], t[5]))
                if key is None:
                    continue
                where.setdefault(key, set()).add(region)
                if is_out and key not in made and not allocs[key].resident:
                    made[key] = region
    roles = {}
    for key, a in allocs.items():
        w = where.get(key, set())
        if a.resident:
            role = "optimizer_state" if w == {"opt"} else "parameter" if "opt" in w and "fwd" in w else "other"
        elif made.get(key) == "fwd" and "bwd" in w:
            role = "activation"
        elif made.get(key) == "bwd" and "opt" in w:
            role = "gradient"
        else:
            role = "other"
        roles[key] = role
    return roles


def inside(uses: Sequence[Use], rx: re.Pattern) -> list[bool]:
    """Per use: whether it starts inside the time window of an operator whose name matches `rx`."""
    merged: list[list[int]] = []
    for s, e in sorted((u.start, u.end) for u in uses if rx.search(u.name)):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    out = []
    for u in uses:
        k = bisect_right(merged, [u.start, 1 << 62]) - 1
        out.append(k >= 0 and u.start <= merged[k][1])
    return out


# ----------------------------------------------------------------------------- the allocator's own figures


def allocator_profile(path: Any) -> dict[str, Any]:
    """The allocator's figures from a Kineto trace recorded with `profile_memory=True`: per device,
    its `[memory]` events' count and `Total Allocated` at the start (before the first event), peak
    and end. On CPU the profiler counts only blocks allocated while it runs (a block from before
    frees without a size), so there the figure to compare with is `peak - start` against the
    trace's `step_peak_bytes`; on CUDA `Total Allocated` is the caching allocator's whole count,
    as `torch.cuda.max_memory_allocated` reports it, to compare with `peak_bytes`."""
    from chakra.io import read_input_bytes

    try:
        doc = orjson.loads(read_input_bytes(path))
    except orjson.JSONDecodeError as exc:
        raise TraceFormatError(path, f"not JSON ({exc})") from None
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        raise TraceFormatError(path, "not a Kineto trace (no traceEvents list)")
    devices: dict[str, dict[str, Any]] = {}
    for i, e in enumerate(events):
        if not isinstance(e, dict) or e.get("name") != "[memory]":
            continue
        a = e.get("args")
        total, nbytes = (a.get("Total Allocated"), a.get("Bytes")) if isinstance(a, dict) else (None, None)
        if type(total) is not int or type(nbytes) is not int:
            raise TraceFormatError(
                path, f"traceEvents[{i}]: a [memory] event needs integer 'Total Allocated' and 'Bytes'"
            )
        kind, dev = a.get("Device Type"), a.get("Device Id")
        name = "cpu" if kind == 0 else f"cuda:{dev}" if kind == 1 else f"device{kind}:{dev}"
        d = devices.get(name)
        if d is None:
            d = devices[name] = {"events": 0, "start_bytes": total - nbytes, "peak_bytes": total, "end_bytes": total}
        d["events"] += 1
        d["peak_bytes"] = max(d["peak_bytes"], total)
        d["end_bytes"] = total
    info = doc.get("distributedInfo")
    rank = info.get("rank") if isinstance(info, dict) and type(info.get("rank")) is int else None
    return {"path": str(path), "rank": rank, "devices": devices}


def measured_figure(report: dict[str, Any], profile: dict[str, Any]) -> Optional[dict[str, Any]]:
    """One rank's footprint next to its allocator profile: (measured, estimated, error)."""
    dev = profile["devices"].get(report["device"])
    if dev is None:
        return None
    if report["device"] == "cpu":
        measured, estimated = dev["peak_bytes"] - dev["start_bytes"], report["step_peak_bytes"]
        what = "allocated in the trace"
    else:
        measured, estimated, what = dev["peak_bytes"], report["peak_bytes"], "total allocated"
    err = (estimated - measured) / measured if measured else None
    return {"measured_bytes": measured, "estimated_bytes": estimated, "error": err, "what": what,
            "events": dev["events"]}  # fmt: skip


def fmt_bytes(n: float) -> str:
    """Decimal units, as GPU capacities are quoted (80 GB)."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:,.2f} {unit}"
    return f"{int(n):,} B"


__all__ = [
    "Alloc",
    "Use",
    "allocations",
    "allocator_profile",
    "classify",
    "fmt_bytes",
    "footprint",
    "inside",
    "main_device",
    "measured_figure",
    "parse_bytes",
    "rank_footprints",
    "tensors",
    "uses_of",
]

"""What the host allocator costs a CPU step in fp32 and under bf16 autocast, replayed on this host.

An fp32 CPU training step can spend milliseconds in page faults that its bf16 run does not:
glibc's malloc serves large blocks with mmap and gives the top of its heap back to the kernel
(its dynamic mmap and trim thresholds), so a step whose activations cross those thresholds maps
fresh pages every step, and the kernel zeroes each one on its first write. Halved tensors under
autocast fall under the thresholds and reuse the heap. Measured on this host's recordings (thread
CPU time, 30 steps): cnn fp32 8.96 ms a step with 1055 minor faults, 6.66 ms with
`MALLOC_TRIM_THRESHOLD_`/`MALLOC_MMAP_THRESHOLD_` large (17 faults), bf16 7.2 ms with 66 faults;
lstm fp32 12.5 ms / 1280 faults, 8.3 ms without them. An operator timed alone (chakra.whatif.cpu_rates)
reuses its memory and never sees this cost.

This module rebuilds the step's allocations from the trace and replays them through the same
allocator: every storage (ET tensor value `[id, storage id, offset, numel, itemsize, device]`)
is allocated where it first appears as a result and freed after its last use; storages only read
(weights, optimizer state) are allocated once before the step. A storage id names an address, so
an id that reappears as the result of an op that did not read it (nor an op around it) is a new
block at the same address. Under autocast the storages made by an op that runs in bf16 take half
the bytes, and each input autocast casts to bf16 gets a copy, kept until the backward of its op.

The replay runs in a fresh Python process (`python -m chakra.whatif.cpu_alloc`: its heap starts as
a training process's does, not as this one's after reading a trace), allocating with
`torch.empty` (torch's CPU allocator: posix_memalign, as the step's tensors) and writing one byte
per page (the step writes every result; the first write maps the page). It times each op's
allocations and frees by the thread's CPU time, several rounds of the traced steps after warm-up
rounds, the median per op; the bf16 − fp32 difference per op is what the allocator adds to (or
saves from) the op under autocast.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

from chakra.schema import pb
from chakra.whatif.autocast_cpu import BF16, CPU_LOWER, FP32, Unit, io_of, op_name, tensors, windows

PAGE = 4096


@dataclass
class Plan:
    """A step's allocations: `persistent` block sizes (allocated before it), then `events`
    (node id, +block index to allocate / -block index - 1 to free), block sizes per precision."""

    persistent: list[int]
    events: list[tuple[int, int]]
    fp32_bytes: list[int]
    bf16_bytes: list[int]


def plan(nodes: Sequence[pb.Node], units: Sequence[Unit], bf16_out: Optional[dict[int, list[int]]] = None) -> Plan:
    """The allocations of the traced steps in the order they ran (`units`: propagated dtypes).
    `bf16_out`: per node id, the bytes of each tensor its bf16 call returns where that call was
    run (cpu_rates); elsewhere a result an op makes in bf16 is half its fp32 size."""
    bf16_out = bf16_out or {}
    order = sorted((n for n in nodes if n.name != "gap"), key=lambda n: (n.start_time_micros, n.id))
    parent = windows(nodes)
    by_id = {n.id: n for n in nodes}
    unit_of = {m: u for u in units for m in u.members}
    first_bw: dict[int, int] = {}
    for u in units:
        if u.phase == "backward" and u.backward_of is not None:
            first_bw.setdefault(u.backward_of, u.node.id)

    def ancestors(i: int) -> set[int]:
        out, p = {i}, parent.get(i)
        while p is not None:
            out.add(p)
            p = parent.get(p)
        return out

    fp32: list[int] = []
    bf16: list[int] = []
    opener: list[int] = []
    last: list[int] = []  # position in `order` of each block's last use
    live: dict[int, int] = {}  # storage id -> block
    persistent: dict[int, int] = {}  # storage id -> bytes
    reads: dict[int, set[int]] = {}  # node id -> storage ids it reads
    for n in order:
        vals, types, _s, _ov, _ot = io_of(n)
        reads[n.id] = {v[1] for v, _d, _sh in tensors(vals, types) if v[5] == "cpu"}
    opens: dict[int, list[int]] = {}
    # the ops autocast casts the inputs of: on its lower-precision list, not inside another such op
    outer_lower = {n.id for n in order if op_name(n) in CPU_LOWER
                   and not any(op_name(by_id[a]) in CPU_LOWER for a in ancestors(n.id) - {n.id})}  # fmt: skip
    casts: list[tuple[int, int, int]] = []  # (node to allocate at, node to free at, bytes)
    for pos, n in enumerate(order):
        vals, types, shapes, ovals, otypes = io_of(n)
        for v, _d, _sh in tensors(vals, types):
            if v[5] != "cpu":
                continue
            b = live.get(v[1])
            if b is None:
                nbytes = (v[2] + v[3]) * v[4]
                persistent[v[1]] = max(persistent.get(v[1], 0), nbytes)
            else:
                last[b] = pos
        held = ancestors(n.id)
        around = set().union(*(reads.get(a, set()) for a in held))
        u = unit_of.get(n.id)
        if u is not None and u.phase == "forward" and n.id in outer_lower:
            # autocast casts each fp32 input to a bf16 copy, kept for the op's backward
            for v, dt, _sh in tensors(vals, types):
                b = live.get(v[1])
                if dt == FP32 and v[5] == "cpu" and (b is None or bf16[b] == fp32[b]):
                    casts.append((n.id, first_bw.get(u.node.id, n.id), v[3] * 2))
        known = bf16_out.get(n.id, [])
        outs = tensors(ovals, otypes)
        known = known if len(known) == len(outs) else []
        for k, (v, dt, _sh) in enumerate(outs):
            if v[5] != "cpu" or v[1] in persistent:
                continue
            nbytes = (v[2] + v[3]) * v[4]
            b = live.get(v[1])
            low = known[k] if known else nbytes // 2 if _halved(u, dt) else nbytes
            if b is not None and (v[1] in around or opener[b] in held):
                fp32[b] = max(fp32[b], nbytes)  # a view, an in-place or nested write: the same block
                bf16[b] = max(bf16[b], low)
                last[b] = pos
                continue
            live[v[1]] = len(fp32)
            opens.setdefault(n.id, []).append(len(fp32))
            fp32.append(nbytes)
            bf16.append(low)
            opener.append(n.id)
            last.append(pos)
        if u is not None and u.node.id == n.id:
            # a gradient cast back to fp32 (ToCopyBackward0) in the op's backward, kept as `.grad`
            for shape, _src, dst in u.backward_casts:
                size = math.prod(int(x) for x in shape) * (4 if dst == FP32 else 2)
                casts.append((first_bw.get(n.id, n.id), order[-1].id, size))
    index = {n.id: i for i, n in enumerate(order)}
    events: list[tuple[int, int, int]] = []  # (position, 0 free / 1 alloc, payload)
    for b, (o, end) in enumerate(zip(opener, last)):
        events.append((index[o], 1, b))
        events.append((end, 2, -b - 1))  # freed after its last use (after that op's allocations)
    for at, end, nbytes in casts:
        b = len(fp32)
        fp32.append(0)  # fp32 has no copy
        bf16.append(nbytes)
        events.append((index[at], 1, b))
        events.append((index[end], 2, -b - 1))
    events.sort()
    return Plan(
        persistent=list(persistent.values()),
        events=[(order[p].id, x) for p, _k, x in events],
        fp32_bytes=fp32,
        bf16_bytes=bf16,
    )


def _halved(u: Optional[Unit], dtype: str) -> bool:
    return u is not None and u.out_dtype == BF16 and dtype == FP32


def replay_costs(
    p: Plan, *, processes: int = 3, rounds: int = 5, warmup: int = 3, progress: Any = None
) -> dict[int, float]:
    """Per node id: bf16 − fp32 allocator time (µs per round of the traced steps). Each precision
    is replayed in `processes` fresh processes, alternating; per node the median over them (where
    glibc's thresholds fall relative to a step's blocks depends on the heap the process starts
    with: the same replay faults every step in one process and not in the next)."""
    per: dict[str, list[dict[int, float]]] = {"fp32": [], "bf16": []}
    faults: dict[str, list[float]] = {"fp32": [], "bf16": []}
    with tempfile.TemporaryDirectory(prefix="chakra-alloc-") as tmp:
        for name, sizes in (("fp32", p.fp32_bytes), ("bf16", p.bf16_bytes)):
            with open(os.path.join(tmp, f"{name}.json"), "w") as f:
                json.dump({"persistent": p.persistent, "events": p.events, "sizes": sizes,
                           "rounds": rounds, "warmup": warmup}, f)  # fmt: skip
        for _ in range(processes):
            for name in ("fp32", "bf16"):
                done = subprocess.run(
                    [sys.executable, "-m", "chakra.whatif.cpu_alloc", os.path.join(tmp, f"{name}.json")],
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if done.returncode != 0:
                    last = (done.stderr.strip().splitlines() or ["no message"])[-1]
                    raise RuntimeError(f"allocation replay failed: {last}")
                res = json.loads(done.stdout)
                per[name].append({int(k): v for k, v in res["us"].items()})
                faults[name].append(res["faults"])
    med: dict[str, dict[int, float]] = {}
    for name, runs in per.items():
        keys = set().union(*runs)
        med[name] = {k: statistics.median(r.get(k, 0.0) for r in runs) for k in keys}
        if progress is not None:
            progress(
                f"allocations replayed in {name} ({processes} processes): page faults a round "
                f"{', '.join(f'{x:.0f}' for x in faults[name])}; "
                f"{sum(med[name].values()) / 1e3:.2f} ms a round (median)"
            )
    keys = set(med["fp32"]) | set(med["bf16"])
    return {k: med["bf16"].get(k, 0.0) - med["fp32"].get(k, 0.0) for k in keys}


def _replay(spec: dict[str, Any]) -> dict[str, Any]:
    """Run in the fresh process: the allocations of `spec`, timed per node."""
    import resource

    import torch

    torch.set_num_threads(1)
    keep = [torch.empty(n, dtype=torch.uint8) for n in spec["persistent"] if n > 0]
    for t in keep:
        t[::PAGE].fill_(1)
    sizes: list[int] = spec["sizes"]
    events = [(int(node), int(x)) for node, x in spec["events"] if sizes[x if x >= 0 else -x - 1] > 0]
    times: dict[int, list[float]] = {}
    faults = []
    for r in range(spec["warmup"] + spec["rounds"]):
        blocks: dict[int, Any] = {}
        acc: dict[int, float] = {}
        f0 = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
        for node, x in events:
            t0 = time.thread_time()
            if x >= 0:
                t = torch.empty(sizes[x], dtype=torch.uint8)
                t[::PAGE].fill_(1)
                blocks[x] = t
            else:
                blocks.pop(-x - 1, None)
            acc[node] = acc.get(node, 0.0) + time.thread_time() - t0
        blocks.clear()
        if r >= spec["warmup"]:
            faults.append(resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - f0)
            for node, s in acc.items():
                times.setdefault(node, []).append(s)
    return {"us": {k: statistics.median(v) * 1e6 for k, v in times.items()}, "faults": statistics.median(faults)}


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        print(json.dumps(_replay(json.load(f))))

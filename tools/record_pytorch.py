#!/usr/bin/env python3
"""Record real PyTorch (CPU) training runs for what-if validation: traces plus untraced step times.

Each run trains one small model for a few steps and writes, under ``OUT/<run>/``:

  et.<rank>.json       ExecutionTraceObserver output of the traced steps
  kineto.<rank>.json   Kineto (torch.profiler) trace of the same steps, linked by rf_id
  manifest[.<rank>].json  chakra.record's manifest (untraced steps, versions, world size): the
                       steps are recorded by `chakra.record.Recorder`, so `chakra convert pytorch`
                       fits the profiler's cost to the untraced step on its own
  timing.json          wall-clock time of every *untraced* step on every rank (seconds), the
                       per-step maximum over ranks, and its median / quartiles; CPU time of the
                       training thread and of the whole process; the load, and the CPU other
                       processes used meanwhile (``foreign_cpu_frac``, from /proc/stat)

Step times are measured without the profiler, because the profiler itself slows every operator
down; the traced steps come afterwards and are only used as the input of predictions.

The all-reduce microbenchmark (``allreduce``) times gloo ``all_reduce`` over a range of sizes
(per call behind a barrier: median, mean, every sample and the process CPU time; and back to back
over the same number of calls, ``loop_mean_s_by_bytes``, which ``predict`` calibrates on), fits
``t = alpha + beta * bytes`` by least squares and writes a network config in the ASTRA-sim YAML
form ``chakra simulate`` reads (``network.<N>.yml``: a Ring of N NPUs whose ring all-reduce
time 2(N-1)*latency + 2(N-1)/N*bytes/bandwidth equals the fit), plus ``allreduce.<N>.json``.

Usage (torch is an optional extra: ``pip install torch``)::

    python tools/record_pytorch.py --out /tmp/runs run --world 1 --optim adam
    python tools/record_pytorch.py --out /tmp/runs run --world 2 --optim adam
    python tools/record_pytorch.py --out /tmp/runs allreduce --world 4
    python tools/record_pytorch.py --out /tmp/runs all --rounds 5   # the whole validation set
    python tools/record_pytorch.py --out /tmp/runs predict           # chakra's predictions
    python tools/record_pytorch.py --out /tmp/zoo zoo --world 4 ddp tp pp   # the trace zoo
    python tools/record_pytorch.py --out /tmp/gpu gpu                   # GPU runs (tools/pytorch_gpu.py)
    python tools/record_pytorch.py --out bench/out/gpt gpt              # 1-rank GPT CPU trace (~67 + 28 MB)

``zoo`` records small multi-rank training steps, one per kind of parallelism (DDP with buckets,
no_sync and unused parameters; FSDP2 ``fully_shard``; tensor, pipeline (1F1B) and expert (MoE
all-to-all) parallelism; TP and DP process groups together; broadcast, barrier and coalesced
ops): ``OUT/<workload><world>/`` gets ``et.<rank>.json.gz``, ``kineto.<rank>.json.gz`` and
``manifest.json`` (see tools/pytorch_zoo.py for what each workload runs). Convert one with
``chakra convert pytorch OUT/ddp4/et.*.json.gz -k OUT/ddp4/kineto.0.json.gz ... -o PREFIX``.

``all`` waits before each round for a 1-minute load below ``--max-load``; ``predict`` leaves out
comparisons whose runs had other processes using more than 10% of the cores (``MAX_FOREIGN``).

Traces are large and machine specific: keep them out of git (write under /tmp or bench/out).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Optional

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

#: The model: a deep, narrow MLP, so the step has many parameters (a long optimizer phase) and a
#: backward pass that DDP splits into several buckets. Small enough for a shared 2-core machine.
DEPTH = 8
WIDTH = 256
BATCH = 32


def build_model() -> nn.Module:
    layers: list[nn.Module] = []
    for _ in range(DEPTH):
        layers += [nn.Linear(WIDTH, WIDTH), nn.ReLU()]
    layers.append(nn.Linear(WIDTH, 10))
    return nn.Sequential(*layers)


def make_optimizer(params: Any, kind: str) -> torch.optim.Optimizer:
    """adam = the per-parameter loop (foreach=False); adam-foreach; adam-fused (one kernel per step)."""
    if kind == "adam":
        return torch.optim.Adam(params, lr=1e-3, foreach=False)
    if kind == "adam-foreach":
        return torch.optim.Adam(params, lr=1e-3, foreach=True)
    if kind == "adam-fused":
        return torch.optim.Adam(params, lr=1e-3, fused=True)
    raise ValueError(f"unknown optimizer {kind!r}")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _summary(values: list[float]) -> dict[str, float]:
    q = statistics.quantiles(values, n=4) if len(values) >= 2 else [values[0]] * 3
    return {"median": statistics.median(values), "p25": q[0], "p75": q[2], "min": min(values), "n": len(values)}


# ----------------------------------------------------------------------------- training runs


def _machine_busy_s() -> float:
    """CPU seconds the whole machine spent busy so far (/proc/stat; 0 where it does not exist)."""
    try:
        with open("/proc/stat") as fh:
            f = [int(x) for x in fh.readline().split()[1:]]
    except OSError:
        return 0.0
    idle = f[3] + (f[4] if len(f) > 4 else 0)
    return (sum(f[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _train_worker(rank: int, world: int, port: int, opts: dict, queue: Any) -> None:
    try:
        torch.set_num_threads(1)
        if world > 1:
            os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
            dist.init_process_group("gloo", rank=rank, world_size=world)
        torch.manual_seed(1234)  # same initial weights on every rank
        model = build_model()
        if world > 1:
            from torch.nn.parallel import DistributedDataParallel as DDP

            model = DDP(model, bucket_cap_mb=opts["bucket_mb"])
        opt = make_optimizer(model.parameters(), opts["optim"])
        torch.manual_seed(100 + rank)
        x = torch.randn(BATCH, WIDTH)
        y = torch.randint(0, 10, (BATCH,))
        loss_fn = nn.CrossEntropyLoss()

        def step() -> tuple[float, float]:
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            t, c = time.perf_counter(), time.thread_time()
            opt.step()
            return time.perf_counter() - t, time.thread_time() - c

        # The untraced timing and the traced steps are chakra.record.Recorder's (its manifest lands
        # beside the traces); this loop adds the optimizer's share and the process-wide CPU time.
        from chakra.record import Recorder

        rec = Recorder(
            opts["out_dir"],
            warmup=opts["warmup"],
            timed=opts["steps"],
            traced=opts["trace_steps"],
            device="cpu",
            gzip_output=False,  # `predict` and the docs read et.<rank>.json / kineto.<rank>.json
            extra={"optimizer": opts["optim"], "model": {"depth": DEPTH, "width": WIDTH, "batch": BATCH}},
        )
        opt_times, opt_cpu_times, proc_times = [], [], []
        loop: dict[str, float] = {}
        while rec.running:
            phase = rec.phase()
            if phase == "timed" and not loop:
                loop = {"busy0": _machine_busy_s(), "cpu0": time.process_time(), "t0": time.perf_counter()}
            p0 = time.process_time()
            with rec.step():
                ow, oc = step()
            if phase == "timed":
                # CPU time of the whole process: the training thread plus gloo's and autograd's threads.
                proc_times.append(time.process_time() - p0)
                opt_times.append(ow)
                opt_cpu_times.append(oc)
                if rec.phase() != "timed":
                    loop = {
                        "machine_busy_s": _machine_busy_s() - loop["busy0"],
                        "process_cpu_s": time.process_time() - loop["cpu0"],
                        "wall_s": time.perf_counter() - loop["t0"],
                    }
        times, cpu_times = rec.untraced_s, rec.untraced_cpu_s
        if world > 1:
            dist.destroy_process_group()  # the Recorder's last barrier is behind us
        queue.put(
            (
                rank,
                {
                    "wall": times,
                    "opt_wall": opt_times,
                    "cpu": cpu_times,
                    "opt_cpu": opt_cpu_times,
                    "proc": proc_times,
                    "loop": loop,
                },
            )
        )
    except Exception:
        queue.put((rank, traceback.format_exc()))
        raise


def run_training(out_root: str, world: int, optim: str, steps: int, trace_steps: int, bucket_mb: float) -> dict:
    name = f"{optim}_w{world}"
    out_dir = os.path.join(out_root, name)
    os.makedirs(out_dir, exist_ok=True)
    opts = {
        "optim": optim,
        "warmup": 5,
        "steps": steps,
        "trace_steps": trace_steps,
        "bucket_mb": bucket_mb,
        "out_dir": out_dir,
        "load_at_start": os.getloadavg(),
    }
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    t0 = time.time()
    mp.start_processes(_train_worker, args=(world, _free_port(), opts, queue), nprocs=world, join=True)
    got_by_rank: dict[int, dict[str, list[float]]] = {}
    while not queue.empty():
        rank, got = queue.get()
        if isinstance(got, str):
            raise RuntimeError(f"rank {rank} failed:\n{got}")
        got_by_rank[rank] = got
    per_rank = {r: g["wall"] for r, g in got_by_rank.items()}
    step_max = [max(per_rank[r][i] for r in per_rank) for i in range(steps)]
    timing = {
        "run": name,
        "world_size": world,
        "optimizer": optim,
        "model": {"depth": DEPTH, "width": WIDTH, "batch": BATCH},
        "ddp_bucket_cap_mb": bucket_mb if world > 1 else None,
        "torch_version": torch.__version__,
        "threads_per_rank": 1,
        "cpus": os.cpu_count(),
        "load_avg_at_end": os.getloadavg(),
        "warmup_steps": opts["warmup"],
        "traced_steps": trace_steps,
        "step_s": _summary(step_max),
        "optimizer_step_s": _summary(got_by_rank[0]["opt_wall"]),
        # CPU time of the training thread (time.thread_time): insensitive to being descheduled on
        # the shared machine, so it shows the work itself; wall time shows what a user waits.
        "step_cpu_s": _summary(got_by_rank[0]["cpu"]),
        "optimizer_step_cpu_s": _summary(got_by_rank[0]["opt_cpu"]),
        "step_process_cpu_s": _summary(got_by_rank[0]["proc"]),
        "per_rank_step_cpu_s": {str(r): _summary(g["cpu"])["median"] for r, g in sorted(got_by_rank.items())},
        "per_rank_step_process_cpu_s": {str(r): _summary(g["proc"])["median"] for r, g in sorted(got_by_rank.items())},
        "load_avg_at_start": opts["load_at_start"],
        # CPU used by other processes while the timed steps ran: the machine's busy time minus our
        # ranks' process CPU time, as a fraction of the cores (rank windows differ by a barrier).
        "foreign_cpu_frac": max(
            0.0,
            got_by_rank[0]["loop"]["machine_busy_s"] - sum(g["loop"]["process_cpu_s"] for g in got_by_rank.values()),
        )
        / ((os.cpu_count() or 1) * got_by_rank[0]["loop"]["wall_s"]),
        "per_rank_step_s": {str(r): v for r, v in sorted(per_rank.items())},
        "wall_s": round(time.time() - t0, 2),
    }
    with open(os.path.join(out_dir, "timing.json"), "w") as fh:
        json.dump(timing, fh, indent=2)
    return timing


# ----------------------------------------------------------------------------- GPT (conversion bench)


def record_gpt(
    out_dir: str,
    *,
    layers: int = 12,
    d: int = 64,
    heads: int = 4,
    seq: int = 32,
    batch: int = 2,
    vocab: int = 512,
    trace_steps: int = 7,
    warmup: int = 2,
    timed: int = 5,
) -> dict[str, Any]:
    """One rank of a GPT-like decoder (tools/pytorch_gpu.py's `GPT`: pre-norm blocks, causal
    attention, GELU MLP) trained on the CPU with AdamW's per-parameter loop, recorded by
    `chakra.record.Recorder` the documented way (`torch.profiler.profile(activities=[CPU],
    execution_trace_observer=ExecutionTraceObserver().register_callback(path))`, a profiler
    warm-up step, then `trace_steps` active ones). The model is narrow so that a step is cheap on
    a shared machine; what makes the trace big is its operator count: the defaults give an ET of
    about 67 MB (~9.5 MB per step) and a Kineto trace of about 28 MB, the shape of a real
    one-rank GPT trace. Writes OUT/et.0.json, kineto.0.json and manifest.json (uncompressed: the
    conversion bench times the JSON itself)."""
    import torch.nn.functional as F
    from pytorch_gpu import GPT, Config

    from chakra.record import Recorder

    torch.set_num_threads(1)
    torch.manual_seed(1234)
    c = Config(vocab=vocab, d=d, heads=heads, layers=layers, seq=seq, batch=batch)
    model = GPT(c)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
    g = torch.Generator().manual_seed(100)
    x = torch.randint(0, vocab, (batch, seq), generator=g)
    y = torch.randint(0, vocab, (batch, seq), generator=g)
    extra = {"model": "gpt", "config": c.__dict__, "optimizer": "AdamW(foreach=False)"}
    rec = Recorder(
        out_dir, warmup=warmup, timed=timed, traced=trace_steps, device="cpu", gzip_output=False, extra=extra
    )
    t0 = time.perf_counter()
    while rec.running:
        with rec.step():
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(model(x).view(-1, vocab), y.view(-1)).backward()
            opt.step()
    return {"out": out_dir, "files": rec.files, "seconds": round(time.perf_counter() - t0, 2)}


# ----------------------------------------------------------------------------- all-reduce benchmark

SIZES = [1 << k for k in range(10, 23, 2)]  # 1 KiB .. 4 MiB (bytes of float32 data)


def _allreduce_worker(rank: int, world: int, port: int, reps: int, queue: Any) -> None:
    try:
        torch.set_num_threads(1)
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
        dist.init_process_group("gloo", rank=rank, world_size=world)
        result = {}
        for size in SIZES:
            t = torch.ones(size // 4)
            for _ in range(3):
                dist.all_reduce(t)
            samples, cpu = [], []
            for _ in range(reps):
                dist.barrier()
                t0, c0 = time.perf_counter(), time.process_time()
                dist.all_reduce(t)
                samples.append(time.perf_counter() - t0)
                # CPU time of the process (gloo's worker thread included): is the all-reduce CPU-bound?
                cpu.append(time.process_time() - c0)
            result[size] = samples
            result[-size] = cpu
            # Back to back, as DDP issues its buckets (and as nccl-tests times): one barrier, then
            # `reps` all-reduces timed as a whole. The per-call timing above also pays the skew of
            # the ranks leaving the barrier (each waits to be woken up), which DDP does not.
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(reps):
                dist.all_reduce(t)
            result[size + 1] = [(time.perf_counter() - t0) / reps]
        dist.barrier()
        dist.destroy_process_group()
        queue.put((rank, result))
    except Exception:
        queue.put((rank, traceback.format_exc()))
        raise


def fit_line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares alpha, beta of y = alpha + beta*x (plain formulas; keeps this tool torch-only)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    beta = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return my - beta * mx, beta


def ring_network(world: int, alpha_s: float, beta_s_per_byte: float) -> tuple[float, float]:
    """(bandwidth GB/s, latency ns) of a Ring whose ideal all-reduce time matches alpha + beta*bytes.

    First order only: `chakra.whatif.recipes.calibrate_network` refines it against the simulator's
    own collective model (chunking, endpoint delay).

    A ring all-reduce is 2(N-1) steps, each one link latency plus a chunk of bytes/N:
    T = 2(N-1)*lat + 2(N-1)/N * bytes / bw, so lat = alpha / (2(N-1)), bw = 2(N-1)/(N*beta).
    """
    steps = 2 * (world - 1)
    latency_ns = alpha_s / steps * 1e9
    bandwidth = steps / (world * beta_s_per_byte) / 2**30  # bytes/s -> GB/s (GB = 2^30 B, as chakra.sim)
    return bandwidth, latency_ns


def wait_quiet(max_load: float, timeout_s: float = 600.0) -> tuple[float, float, float]:
    """Wait until the 1-minute load average is below `max_load` (or `timeout_s` passed).

    On a shared machine other processes' CPU use changes every wall-clock measurement; starting
    each round on a quiet machine keeps that noise out (the load is recorded with every run).
    """
    t0 = time.time()
    while os.getloadavg()[0] >= max_load and time.time() - t0 < timeout_s:
        time.sleep(5)
    return os.getloadavg()


def run_allreduce(out_root: str, world: int, reps: int) -> dict:
    os.makedirs(out_root, exist_ok=True)
    load_start = os.getloadavg()
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    mp.start_processes(_allreduce_worker, args=(world, _free_port(), reps, queue), nprocs=world, join=True)
    per_rank = {}
    while not queue.empty():
        rank, got = queue.get()
        if isinstance(got, str):
            raise RuntimeError(f"rank {rank} failed:\n{got}")
        per_rank[rank] = got
    medians = {}
    cpu_medians = {}
    means = {}
    loop_means = {}
    samples = {}
    for size in SIZES:
        samples[size] = [max(per_rank[r][size][i] for r in per_rank) for i in range(reps)]
        medians[size] = statistics.median(samples[size])
        means[size] = statistics.fmean(samples[size])
        loop_means[size] = max(per_rank[r][size + 1][0] for r in per_rank)
        cpu_medians[size] = statistics.median(statistics.median(per_rank[r][-size]) for r in per_rank)
    alpha, beta = fit_line([float(s) for s in SIZES], [medians[s] for s in SIZES])
    bw, lat = ring_network(world, alpha, beta)
    result = {
        "world_size": world,
        "reps": reps,
        "median_s_by_bytes": {str(s): medians[s] for s in SIZES},
        "median_process_cpu_s_by_bytes": {str(s): cpu_medians[s] for s in SIZES},
        # The per-call time is bimodal on a 2-core VM (a woken gloo thread sometimes waits for the
        # next scheduler tick, 4 ms at HZ=250), so the median flips between modes from run to run;
        # the mean is what a step of several all-reduces pays on average.
        "mean_s_by_bytes": {str(s): means[s] for s in SIZES},
        "loop_mean_s_by_bytes": {str(s): loop_means[s] for s in SIZES},
        "samples_s_by_bytes": {str(s): samples[s] for s in SIZES},
        "fit": {"alpha_s": alpha, "beta_s_per_byte": beta},
        "ring": {"bandwidth_GBps": bw, "latency_ns": lat},
        "load_avg_at_start": load_start,
        "load_avg_at_end": os.getloadavg(),
    }
    with open(os.path.join(out_root, f"allreduce.{world}.json"), "w") as fh:
        json.dump(result, fh, indent=2)
    with open(os.path.join(out_root, f"network.{world}.yml"), "w") as fh:
        fh.write(f"# gloo all_reduce on 127.0.0.1, {world} ranks, calibrated by tools/record_pytorch.py\n")
        fh.write(f"# fit: t = {alpha * 1e6:.2f} us + {beta * 1e9:.4f} ns/byte\n")
        fh.write("topology: [ Ring ]\n")
        fh.write(f"npus_count: [ {world} ]\n")
        fh.write(f"bandwidth: [ {bw:.6f} ]  # GB/s\n")
        fh.write(f"latency: [ {lat:.1f} ]  # ns\n")
    return result


# ----------------------------------------------------------------------------- predictions (chakra)


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def background_threads(wall1: float, cpu1: float, cores: int) -> float:
    """Other runnable threads B on the machine, from the one-rank run's wall/CPU ratio.

    Processor sharing: with B other runnable threads on C cores, each of T busy threads gets
    min(1, C/(B+T)) of a core, so the one-rank run has wall/CPU r = max(1, (B+1)/C) and
    B = C*r - 1 when r > 1 (else 0).
    """
    r = wall1 / cpu1 if cpu1 > 0 else 1.0
    return max(0.0, cores * r - 1) if r > 1.0 else 0.0


def sharing_slowdown(background: float, threads: int, reference_threads: int, cores: int) -> float:
    """Slowdown of a thread when `threads` of ours run instead of `reference_threads`."""
    return max(1.0, (background + threads) / cores) / max(1.0, (background + reference_threads) / cores)


def predict_round(round_dir: str, cores: int) -> dict:
    """Predictions from one round's recordings with chakra's recipes, next to the measurements.

    - data-parallel: the 1-rank trace's compute is first scaled to the untraced run (BigSim's
      constant factor: measured step / simulated step; the profiler inflates every operator),
      then `data-parallel N` inserts the bucketed all-reduces and the N-rank trace is simulated
      on a Ring calibrated to this round's gloo all-reduce microbenchmark. A second figure also
      slows compute by processor sharing (`sharing_slowdown`): N ranks compete for the cores
      with each other and with the machine's background load.
    - fused optimizer: `fused-optimizer` on the plain-Adam trace; the simulated speedup is applied
      to the measured plain step (wall and CPU time).
    """
    from chakra.converters import pytorch as ptconv
    from chakra.io import read_traces
    from chakra.sim import simulate
    from chakra.whatif.interpolate import rewrite
    from chakra.whatif.recipes import (
        calibrate_network,
        clone,
        count_steps,
        data_parallel,
        fused_optimizer,
        scale_compute,
    )

    def timing(run: str) -> dict:
        with open(os.path.join(round_dir, run, "timing.json")) as fh:
            t = json.load(fh)
        nan = {"median": float("nan"), "p25": float("nan"), "p75": float("nan")}
        for key in ("step_cpu_s", "optimizer_step_s", "optimizer_step_cpu_s"):
            t.setdefault(key, nan)
        return t

    def convert(run: str) -> list:
        d = os.path.join(round_dir, run)
        prefix = os.path.join(d, "chakra")
        ranks = sorted(int(f.split(".")[1]) for f in os.listdir(d) if f.startswith("et.") and f.endswith(".json"))
        inputs = [Path(d) / f"et.{r}.json" for r in ranks] + [Path(d) / f"kineto.{r}.json" for r in ranks]
        ptconv.convert(inputs, Path(prefix), profiled=True)  # this validation predicts from the recorded durations
        return read_traces([prefix])

    out: dict = {"round": os.path.basename(round_dir), "cores": cores}
    runs = ("adam_w1", "adam_w2", "adam_w4", "adam-foreach_w1", "adam-fused_w1")
    out["foreign"] = {run: timing(run).get("foreign_cpu_frac", 0.0) for run in runs}
    base = convert("adam_w1")
    steps = count_steps(base)
    sim1 = simulate(base).finish_ns / steps / 1e9
    t1 = timing("adam_w1")
    meas1 = t1["step_s"]["median"]
    factor = meas1 / sim1
    out["w1"] = {"measured_s": meas1, "measured_cpu_s": t1["step_cpu_s"]["median"], "traced_sim_s": sim1}
    out["calibration_factor"] = factor
    scaled = clone(base)
    rewrite(scaled, scale=factor)
    for n in (2, 4):
        with open(os.path.join(round_dir, f"allreduce.{n}.json")) as fh:
            ar = json.load(fh)
        # Back-to-back mean (DDP's pattern); older recordings: per-call mean, or medians only.
        stat = ar.get("loop_mean_s_by_bytes", ar.get("mean_s_by_bytes", ar["median_s_by_bytes"]))
        sizes = {int(k): v for k, v in stat.items() if (1 << 16) <= int(k) <= (1 << 20)}
        net, rep = calibrate_network(sizes, n)
        dp = data_parallel(scaled, ranks=n, bucket_mb=0.5, first_bucket_mb=1.0)
        pred = simulate(dp.traces, net).finish_ns / steps / 1e9
        bg = background_threads(meas1, t1["step_cpu_s"]["median"], cores)
        # N ranks compute (vs 1 in the calibration run): compute slows by sharing with N threads.
        share = sharing_slowdown(bg, n, 1, cores)
        dp_shared = scale_compute(dp.traces, factor=1.0 / share) if share > 1 else dp
        pred_shared = simulate(dp_shared.traces, net).finish_ns / steps / 1e9
        # DDP's own CPU copies (gradient <-> bucket), costed from the trace's aten::copy_ operators.
        dpc = data_parallel(scaled, ranks=n, bucket_mb=0.5, first_bucket_mb=1.0, bucket_copies=True)
        dpc_shared = scale_compute(dpc.traces, factor=1.0 / share) if share > 1 else dpc
        pred_copies = simulate(dpc_shared.traces, net).finish_ns / steps / 1e9
        # gloo runs each collective on a CPU thread of its own: while buckets overlap the backward
        # pass, 2N threads compete (the microbenchmark had N). Upper bound: always overlapped.
        share_c = sharing_slowdown(bg, 2 * n, 1, cores)
        share_m = sharing_slowdown(bg, 2 * n, n, cores)
        dp_both = scale_compute(dp.traces, factor=1.0 / share_c) if share_c > 1 else dp
        pred_both = simulate(dp_both.traces, net.scaled(bandwidth=1 / share_m, latency=share_m)).finish_ns
        pred_both = pred_both / steps / 1e9
        # Shared cores (chakra.whatif.recipes.share_cores): N ranks x (compute + gloo thread) on `cores`
        # cores; compute x max(1, N/cores), collectives serialized with compute. Then with DDP's
        # own CPU work (division by N, gradient <-> bucket copies) costed from the trace.
        dps = data_parallel(scaled, ranks=n, bucket_mb=0.5, first_bucket_mb=1.0, cores=cores)
        pred_cores = simulate(dps.traces, net).finish_ns / steps / 1e9
        dpsc = data_parallel(scaled, ranks=n, bucket_mb=0.5, first_bucket_mb=1.0, cores=cores, bucket_copies=True)
        pred_cores_copies = simulate(dpsc.traces, net).finish_ns / steps / 1e9
        # The other bound: compute x N/cores but collectives overlapping it, on gloo's two worker
        # threads per process (ProcessGroupGloo's default `threads=2`: two buckets in flight).
        dpo = data_parallel(
            scaled, ranks=n, bucket_mb=0.5, first_bucket_mb=1.0, cores=cores, bucket_copies=True, serialize_comm=False
        )
        pred_overlap = simulate(dpo.traces, net).finish_ns / steps / 1e9
        pred_overlap2 = simulate(dpo.traces, net, slots={"comm": 2}).finish_ns / steps / 1e9
        # Between the two: the CPU-busy fraction of the all-reduce (microbenchmark CPU time per rank
        # c against its wall time w: f = c * max(1, N/cores) / w) competes with compute.
        cpu_stat = ar.get("median_process_cpu_s_by_bytes", {})
        fracs = [min(1.0, cpu_stat[str(b)] * max(1.0, n / cores) / w) for b, w in sizes.items() if str(b) in cpu_stat]
        frac = statistics.median(fracs) if fracs else None
        pred_frac = pred_frac2 = float("nan")
        frac_notes: list = []
        if frac is not None:
            dpf = data_parallel(
                scaled, ranks=n, bucket_mb=0.5, first_bucket_mb=1.0, cores=cores, bucket_copies=True,
                comm_cpu_fraction=frac, network=net,
            )  # fmt: skip
            pred_frac = simulate(dpf.traces, net).finish_ns / steps / 1e9
            pred_frac2 = simulate(dpf.traces, net, slots={"comm": 2}).finish_ns / steps / 1e9
            frac_notes = dpf.notes
        raw = simulate(data_parallel(base, ranks=n, bucket_mb=0.5).traces, net).finish_ns / steps / 1e9
        tn = timing(f"adam_w{n}")
        out[f"w{n}"] = {
            "measured_s": tn["step_s"]["median"],
            "measured_p25_s": tn["step_s"]["p25"],
            "measured_p75_s": tn["step_s"]["p75"],
            "predicted_s": pred,
            "predicted_shared_s": pred_shared,
            "predicted_shared_comm_s": pred_both,
            "predicted_shared_copies_s": pred_copies,
            "predicted_cores_s": pred_cores,
            "predicted_cores_copies_s": pred_cores_copies,
            "predicted_overlap_s": pred_overlap,
            "predicted_overlap_2threads_s": pred_overlap2,
            "comm_cpu_fraction": frac,
            "predicted_comm_cpu_s": pred_frac,
            "predicted_comm_cpu_2threads_s": pred_frac2,
            "comm_cpu_notes": frac_notes,
            "cores_notes": dpsc.notes,
            "measured_cpu_s": tn["step_cpu_s"]["median"],
            "measured_process_cpu_s": tn.get("step_process_cpu_s", {}).get("median", float("nan")),
            "copies_notes": dpc.notes,
            "background_threads": bg,
            "sharing_slowdown": share,
            "sharing_slowdown_overlap": [share_c, share_m],
            "predicted_uncalibrated_s": raw,
            "network": {"bandwidth_GBps": net.bandwidth[0], "latency_ns": net.latency[0]},
            "allreduce_fit_us": {r["bytes"]: (r["measured_us"], r["simulated_us"]) for r in rep["sizes"]},
            "buckets": dp.notes,
        }
    tf, tfe = timing("adam-fused_w1"), timing("adam-foreach_w1")
    out["fused"] = {
        "measured_s": tf["step_s"]["median"],
        "measured_cpu_s": tf["step_cpu_s"]["median"],
        "measured_opt_s": tf["optimizer_step_s"]["median"],
        "measured_opt_cpu_s": tf["optimizer_step_cpu_s"]["median"],
        "plain_opt_s": t1["optimizer_step_s"]["median"],
        "plain_opt_cpu_s": t1["optimizer_step_cpu_s"]["median"],
    }
    for cost in ("sum", "bytes"):
        fused = fused_optimizer(base, cost=cost)
        # The traced optimizer phase shrinks by fused_us / region_us; apply that ratio to the
        # measured (untraced) optimizer phase of the plain run, keep the rest of its step.
        ratio = fused.changed["fused_us"] / fused.changed["region_us"]
        sim_ratio = simulate(fused.traces).finish_ns / steps / 1e9 / sim1
        res = {"notes": fused.notes, "phase_ratio": ratio, "step_sim_ratio": sim_ratio}
        for suffix in ("", "_cpu"):
            step = t1[f"step{suffix}_s"]["median"]
            opt = t1[f"optimizer_step{suffix}_s"]["median"]
            res[f"predicted_opt{suffix}_s"] = opt * ratio
            res[f"predicted{suffix}_s"] = step - opt + opt * ratio
        out["fused"][cost] = res
    out["foreach"] = {
        "predicted_s": meas1,
        "measured_s": tfe["step_s"]["median"],
        "predicted_cpu_s": t1["step_cpu_s"]["median"],
        "measured_cpu_s": tfe["step_cpu_s"]["median"],
    }
    return out


#: A run during which other processes used more than this fraction of the cores is not compared:
#: its times measure the other process as much as ours (decided on the load, not on the error).
MAX_FOREIGN = 0.10


def markdown_table(results: list[dict], max_foreign: float = MAX_FOREIGN) -> str:
    """Predicted vs measured per round, and the median over rounds, as a markdown table (ms).

    A round's pair is left out of a row when one of the runs it compares (the one-rank plain run
    and the predicted configuration) had other processes using more than `max_foreign` of the
    cores; the row says how many rounds it kept.
    """
    rows: list[tuple[str, str, list[tuple[str, float, float]]]] = []

    def clean(r: dict, run: str) -> bool:
        foreign = r.get("foreign", {})
        return all(foreign.get(x, 0.0) <= max_foreign for x in ("adam_w1", run))

    def add(label: str, what: str, run: str, pick: Any) -> None:
        rows.append((label, what, [(r["round"], *pick(r)) for r in results if clean(r, run)]))

    ddp_rows = [
        ("predicted_s", "step, wall (calibrated compute + calibrated gloo ring, dedicated cores)"),
        ("predicted_shared_s", "... + processor sharing with background load"),
        ("predicted_shared_copies_s", "... + processor sharing + DDP bucket copies"),
        ("predicted_shared_comm_s", "... + sharing with gloo threads (bound)"),
        ("predicted_cores_s", "shared cores (`cores=2`: compute x N/2, collectives serialized)"),
        ("predicted_cores_copies_s", "**shared cores + DDP CPU work (mul, bucket copies)**"),
        ("predicted_overlap_s", "compute x N/2 + DDP CPU work, collectives overlapped (1 gloo thread)"),
        ("predicted_overlap_2threads_s", "... with gloo's 2 worker threads (2 collectives in flight)"),
        ("predicted_comm_cpu_s", "compute x N/2 + DDP CPU work + measured CPU share of collectives"),
        ("predicted_comm_cpu_2threads_s", "... with gloo's 2 worker threads"),
    ]
    for n in (2, 4):
        for key, what in ddp_rows:
            add(f"DDP {n} ranks", what, f"adam_w{n}", lambda r, k=key, w=f"w{n}": (r[w][k], r[w]["measured_s"]))
    for cost in ("sum", "bytes"):
        label = f"fused Adam ({cost})"
        add(label, "step, wall", "adam-fused_w1",
            lambda r, c=cost: (r["fused"][c]["predicted_s"], r["fused"]["measured_s"]))  # fmt: skip
        add(label, "step, CPU time", "adam-fused_w1",
            lambda r, c=cost: (r["fused"][c]["predicted_cpu_s"], r["fused"]["measured_cpu_s"]))  # fmt: skip
        add(label, "optimizer.step, CPU time", "adam-fused_w1",
            lambda r, c=cost: (r["fused"][c]["predicted_opt_cpu_s"], r["fused"]["measured_opt_cpu_s"]))  # fmt: skip
    add("foreach Adam (= plain)", "step, wall", "adam-foreach_w1",
        lambda r: (r["foreach"]["predicted_s"], r["foreach"]["measured_s"]))  # fmt: skip
    add("foreach Adam (= plain)", "step, CPU time", "adam-foreach_w1",
        lambda r: (r["foreach"]["predicted_cpu_s"], r["foreach"]["measured_cpu_s"]))  # fmt: skip
    head = (
        "| what-if | measure | predicted (median) | measured (median) | error per round | rounds | median error |\n"
        "|---|---|---|---|---|---|---|\n"
    )
    lines = []
    for label, what, pairs in rows:
        if not pairs:
            lines.append(f"| {label} | {what} | - | - | - | 0 | - |")
            continue
        errs = [100.0 * (p - m) / m for _, p, m in pairs if m == m and m > 0]
        per_round = ", ".join(f"{e:+.0f}%" for e in errs)
        used = " ".join(name.replace("round", "") for name, _, _ in pairs)
        med_p = statistics.median(p for _, p, _ in pairs) * 1e3
        med_m = statistics.median(m for _, _, m in pairs) * 1e3
        med = statistics.median(errs) if errs else float("nan")
        lines.append(f"| {label} | {what} | {med_p:.2f} ms | {med_m:.2f} ms | {per_round} | {used} | {med:+.1f}% |")
    return head + "\n".join(lines) + "\n"


def run_predictions(out_root: str) -> list[dict]:
    rounds = sorted((d for d in os.listdir(out_root) if d.startswith("round")), key=lambda d: int(d[5:]))
    cores = os.cpu_count() or 1
    results = [predict_round(os.path.join(out_root, r), cores) for r in rounds]
    with open(os.path.join(out_root, "predictions.json"), "w") as fh:
        json.dump(results, fh, indent=2)
    return results


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output folder (keep it out of git)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="one training run")
    r.add_argument("--world", type=int, default=1)
    r.add_argument("--optim", default="adam", choices=["adam", "adam-foreach", "adam-fused"])
    r.add_argument("--steps", type=int, default=30, help="untraced, timed steps")
    r.add_argument("--trace-steps", type=int, default=3, help="traced steps (after one traced warm-up)")
    r.add_argument("--bucket-mb", type=float, default=0.5, help="DDP bucket_cap_mb")
    a = sub.add_parser("allreduce", help="gloo all_reduce microbenchmark -> network.<N>.yml")
    a.add_argument("--world", type=int, default=2)
    a.add_argument("--reps", type=int, default=40)
    al = sub.add_parser("all", help="the whole validation set, in interleaved rounds (OUT/round<k>/...)")
    al.add_argument("--rounds", type=int, default=3)
    al.add_argument("--first-round", type=int, default=0, help="number of the first round (to add rounds)")
    al.add_argument("--reps", type=int, default=40, help="all-reduce repetitions per size")
    al.add_argument("--max-load", type=float, default=1.0, help="wait for a 1-minute load below this per round")
    sub.add_parser("predict", help="chakra predictions for every OUT/round<k> (needs the chakra package)")
    z = sub.add_parser("zoo", help="small multi-rank traces, one per kind of parallelism -> OUT/<workload><world>/")
    z.add_argument("workloads", nargs="*", help="any of tools/pytorch_zoo.py WORKLOADS (default: all that fit --world)")
    z.add_argument("--world", type=int, default=4, help="ranks (gloo processes on this machine)")
    z.add_argument("--profile-memory", action="store_true", help="also record the allocator's [memory] events")
    gp = sub.add_parser("gpt", help="one rank of a 12-layer GPT-like decoder on the CPU -> OUT/ (conversion bench)")
    gp.add_argument("--layers", type=int, default=12)
    gp.add_argument("--trace-steps", type=int, default=7, help="traced steps (~9.5 MB of ET each at the defaults)")
    import pytorch_gpu

    g = sub.add_parser("gpu", help="GPU runs: fp32, AMP, fused AdamW, CUDA graphs, compile, DDP -> OUT/<variant>/")
    g.add_argument("variants", nargs="*", help=f"any of {' '.join(pytorch_gpu.VARIANTS)} (default: all)")
    pytorch_gpu.add_options(g)
    args = ap.parse_args(argv)
    if args.cmd == "gpu":
        return pytorch_gpu.run(args)
    if args.cmd == "run":
        t = run_training(args.out, args.world, args.optim, args.steps, args.trace_steps, args.bucket_mb)
        print(f"{t['run']}: median step {t['step_s']['median'] * 1e3:.2f} ms ({t['wall_s']} s)")
    elif args.cmd == "allreduce":
        res = run_allreduce(args.out, args.world, args.reps)
        print(f"allreduce w{args.world}: {res['fit']}, ring {res['ring']}")
    elif args.cmd == "gpt":
        got = record_gpt(args.out, layers=args.layers, trace_steps=args.trace_steps)
        print(f"gpt: {', '.join(got['files'])} in {got['out']} ({got['seconds']} s)")
    elif args.cmd == "zoo":
        import pytorch_zoo

        for w in args.workloads or pytorch_zoo.default_workloads(args.world):
            m = pytorch_zoo.record(args.out, w, args.world, _free_port(), profile_memory=args.profile_memory)
            print(f"{m['workload']}: {len(m['files'])} files ({m['seconds']} s)")
    elif args.cmd == "predict":
        results = run_predictions(args.out)
        table = markdown_table(results)
        with open(os.path.join(args.out, "predictions.md"), "w") as fh:
            fh.write(table)
        print(table)
    else:
        # Interleave configurations round by round so slow phases of the shared machine hit all of them.
        for k in range(args.first_round, args.first_round + args.rounds):
            load = wait_quiet(args.max_load)
            print(f"round {k}: load {load[0]:.2f}", flush=True)
            out = os.path.join(args.out, f"round{k}")
            for world in (2, 4):
                res = run_allreduce(out, world, args.reps)
                print(f"round {k} allreduce w{world}: {res['fit']}")
            for world, optim in [(1, "adam"), (2, "adam"), (4, "adam"), (1, "adam-foreach"), (1, "adam-fused")]:
                t = run_training(out, world, optim, 40, 3, 0.5)
                print(f"round {k} {t['run']}: median step {t['step_s']['median'] * 1e3:.2f} ms ({t['wall_s']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""GPU training runs: the CUDA side of the PyTorch path, measured, for conversion and what-if checks.

A small GPT-like model (token and position embeddings, pre-norm transformer blocks with causal
scaled-dot-product attention and a GELU MLP, a tied-free LM head) trains for a few steps on one
GPU in several variants. Each variant writes, under ``OUT/<variant>/``:

  et.json.gz            ExecutionTraceObserver output of the traced steps
  kineto.json.gz        Kineto trace (CPU + CUDA activities) of the same steps, linked by rf_id
  kineto_only.json.gz   a Kineto trace of two more steps without the ET observer, with
                        ``profile_memory=True`` (the allocator's own [memory] events)
  timing.json           untraced step times (median of ``--steps`` steps, each ended by
                        ``loss.item()`` and ``torch.cuda.synchronize()``), per-phase GPU times
                        (CUDA events around forward, backward, optimizer), the traced steps' wall
                        times, ``torch.cuda.max_memory_allocated`` over the timed steps

Variants: ``fp32`` (AdamW, per-parameter loop ``foreach=False``), ``amp`` (autocast fp16 +
GradScaler, same optimizer), ``fused`` (AdamW ``fused=True``), ``foreach`` (AdamW ``foreach=True``),
``cudagraph`` (the whole step captured with ``torch.cuda.graph`` and replayed; the capture falls
inside the traced window so that the replayed kernels can be traced back to the ops that recorded
them), ``compile`` (``torch.compile`` of the model, inductor), ``ddp2`` (two processes sharing the
one GPU, DDP over gloo with CUDA tensors).

Every step starts with a pinned host-to-device copy of its batch (as a data loader would), so the
traces hold memcpys and the synchronizations the step ends with.

Run on the GPU machine (torch with CUDA; no chakra install needed)::

    python tools/record_pytorch.py --out /tmp/gpu gpu --pack /tmp/gpu-packed
    python tools/pytorch_gpu.py --out /tmp/gpu --device cpu --tiny fp32 amp   # a CPU smoke test
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from record_pytorch import _free_port, _summary  # the CPU recorder's step statistics and ports
from torch.profiler import ExecutionTraceObserver, ProfilerActivity, profile, schedule

VARIANTS = ("fp32", "amp", "fused", "foreach", "ddp2", "cudagraph", "compile")


@dataclass
class Config:
    vocab: int = 2048
    d: int = 384
    heads: int = 6
    layers: int = 4
    seq: int = 256
    batch: int = 8


TINY = Config(vocab=128, d=32, heads=2, layers=2, seq=16, batch=2)
#: Compute-bound on an H100/H200 (the default is launch-bound there): what AMP is for.
BIG = Config(vocab=8192, d=1024, heads=16, layers=4, seq=512, batch=16)
MODELS = {"small": Config(), "tiny": TINY, "big": BIG}


class Block(nn.Module):
    def __init__(self, c: Config) -> None:
        super().__init__()
        self.heads = c.heads
        self.ln1 = nn.LayerNorm(c.d)
        self.qkv = nn.Linear(c.d, 3 * c.d)
        self.proj = nn.Linear(c.d, c.d)
        self.ln2 = nn.LayerNorm(c.d)
        self.fc1 = nn.Linear(c.d, 4 * c.d)
        self.fc2 = nn.Linear(4 * c.d, c.d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, c: Config) -> None:
        super().__init__()
        self.tok = nn.Embedding(c.vocab, c.d)
        self.pos = nn.Embedding(c.seq, c.d)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.layers))
        self.ln_f = nn.LayerNorm(c.d)
        self.head = nn.Linear(c.d, c.vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln_f(x))


def _gzip_into(src: Path, dst: Path) -> None:
    with open(src, "rb") as fi, gzip.open(dst, "wb", compresslevel=9) as fo:
        shutil.copyfileobj(fi, fo)
    src.unlink()


class Trainer:
    """One model, optimizer and batch on one device; `step()` is one training step."""

    def __init__(self, variant: str, c: Config, device: str, rank: int = 0, world: int = 1) -> None:
        self.variant, self.c, self.device = variant, c, device
        self.cuda = device.startswith("cuda")
        torch.manual_seed(1234)
        model: nn.Module = GPT(c).to(device)
        if variant == "ddp2":
            from torch.nn.parallel import DistributedDataParallel as DDP

            model = DDP(model, device_ids=[0] if self.cuda else None)
        self.model = model
        self.fwd: Callable[[torch.Tensor], torch.Tensor] = torch.compile(model) if variant == "compile" else model
        params = list(model.parameters())
        if variant == "fused":
            self.opt = torch.optim.AdamW(params, lr=1e-4, fused=True)
        elif variant == "foreach":
            self.opt = torch.optim.AdamW(params, lr=1e-4, foreach=True)
        elif variant == "cudagraph":
            self.opt = torch.optim.AdamW(params, lr=1e-4, foreach=False, capturable=True)
        else:
            self.opt = torch.optim.AdamW(params, lr=1e-4, foreach=False)
        self.amp = variant == "amp"
        self.scaler = torch.amp.GradScaler(device.split(":")[0]) if self.amp else None
        g = torch.Generator().manual_seed(100 + rank)
        self.host_x = torch.randint(0, c.vocab, (c.batch, c.seq), generator=g)
        self.host_y = torch.randint(0, c.vocab, (c.batch, c.seq), generator=g)
        if self.cuda:
            self.host_x, self.host_y = self.host_x.pin_memory(), self.host_y.pin_memory()
        self.graph: Optional[Any] = None
        self.events: list[tuple[Any, Any, Any, Any]] = []

    # -- one step, in phases ---------------------------------------------------------------
    def _batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        return (
            self.host_x.to(self.device, non_blocking=True),
            self.host_y.to(self.device, non_blocking=True),
        )

    def _loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if self.amp:
            with torch.autocast(self.device.split(":")[0], dtype=torch.float16 if self.cuda else torch.bfloat16):
                logits = self.fwd(x)
                return F.cross_entropy(logits.view(-1, self.c.vocab).float(), y.view(-1))
        return F.cross_entropy(self.fwd(x).view(-1, self.c.vocab), y.view(-1))

    def _optim(self) -> None:
        if self.scaler is not None:
            self.scaler.step(self.opt)
            self.scaler.update()
        else:
            self.opt.step()

    def _event(self) -> Any:
        if not self.cuda:
            return None
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        return e

    def step(self, timed: bool = False) -> float:
        if self.variant == "cudagraph" and self.cuda:
            return self._graph_step(timed)
        e0 = self._event() if timed else None
        x, y = self._batch()
        self.opt.zero_grad(set_to_none=True)
        loss = self._loss(x, y)
        e1 = self._event() if timed else None
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()
        e2 = self._event() if timed else None
        self._optim()
        e3 = self._event() if timed else None
        if timed and self.cuda:
            self.events.append((e0, e1, e2, e3))
        value = loss.item()
        if self.cuda:
            torch.cuda.synchronize()
        return value

    def _capture(self) -> None:
        """Whole-step capture, as the CUDA graphs documentation shows: warm up on a side stream
        (the first time), then record forward, backward and the (capturable) optimizer into one
        graph."""
        if not hasattr(self, "static_x"):
            self.static_x, self.static_y = self._batch()
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    self.opt.zero_grad(set_to_none=True)
                    self._loss(self.static_x, self.static_y).backward()
                    self.opt.step()
            torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        self.opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(self.graph):
            self.static_loss = self._loss(self.static_x, self.static_y)
            self.static_loss.backward()
            self.opt.step()

    def _graph_step(self, timed: bool) -> float:
        if self.graph is None:
            self._capture()
        e0 = self._event() if timed else None
        self.static_x.copy_(self.host_x, non_blocking=True)
        self.static_y.copy_(self.host_y, non_blocking=True)
        self.graph.replay()
        e3 = self._event() if timed else None
        if timed:
            self.events.append((e0, None, None, e3))
        value = self.static_loss.item()
        torch.cuda.synchronize()
        return value

    def phase_times(self) -> dict[str, Any]:
        """Per-phase GPU times (seconds) of the timed steps, from their CUDA events."""
        out: dict[str, list[float]] = {"step_gpu": [], "forward": [], "backward": [], "optimizer": []}
        for e0, e1, e2, e3 in self.events:
            out["step_gpu"].append(e0.elapsed_time(e3) / 1e3)
            if e1 is not None:
                out["forward"].append(e0.elapsed_time(e1) / 1e3)
                out["backward"].append(e1.elapsed_time(e2) / 1e3)
                out["optimizer"].append(e2.elapsed_time(e3) / 1e3)
        return {k: _summary(v) for k, v in out.items() if v}


def _record(trainer: Trainer, out_dir: Path, rank: int, args: argparse.Namespace) -> dict[str, Any]:
    """Warm up, time untraced steps, then trace: ET + Kineto, then Kineto alone with memory."""
    sfx = f".{rank}" if trainer.variant == "ddp2" else ""
    cuda = trainer.cuda
    # CUDA graphs: the timed steps are pure replays of a graph captured during warm-up; the
    # graph is then captured again as the first traced step, so that the ET and Kineto hold the
    # ops and launches that recorded the kernels every later traced step replays.
    graphed = trainer.variant == "cudagraph" and cuda
    t0 = time.perf_counter()
    for _ in range(args.warmup):
        trainer.step()
    warm_s = time.perf_counter() - t0
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    mem_start = torch.cuda.memory_allocated() if cuda else None
    walls: list[float] = []
    for _ in range(args.steps):
        t = time.perf_counter()
        trainer.step(timed=True)
        walls.append(time.perf_counter() - t)
    peak = torch.cuda.max_memory_allocated() if cuda else None
    phases = trainer.phase_times()
    if graphed:
        trainer.graph = None
    warm_n, active_n = (0, args.trace_steps + 1) if graphed else (args.trace_warmup, args.trace_steps)

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    et_path = out_dir / f"et{sfx}.json"
    kin_path = out_dir / f"kineto{sfx}.json"
    et = ExecutionTraceObserver()
    et.register_callback(str(et_path))
    traced: list[float] = []
    prof = profile(
        activities=activities,
        schedule=schedule(wait=0, warmup=warm_n, active=active_n, repeat=1),
        on_trace_ready=lambda p: p.export_chrome_trace(str(kin_path)),
        record_shapes=True,
        execution_trace_observer=et,
    )
    with prof:
        for _ in range(warm_n + active_n):
            t = time.perf_counter()
            trainer.step()
            traced.append(time.perf_counter() - t)
            prof.step()
    et.unregister_callback()

    only_path = out_dir / f"kineto_only{sfx}.json"
    with profile(activities=activities, record_shapes=True, profile_memory=True) as p2:
        for _ in range(2):
            trainer.step()
    p2.export_chrome_trace(str(only_path))
    for p in (et_path, kin_path, only_path):
        if p.exists():
            _gzip_into(p, p.with_name(p.name + ".gz"))
    return {
        "warmup_s": warm_s,
        "step_s": _summary(walls),
        "per_step_s": walls,
        "phases_gpu_s": phases,
        # Wall times of the traced steps (for CUDA graphs the first is the capture and one replay).
        "traced_step_s": traced[warm_n:],
        "traced_warmup_s": traced[:warm_n],
        "traced_capture_step": graphed,
        "memory_allocated_at_start": mem_start,
        "max_memory_allocated": peak,
    }


def _ddp_worker(rank: int, world: int, port: int, out_dir: str, args: argparse.Namespace, c: Config) -> None:
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        trainer = Trainer("ddp2", c, args.device, rank=rank, world=world)
        got = _record(trainer, Path(out_dir), rank, args)
        (Path(out_dir) / f"rank{rank}.json").write_text(json.dumps(got))
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _gpu_info() -> dict[str, Any]:
    info: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda, "python": sys.version.split()[0]}
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        info.update(gpu=p.name, sms=p.multi_processor_count, memory=p.total_memory)
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            info["nvidia_smi"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=20,
            ).stdout.strip()
    return info


def _folder(variant: str, args: argparse.Namespace) -> str:
    return variant if args.tiny or args.model == "small" else f"{args.model}-{variant}"


def run_variant(variant: str, root: Path, args: argparse.Namespace) -> dict[str, Any]:
    c = MODELS["tiny" if args.tiny else args.model]
    out_dir = root / _folder(variant, args)
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    if variant == "ddp2":
        import torch.multiprocessing as mp

        mp.start_processes(_ddp_worker, args=(2, _free_port(), str(out_dir), args, c), nprocs=2, join=True)
        ranks = {r: json.loads((out_dir / f"rank{r}.json").read_text()) for r in range(2)}
        for r in range(2):
            (out_dir / f"rank{r}.json").unlink()
        per_step = [max(a, b) for a, b in zip(ranks[0]["per_step_s"], ranks[1]["per_step_s"])]
        got = {**ranks[0], "step_s": _summary(per_step), "per_rank": ranks}
    else:
        got = _record(Trainer(variant, c, args.device), out_dir, 0, args)
    n_params = sum(p.numel() for p in GPT(c).parameters())
    timing = {
        "variant": variant,
        "model": {**asdict(c), "params": n_params},
        "device": args.device,
        "warmup_steps": args.warmup,
        "timed_steps": args.steps,
        "trace_warmup_steps": args.trace_warmup,
        "traced_steps": args.trace_steps,
        **got,
        "wall_s": round(time.perf_counter() - t0, 2),
        **_gpu_info(),
    }
    (out_dir / "timing.json").write_text(json.dumps(timing, indent=1))
    return timing


def _pack(root: Path, variant: str, dest: Optional[str]) -> None:
    """DEST/<variant>.tar and DEST/manifest.json: one file per variant keeps each under the size
    a GPU lease hands back."""
    if not dest:
        return
    Path(dest).mkdir(parents=True, exist_ok=True)
    if (root / variant).is_dir():
        tmp = Path(dest) / f".{variant}.tar.part"
        with tarfile.open(tmp, "w") as tar:
            tar.add(root / variant, arcname=variant)
        os.replace(tmp, Path(dest) / f"{variant}.tar")
    shutil.copyfile(root / "manifest.json", Path(dest) / "manifest.json")


def _timed(fn: Callable[..., Any], *args: Any, reps: int = 10) -> float:
    for _ in range(3):
        fn(*args)
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(reps):
        fn(*args)
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / reps


def _matmul_flops(dtype: torch.dtype, n: int = 8192) -> float:
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    return 2 * n**3 / _timed(torch.matmul, a, b)


def _copy_bytes_per_s(nbytes: int = 1 << 30) -> float:
    x = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    return 2 * nbytes / _timed(y.copy_, x, reps=20)


def device_peaks() -> dict[str, float]:
    """Measured peaks of this GPU for the roofline model: matrix-product FLOP/s by precision (as
    the model's kernels run them: fp32 without TF32, fp16, bf16) and device memory bandwidth
    (a device-to-device copy, bytes read plus written)."""
    if not torch.cuda.is_available():
        return {}
    out = {
        f"matmul_{k}_flops": _matmul_flops(dt)
        for k, dt in (("fp32", torch.float32), ("fp16", torch.float16), ("bf16", torch.bfloat16))
    }
    out["copy_bytes_per_s"] = _copy_bytes_per_s()
    torch.cuda.empty_cache()
    return out


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder for OUT/<variant>/")
    ap.add_argument("variants", nargs="*", default=list(VARIANTS), help=f"any of {', '.join(VARIANTS)} (default: all)")
    add_options(ap)
    return run(ap.parse_args(argv))


def add_options(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--model", default="small", choices=sorted(MODELS), help="model size (OUT/<model>-<variant>/)")
    ap.add_argument("--tiny", action="store_true", help="the tiny model, in OUT/<variant>/ (smoke tests)")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--steps", type=int, default=40, help="timed untraced steps")
    ap.add_argument("--trace-warmup", type=int, default=1)
    ap.add_argument("--trace-steps", type=int, default=2)
    ap.add_argument("--budget", type=float, default=300.0, help="start no variant after this many seconds")
    ap.add_argument("--in-process", action="store_true", help="run the variants in this process (default: one each)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument(
        "--pack", help="after each variant, write DIR/<variant>.tar and DIR/manifest.json (what a GPU lease hands back)"
    )


def _run_isolated(variant: str, root: Path, args: argparse.Namespace, elapsed: float) -> dict[str, Any]:
    """One variant in a fresh process: a CUDA error (a failed capture, say) or a compile cache
    cannot spoil the variants after it, and each starts with an empty allocator."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--out", str(root), variant, "--in-process", "--child"]
    cmd += ["--device", args.device, "--warmup", str(args.warmup), "--steps", str(args.steps)]
    cmd += ["--trace-warmup", str(args.trace_warmup), "--trace-steps", str(args.trace_steps)]
    cmd += ["--tiny"] if args.tiny else ["--model", args.model]
    proc = subprocess.run(cmd, timeout=max(60.0, args.budget + 180 - elapsed))
    timing_path = root / _folder(variant, args) / "timing.json"
    if proc.returncode != 0 or not timing_path.exists():
        err = root / _folder(variant, args) / "error.txt"
        raise RuntimeError(f"{variant}: exit {proc.returncode}\n" + (err.read_text() if err.exists() else ""))
    return json.loads(timing_path.read_text())


def run(args: argparse.Namespace) -> int:
    root = Path(args.out)
    root.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    manifest: dict[str, Any] = {"started": started, "runs": {}, **_gpu_info()}
    failed = 0
    if args.child:  # one variant for the parent process, which keeps the manifest
        try:
            run_variant(args.variants[0], root, args)
        except Exception:
            (root / _folder(args.variants[0], args)).mkdir(parents=True, exist_ok=True)
            (root / _folder(args.variants[0], args) / "error.txt").write_text(traceback.format_exc())
            raise
        return 0
    try:
        manifest["peaks"] = device_peaks()
    except Exception:
        manifest["peaks"] = {"error": traceback.format_exc()[-2000:]}
    print(f"peaks: {manifest['peaks']}", flush=True)
    for variant in args.variants or VARIANTS:
        if time.perf_counter() - t0 > args.budget:
            manifest["runs"][_folder(variant, args)] = {"skipped": "over budget"}
            continue
        print(f"[{time.perf_counter() - t0:6.1f}s] {variant} ...", flush=True)
        try:
            if args.in_process:
                timing = run_variant(variant, root, args)
            else:
                timing = _run_isolated(variant, root, args, time.perf_counter() - t0)
            manifest["runs"][_folder(variant, args)] = {
                "step_s": timing["step_s"].get("median"),
                "max_memory_allocated": timing.get("max_memory_allocated"),
                "wall_s": timing["wall_s"],
            }
            print(f"   step {timing['step_s'].get('median')}, wall {timing['wall_s']} s", flush=True)
        except Exception:
            failed += 1
            manifest["runs"][_folder(variant, args)] = {"error": traceback.format_exc()[-4000:]}
            print(traceback.format_exc(), flush=True)
        (root / "manifest.json").write_text(json.dumps(manifest, indent=1))
        _pack(root, _folder(variant, args), args.pack)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

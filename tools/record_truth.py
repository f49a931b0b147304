#!/usr/bin/env python3
"""Record small training runs with their untraced step times (chakra.record.Recorder), for
checking replay and what-if against the real run (docs/whatif-validation.md).

Each (model, variant) goes to OUT/<model>-<variant>/: et.0.json.gz, kineto.0.json.gz and
manifest.json. Variants: fp32 (Adam, per-parameter loop), fused (Adam fused=True), bf16
(autocast bf16 forward), fp16 (autocast fp16 + GradScaler; CUDA only), cudagraph (the whole step
captured once with torch.cuda.graph during the warm-up and replayed; CUDA only). Models: mlp, cnn,
lstm, encoder (small CPU-sized ones), resnet (a ResNet-like CNN, batch 128 of 32x32 images;
resnet512 the same at batch 512), bert (a BERT-like encoder, 4 layers of 512, batch 32 x 128
tokens), gru, vit, mobilenet and widemlp (each function's docstring says its shape); `--tiny`
shrinks resnet and bert for a CPU smoke run. Runs on CUDA when available (`--device` to choose), else on CPU with
one thread. `--peaks` also measures the device's matmul and copy peaks (the what-if's roofline
inputs) into OUT/peaks.json.

    python tools/record_truth.py --out /tmp/truth mlp cnn            # every variant of two models
    python tools/record_truth.py --out /tmp/truth lstm --variants fp32 fused
    nice -n -10 taskset -c 1 python tools/record_truth.py --out /tmp/truth mlp   # a shared CPU host
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional

import torch
import torch.nn as nn

from chakra.record import Recorder


def mlp() -> tuple[nn.Module, Callable[[], tuple[torch.Tensor, torch.Tensor]]]:
    layers: list[nn.Module] = []
    for _ in range(6):
        layers += [nn.Linear(256, 256), nn.ReLU()]
    layers.append(nn.Linear(256, 10))
    return nn.Sequential(*layers), lambda: (torch.randn(32, 256), torch.randint(0, 10, (32,)))


def cnn() -> tuple[nn.Module, Callable[[], tuple[torch.Tensor, torch.Tensor]]]:
    m = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 8 * 8, 10),
    )  # fmt: skip
    return m, lambda: (torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,)))


class _Recurrent(nn.Module):
    """Embedding, a 2-layer recurrent stack (`cell`: nn.LSTM or nn.GRU), a head on the last step."""

    def __init__(self, cell: type, vocab: int, d: int, hidden: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.rnn = cell(d, hidden, num_layers=2, batch_first=True)
        self.head = nn.Linear(hidden, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, _ = self.rnn(self.emb(x))
        return self.head(h[:, -1])


def lstm() -> tuple[nn.Module, Callable[[], tuple[torch.Tensor, torch.Tensor]]]:
    model = _Recurrent(nn.LSTM, 1000, 64, 128)
    return model, lambda: (torch.randint(0, 1000, (16, 24)), torch.randint(0, 10, (16,)))


class _Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(1000, 96)
        layer = nn.TransformerEncoderLayer(96, 4, 192, batch_first=True, dropout=0.0)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(96, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.enc(self.emb(x)).mean(1))


def encoder() -> tuple[nn.Module, Callable[[], tuple[torch.Tensor, torch.Tensor]]]:
    return _Encoder(), lambda: (torch.randint(0, 1000, (8, 32)), torch.randint(0, 10, (8,)))


TINY = False  # --tiny: resnet and bert at a size a CPU runs in a second


class _Block(nn.Module):
    """A ResNet basic block: two 3x3 convolutions with batch norm and a shortcut."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.short = (
            nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
            if stride != 1 or cin != cout
            else nn.Identity()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.b1(self.c1(x)))
        return torch.relu(self.b2(self.c2(h)) + self.short(x))


def resnet(batch: int = 128) -> tuple[nn.Module, Callable[[], tuple[torch.Tensor, torch.Tensor]]]:
    """ResNet-18-like for 32x32 images (4 stages of 2 blocks), batch 128 (tiny: 2 stages, batch 8)."""
    widths, batch = ((16, 32), 8) if TINY else ((64, 128, 256, 512), batch)
    layers: list[nn.Module] = [nn.Conv2d(3, widths[0], 3, 1, 1, bias=False), nn.BatchNorm2d(widths[0]), nn.ReLU()]
    cin = widths[0]
    for i, w in enumerate(widths):
        layers += [_Block(cin, w, 1 if i == 0 else 2), _Block(w, w, 1)]
        cin = w
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, 10)]
    return nn.Sequential(*layers), lambda: (torch.randn(batch, 3, 32, 32), torch.randint(0, 10, (batch,)))


class _Bert(nn.Module):
    def __init__(self, vocab: int, d: int, heads: int, layers: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, heads, 4 * d, batch_first=True, dropout=0.1, activation="gelu")
        self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d, vocab)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.enc(self.emb(x))).flatten(0, 1)


def bert() -> tuple[nn.Module, Callable[[], tuple[torch.Tensor, torch.Tensor]]]:
    """BERT-like masked-LM shape: 4 layers of 512 (8 heads), batch 32 x 128 tokens, vocab 8192
    (tiny: 2 layers of 64, batch 4 x 16, vocab 512); the loss is over every token."""
    vocab, d, heads, n, batch, seq = (512, 64, 4, 2, 4, 16) if TINY else (8192, 512, 8, 4, 32, 128)
    return _Bert(vocab, d, heads, n), lambda: (
        torch.randint(0, vocab, (batch, seq)),
        torch.randint(0, vocab, (batch * seq,)),
    )


def resnet512() -> tuple[nn.Module, Callable[[], tuple[torch.Tensor, torch.Tensor]]]:
    """The same ResNet at batch 512: a device-bound step on an H100/H200 (tiny: as `resnet`)."""
    return resnet(512)


def gru() -> tuple[nn.Module, Callable[[], tuple[torch.Tensor, torch.Tensor]]]:
    """Embedding + a 2-layer GRU of 256, batch 32 x 32 tokens."""
    model = _Recurrent(nn.GRU, 2000, 128, 256)
    return model, lambda: (torch.randint(0, 2000, (32, 32)), torch.randint(0, 10, (32,)))


class _ViT(nn.Module):
    def __init__(self, d: int = 192, layers: int = 4) -> None:
        super().__init__()
        self.patch = nn.Conv2d(3, d, 4, 4)  # 32x32 images -> 64 patches
        self.pos = nn.Parameter(torch.zeros(1, 64, d))
        layer = nn.TransformerEncoderLayer(d, 3, 4 * d, batch_first=True, dropout=0.0, activation="gelu",
                                           norm_first=True)  # fmt: skip
        self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.patch(x).flatten(2).transpose(1, 2) + self.pos
        return self.head(self.norm(self.enc(h)).mean(1))


def vit() -> tuple[nn.Module, Callable[[], tuple[torch.Tensor, torch.Tensor]]]:
    """A small vision transformer: 4x4 patches of 32x32 images, 4 pre-norm layers of 192, batch 64."""
    return _ViT(), lambda: (torch.randn(64, 3, 32, 32), torch.randint(0, 10, (64,)))


def mobilenet() -> tuple[nn.Module, Callable[[], tuple[torch.Tensor, torch.Tensor]]]:
    """Depthwise-separable convolutions (MobileNet-like, 6 blocks up to 256 channels), batch 64."""
    layers: list[nn.Module] = [nn.Conv2d(3, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU()]
    cin = 32
    for cout, stride in ((64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (256, 2)):
        layers += [nn.Conv2d(cin, cin, 3, stride, 1, groups=cin, bias=False), nn.BatchNorm2d(cin), nn.ReLU(),
                   nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]  # fmt: skip
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, 10)]
    return nn.Sequential(*layers), lambda: (torch.randn(64, 3, 32, 32), torch.randint(0, 10, (64,)))


def widemlp() -> tuple[nn.Module, Callable[[], tuple[torch.Tensor, torch.Tensor]]]:
    """Three Linear(4096) + GELU on 1,024 features, batch 512: matmul-heavy."""
    m = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 4096), nn.GELU(),
                      nn.Linear(4096, 4096), nn.GELU(), nn.Linear(4096, 10))  # fmt: skip
    return m, lambda: (torch.randn(512, 1024), torch.randint(0, 10, (512,)))


MODELS = {"mlp": mlp, "cnn": cnn, "lstm": lstm, "encoder": encoder, "resnet": resnet, "resnet512": resnet512,
          "bert": bert, "gru": gru, "vit": vit, "mobilenet": mobilenet, "widemlp": widemlp}  # fmt: skip
VARIANTS = ("fp32", "fused", "bf16", "fp16", "cudagraph")
CUDA_ONLY = ("fp16", "cudagraph")


def record(model_name: str, variant: str, out: Path, args: argparse.Namespace) -> dict[str, Any]:
    torch.manual_seed(0)
    dev = args.device
    model, batch = MODELS[model_name]()
    model = model.to(dev)
    if variant == "fused":
        kw: dict[str, Any] = {"fused": True}
    elif variant == "cudagraph":  # the optimizer's step counter stays on the device: capturable
        kw = {"foreach": False, "capturable": True}
    else:
        kw = {"foreach": False}
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, **kw)
    scaler = torch.amp.GradScaler(dev) if variant == "fp16" else None
    loss_fn = nn.CrossEntropyLoss()
    x, y = (t.to(dev) for t in batch())

    def train_step() -> torch.Tensor:
        if variant in ("bf16", "fp16"):
            with torch.autocast(dev, dtype=torch.bfloat16 if variant == "bf16" else torch.float16):
                loss = loss_fn(model(x), y)
        else:
            loss = loss_fn(model(x), y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        return loss

    graph: Any = None

    def step() -> None:
        nonlocal graph
        if variant != "cudagraph":
            train_step()
            opt.zero_grad(set_to_none=True)
            return
        if graph is None:  # CUDA graphs documentation: warm up on a side stream, then capture
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    opt.zero_grad(set_to_none=True)
                    train_step()
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            opt.zero_grad(set_to_none=True)
            with torch.cuda.graph(graph):
                train_step()
        graph.replay()

    folder = out / f"{model_name}-{variant}"
    rec = Recorder(folder, warmup=args.warmup, timed=args.timed, traced=args.traced, timed_after=args.timed_after,
                   device=dev,
                   extra={"model": model_name, "variant": variant, "threads": torch.get_num_threads(),
                          "tiny": TINY})  # fmt: skip
    t0 = time.perf_counter()
    while rec.running:
        with rec.step():
            step()
    m = rec.manifest()
    return {
        "run": folder.name,
        "untraced_ms": 1e3 * m["untraced_step_s"]["median"],
        "untraced_cpu_ms": 1e3 * m["untraced_thread_cpu_s"]["median"],
        "traced_ms": [round(1e3 * s, 2) for s in m["traced_step_s"]],
        "traced_cpu_ms": [round(1e3 * s, 2) for s in m["traced_thread_cpu_s"]],
        "drift": round(m.get("untraced_drift", 0.0), 3),
        "wall_s": round(time.perf_counter() - t0, 1),
    }


def main(argv: Optional[list[str]] = None) -> int:
    global TINY
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("models", nargs="+", choices=sorted(MODELS))
    ap.add_argument("--variants", nargs="+", choices=VARIANTS, default=None)
    ap.add_argument("--device", choices=("cuda", "cpu"), default=None, help="default: cuda when available")
    ap.add_argument("--tiny", action="store_true", help="resnet and bert at a CPU smoke-test size")
    ap.add_argument("--peaks", action="store_true", help="also measure the GPU's peaks into OUT/peaks.json")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--timed", type=int, default=30)
    ap.add_argument("--traced", type=int, default=3)
    ap.add_argument("--timed-after", type=int, default=20, help="untraced steps after the traced ones (default 20)")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    args = ap.parse_args(argv)
    TINY = args.tiny
    args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if args.device == "cuda" and not torch.cuda.is_available():
        print("record_truth: --device cuda, but torch sees no CUDA device", file=sys.stderr)
        return 1
    torch.set_num_threads(args.threads)
    cuda = args.device == "cuda"
    variants = args.variants or [v for v in VARIANTS if v not in CUDA_ONLY or cuda]
    skipped = [v for v in variants if v in CUDA_ONLY and not cuda]
    if skipped:
        print(f"record_truth: {', '.join(skipped)} need CUDA: skipped on CPU", file=sys.stderr)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.peaks and cuda:
        from pytorch_gpu import device_peaks  # the committed GPU runs' peak measurement

        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 peaks as the fp32 runs use it
        peaks = device_peaks()
        (args.out / "peaks.json").write_text(json.dumps(peaks, indent=1) + "\n")
        print(json.dumps({"peaks": peaks}), flush=True)
    for name in args.models:
        for v in variants:
            if v in skipped:
                continue
            print(json.dumps(record(name, v, args.out, args)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Record small training runs with their untraced step times (chakra.record.Recorder), for
checking replay and what-if against the real run (docs/whatif-validation.md).

Each (model, variant) goes to OUT/<model>-<variant>/: et.0.json.gz, kineto.0.json.gz and
manifest.json. Variants: fp32 (Adam, per-parameter loop), fused (Adam fused=True), bf16
(autocast bf16 forward), fp16 (autocast fp16 + GradScaler; CUDA only). Runs on CUDA when
available, else on CPU with one thread.

    python tools/record_truth.py --out /tmp/truth mlp cnn            # every variant of two models
    python tools/record_truth.py --out /tmp/truth lstm --variants fp32 fused
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


class _LSTM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(1000, 64)
        self.lstm = nn.LSTM(64, 128, num_layers=2, batch_first=True)
        self.head = nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, _ = self.lstm(self.emb(x))
        return self.head(h[:, -1])


def lstm() -> tuple[nn.Module, Callable[[], tuple[torch.Tensor, torch.Tensor]]]:
    return _LSTM(), lambda: (torch.randint(0, 1000, (16, 24)), torch.randint(0, 10, (16,)))


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


MODELS = {"mlp": mlp, "cnn": cnn, "lstm": lstm, "encoder": encoder}
VARIANTS = ("fp32", "fused", "bf16", "fp16")


def record(model_name: str, variant: str, out: Path, args: argparse.Namespace) -> dict[str, Any]:
    torch.manual_seed(0)
    cuda = torch.cuda.is_available()
    dev = "cuda" if cuda else "cpu"
    model, batch = MODELS[model_name]()
    model = model.to(dev)
    opt = torch.optim.Adam(
        model.parameters(), lr=1e-3, **({"fused": True} if variant == "fused" else {"foreach": False})
    )
    scaler = torch.amp.GradScaler(dev) if variant == "fp16" else None
    loss_fn = nn.CrossEntropyLoss()
    x, y = (t.to(dev) for t in batch())

    def step() -> None:
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
        opt.zero_grad(set_to_none=True)

    folder = out / f"{model_name}-{variant}"
    rec = Recorder(folder, warmup=args.warmup, timed=args.timed, traced=args.traced, timed_after=args.timed_after,
                   device=dev,
                   extra={"model": model_name, "variant": variant, "threads": torch.get_num_threads()})  # fmt: skip
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
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("models", nargs="+", choices=sorted(MODELS))
    ap.add_argument("--variants", nargs="+", choices=VARIANTS, default=None)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--timed", type=int, default=30)
    ap.add_argument("--traced", type=int, default=3)
    ap.add_argument("--timed-after", type=int, default=20, help="untraced steps after the traced ones (default 20)")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    variants = args.variants or [v for v in VARIANTS if v != "fp16" or torch.cuda.is_available()]
    for name in args.models:
        for v in variants:
            print(json.dumps(record(name, v, args.out, args)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

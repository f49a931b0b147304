"""Time `chakra generate transformer` for a 1,024-rank GPT step (issue 8: must stay under a minute).

Run: .venv/bin/python bench/generate_bench.py [--ranks-config dp,tp,pp] [--out DIR]
Prints build, assemble and write times, node counts and the FLOP check against the closed form.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from chakra.dsl.builtins.transformer import TransformerConfig, build_transformer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parallel", default="16,8,8", help="dp,tp,pp (default 16,8,8 = 1,024 ranks)")
    ap.add_argument("--layers", type=int, default=40)
    ap.add_argument("--hidden", type=int, default=5120)
    ap.add_argument("--heads", type=int, default=40)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--microbatches", type=int, default=16)
    ap.add_argument("--zero", type=int, default=1)
    ap.add_argument("--out", default=None, help="output directory (default: a temporary one, removed after)")
    args = ap.parse_args()
    dp, tp, pp = (int(x) for x in args.parallel.split(","))
    cfg = TransformerConfig(
        layers=args.layers,
        hidden=args.hidden,
        heads=args.heads,
        seq=args.seq,
        batch=args.batch,
        microbatches=args.microbatches,
        dp=dp,
        tp=tp,
        pp=pp,
        zero=args.zero,
    )
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="chakra-genbench-"))
    t0 = time.perf_counter()
    w = build_transformer(cfg)
    t1 = time.perf_counter()
    traces = w.traces()
    t2 = time.perf_counter()
    from chakra.io import write_rank_traces

    paths = write_rank_traces(out / "gpt", traces)
    w.save_comm_groups(out / "gpt.comm_groups.json")
    t3 = time.perf_counter()
    nodes = sum(len(t.nodes) for t in traces)
    size = sum(p.stat().st_size for p in paths)
    print(f"config: dp={dp} tp={tp} pp={pp} layers={cfg.layers} hidden={cfg.hidden} seq={cfg.seq} "
          f"batch={cfg.batch} microbatches={cfg.microbatches} zero={cfg.zero}")  # fmt: skip
    per_rank = nodes / cfg.world
    print(f"ranks: {cfg.world}, nodes: {nodes:,} ({per_rank:,.0f}/rank), files: {len(paths)}, {size / 2**20:.1f} MiB")
    print(f"build (stamp programs): {t1 - t0:6.2f} s")
    print(f"assemble traces:        {t2 - t1:6.2f} s")
    print(f"write .et files:        {t3 - t2:6.2f} s")
    print(f"total:                  {t3 - t0:6.2f} s")
    print(f"FLOPs in trace / closed form (6PT + attention): {w.total_flops() / cfg.model_flops():.4f}")
    if not args.out:
        shutil.rmtree(out)


if __name__ == "__main__":
    main()

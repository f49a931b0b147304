"""Mixture-of-experts layers with expert parallelism: routed tokens cross all-to-alls of uneven sizes.

E experts live on N ranks (E / N each, expert e on rank e // (E / N)); every rank holds T tokens.
Per layer, on every rank: the dense part of the layer (attention projections, 4 H x H matmuls),
the router (an H x E matmul), then each token picks its top-k experts from the routing
distribution; a dispatch all-to-all sends every token to the ranks of its experts, each rank runs
its experts' FFN (two matmuls, H x F and F x H) on the tokens it received, and a combine all-to-all
returns them. The next layer starts when the combine is back.

Routing is drawn, token by token, from a stated distribution, seeded:

- `uniform`: every expert equally likely (a balanced router; draws still vary a little);
- `zipf:S`: expert popularity ~ 1 / k^S for the k-th most popular expert, the popularity order
  a fresh seeded permutation per layer (a hot expert is hot for every rank, as with a trained
  router).

Both all-to-alls carry per-peer sizes (`comm_send_bytes`/`comm_recv_bytes`: [i][j] = tokens rank
i routes to rank j, times H x dtype bytes), and the FFN of a rank costs what its tokens cost, so
an imbalanced router shows as slower all-to-alls and an overloaded expert rank.

FLOPs of a forward pass: L x (N x (8 T H^2 + 2 T H E) + 4 T k N H F).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from chakra.dsl.device import Device
from chakra.dsl.workload import DSLError, Workload


@dataclass
class MoEConfig:
    ranks: int = 4
    experts: int = 8
    tokens: int = 4096  # per rank
    hidden: int = 1024
    ffn: int = 4096
    layers: int = 2
    top_k: int = 1
    imbalance: str = "uniform"  # uniform | zipf:S
    seed: int = 0
    dtype_bytes: int = 2

    def check(self) -> None:
        for f in ("ranks", "experts", "tokens", "hidden", "ffn", "layers", "top_k", "dtype_bytes"):
            if getattr(self, f) < 1:
                raise DSLError(f"moe: --{f.replace('_', '-')} must be >= 1")
        if self.ranks < 2:
            raise DSLError("moe: --ranks must be >= 2 (expert parallelism needs peers)")
        if self.experts % self.ranks:
            raise DSLError(f"moe: {self.experts} experts do not divide evenly over {self.ranks} ranks")
        if self.top_k > self.experts:
            raise DSLError(f"moe: --top-k {self.top_k} exceeds the {self.experts} experts")
        self.exponent()

    def exponent(self) -> float:
        """0 for uniform routing, S for zipf:S."""
        kind, _, arg = self.imbalance.partition(":")
        if kind == "uniform" and not arg:
            return 0.0
        if kind == "zipf":
            try:
                s = float(arg)
            except ValueError:
                raise DSLError(f"moe: --imbalance zipf:S needs a number S, got {self.imbalance!r}") from None
            if not s >= 0 or s > 100:
                raise DSLError(f"moe: zipf exponent must be in [0, 100], got {arg}")
            return s
        raise DSLError(f"moe: --imbalance must be uniform or zipf:S (e.g. zipf:1.2), got {self.imbalance!r}")

    def flops(self) -> float:
        t, h, n = self.tokens, self.hidden, self.ranks
        dense = n * (8 * t * h * h + 2 * t * h * self.experts)
        return float(self.layers * (dense + 4 * t * self.top_k * n * h * self.ffn))


_BLOCK = 1 << 15  # tokens drawn at once


def routing(cfg: MoEConfig) -> list[list[list[int]]]:
    """Per layer, tokens[i][j]: the tokens rank i sends to rank j (its experts' rank)."""
    import numpy as np

    cfg.check()
    rng = np.random.default_rng(cfg.seed)
    e, n = cfg.experts, cfg.ranks
    per = e // n
    weights = 1.0 / np.arange(1, e + 1, dtype=np.float64) ** cfg.exponent()
    out = []
    for _ in range(cfg.layers):
        prob = np.empty(e)
        prob[rng.permutation(e)] = weights / weights.sum()
        layer = []
        for _ in range(n):
            # top-k without replacement: k draws per token from the distribution renormalised
            # over the experts not yet taken (the Gumbel top-k trick gives exactly that)
            # (in blocks of tokens: memory stays bounded for any --tokens; the draws are the same)
            counts = np.zeros(e, dtype=np.int64)
            for start in range(0, cfg.tokens, _BLOCK):
                rows = min(_BLOCK, cfg.tokens - start)
                keys = np.log(prob)[None, :] - np.log(-np.log(rng.random((rows, e))))
                picks = np.argpartition(-keys, cfg.top_k - 1, axis=1)[:, : cfg.top_k]
                counts += np.bincount(picks.ravel(), minlength=e)
            layer.append([int(counts[j * per : (j + 1) * per].sum()) for j in range(n)])
        out.append(layer)
    return out


def build_moe(cfg: MoEConfig, device: Device, table: Optional[list[list[list[int]]]] = None) -> Workload:
    """The workload; `table`: the routing (`routing(cfg)`, drawn here when not given)."""
    cfg.check()
    n, t, h, f, db = cfg.ranks, cfg.tokens, cfg.hidden, cfg.ffn, cfg.dtype_bytes
    row = h * db  # bytes of one token's activation
    w = Workload(n, device=device, name=f"moe{n}")
    ranks = w.all_ranks
    prev = None
    for li, tokens in enumerate(table if table is not None else routing(cfg)):
        attn = w.compute(ranks, f"L{li}.attention", flops=8 * t * h * h, bytes=(t * h * 4 + 4 * h * h) * db, after=prev)
        router = w.compute(
            ranks, f"L{li}.router", flops=2 * t * h * cfg.experts, bytes=(t * h + h * cfg.experts) * db, after=attn
        )
        sent = [[tokens[i][j] * row for j in range(n)] for i in range(n)]
        dispatch = w.all_to_all(per_peer=sent, after=router, name=f"L{li}.dispatch")
        ffns = []
        for j in range(n):
            got = sum(tokens[i][j] for i in range(n))
            weights = 2 * h * f * (cfg.experts // n) * db
            ffns.append(
                w.compute(
                    j,
                    f"L{li}.experts",
                    flops=4 * got * h * f,
                    bytes=weights + got * (2 * h + f) * db,
                    after=dispatch.on(j),
                )  # fmt: skip
            )
        back = [[sent[j][i] for j in range(n)] for i in range(n)]
        prev = w.all_to_all(per_peer=back, after=ffns, name=f"L{li}.combine")
    return w

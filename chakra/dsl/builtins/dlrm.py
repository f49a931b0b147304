"""DLRM training step: model-parallel embedding tables, data-parallel MLPs.

Each rank owns a share of the embedding tables (table i lives on rank i mod N). Forward: the rank
pools its tables for the whole global batch, an all-to-all hands every rank the pooled vectors of
its own samples, the bottom MLP runs meanwhile on the dense features, then feature interaction
(pairwise dot products of the T+1 vectors) and the top MLP. Backward mirrors it: top MLP,
interaction, an all-to-all returning embedding gradients to the table owners, sparse table
updates, bottom MLP; MLP weight gradients are all-reduced per layer (overlapped) before SGD.

The all-to-all buffer is padded to ceil(T/N) tables per rank so every rank exchanges the same
size (as padded all-to-alls in practice do and as replay needs).

FLOPs of a step: 6 B sum(in*out) over MLP layers + 6 B (T+1)^2 d (interaction) + 2 B T L d
(pooling and its sparse update) + 2 N P_mlp (SGD).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from chakra.dsl.device import Device
from chakra.dsl.template import Program
from chakra.dsl.workload import DSLError, Workload
from chakra.schema import CollectiveType as CT


@dataclass
class DLRMConfig:
    ranks: int = 8
    batch: int = 2048  # global
    tables: int = 26
    emb_dim: int = 128
    pooling: int = 1  # lookups per sample per table
    dense: int = 13
    bottom: list[int] = field(default_factory=lambda: [512, 256])
    top: list[int] = field(default_factory=lambda: [1024, 1024, 512, 256, 1])
    dtype_bytes: int = 4

    def check(self) -> None:
        for f in ("ranks", "batch", "tables", "emb_dim", "pooling", "dense"):
            if getattr(self, f) < 1:
                raise DSLError(f"dlrm: --{f} must be >= 1")
        if self.batch % self.ranks:
            raise DSLError(f"dlrm: batch {self.batch} is not divisible by ranks {self.ranks}")
        if any(x < 1 for x in self.bottom + self.top):
            raise DSLError("dlrm: MLP layer widths must be >= 1")

    def bottom_layers(self) -> list[tuple[int, int]]:
        dims = [self.dense, *self.bottom, self.emb_dim]
        return list(zip(dims[:-1], dims[1:]))

    def top_layers(self) -> list[tuple[int, int]]:
        t = self.tables
        dims = [self.emb_dim + (t + 1) * t // 2, *self.top]
        return list(zip(dims[:-1], dims[1:]))

    def mlp_params(self) -> int:
        return sum(i * o for i, o in self.bottom_layers() + self.top_layers())

    def flops(self) -> float:
        b, t, d = self.batch, self.tables, self.emb_dim
        return (
            6 * b * self.mlp_params()
            + 6 * b * (t + 1) ** 2 * d
            + 2 * b * t * self.pooling * d
            + 2 * self.ranks * self.mlp_params()
        )


def _program(cfg: DLRMConfig, local_tables: int, device: Device) -> Program:
    b_glob, n, d, db = cfg.batch, cfg.ranks, cfg.emb_dim, cfg.dtype_bytes
    b = b_glob // n
    a2a = b_glob * -(-cfg.tables // n) * d * db
    p = Program(device)
    lookups = b_glob * local_tables * cfg.pooling
    lookup = p.compute("emb.lookup", lookups * d, lookups * d * db + b_glob * local_tables * d * db)
    a2a_fwd = p.collective(CT.ALL_TO_ALL, a2a, "world", after=[lookup], name="emb.a2a_fwd")
    prev = lookup
    for i, (fi, fo) in enumerate(cfg.bottom_layers()):
        prev = p.compute(f"bot{i}.fwd", 2 * b * fi * fo, db * (b * fi + fi * fo + b * fo), after=[prev])
    t1 = cfg.tables + 1
    prev = p.compute("interaction.fwd", 2 * b * t1 * t1 * d, db * (b * t1 * d + b * t1 * t1), after=[prev, a2a_fwd])
    for i, (fi, fo) in enumerate(cfg.top_layers()):
        prev = p.compute(f"top{i}.fwd", 2 * b * fi * fo, db * (b * fi + fi * fo + b * fo), after=[prev])
    grads: dict[str, int] = {}
    for i, (fi, fo) in reversed(list(enumerate(cfg.top_layers()))):
        prev = p.compute(f"top{i}.dgrad", 2 * b * fi * fo, db * (b * fo + fi * fo + b * fi), after=[prev])
        wg = p.compute(f"top{i}.wgrad", 2 * b * fi * fo, db * (b * fi + b * fo + fi * fo), after=[prev])
        prev = wg
        if n > 1:
            grads[f"top{i}"] = p.collective(CT.ALL_REDUCE, fi * fo * db, "world", after=[wg], name=f"top{i}.grad_ar")
    prev = p.compute("interaction.bwd", 4 * b * t1 * t1 * d, 2 * db * (b * t1 * d + b * t1 * t1), after=[prev])
    a2a_bwd = p.collective(CT.ALL_TO_ALL, a2a, "world", after=[prev], name="emb.a2a_bwd")
    for i, (fi, fo) in reversed(list(enumerate(cfg.bottom_layers()))):
        prev = p.compute(f"bot{i}.dgrad", 2 * b * fi * fo, db * (b * fo + fi * fo + b * fi), after=[prev])
        wg = p.compute(f"bot{i}.wgrad", 2 * b * fi * fo, db * (b * fi + b * fo + fi * fo), after=[prev])
        prev = wg
        if n > 1:
            grads[f"bot{i}"] = p.collective(CT.ALL_REDUCE, fi * fo * db, "world", after=[wg], name=f"bot{i}.grad_ar")
    prev = p.compute("emb.update", lookups * d, 2 * lookups * d * db, after=[prev, a2a_bwd])
    for name, layers in (("bot", cfg.bottom_layers()), ("top", cfg.top_layers())):
        for i, (fi, fo) in enumerate(layers):
            prm = fi * fo
            prev = p.compute(f"{name}{i}.sgd", 2 * prm, 3 * prm * db, after=[prev, grads.get(f"{name}{i}")])
    return p


def build_dlrm(cfg: DLRMConfig, device: Optional[Device] = None) -> Workload:
    cfg.check()
    device = device or Device()
    w = Workload(cfg.ranks, device=device, name="dlrm")
    programs: dict[int, Program] = {}
    for r in range(cfg.ranks):
        local = len(range(r, cfg.tables, cfg.ranks))
        if local not in programs:
            programs[local] = _program(cfg, local, device)
        w.adopt(r, programs[local].stamp(r, {"world": w.world}, {}), programs[local].flops)
    return w

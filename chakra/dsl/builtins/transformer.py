"""GPT-style training step with data, tensor and pipeline parallelism (Megatron-LM layout).

Model: `layers` decoder blocks of hidden size h (QKV h x 3h, projection h x h, MLP h x 4h x h,
so 12 h^2 weights per block), a vocabulary of V tied between the input embedding and the output
logits. Parameters P = 12 L h^2 + V h; a step over T = batch x seq tokens costs
6 P T + 12 L batch seq^2 h FLOPs in matrix products (the second term is attention's QK^T and
softmax x V, which 6PT leaves out), plus the optimizer's elementwise update
(`OPTIMIZER_FLOPS_PER_PARAM` per parameter a rank updates).

Parallelism:
- tensor (tp): Megatron column/row split; one all-reduce after attention and one after the MLP in
  forward, and their conjugates in backward. With `sequence_parallel`, each all-reduce becomes a
  reduce-scatter and the block input an all-gather.
- pipeline (pp): layers split evenly over stages, microbatches scheduled 1F1B (warm-up forwards,
  steady one-forward-one-backward, cool-down backwards); activations and their gradients go by
  send/recv tagged 2*mb (forward) and 2*mb+1 (backward). The tied embedding's gradient is
  all-reduced between the first and last stage ("emb" groups).
- data (dp): per-layer gradient all-reduce overlapped with the last microbatch's backward; ZeRO-1
  reduce-scatters gradients after backward and all-gathers updated parameters after the optimizer;
  ZeRO-2 does the reduce-scatter per layer during backward; ZeRO-3 also all-gathers each layer's
  parameters before its forward and backward of every microbatch (and never keeps them).

Rank = pp_index * (dp * tp) + dp_index * tp + tp_index (tensor-parallel ranks adjacent).
Every rank of a pipeline stage runs the same program, so each stage is built once and stamped.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Optional

from chakra.dsl.device import Device
from chakra.dsl.template import Program
from chakra.dsl.workload import DSLError, Workload
from chakra.schema import CollectiveType as CT

OPTIMIZER_FLOPS_PER_PARAM = 10  # Adam: moments, bias correction, update (elementwise)


@dataclass
class TransformerConfig:
    layers: int = 24
    hidden: int = 2048
    heads: int = 16
    seq: int = 2048
    batch: int = 32  # global batch in sequences
    microbatches: int = 4
    dp: int = 1
    tp: int = 1
    pp: int = 1
    vocab: int = 50257
    zero: int = 0
    sequence_parallel: bool = False
    dtype_bytes: int = 2

    @property
    def world(self) -> int:
        return self.dp * self.tp * self.pp

    @property
    def micro_batch(self) -> int:
        return self.batch // (self.dp * self.microbatches)

    def check(self) -> None:
        c = self
        for field in ("layers", "hidden", "heads", "seq", "batch", "microbatches", "dp", "tp", "pp", "vocab"):
            if getattr(c, field) < 1:
                raise DSLError(f"transformer: --{field} must be >= 1, got {getattr(c, field)}")
        if c.hidden % c.heads:
            raise DSLError(f"transformer: hidden {c.hidden} is not divisible by heads {c.heads}")
        if c.heads % c.tp:
            raise DSLError(f"transformer: heads {c.heads} are not divisible by tp {c.tp}")
        if c.layers % c.pp:
            raise DSLError(f"transformer: layers {c.layers} are not divisible by pp {c.pp}")
        if c.batch % (c.dp * c.microbatches):
            raise DSLError(
                f"transformer: batch {c.batch} is not divisible by dp x microbatches = {c.dp * c.microbatches}"
            )
        if c.zero not in (0, 1, 2, 3):
            raise DSLError(f"transformer: --zero must be 0, 1, 2 or 3, got {c.zero}")
        if c.sequence_parallel and c.seq % c.tp:
            raise DSLError(f"transformer: sequence parallelism needs seq {c.seq} divisible by tp {c.tp}")

    def params(self) -> int:
        """Weights of the model (tied embedding counted once)."""
        return 12 * self.layers * self.hidden**2 + self.vocab * self.hidden

    def model_flops(self) -> float:
        """Closed form of the matrix-product FLOPs of one step: 6 P T plus attention's s^2 term."""
        tokens = self.batch * self.seq
        return 6 * self.params() * tokens + 12 * self.layers * self.batch * self.seq**2 * self.hidden


def _gemm_bytes(m: float, k: float, n: float, db: int) -> float:
    return db * (m * k + k * n + m * n)


class _StageBuilder:
    """Builds the program of one pipeline stage (roles: tp, dp, emb groups; prev/next peers)."""

    def __init__(self, cfg: TransformerConfig, stage: int, device: Device) -> None:
        self.c = cfg
        self.s = stage
        self.p = Program(device)
        self.first = stage == 0
        self.last = stage == cfg.pp - 1
        self.layer_ids = range(stage * (cfg.layers // cfg.pp), (stage + 1) * (cfg.layers // cfg.pp))
        self.prev: Optional[int] = None
        self.grad_comms: list[int] = []

    # -- helpers
    def comp(self, name: str, flops: float, nbytes: float) -> None:
        self.prev = self.p.compute(name, flops, nbytes, after=[self.prev])

    def tp_coll(self, kind: CT, size: float, name: str) -> None:
        if self.c.tp > 1:
            self.prev = self.p.collective(kind, size, "tp", after=[self.prev], name=name)

    def zero3_gather(self, layer: int, tag: str) -> None:
        c = self.c
        if c.zero == 3 and c.dp > 1:
            shard = 12 * c.hidden**2 / c.tp * c.dtype_bytes / c.dp
            self.prev = self.p.collective(
                CT.ALL_GATHER, shard, "dp", after=[self.prev], name=f"L{layer}.{tag}.zero3_ag"
            )

    # -- passes
    def forward(self, mb: int) -> None:
        c, p = self.c, self.p
        h, t, db = c.hidden, c.tp, c.dtype_bytes
        n = c.micro_batch * c.seq  # tokens in a microbatch
        act = n * h * db
        sp = c.sequence_parallel and t > 1
        if not self.first:
            self.prev = p.recv("prev", act, 2 * mb, after=[self.prev], name=f"mb{mb}.fwd.recv")
        else:
            self.comp(f"mb{mb}.embedding", 0, act + n * 8)
        for layer in self.layer_ids:
            pre = f"mb{mb}.L{layer}"
            self.zero3_gather(layer, f"mb{mb}.fwd")
            if sp:
                self.tp_coll(CT.ALL_GATHER, act / t, f"{pre}.attn.sp_ag")
            self.comp(f"{pre}.attn.qkv", 2 * n * h * 3 * h / t, _gemm_bytes(n, h, 3 * h / t, db))
            core_bytes = db * (4 * n * h / t + c.micro_batch * (c.heads / t) * c.seq**2)
            self.comp(f"{pre}.attn.core", 4 * n * c.seq * h / t, core_bytes)
            self.comp(f"{pre}.attn.proj", 2 * n * h * h / t, _gemm_bytes(n, h / t, h, db))
            self.tp_coll(CT.REDUCE_SCATTER if sp else CT.ALL_REDUCE, act, f"{pre}.attn.tp_{'rs' if sp else 'ar'}")
            if sp:
                self.tp_coll(CT.ALL_GATHER, act / t, f"{pre}.mlp.sp_ag")
            self.comp(f"{pre}.mlp.fc1", 8 * n * h * h / t, _gemm_bytes(n, h, 4 * h / t, db))
            self.comp(f"{pre}.mlp.fc2", 8 * n * h * h / t, _gemm_bytes(n, 4 * h / t, h, db))
            self.tp_coll(CT.REDUCE_SCATTER if sp else CT.ALL_REDUCE, act, f"{pre}.mlp.tp_{'rs' if sp else 'ar'}")
        if self.last:
            v = c.vocab / t
            self.comp(f"mb{mb}.logits", 2 * n * h * v, _gemm_bytes(n, h, v, db))
            self.comp(f"mb{mb}.loss", 0, n * v * db)
        else:
            p.send("next", act, 2 * mb, after=[self.prev], name=f"mb{mb}.fwd.send")

    def backward(self, mb: int, final: bool) -> None:
        """Backward of microbatch `mb`; `final` marks the last one (gradients complete there)."""
        c, p = self.c, self.p
        h, t, db = c.hidden, c.tp, c.dtype_bytes
        n = c.micro_batch * c.seq
        act = n * h * db
        sp = c.sequence_parallel and t > 1
        layer_grad = 12 * h * h / t * db
        if self.last:
            v = c.vocab / t
            self.comp(f"mb{mb}.logits.dgrad", 2 * n * h * v, _gemm_bytes(n, v, h, db))
            self.comp(f"mb{mb}.logits.wgrad", 2 * n * h * v, _gemm_bytes(h, n, v, db))
        else:
            self.prev = p.recv("next", act, 2 * mb + 1, after=[self.prev], name=f"mb{mb}.bwd.recv")
        for layer in reversed(self.layer_ids):
            pre = f"mb{mb}.L{layer}"
            self.zero3_gather(layer, f"mb{mb}.bwd")
            if sp:
                self.tp_coll(CT.ALL_GATHER, act / t, f"{pre}.mlp.sp_ag_bwd")
            self.comp(f"{pre}.mlp.fc2.dgrad", 8 * n * h * h / t, _gemm_bytes(n, h, 4 * h / t, db))
            self.comp(f"{pre}.mlp.fc2.wgrad", 8 * n * h * h / t, _gemm_bytes(4 * h / t, n, h, db))
            self.comp(f"{pre}.mlp.fc1.dgrad", 8 * n * h * h / t, _gemm_bytes(n, 4 * h / t, h, db))
            self.comp(f"{pre}.mlp.fc1.wgrad", 8 * n * h * h / t, _gemm_bytes(h, n, 4 * h / t, db))
            self.tp_coll(CT.REDUCE_SCATTER if sp else CT.ALL_REDUCE, act, f"{pre}.mlp.tp_bwd")
            if sp:
                self.tp_coll(CT.ALL_GATHER, act / t, f"{pre}.attn.sp_ag_bwd")
            self.comp(f"{pre}.attn.proj.dgrad", 2 * n * h * h / t, _gemm_bytes(n, h, h / t, db))
            self.comp(f"{pre}.attn.proj.wgrad", 2 * n * h * h / t, _gemm_bytes(h / t, n, h, db))
            core_bytes = db * (8 * n * h / t + c.micro_batch * (c.heads / t) * c.seq**2)
            self.comp(f"{pre}.attn.core.bwd", 8 * n * c.seq * h / t, core_bytes)
            self.comp(f"{pre}.attn.qkv.dgrad", 6 * n * h * h / t, _gemm_bytes(n, 3 * h / t, h, db))
            self.comp(f"{pre}.attn.qkv.wgrad", 6 * n * h * h / t, _gemm_bytes(h, n, 3 * h / t, db))
            self.tp_coll(CT.REDUCE_SCATTER if sp else CT.ALL_REDUCE, act, f"{pre}.attn.tp_bwd")
            if final and c.dp > 1 and c.zero != 1:
                kind = CT.ALL_REDUCE if c.zero == 0 else CT.REDUCE_SCATTER
                self.grad_comms.append(
                    p.collective(kind, layer_grad, "dp", after=[self.prev], name=f"L{layer}.grad_sync")
                )
        if self.first:
            self.comp(f"mb{mb}.embedding.bwd", 0, 2 * act)
        else:
            p.send("prev", act, 2 * mb + 1, after=[self.prev], name=f"mb{mb}.bwd.send")

    def _embedding_grad_sync(self) -> None:
        """Megatron's finalize step: after all backward passes, first and last stage sum the tied
        embedding's gradient (issuing it earlier would let the last stage wait on a first stage
        that still waits for the last stage's gradients)."""
        c = self.c
        if c.pp > 1 and (self.first or self.last):
            size = c.vocab / c.tp * c.hidden * c.dtype_bytes
            self.grad_comms.append(
                self.p.collective(CT.ALL_REDUCE, size, "emb", after=[self.prev], name="embedding.tied_grad_ar")
            )

    def local_params(self) -> float:
        c = self.c
        n = len(self.layer_ids) * 12 * c.hidden**2 / c.tp
        if self.first or self.last:
            n += c.vocab * c.hidden / c.tp
        return n

    def optimizer(self) -> None:
        c, p = self.c, self.p
        params = self.local_params()
        db = c.dtype_bytes
        self._embedding_grad_sync()
        if c.dp > 1 and c.zero == 1:
            for layer in reversed(self.layer_ids):
                self.grad_comms.append(
                    p.collective(
                        CT.REDUCE_SCATTER,
                        12 * c.hidden**2 / c.tp * db,
                        "dp",
                        after=[self.prev],
                        name=f"L{layer}.grad_rs",
                    )
                )
        shard = params / c.dp if (c.zero and c.dp > 1) else params
        # Adam reads and writes fp32 master weights, two moments and the gradient: ~16 bytes/param.
        self.prev = p.compute(
            "optimizer.step", OPTIMIZER_FLOPS_PER_PARAM * shard, 16 * shard, after=[self.prev, *self.grad_comms]
        )
        if c.dp > 1 and c.zero in (1, 2):
            opt = self.prev
            gathers = [
                p.collective(
                    CT.ALL_GATHER, 12 * c.hidden**2 / c.tp * db / c.dp, "dp", after=[opt], name=f"L{layer}.param_ag"
                )
                for layer in self.layer_ids
            ]
            self.prev = gathers[-1] if gathers else opt

    def build(self) -> Program:
        c = self.c
        warmup = min(c.pp - self.s - 1, c.microbatches)
        steady = c.microbatches - warmup
        for mb in range(warmup):
            self.forward(mb)
        for i in range(steady):
            self.forward(warmup + i)
            self.backward(i, final=i == c.microbatches - 1)
        for mb in range(steady, c.microbatches):
            self.backward(mb, final=mb == c.microbatches - 1)
        self.optimizer()
        return self.p


def rank_of(cfg: TransformerConfig, pp_i: int, dp_i: int, tp_i: int) -> int:
    return pp_i * cfg.dp * cfg.tp + dp_i * cfg.tp + tp_i


def build_transformer(cfg: TransformerConfig, device: Optional[Device] = None) -> Workload:
    """The whole job as a Workload (one program per pipeline stage, stamped onto its ranks)."""
    cfg.check()
    device = device or Device()
    w = Workload(cfg.world, device=device, name="transformer")
    tp_g, dp_g, emb_g = {}, {}, {}
    for pp_i in range(cfg.pp):
        for dp_i in range(cfg.dp):
            if cfg.tp > 1:
                ranks = [rank_of(cfg, pp_i, dp_i, t) for t in range(cfg.tp)]
                tp_g[pp_i, dp_i] = w.group(ranks, f"tp:pp{pp_i}.dp{dp_i}")
    for pp_i in range(cfg.pp):
        for tp_i in range(cfg.tp):
            if cfg.dp > 1:
                ranks = [rank_of(cfg, pp_i, d, tp_i) for d in range(cfg.dp)]
                dp_g[pp_i, tp_i] = w.group(ranks, f"dp:pp{pp_i}.tp{tp_i}")
    if cfg.pp > 1:
        for dp_i in range(cfg.dp):
            for tp_i in range(cfg.tp):
                ranks = [rank_of(cfg, s, dp_i, tp_i) for s in range(cfg.pp)]
                w.group(ranks, f"pp:dp{dp_i}.tp{tp_i}")
                emb_g[dp_i, tp_i] = w.group([ranks[0], ranks[-1]], f"emb:dp{dp_i}.tp{tp_i}")
    for stage in range(cfg.pp):
        program = _StageBuilder(cfg, stage, device).build()
        for dp_i in range(cfg.dp):
            for tp_i in range(cfg.tp):
                rank = rank_of(cfg, stage, dp_i, tp_i)
                groups = {"tp": tp_g.get((stage, dp_i)), "dp": dp_g.get((stage, tp_i)), "emb": emb_g.get((dp_i, tp_i))}
                peers = {}
                if stage > 0:
                    peers["prev"] = rank_of(cfg, stage - 1, dp_i, tp_i)
                if stage < cfg.pp - 1:
                    peers["next"] = rank_of(cfg, stage + 1, dp_i, tp_i)
                bound = {k: v for k, v in groups.items() if v is not None}
                w.adopt(rank, program.stamp(rank, bound, peers), program.flops)
    return w


def describe(cfg: TransformerConfig) -> dict[str, Any]:
    """Closed-form figures users check the generated trace against."""
    tokens = cfg.batch * cfg.seq
    return {
        **asdict(cfg),
        "ranks": cfg.world,
        "params": cfg.params(),
        "tokens": tokens,
        "model_flops": cfg.model_flops(),
        "six_p_t": 6 * cfg.params() * tokens,
    }

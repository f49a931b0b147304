"""The trace zoo: small real multi-rank training steps (torch on CPU, gloo), one per parallelism.

Each workload runs on every rank of a gloo job and traces ONE step (after one untraced warm-up
step, and one profiler warm-up step) with the Execution Trace observer and Kineto, exactly as
`record_pytorch.py run` does. `record_pytorch.py zoo` drives it; the files are gzipped
(`et.<rank>.json.gz`, `kineto.<rank>.json.gz`) with a `manifest.json` saying what ran.

Workloads (sizes are small on purpose: the traces go into the repository):

  ddp     DistributedDataParallel over a 6-layer MLP with a parameter that forward never uses
          (find_unused_parameters=True), buckets of 64 KiB (several all-reduces), and gradient
          accumulation: the first micro-batch's backward runs under `no_sync()`.
  fsdp    ZeRO-3 with `fully_shard` (FSDP2): parameters all-gathered per layer in forward and
          backward, gradients reduce-scattered.
  tp      Megatron-style tensor parallelism by hand: a column-parallel then a row-parallel
          Linear per block; all-reduce of the activations in forward (row) and of the input
          gradients in backward (column).
  pp      pipeline parallelism by hand: one stage per rank, 4 micro-batches, 1F1B schedule with
          send/recv of activations and gradients.
  moe     expert parallelism: tokens routed with `all_to_all_single` and uneven splits (dispatch
          and combine, forward and backward; capacity-balanced: every expert gets as many tokens
          as every rank sends), data-parallel all-reduce of the dense gradients.
  moeskew expert parallelism with skewed routing: every token picks its expert from a Zipf
          distribution (exponent 1.2, seeded), so experts receive unequal totals (the hot
          expert's rank receives most tokens); one dispatch and one combine in forward, the
          reverse pair in backward (`all_to_all_single` with uneven splits).
  groups  2-D parallelism: tensor-parallel groups of 2 and data-parallel groups across them, both
          in use in the same step (TP all-reduces in forward/backward, DP all-reduce of grads),
          plus the loss all-reduced on the world group.
  misc    broadcast of the initial weights, barrier, coalesced all-reduce and all-gather
          (`_coalescing_manager`), all_gather_into_tensor, reduce_scatter_tensor, all_to_all.

torch's own parallel libraries (groups made by DeviceMesh; on 4 ranks a (2, 2) mesh, on 8 (2, 4)):

  tpdp    DTensor TP (ColwiseParallel, RowwiseParallel, SequenceParallel) x data parallel.
  hsdp    FSDP2 `fully_shard` on a (replicate, shard) mesh.
  fsdptp  torchtitan's 2-D: TP inside, `fully_shard` on the dp dimension.
  fsdpac  FSDP2 with activation checkpointing (`checkpoint_wrapper`).
  pipe*   torch.distributed.pipelining: pipegpipe, pipe1f1b (8 microbatches), pipeinterleaved,
          pipezb (InterleavedZeroBubble), pipezbv (ZBVZeroBubble).
  collmix the collective mix: gather, scatter, reduce, list all_to_all, batch_isend_irecv, async
          all-reduces waited late, broadcast_object_list, ...
  mesh3d  FSDP2 x TP x pipelining on a (2, 2, 2) mesh (8 ranks only).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import time
import traceback
from typing import Any, Callable

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dfn
import torch.nn as nn
from torch.profiler import ExecutionTraceObserver, ProfilerActivity, profile, schedule

WIDTH = 64
BATCH = 16
WORKLOADS = ("ddp", "fsdp", "tp", "pp", "moe", "moeskew", "groups", "misc", "tpdp", "hsdp", "fsdptp", "fsdpac",
             "pipegpipe", "pipe1f1b", "pipeinterleaved", "pipezb", "pipezbv", "mesh3d", "collmix",
             "subgroups")  # fmt: skip


def default_workloads(world: int) -> tuple[str, ...]:
    """What `zoo` records when no workload is named: every one that runs on `world` ranks."""
    return tuple(w for w in WORKLOADS if w != "mesh3d" or world == 8)


def _mlp(depth: int, width: int = WIDTH) -> nn.Sequential:
    layers: list[nn.Module] = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers)


def _data(rank: int, n: int = BATCH) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(100 + rank)
    return torch.randn(n, WIDTH, generator=g), torch.randn(n, WIDTH, generator=g)


# ----------------------------------------------------------------------------------- workloads
# Each returns a step function (called once untraced, then under the profiler) and a description.


def ddp(rank: int, world: int) -> tuple[Callable[[], None], dict]:
    from torch.nn.parallel import DistributedDataParallel as DDP

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = _mlp(6)
            self.head = nn.Linear(WIDTH, WIDTH)
            self.unused = nn.Linear(WIDTH, WIDTH)  # never in forward: DDP must find it every step

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.body(x))

    torch.manual_seed(0)
    model = DDP(Net(), bucket_cap_mb=0.0625, find_unused_parameters=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = _data(rank, 2 * BATCH)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with model.no_sync():  # micro-batch 1: gradients accumulate locally
            nn.functional.mse_loss(model(x[:BATCH]), y[:BATCH]).backward()
        nn.functional.mse_loss(model(x[BATCH:]), y[BATCH:]).backward()  # micro-batch 2: all-reduce
        opt.step()

    return step, {"bucket_cap_mb": 0.0625, "find_unused_parameters": True, "accumulation": 2}


def fsdp(rank: int, world: int) -> tuple[Callable[[], None], dict]:
    from torch.distributed.device_mesh import init_device_mesh

    torch.manual_seed(0)
    step = _fully_sharded_mlp_step(_mlp(4), init_device_mesh("cpu", (world,)), rank)
    return step, {"api": "torch.distributed.fsdp.fully_shard", "layers_sharded": 4}


def _fully_sharded_mlp_step(model: nn.Sequential, mesh: Any, rank: int) -> Callable[[], None]:
    """FSDP2 on every Linear of `model` and on the whole, over `mesh`; one SGD step of MSE loss."""
    from torch.distributed.fsdp import fully_shard

    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return _sgd_step(model, *_data(rank))


def _sgd_step(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> Callable[[], None]:
    """One SGD step of MSE loss on (x, y): the training step of the workloads that need no more."""
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()

    return step


class _ColumnRow(nn.Module):
    """A column-parallel Linear (output features split) then a row-parallel one (input split)."""

    def __init__(self, tp: int, group: Any) -> None:
        super().__init__()
        self.group = group
        self.up = nn.Linear(WIDTH, 2 * WIDTH // tp)
        self.down = nn.Linear(2 * WIDTH // tp, WIDTH, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = _CopyToTP.apply(x, self.group)  # backward: all-reduce of the input gradient
        h = torch.relu(self.up(x))
        return dfn.all_reduce(self.down(h), group=self.group)  # forward: all-reduce of partial sums


class _CopyToTP(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: Any) -> torch.Tensor:
        ctx.group = group
        return x

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        grad = grad.contiguous()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


def tp(rank: int, world: int) -> tuple[Callable[[], None], dict]:
    torch.manual_seed(rank)  # each rank holds its own shard
    model = nn.Sequential(*[_ColumnRow(world, None) for _ in range(3)])
    # tensor parallelism: every rank sees the same batch
    return _sgd_step(model, *_data(0)), {"tp": world, "blocks": 3}


def pp(rank: int, world: int) -> tuple[Callable[[], None], dict]:
    micro = 4
    torch.manual_seed(rank)
    stage = _mlp(2)
    opt = torch.optim.SGD(stage.parameters(), lr=0.01)
    first, last = rank == 0, rank == world - 1
    x, y = _data(0, BATCH * micro)
    mb = BATCH
    # Sends are asynchronous (a blocking gloo send waits for its receive, and in 1F1B neighbours
    # send to each other at the same time); they complete before the optimizer step.
    sends: list = []

    def forward(i: int, saved: dict) -> None:
        if first:
            inp = x[i * mb : (i + 1) * mb]
        else:
            inp = torch.empty(mb, WIDTH)
            dist.recv(inp, src=rank - 1)
            inp.requires_grad_(True)
        out = stage(inp)
        if last:
            out = nn.functional.mse_loss(out, y[i * mb : (i + 1) * mb])
        else:
            sends.append((dist.isend(out.detach(), dst=rank + 1), out))
        saved[i] = (inp, out)

    def backward(i: int, saved: dict) -> None:
        inp, out = saved.pop(i)
        if last:
            out.backward()
        else:
            grad = torch.empty(mb, WIDTH)
            dist.recv(grad, src=rank + 1)
            out.backward(grad)
        if not first:
            sends.append((dist.isend(inp.grad, dst=rank - 1), inp))

    def step() -> None:
        # 1F1B: warm-up forwards (deeper stages fewer), steady one-forward-one-backward, cool-down.
        opt.zero_grad(set_to_none=True)
        saved: dict = {}
        warm = min(world - rank - 1, micro)
        f = b = 0
        for _ in range(warm):
            forward(f, saved)
            f += 1
        while f < micro:
            forward(f, saved)
            f += 1
            backward(b, saved)
            b += 1
        while b < micro:
            backward(b, saved)
            b += 1
        for work, _tensor in sends:
            work.wait()
        sends.clear()
        opt.step()

    return step, {"stages": world, "microbatches": micro, "schedule": "1F1B"}


def _moe_splits(world: int, tokens: int) -> list[list[int]]:
    """splits[i][j]: tokens rank i sends to expert (rank) j: uneven, the same table on every rank.

    Capacity-balanced routing: row j is row 0 shifted, so every rank sends and every expert
    receives `tokens` in all (each all-to-all moves the same bytes per rank, as the simulators
    need), while the pairs differ."""
    g = torch.Generator().manual_seed(7)
    cut = sorted(torch.randint(0, tokens + 1, (world - 1,), generator=g).tolist())
    base = [b - a for a, b in zip([0, *cut], [*cut, tokens])]
    return [[base[(j - i) % world] for j in range(world)] for i in range(world)]


def moe(rank: int, world: int) -> tuple[Callable[[], None], dict]:
    tokens = 2 * BATCH
    splits = _moe_splits(world, tokens)
    send = splits[rank]
    recv = [splits[j][rank] for j in range(world)]
    torch.manual_seed(0)
    dense = nn.Linear(WIDTH, WIDTH)  # replicated: gradients all-reduced
    torch.manual_seed(10 + rank)
    expert = _mlp(2)  # this rank's expert
    opt = torch.optim.SGD([*dense.parameters(), *expert.parameters()], lr=0.01)
    x, y = _data(rank, tokens)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        h = dense(x)
        routed = dfn.all_to_all_single(torch.empty(sum(recv), WIDTH), h, recv, send)
        back = dfn.all_to_all_single(torch.empty(tokens, WIDTH), expert(routed), send, recv)
        nn.functional.mse_loss(back, y).backward()
        for p in dense.parameters():
            dist.all_reduce(p.grad)
        opt.step()

    return step, {"splits": splits, "experts": world}


def _zipf_routing(world: int, tokens: int, exponent: float, seed: int) -> list[list[int]]:
    """splits[i][j]: tokens rank i routes to expert j, each token's expert drawn from Zipf(exponent).

    The popularity order of the experts is one seeded permutation shared by every rank (a hot
    expert is hot for everybody, as in a trained router), the draws differ per rank."""
    g = torch.Generator().manual_seed(seed)
    order = torch.randperm(world, generator=g)
    weights = torch.tensor([1.0 / (k + 1) ** exponent for k in range(world)])
    prob = torch.empty(world)
    prob[order] = weights / weights.sum()
    rows = []
    for _ in range(world):
        picks = torch.multinomial(prob, tokens, replacement=True, generator=g)
        rows.append(torch.bincount(picks, minlength=world).tolist())
    return rows


def moeskew(rank: int, world: int) -> tuple[Callable[[], None], dict]:
    tokens = 2 * BATCH
    splits = _zipf_routing(world, tokens, exponent=1.2, seed=22)
    send = splits[rank]
    recv = [splits[j][rank] for j in range(world)]
    torch.manual_seed(0)
    dense = nn.Linear(WIDTH, WIDTH)
    torch.manual_seed(10 + rank)
    expert = _mlp(2)
    opt = torch.optim.SGD([*dense.parameters(), *expert.parameters()], lr=0.01)
    x, y = _data(rank, tokens)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        h = dense(x)
        routed = dfn.all_to_all_single(torch.empty(sum(recv), WIDTH), h, recv, send)
        back = dfn.all_to_all_single(torch.empty(tokens, WIDTH), expert(routed), send, recv)
        nn.functional.mse_loss(back, y).backward()
        opt.step()

    return step, {"splits": splits, "experts": world, "routing": "zipf", "exponent": 1.2, "seed": 22}


def groups(rank: int, world: int) -> tuple[Callable[[], None], dict]:
    tp_size = 2
    dp_size = world // tp_size
    tp_groups = [list(range(d * tp_size, (d + 1) * tp_size)) for d in range(dp_size)]
    dp_groups = [list(range(t, world, tp_size)) for t in range(tp_size)]
    # Every rank creates every group, in the same order (new_group is collective).
    tp_pg = {tuple(r): dist.new_group(r) for r in tp_groups}
    dp_pg = {tuple(r): dist.new_group(r) for r in dp_groups}
    my_tp = next(g for r, g in tp_pg.items() if rank in r)
    my_dp = next(g for r, g in dp_pg.items() if rank in r)
    torch.manual_seed(rank % tp_size)  # the same TP shard on every DP replica
    model = nn.Sequential(*[_ColumnRow(tp_size, my_tp) for _ in range(2)])
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = _data(rank // tp_size)  # one batch per DP replica

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad, group=my_dp)
        opt.step()
        dist.all_reduce(loss.detach())  # the mean loss for logging, on the world group

    return step, {"tp_groups": tp_groups, "dp_groups": dp_groups}


def misc(rank: int, world: int) -> tuple[Callable[[], None], dict]:
    torch.manual_seed(rank)
    model = _mlp(2)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = _data(rank)

    def step() -> None:
        for p in model.parameters():  # the weights of rank 0 everywhere
            dist.broadcast(p.data, src=0)
        dist.barrier()
        opt.zero_grad(set_to_none=True)
        nn.functional.mse_loss(model(x), y).backward()
        grads = [p.grad for p in model.parameters()]
        with dist._coalescing_manager(async_ops=True) as cm:
            for g in grads:
                dist.all_reduce(g)
        cm.wait()
        full = torch.empty(world * WIDTH)
        dist.all_gather_into_tensor(full, grads[1].contiguous())
        part = torch.empty(WIDTH)
        dist.reduce_scatter_tensor(part, full)
        a2a = torch.empty(world * 8)
        dist.all_to_all_single(a2a, torch.arange(world * 8, dtype=torch.float32))
        opt.step()
        dist.barrier()

    return step, {"ops": ["broadcast", "barrier", "coalesced all_reduce", "all_gather_into_tensor",
                          "reduce_scatter_tensor", "all_to_all_single"]}  # fmt: skip


def collmix(rank: int, world: int) -> tuple[Callable[[], None], dict]:
    """The collective mix of the issue's run: all_gather_into_tensor, reduce_scatter_tensor, gather,
    scatter, reduce, list all_to_all, batch_isend_irecv (ring), two async all-reduces waited late,
    broadcast_object_list."""
    torch.manual_seed(rank)
    model = _mlp(2)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = _data(rank)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        nn.functional.mse_loss(model(x), y).backward()
        grads = [p.grad for p in model.parameters()]
        late = [dist.all_reduce(grads[0], async_op=True), dist.all_reduce(grads[1], async_op=True)]
        full = torch.empty(world * WIDTH)
        dist.all_gather_into_tensor(full, grads[3].contiguous())
        part = torch.empty(WIDTH)
        dist.reduce_scatter_tensor(part, full)
        dist.gather(part, [torch.empty(WIDTH) for _ in range(world)] if rank == 0 else None, dst=0)
        dist.scatter(part, [torch.full((WIDTH,), float(r)) for r in range(world)] if rank == 0 else None, src=0)
        dist.reduce(part, dst=world - 1)
        outs = [torch.empty(8) for _ in range(world)]
        dist.all_to_all(outs, [torch.full((8,), float(rank * world + r)) for r in range(world)])
        ring = torch.empty(WIDTH)
        ops = [dist.P2POp(dist.isend, part, (rank + 1) % world), dist.P2POp(dist.irecv, ring, (rank - 1) % world)]
        for work in dist.batch_isend_irecv(ops):
            work.wait()
        meta = [{"step": 1, "lr": 0.01}] if rank == 0 else [None]
        dist.broadcast_object_list(meta, src=0)
        for work in late:  # waited only now
            work.wait()
        opt.step()

    return step, {"ops": ["all_gather_into_tensor", "reduce_scatter_tensor", "gather", "scatter", "reduce",
                          "all_to_all (list)", "batch_isend_irecv", "async all_reduce x2 waited late",
                          "broadcast_object_list"]}  # fmt: skip


def subgroups(rank: int, world: int) -> tuple[Callable[[], None], dict]:
    """Groups made every other way: `new_subgroups` (consecutive pairs), `new_subgroups_by_enumeration`
    (strided pairs), a 2-D DeviceMesh flattened (`mesh["a", "b"]._flatten()`, a group of every rank
    that is not the default one) and sliced; each used by an all-reduce in the step. (`split_group`
    is NCCL-only: it refuses gloo.)"""
    pairs, _ = dist.new_subgroups(group_size=2)
    strided, _ = dist.new_subgroups_by_enumeration([list(range(s, world, 2)) for s in range(2)])
    mesh = _mesh_2d(world, ("a", "b"))
    flat = mesh["a", "b"]._flatten("ab")
    torch.manual_seed(rank)
    model = _mlp(2)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = _data(rank)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        nn.functional.mse_loss(model(x), y).backward()
        w1, b1, w2, b2 = (p.grad for p in model.parameters())
        dist.all_reduce(w1, group=pairs)
        dist.all_reduce(b1, group=strided)
        dist.all_reduce(w2, group=flat.get_group())
        dist.all_reduce(b2, group=mesh["b"].get_group())
        opt.step()

    return step, {"groups": ["new_subgroups(2)", "new_subgroups_by_enumeration(strided)", "mesh flattened",
                             "mesh['b']"]}  # fmt: skip


def _mesh_2d(world: int, names: tuple[str, str]) -> Any:
    """A (world / inner) x inner DeviceMesh: inner = 2 on 4 ranks, 4 on 8 (as the issue's runs)."""
    from torch.distributed.device_mesh import init_device_mesh

    inner = 2 if world <= 4 else 4
    return init_device_mesh("cpu", (world // inner, inner), mesh_dim_names=names)


class _SPBlock(nn.Module):
    """A transformer-style MLP block: LayerNorm (sequence parallel), up (column), down (row)."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(WIDTH)
        self.up = nn.Linear(WIDTH, 2 * WIDTH)
        self.down = nn.Linear(2 * WIDTH, WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.relu(self.up(self.norm(x))))


def _tp_plan(sequence_parallel: bool) -> dict:
    """Megatron TP of two MLP blocks with DTensor styles; with sequence parallelism the LayerNorm
    runs on the token shard (all-gather before `up`, reduce-scatter after `down`)."""
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, SequenceParallel

    plan: dict = {}
    for i in range(2):
        if sequence_parallel:
            plan[f"{i}.norm"] = SequenceParallel(sequence_dim=0)
            plan[f"{i}.up"] = ColwiseParallel(input_layouts=Shard(0))
            plan[f"{i}.down"] = RowwiseParallel(output_layouts=Shard(0))
        else:
            plan[f"{i}.up"] = ColwiseParallel()
            plan[f"{i}.down"] = RowwiseParallel()
    return plan


def tpdp(rank: int, world: int) -> tuple[Callable[[], None], dict]:
    """DTensor TP (Colwise/Rowwise, then a sequence-parallel block) x data parallel on a 2-D mesh,
    gradients all-reduced by hand on the dp group (the issue's run)."""
    from torch.distributed.tensor.parallel import parallelize_module

    mesh = _mesh_2d(world, ("dp", "tp"))
    torch.manual_seed(0)
    model = parallelize_module(nn.Sequential(_SPBlock(), _SPBlock()), mesh["tp"], _tp_plan(False))
    sp = parallelize_module(nn.Sequential(_SPBlock(), _SPBlock()), mesh["tp"], _tp_plan(True))
    opt = torch.optim.SGD([*model.parameters(), *sp.parameters()], lr=0.01)
    dp_group = mesh["dp"].get_group()
    x, y = _data(mesh["dp"].get_local_rank())
    tp_rank, tp = mesh["tp"].get_local_rank(), mesh["tp"].size()
    rows = BATCH // tp

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        h = model(x)
        out = sp(h[tp_rank * rows : (tp_rank + 1) * rows])  # the token shard of this TP rank
        nn.functional.mse_loss(out, y[tp_rank * rows : (tp_rank + 1) * rows]).backward()
        for p in [*model.parameters(), *sp.parameters()]:
            g = p.grad
            dist.all_reduce(g.to_local() if hasattr(g, "to_local") else g, group=dp_group)
        opt.step()

    return step, {"mesh": list(mesh.shape), "mesh_dim_names": ["dp", "tp"],
                  "tp_styles": ["ColwiseParallel", "RowwiseParallel", "SequenceParallel"]}  # fmt: skip


def hsdp(rank: int, world: int) -> tuple[Callable[[], None], dict]:
    """FSDP2 hybrid sharding: `fully_shard` on a (replicate, shard) mesh: parameters all-gathered
    and gradients reduce-scattered within a shard group, then all-reduced across replicas."""
    mesh = _mesh_2d(world, ("replicate", "shard"))
    torch.manual_seed(0)
    step = _fully_sharded_mlp_step(_mlp(3), mesh, rank)
    return step, {"api": "fully_shard(mesh=2-D)", "mesh": list(mesh.shape), "mesh_dim_names": ["replicate", "shard"]}


def fsdptp(rank: int, world: int) -> tuple[Callable[[], None], dict]:
    """torchtitan's 2-D: DTensor TP (sequence parallel) inside, FSDP2 `fully_shard` on the dp mesh."""
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import parallelize_module

    mesh = _mesh_2d(world, ("dp", "tp"))
    torch.manual_seed(0)
    model = parallelize_module(nn.Sequential(_SPBlock(), _SPBlock()), mesh["tp"], _tp_plan(True))
    for block in model:
        fully_shard(block, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = _data(mesh["dp"].get_local_rank())
    tp_rank, tp = mesh["tp"].get_local_rank(), mesh["tp"].size()
    rows = BATCH // tp

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        part = slice(tp_rank * rows, (tp_rank + 1) * rows)
        nn.functional.mse_loss(model(x[part]), y[part]).backward()
        opt.step()

    return step, {"mesh": list(mesh.shape), "mesh_dim_names": ["dp", "tp"], "fsdp": "fully_shard on dp"}


def fsdpac(rank: int, world: int) -> tuple[Callable[[], None], dict]:
    """FSDP2 with activation checkpointing: each block recomputes its forward in backward, so its
    parameters are all-gathered a second time there."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("dp",))
    torch.manual_seed(0)
    model = nn.Sequential(*[checkpoint_wrapper(_SPBlock()) for _ in range(3)])
    for block in model:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return _sgd_step(model, *_data(rank)), {"api": "fully_shard + checkpoint_wrapper", "blocks": 3}


#: zoo name -> (torch.distributed.pipelining schedule, stages per rank, microbatches)
PIPE_SCHEDULES = {
    "pipegpipe": ("ScheduleGPipe", 1, 4),
    "pipe1f1b": ("Schedule1F1B", 1, 8),
    "pipeinterleaved": ("ScheduleInterleaved1F1B", 2, 4),
    "pipezb": ("ScheduleInterleavedZeroBubble", 2, 4),
    "pipezbv": ("ScheduleZBVZeroBubble", 2, 4),
    "mesh3d": ("Schedule1F1B", 1, 4),
}


def _pipeline_schedule(name: str, rank: int, pp: int, group: Any, stage_module: Callable[[], nn.Module]) -> Any:
    """The schedule object for this rank's stage(s) of a `pp`-stage-per-loop pipeline on `group`."""
    import torch.distributed.pipelining as pipelining

    cls_name, per_rank, micro = PIPE_SCHEDULES[name]
    n_stages = pp * per_rank
    if name == "pipezbv":  # V shape: rank r holds stages r and 2*pp-1-r
        indices = [rank, n_stages - 1 - rank]
    else:  # looped: rank r holds stages r, r+pp, ...
        indices = [rank + k * pp for k in range(per_rank)]
    stages = []
    for idx in indices:
        torch.manual_seed(idx)
        stages.append(pipelining.PipelineStage(stage_module(), idx, n_stages, torch.device("cpu"), group=group))
    cls = getattr(pipelining, cls_name)
    loss = nn.functional.mse_loss
    if per_rank == 1:
        return cls(stages[0], n_microbatches=micro, loss_fn=loss), stages, indices, n_stages
    return cls(stages, n_microbatches=micro, loss_fn=loss), stages, indices, n_stages


def _pipe(name: str, rank: int, world: int) -> tuple[Callable[[], None], dict]:
    sched, stages, indices, n_stages = _pipeline_schedule(name, rank, world, None, lambda: _mlp(1))
    params = [p for s in stages for p in s.submod.parameters()]
    opt = torch.optim.SGD(params, lr=0.01)
    micro = PIPE_SCHEDULES[name][2]
    x, y = _data(0, BATCH * micro // 2)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        kwargs: dict = {}
        args: tuple = ()
        if 0 in indices:
            args = (x,)
        if n_stages - 1 in indices:
            kwargs["target"] = y
        sched.step(*args, **kwargs)
        opt.step()

    cls_name, per_rank, _ = PIPE_SCHEDULES[name]
    return step, {"schedule": cls_name, "stages": n_stages, "stages_per_rank": per_rank, "microbatches": micro}


def pipegpipe(rank: int, world: int) -> tuple[Callable[[], None], dict]:
    return _pipe("pipegpipe", rank, world)


def pipe1f1b(rank: int, world: int) -> tuple[Callable[[], None], dict]:
    return _pipe("pipe1f1b", rank, world)


def pipeinterleaved(rank: int, world: int) -> tuple[Callable[[], None], dict]:
    return _pipe("pipeinterleaved", rank, world)


def pipezb(rank: int, world: int) -> tuple[Callable[[], None], dict]:
    return _pipe("pipezb", rank, world)


def pipezbv(rank: int, world: int) -> tuple[Callable[[], None], dict]:
    return _pipe("pipezbv", rank, world)


def mesh3d(rank: int, world: int) -> tuple[Callable[[], None], dict]:
    """FSDP2 x TP x pipelining on a (pp, dp, tp) = (2, 2, 2) mesh: each pipeline stage is a
    sequence-parallel block, TP on `tp`, `fully_shard` on `dp`, Schedule1F1B on `pp` (4 microbatches)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import parallelize_module

    if world != 8:
        raise ValueError("mesh3d runs on 8 ranks (a 2 x 2 x 2 mesh)")
    mesh = init_device_mesh("cpu", (2, 2, 2), mesh_dim_names=("pp", "dp", "tp"))
    pp_rank = mesh["pp"].get_local_rank()
    tp_rank, tp = mesh["tp"].get_local_rank(), mesh["tp"].size()

    def stage_module() -> nn.Module:
        block = parallelize_module(nn.Sequential(_SPBlock()), mesh["tp"], {k: v for k, v in _tp_plan(True).items()
                                                                         if k.startswith("0.")})  # fmt: skip
        fully_shard(block, mesh=mesh["dp"])
        return block

    sched, stages, indices, n_stages = _pipeline_schedule("mesh3d", pp_rank, 2, mesh["pp"].get_group(), stage_module)
    opt = torch.optim.SGD([p for s in stages for p in s.submod.parameters()], lr=0.01)
    rows = BATCH // tp
    x, y = _data(mesh["dp"].get_local_rank(), BATCH * 4)  # 4 microbatches of BATCH tokens
    part = torch.cat([x[i * BATCH + tp_rank * rows : i * BATCH + (tp_rank + 1) * rows] for i in range(4)])
    target = torch.cat([y[i * BATCH + tp_rank * rows : i * BATCH + (tp_rank + 1) * rows] for i in range(4)])

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        if pp_rank == 0:
            sched.step(part)
        else:
            sched.step(target=target)
        opt.step()

    return step, {"mesh": [2, 2, 2], "mesh_dim_names": ["pp", "dp", "tp"], "schedule": "Schedule1F1B",
                  "microbatches": PIPE_SCHEDULES["mesh3d"][2]}  # fmt: skip


# ----------------------------------------------------------------------------------- recording


def _worker(
    rank: int, world: int, port: int, workload: str, out_dir: str, queue: Any, profile_memory: bool = False
) -> None:
    try:
        torch.set_num_threads(1)
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
        dist.init_process_group("gloo", rank=rank, world_size=world)
        step, info = globals()[workload](rank, world)
        step()  # warm-up, untraced
        dist.barrier()
        et = ExecutionTraceObserver()
        et.register_callback(os.path.join(out_dir, f"et.{rank}.json"))
        kineto_path = os.path.join(out_dir, f"kineto.{rank}.json")
        prof = profile(
            activities=[ProfilerActivity.CPU],
            schedule=schedule(wait=0, warmup=1, active=1, repeat=1),
            on_trace_ready=lambda p: p.export_chrome_trace(kineto_path),
            record_shapes=True,
            # the allocator's own events ([memory]: bytes, total allocated) for `chakra memory` checks
            profile_memory=profile_memory,
            execution_trace_observer=et,
        )
        with prof:
            for _ in range(2):
                step()
                prof.step()
        et.unregister_callback()
        dist.barrier()
        dist.destroy_process_group()
        queue.put((rank, info))
    except Exception:
        queue.put((rank, traceback.format_exc()))
        raise


def _gzip(path: str) -> None:
    with open(path, "rb") as src, gzip.GzipFile(path + ".gz", "wb", mtime=0) as dst:
        shutil.copyfileobj(src, dst)
    os.remove(path)


def record(
    out_root: str, workload: str, world: int, port: int, timeout_s: float = 600.0, profile_memory: bool = False
) -> dict:
    """Run one zoo workload on `world` gloo ranks; writes OUT/<workload><world>/ and returns its manifest."""
    import torch.multiprocessing as mp

    if workload not in WORKLOADS:
        raise ValueError(f"unknown workload {workload!r} (one of {', '.join(WORKLOADS)})")
    name = f"{workload}{world}"
    out_dir = os.path.join(out_root, name)
    os.makedirs(out_dir, exist_ok=True)
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    t0 = time.time()
    args = (world, port, workload, out_dir, queue, profile_memory)
    procs = mp.start_processes(_worker, args=args, nprocs=world, join=False)
    while not procs.join(timeout=5):
        if time.time() - t0 > timeout_s:  # a workload that deadlocks must not hang the recorder
            for p in procs.processes:
                p.kill()
            raise RuntimeError(f"{name}: ranks still running after {timeout_s:.0f} s (killed)")
    infos = {}
    while not queue.empty():
        rank, got = queue.get()
        if isinstance(got, str):
            raise RuntimeError(f"rank {rank} failed:\n{got}")
        infos[rank] = got
    files = []
    for rank in range(world):
        for stem in ("et", "kineto"):
            _gzip(os.path.join(out_dir, f"{stem}.{rank}.json"))
            files.append(f"{stem}.{rank}.json.gz")
    manifest = {
        "workload": name,
        "world_size": world,
        "backend": "gloo",
        "torch_version": torch.__version__,
        "warmup_steps": 1,
        "active_steps": 1,
        "what": infos.get(0, {}),
        "profile_memory": profile_memory,
        "command": f"python tools/record_pytorch.py --out OUT zoo --world {world} {workload}"
        + (" --profile-memory" if profile_memory else ""),
        "files": files,
        "seconds": round(time.time() - t0, 2),
    }
    with open(os.path.join(out_dir, "manifest.json"), "w") as fh:
        json.dump(manifest, fh, indent=2, sort_keys=True)
    return manifest

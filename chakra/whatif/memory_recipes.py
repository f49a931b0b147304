"""What-if recipes that change the memory footprint: activation checkpointing and ZeRO sharding.

Both edit the tensors the operators list (`IOInfo.values`), so `chakra memory` (and the whatif
report) measures the new peak with the same rules as the old one (`chakra.footprint`):

- `activation-checkpointing`: every activation (made outside backward and the optimizer, used
  again in backward) is dropped after its last forward use and recomputed right before its first
  backward use: the backward uses get a new allocation, made by that first backward operator,
  whose duration grows by the recorded time of the forward operator that made the activation
  (each producer counted once). It models checkpointing every layer (one extra forward pass);
  the inputs of the checkpointed segments are not told apart from the rest, so it is the lower
  bound of the saving's memory and the upper bound of its recompute.
- `zero --stage S`: ZeRO (DeepSpeed) / FSDP sharding over the data-parallel ranks (default: every
  rank of the trace): stage 1 shards the optimizer state, 2 also the gradients, 3 also the
  parameters; each shard is 1/N of the allocation. The collectives ZeRO adds or changes
  (reduce-scatter instead of all-reduce, all-gathers of parameters at stage 3) and the gathered
  copy of a layer's parameters at stage 3 are not modelled: the step time is left as recorded.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Callable, Optional

import orjson

from chakra.errors import InputError
from chakra.footprint import BACKWARD, OPTIMIZER, allocations, classify, inside, is_tensor_value, uses_of
from chakra.schema import pb
from chakra.trace import Trace


def _edit_io(node: pb.Node, which: str, edit: Callable[[list], bool]) -> bool:
    """Apply `edit` to every tensor value of `node.<which>` (in place); rewrite when it changed."""
    io = getattr(node, which)
    if not io.values:
        return False
    values = orjson.loads(io.values)
    changed = False

    def walk(v: Any) -> None:
        nonlocal changed
        if not isinstance(v, list) or not v:
            return
        if is_tensor_value(v):
            changed |= edit(v)
            return
        for x in v:
            walk(x)

    walk(values)
    if changed:
        io.values = orjson.dumps(values).decode()
    return changed


def _rank_tensors(g: Any) -> tuple[list, list, dict, dict]:
    """A rank's operators in order, their tensor uses, the allocations and each one's role."""
    nodes = list(g.nodes.values())
    uses = uses_of(nodes, str(g.trace.path or f"rank {g.rank}"))
    allocs = allocations(uses)
    return nodes, uses, allocs, classify(uses, allocs)


def activation_checkpointing(traces: Sequence[Trace]) -> Any:
    from chakra.whatif.recipes import _finish, clone
    from chakra.whatif.transforms import graphs

    gs = graphs(clone(traces))
    saved = recomputed_us = 0
    for g in gs:
        nodes, uses, allocs, roles = _rank_tensors(g)
        bwd = inside(uses, BACKWARD)
        opt = inside(uses, OPTIMIZER)
        acts = {key for key, role in roles.items() if role == "activation"}
        if not acts:
            continue
        next_sid = max((k[0] for k in allocs), default=0) + 1
        renamed: dict[tuple[int, str], int] = {}
        producer_charged: set[int] = set()
        for k, u in enumerate(uses):
            if not bwd[k] or opt[k]:
                continue
            here = [t for t in u.ins + u.outs if u.keys.get((t[1], t[5])) in acts]
            if not here:
                continue
            node = g[u.node_id]
            fresh = []
            for t in here:
                key = u.keys[(t[1], t[5])]
                if key not in renamed:
                    renamed[key] = next_sid
                    next_sid += 1
                    fresh.append(t)
                    saved += allocs[key].nbytes
                    src = uses[allocs[key].first]
                    if src.node_id not in producer_charged:  # recompute the producer once
                        producer_charged.add(src.node_id)
                        extra = src.end - src.start
                        node.duration_micros += extra
                        recomputed_us += extra

            new_sid = {sk: renamed[key] for sk, key in u.keys.items() if key in renamed}

            def rename(v: list, new_sid: dict = new_sid) -> bool:
                sid = new_sid.get((v[1], v[5]))
                if sid is None:
                    return False
                v[1] = sid
                return True

            _edit_io(node, "inputs", rename)
            _edit_io(node, "outputs", rename)
            if fresh:  # recomputed just before: outputs of the operator before this one in the rank's order
                node = g[uses[k - 1].node_id] if k else node
                values = orjson.loads(node.outputs.values) if node.outputs.values else []
                types = orjson.loads(node.outputs.types) if node.outputs.types else []
                shapes = orjson.loads(node.outputs.shapes) if node.outputs.shapes else []
                for t in fresh:
                    values.append([t[0], new_sid[(t[1], t[5])], t[2], t[3], t[4], t[5]])
                    types.append("Tensor")
                    shapes.append([t[3]])
                node.outputs.values = orjson.dumps(values).decode()
                node.outputs.types = orjson.dumps(types).decode()
                node.outputs.shapes = orjson.dumps(shapes).decode()
        g.log.scaled += len(producer_charged)
    notes = [
        f"{len(gs)} rank(s): activations dropped after forward and recomputed before their first backward use "
        f"({saved:,} B of activations over all ranks; +{recomputed_us:,} µs of recompute, each producer once)"
    ]
    if not saved:
        notes.append("no activation found (no operator lists tensors, or no backward pass in the trace)")
    return _finish("activation-checkpointing", gs, notes=notes)


SHARDED = {1: ("optimizer_state",), 2: ("optimizer_state", "gradient"), 3: ("optimizer_state", "gradient", "parameter")}


def zero(traces: Sequence[Trace], *, stage: int, ranks: Optional[int] = None) -> Any:
    from chakra.whatif.recipes import _finish, clone
    from chakra.whatif.transforms import graphs

    if stage not in SHARDED:
        raise InputError(f"--stage must be 1, 2 or 3 (ZeRO stage), got {stage}")
    n = ranks if ranks is not None else len(traces)
    if n < 2:
        raise InputError("zero shards over the data-parallel ranks: give a trace of 2 or more ranks, or --ranks N")
    gs = graphs(clone(traces))
    before = after = 0
    for g in gs:
        nodes, uses, allocs, roles = _rank_tensors(g)
        shard = {key for key, role in roles.items() if role in SHARDED[stage]}
        before += sum(allocs[k].nbytes for k in shard)

        for u in uses:
            mine = {sk for sk, key in u.keys.items() if key in shard}
            if not mine:
                continue

            def cut(v: list, mine: set = mine) -> bool:
                if (v[1], v[5]) not in mine:
                    return False
                v[2], v[3] = v[2] // n, math.ceil(v[3] / n)
                return True

            node = g[u.node_id]
            g.log.scaled += _edit_io(node, "inputs", cut) | _edit_io(node, "outputs", cut)
        after += sum(allocations(uses_of(nodes))[k].nbytes for k in shard if k in allocs)
    what = ", ".join(r.replace("_", " ") for r in SHARDED[stage])
    notes = [
        f"ZeRO stage {stage} over {n} ranks: {what} sharded ({before:,} B -> {after:,} B over all ranks); "
        "the collectives ZeRO changes are not modelled (step time as recorded)"
    ]
    if not before:
        notes.append(
            f"nothing of that kind found ({what}): no operator lists tensors, no optimizer step in the trace, "
            "or an optimizer that keeps no state (SGD without momentum)"
        )
    return _finish("zero", gs, notes=notes)

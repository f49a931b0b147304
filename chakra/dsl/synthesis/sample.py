"""Sample a synthetic job of any rank count from a fitted `SynthModel`.

The job is built through the DSL, so its replay invariants hold by construction: a collective
token becomes one DSL collective per group of its class (same type, size and order on every
member), and a point-to-point token becomes one send/receive pair (matching tag and size) in
every tile of input-world-size consecutive ranks. Compute nodes form one chain per
rank; durations are drawn independently per rank, so ranks differ the way real ranks do.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Optional

import numpy as np

from chakra.dsl.synthesis.model import SynthesisError, SynthModel, Token, obfuscated_name, size_key, work_for
from chakra.dsl.workload import ProcessGroup, Ref, Workload


def _sample_tokens(m: SynthModel, rng: np.random.Generator, length: int) -> list[Token]:
    starts = list(m.starts)
    start_p = np.array([m.starts[t] for t in starts], dtype=float)
    start_p /= start_p.sum()
    out: list[Token] = []
    cur: Optional[Token] = None
    for _ in range(length):
        nxt = m.transitions.get(cur) if cur is not None else None
        if nxt:
            options = list(nxt)
            p = np.array([nxt[t] for t in options], dtype=float)
            cur = options[rng.choice(len(options), p=p / p.sum())]
        else:
            cur = starts[rng.choice(len(starts), p=start_p)]
        out.append(cur)
    return out


def _sizes(m: SynthModel, tokens: list[Token], rng: np.random.Generator) -> list[int]:
    by_key: dict[tuple[str, int], list[int]] = defaultdict(list)
    for i, tok in enumerate(tokens):
        by_key[size_key(tok), tok[3]].append(i)
    out = [0] * len(tokens)
    for (key, comp), idx in by_key.items():
        raw = np.exp2(m.sizes[key].sample(len(idx), rng, component=comp)) - 1
        align = m.size_align[key]
        values = np.maximum(np.rint(raw / align) * align, 0).astype(np.int64)
        lo = int(m.size_values[key].min())
        for i, v in zip(idx, values):
            out[i] = int(max(v, lo))
    return out


def _class_groups(w: Workload, cls: str, names: dict[str, str]) -> list[ProcessGroup]:
    n = w.num_ranks
    if cls == "world":
        return [w.world]
    k = int(cls[1:])
    if k >= n or n % k:
        return [w.world]
    return [w.group(range(i, i + k), f"{names.get(cls, cls)}:{i // k}") for i in range(0, n, k)]


def sample(m: SynthModel, ranks: int, seed: int = 0, obfuscate: bool = False, length: Optional[int] = None) -> Workload:
    """A synthetic Workload of `ranks` ranks (sequence length drawn from the inputs unless given)."""
    if ranks < 1:
        raise SynthesisError(f"--ranks must be >= 1, got {ranks}")
    rng = np.random.default_rng(seed)
    if length is None:
        length = int(rng.choice(m.lengths))
    tokens = _sample_tokens(m, rng, length)
    sizes = _sizes(m, tokens, rng)
    gaps = [int(rng.choice(m.gaps[t])) if m.gaps.get(t) else 0 for t in tokens]
    tail = int(rng.choice(m.tails)) if m.tails else 0
    lags = []
    for t in tokens:
        options = m.lags.get(t) or [None]
        lags.append(options[rng.integers(len(options))])
    # Comm durations draw from their own stream, so the rest of a seeded sample stays as it was.
    comm_rng = np.random.default_rng([seed, 1])
    comm_us = [int(comm_rng.choice(m.comm_durations[t])) if m.comm_durations.get(t) else 0 for t in tokens]

    # Operator classes of every compute node, then their durations per rank.
    classes = list(m.class_counts)
    total = sum(gaps) + tail
    if classes:
        freq = np.array([m.class_counts[c] for c in classes], dtype=float)
        picks = rng.choice(len(classes), size=total, p=freq / freq.sum())
    else:
        picks = np.zeros(total, dtype=np.int64)
        total = 0
    if obfuscate:
        order = {c: i for i, (c, _) in enumerate(m.class_counts.most_common())}
        names = [obfuscated_name(order[c]) for c in classes]
    else:
        names = classes
    durations = np.zeros((ranks, total), dtype=np.int64)
    flops = np.zeros((ranks, total), dtype=np.int64)
    nbytes = np.zeros((ranks, total), dtype=np.int64)
    for ci, cls in enumerate(classes):
        where = np.nonzero(picks == ci)[0]
        if where.size:
            draws = np.expm1(m.durations[cls].sample(where.size * ranks, rng))
            drawn = np.maximum(np.rint(draws), 0).astype(np.int64)
            ops, size = work_for(m.work_rows[cls], drawn)
            durations[:, where] = drawn.reshape(ranks, where.size)
            flops[:, where] = ops.reshape(ranks, where.size)
            nbytes[:, where] = size.reshape(ranks, where.size)
    cpu = [m.cpu_class.get(c, False) for c in classes]

    w = Workload(ranks, name="synthetic" if obfuscate else "synthesized")
    group_names = {}
    group_cache: dict[str, list[ProcessGroup]] = {}
    prev: dict[int, int] = {}
    pending: dict[int, list[Ref]] = defaultdict(list)  # compute index -> comm refs it must wait for
    index = 0

    def compute_run(count: int) -> None:
        nonlocal index
        for _ in range(count):
            ci = picks[index]
            cls_name, on_cpu = names[ci], cpu[ci]
            waits = pending.pop(index, [])
            for r in range(ranks):
                after = [Ref({r: prev[r]}, "prev")] if r in prev else []
                after.extend(ref for ref in waits if r in ref.ids)
                prev[r] = w.compute(
                    r,
                    cls_name,
                    duration_us=int(durations[r, index]),
                    flops=int(flops[r, index]),
                    bytes=int(nbytes[r, index]),
                    cpu=on_cpu,
                    after=after or None,
                ).ids[r]
            index += 1

    for tok, size, gap, lag, dur in zip(tokens, sizes, gaps, lags, comm_us):
        compute_run(gap)
        kind, ctype, cls, _ = tok
        if kind == "coll":
            if cls not in group_cache:
                if obfuscate:
                    group_names[cls] = f"pg{len(group_names) + 1}"
                group_cache[cls] = _class_groups(w, cls, group_names)
            ids: dict[int, int] = {}
            for g in group_cache[cls]:
                after = Ref({r: prev[r] for r in g.ranks if r in prev}, "prev") if prev else None
                after = after if after and after.ids else None
                ids.update(w.collective(ctype, size, group=g, after=after, duration_us=dur).ids)
            ref = Ref(ids, "coll")
        else:
            world_in = ctype
            src_role, dst_role = (int(x) for x in cls.split(">"))
            ids = {}
            for base in range(0, ranks, world_in):
                src, dst = base + src_role, base + dst_role
                if src >= ranks or dst >= ranks or src == dst:
                    continue
                after = [Ref({x: prev[x]}, "prev") for x in (src, dst) if x in prev]
                pair = w.send(src, dst, size, after=after or None, duration_us=dur)
                ids[src] = pair.send[src]
                ids[dst] = pair.recv[dst]
            if not ids:
                continue
            ref = Ref(ids, "p2p")
        if lag is not None and index + lag < total:
            pending[index + lag].append(ref)
    compute_run(tail)
    return w

"""Collective microbenchmark: every collective type at every size of a sweep, on all ranks.

The collectives run back to back (each waits for the previous one) on the world group, so a
simulator's timeline shows one collective at a time, as a bus-bandwidth sweep would.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from chakra.dsl.template import Program
from chakra.dsl.workload import DSLError, Workload, collective_type
from chakra.schema import CollectiveType as CT

ALL_TYPES = tuple(CT)


def size_sweep(min_size: int, max_size: int, factor: int = 2) -> list[int]:
    """min, min*factor, ... up to max (inclusive)."""
    if min_size < 1 or max_size < min_size or factor < 2:
        raise DSLError(f"bad size sweep: min {min_size}, max {max_size}, factor {factor}")
    out, size = [], min_size
    while size <= max_size:
        out.append(size)
        size *= factor
    return out


def build_microbench(ranks: int, sizes: Sequence[int], types: Optional[Sequence[str]] = None) -> Workload:
    if ranks < 2:
        raise DSLError(f"microbench: collectives need at least 2 ranks, got {ranks}")
    kinds = [collective_type(t) for t in types] if types else list(ALL_TYPES)
    w = Workload(ranks, name="microbench")
    p = Program()
    prev = None
    for size in sizes:
        for kind in kinds:
            if kind == CT.BARRIER:
                continue
            prev = p.collective(kind, size, "world", after=[prev], name=f"{kind.name.lower()}_{size}")
    if CT.BARRIER in kinds:
        p.collective(CT.BARRIER, 0, "world", after=[prev], name="barrier")
    for r in range(ranks):
        w.adopt(r, p.stamp(r, {"world": w.world}, {}), p.flops)
    return w

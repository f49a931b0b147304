"""Copies of one real rank's PyTorch ET + Kineto pair under new rank numbers.

For trying a cluster or measuring scale-out without a 1,024-GPU job: every copy is the real
trace, named `et.<rank>.json` / `kineto.<rank>.json`, with the Kineto `distributedInfo` rank and
world size rewritten so the pair still agrees with its name (the converter checks that).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from chakra.ranks import with_kineto_rank

_WORLD = re.compile(rb'("distributedInfo"\s*:\s*\{[^{}]*?"world_size"\s*:\s*)\d+')


def replicate_pair(et: Path, kineto: Path, out_dir: Path, ranks: Iterable[int]) -> list[tuple[Path, Path]]:
    """Write `out_dir/et.<r>.json` and `out_dir/kineto.<r>.json` for every r; returns the pairs."""
    ranks = list(ranks)
    out_dir.mkdir(parents=True, exist_ok=True)
    et_raw = Path(et).read_bytes()
    kin_raw = Path(kineto).read_bytes()
    world = str(max(ranks) + 1).encode()
    kin_raw = _WORLD.sub(lambda m: m.group(1) + world, kin_raw, count=1)
    pairs = []
    for r in ranks:
        e, k = out_dir / f"et.{r}.json", out_dir / f"kineto.{r}.json"
        e.write_bytes(et_raw)
        k.write_bytes(with_kineto_rank(kin_raw, r))
        pairs.append((e, k))
    return pairs

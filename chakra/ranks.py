"""Rank numbers from input file names: the one parser every multi-rank input uses.

A rank comes from `rank<N>` anywhere in the path (`rank12/trace.json`, `kineto_rank12.json`,
HTA's `rank-12.<date>.pt.trace.json`) or `worker<N>` (the profiler's worker name, as in PARAM's
`worker12_step_5.<timestamp>.pt.trace.json`), else the last number in the file name without its
extensions (`et.12.json`, `kineto_12.json.gz`, PARAM's `dlrm_eg_12.json`).
Our own outputs are named `PREFIX.<rank>.et` (`chakra.io.rank_path` / `rank_from_path`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Optional

from chakra.errors import InputError

_RANK_WORD = re.compile(r"(?:^|[^a-z])(?:rank|worker)[_-]?(\d+)", re.IGNORECASE)
_NUMBER = re.compile(r"\d+")
_EXTENSIONS = (".gz", ".tgz", ".tar", ".json", ".trace", ".pt", ".sqlite", ".et")
# A rank stated right before the extension: `et.3.json`, `rank_3.json.gz`, `w-3.pt.trace.json`.
_STATED = re.compile(r"(?:^|[._-])(?:rank[_-]?)?(\d+)\.(?:json|pt\.trace\.json)(?:\.gz)?$", re.IGNORECASE)
#: the rank a Kineto trace records in its `distributedInfo` block; group 1 is all before the number
KINETO_RANK = re.compile(rb'("distributedInfo"\s*:\s*\{[^{}]*?"rank"\s*:\s*)(\d+)')
#: how far into a Kineto trace `distributedInfo` is looked for (PyTorch writes it near the top)
KINETO_HEAD = 200_000


def rank_word(path: Path) -> Optional[int]:
    """The rank a path spells as `rank<N>` or `worker<N>` (file name first, then its folders), or None."""
    for part in (path, *path.parents):
        m = _RANK_WORD.search(part.name)
        if m:
            return int(m.group(1))
    return None


def rank_of(path: Path) -> Optional[int]:
    """The rank a path names, or None."""
    m = _RANK_WORD.search(path.name)
    if m:
        return int(m.group(1))
    base = path.name
    stripped = True
    while stripped:
        stripped = False
        for ext in _EXTENSIONS:
            if base.lower().endswith(ext):
                base, stripped = base[: -len(ext)], True
    nums = _NUMBER.findall(base)
    if nums:
        return int(nums[-1])
    for parent in path.parents:
        m = _RANK_WORD.search(parent.name)
        if m:
            return int(m.group(1))
    return None


def _member(name: str) -> Path:
    """An input name as a path: an archive member `a.tar:rank3/et.json` is its inside path."""
    return Path(name.rsplit(":", 1)[-1])


def rank_of_name(name: str) -> Optional[int]:
    """`rank_of` for an input name, which may be an archive member (`a.tar:et.3.json`)."""
    return rank_of(_member(name))


def stated_rank(name: str) -> Optional[int]:
    """The rank a file name states right before its extension (`et.3.json`, `rank_3.json.gz`), or None:
    stricter than `rank_of`, for checking a name against the rank a trace records."""
    m = _STATED.search(_member(name).name)
    return int(m.group(1)) if m else None


def kineto_rank(raw: bytes) -> Optional[int]:
    """The rank a Kineto trace records (`distributedInfo.rank`), read from its head, or None."""
    m = KINETO_RANK.search(raw[:KINETO_HEAD])
    return int(m.group(2)) if m else None


def with_kineto_rank(raw: bytes, rank: int) -> bytes:
    """The Kineto trace with its `distributedInfo.rank` set to `rank`."""
    return KINETO_RANK.sub(lambda m: m.group(1) + str(rank).encode(), raw, count=1)


def by_rank(
    files: Sequence[Path], kineto: Sequence[Path] = (), rank_for: Callable[[Path], Optional[int]] = rank_of
) -> dict[int, tuple[list[Path], list[Path]]]:
    """rank -> (files, kineto files); every file must name its rank, except in a one-rank set (two
    files at most, one of them naming no rank: a one-GPU recording's et.json + kineto.json), whose
    rank is the one the other names, else 0, as the plain converter takes it (the worker then
    refuses two files of one kind). `rank_for(path)`: the rank of a file (default: its name's)."""
    if len(files) + len(kineto) <= 2:
        ranks = {rank_for(p) for p in (*files, *kineto)}
        named = ranks - {None}
        if None in ranks and len(named) <= 1:
            return {named.pop() if named else 0: (list(files), list(kineto))}
    out: dict[int, tuple[list[Path], list[Path]]] = {}
    for group, paths in ((0, files), (1, kineto)):
        for p in paths:
            rank = rank_for(p)
            if rank is None:
                raise InputError(
                    f"{p}: no rank number in the name (name files like et.<rank>.json, kineto_<rank>.json, rank<N>/)"
                )
            out.setdefault(rank, ([], []))[group].append(p)
    return dict(sorted(out.items()))

"""Input files of a batch from explicit names, folders or globs, with rank numbers from the names.

The client side only lists names (never opens the files): the workers read them. A rank comes
from `rank<N>` anywhere in the path (`rank12/trace.json`, `kineto_rank12.json`), else the last
number in the file name without its extensions (`et.12.json`, `kineto_12.json.gz`).
"""

from __future__ import annotations

import glob
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

from chakra.errors import InputError

_RANK_WORD = re.compile(r"(?:^|[^a-z])rank[_-]?(\d+)", re.IGNORECASE)
_NUMBER = re.compile(r"\d+")
_EXTENSIONS = (".gz", ".tgz", ".tar", ".json", ".trace", ".pt", ".sqlite", ".et")

#: File name endings a folder is searched for, per converter.
SUFFIXES: dict[str, tuple[str, ...]] = {
    "pytorch": (".json", ".json.gz", ".tar.gz", ".tgz"),
    "kineto": (".json", ".json.gz"),
    "nsys": (".sqlite",),
}


def rank_word(path: Path) -> Optional[int]:
    """The rank a path spells as `rank<N>` (file name first, then its folders), or None."""
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


def expand(args: Sequence[Path], fmt: str) -> tuple[list[Path], list[Path]]:
    """(files, skipped): explicit files as given, folders searched recursively for the format's
    files, glob patterns expanded. `skipped` lists folder entries and glob matches whose names
    carry no rank (a manifest.json beside the traces); an explicit file without one is an error later."""
    suffixes = SUFFIXES.get(fmt, ())
    files: list[Path] = []
    skipped: list[Path] = []
    for arg in args:
        text = str(arg)
        if arg.is_dir():
            found = sorted(p for p in arg.rglob("*") if p.is_file() and p.name.lower().endswith(suffixes))
            for p in found:
                (files if rank_of(p) is not None else skipped).append(p)
            if not found:
                raise InputError(f"{arg}: no {fmt} input files ({', '.join(suffixes)}) in this folder")
        elif arg.exists():
            files.append(arg)
        elif any(c in text for c in "*?["):
            matches = sorted(Path(p) for p in glob.glob(text, recursive=True) if Path(p).is_file())
            if not matches:
                raise InputError(f"{text}: the pattern matches no file")
            for p in matches:
                (files if rank_of(p) is not None else skipped).append(p)
        else:
            raise InputError(f"{arg}: no such file")
    seen: set[Path] = set()
    unique = [p for p in files if not (p in seen or seen.add(p))]  # type: ignore[func-returns-value]
    return unique, skipped


def by_rank(files: Sequence[Path], kineto: Sequence[Path] = ()) -> dict[int, tuple[list[Path], list[Path]]]:
    """rank -> (files, kineto files); every file must name its rank."""
    out: dict[int, tuple[list[Path], list[Path]]] = {}
    for group, paths in ((0, files), (1, kineto)):
        for p in paths:
            rank = rank_of(p)
            if rank is None:
                raise InputError(
                    f"{p}: no rank number in the name (name files like et.<rank>.json, kineto_<rank>.json, rank<N>/)"
                )
            out.setdefault(rank, ([], []))[group].append(p)
    return dict(sorted(out.items()))

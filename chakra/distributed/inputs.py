"""Input files of a batch from explicit names, folders (searched for the format plugin's
`EXTENSIONS`) or globs; the ranks come from the names (`chakra.ranks`).

The client side only lists names (never opens the files): the workers read them.
"""

from __future__ import annotations

import glob
from collections.abc import Sequence
from pathlib import Path

from chakra import converters
from chakra.errors import InputError
from chakra.ranks import rank_of


def expand(args: Sequence[Path], fmt: str) -> tuple[list[Path], list[Path]]:
    """(files, skipped): explicit files as given, folders searched recursively for the format's
    files, glob patterns expanded. `skipped` lists folder entries and glob matches whose names
    carry no rank (a manifest.json beside the traces); an explicit file without one is an error later."""
    suffixes = tuple(getattr(converters.load(fmt), "EXTENSIONS", ()))
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

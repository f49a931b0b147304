"""Input files of a batch: the same expansion as every converter's plain path
(`chakra.converters.expand_inputs`: files, folders, quoted patterns, PREFIXes); the ranks come
from the names (`chakra.ranks`).

The client side lists names and reads no more than the first 64 KiB of the files a folder or a
pattern names (to keep the format's own): the workers read the files.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Callable, Optional

from chakra import converters
from chakra.errors import InputError
from chakra.files import STDIN


def expand(
    args: Sequence[Path], fmt: str, note: Optional[Callable[[str], None]] = None
) -> tuple[list[Path], list[Path]]:
    """(files, skipped): explicit files as given, folders searched recursively for the format's
    files, glob patterns expanded, PREFIXes as their rank files. `skipped` lists folder entries and
    glob matches that are not the format's (a manifest.json beside the traces); `note` hears of
    each. Standard input cannot be handed to workers."""
    if any(str(a) == STDIN for a in args):
        raise InputError("-: standard input cannot go to Dask workers (they read files); save it to a file first")
    return converters.expand_inputs(fmt, list(args), allow_stdin=False, note=note)

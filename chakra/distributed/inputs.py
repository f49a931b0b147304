"""Input files of a batch: the same expansion as every converter's plain path
(`chakra.converters.expand_inputs`: files, folders, quoted patterns, PREFIXes); the ranks come
from the names (`chakra.ranks`).

The client side only lists names (never opens the files): the workers read them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from chakra import converters
from chakra.errors import InputError
from chakra.files import STDIN


def expand(args: Sequence[Path], fmt: str) -> tuple[list[Path], list[Path]]:
    """(files, skipped): explicit files as given, folders searched recursively for the format's
    files, glob patterns expanded, PREFIXes as their rank files. `skipped` lists folder entries and
    glob matches whose names carry no rank (a manifest.json beside the traces); an explicit file
    without one is an error later. Standard input cannot be handed to workers."""
    if any(str(a) == STDIN for a in args):
        raise InputError("-: standard input cannot go to Dask workers (they read files); save it to a file first")
    return converters.expand_inputs(fmt, list(args), allow_stdin=False)

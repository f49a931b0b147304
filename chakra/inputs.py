"""What the input arguments of a command name: the one expansion every command uses.

An input argument is, tried in this order:

- `-`: standard input, as one file. It is copied once to a private temporary file (removed when
  the command ends), so that a trace can be read twice (sniffed, then parsed) and by name.
  Refused when standard input is a terminal: the command would wait for typing.
- an existing file: that file.
- an existing folder: the inputs in it. For Chakra traces, its rank files `NAME.<rank>.et` (one
  NAME only); for a converter, every file in it and its subfolders with one of the format's
  extensions (a folder the format itself reads, BigSim's logs, stays a folder).
- a pattern holding `*`, `?` or `[` (quoted, so that chakra sees it and not the shell): the files
  it matches (`**` crosses folders).
- otherwise a PREFIX: every `PREFIX.<rank>.et` trace (also `.et.gz`, `.json`, `.json.gz`), or for
  a converter every `PREFIX.<rank>EXT`, `PREFIX_<rank>EXT` or `PREFIX-<rank>EXT` input.

In a converter's folders and pattern matches, files that are not the format's (a `manifest.json`
beside the traces, told by content: the caller's `wanted`) are skipped and reported to the caller,
unless that leaves nothing. The table of which command takes what is docs/inputs.md.

This module sits just above `chakra.files`, below `chakra.io` (whose `read_traces` uses it): it
imports nothing of chakra but `chakra.files` and `chakra.errors`.
"""

from __future__ import annotations

import atexit
import glob
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Callable, Optional, Union

from chakra.errors import InputError
from chakra.files import STDIN, check_input, is_special

PathLike = Union[str, os.PathLike]

#: A Chakra rank file: `PREFIX.<rank>.et` (also `.et.gz`, and the JSON forms `.json`, `.json.gz`).
#: DOTALL and \Z: a file name holding a newline (written by another tool) still has a rank.
TRACE_NAME = re.compile(r"^(?P<prefix>.*)\.(?P<rank>\d+)\.(?P<ext>et|et\.gz|json|json\.gz)\Z", re.DOTALL)
_GLOB_CHARS = frozenset("*?[")
#: Our own files beside the rank files, never traces themselves.
_SIDECARS = (".comm_groups.json",)


def is_pattern(arg: PathLike) -> bool:
    """True when `arg` holds a glob character and names no existing file or folder."""
    text = os.fspath(arg)
    return any(c in _GLOB_CHARS for c in text) and not os.path.exists(text)


# ---------------------------------------------------------------------------------------------
# Standard input

# (the standard input stream, its copy): one copy per stream, so a command naming `-` twice
# reads the same bytes, and a test running commands in one process gets each its own.
_stdin_copy: Optional[tuple[object, Path]] = None


def stdin_file() -> Path:
    """Standard input as a file: copied once to a private temporary folder."""
    global _stdin_copy
    if _stdin_copy is not None and _stdin_copy[0] is sys.stdin:
        return _stdin_copy[1]
    if sys.stdin is None or sys.stdin.isatty():
        raise InputError("-: standard input is a terminal; pipe the input in (... | chakra CMD -) or name a file")
    folder = Path(tempfile.mkdtemp(prefix="chakra-stdin-"))
    atexit.register(shutil.rmtree, folder, True)
    path = folder / "stdin"
    try:
        with open(path, "wb") as out:
            shutil.copyfileobj(sys.stdin.buffer, out, 8 << 20)
    except OSError as exc:  # a full temporary folder: say where, not a traceback
        raise InputError(f"-: cannot copy standard input to {folder}: {exc.strerror or exc}") from None
    if path.stat().st_size == 0:
        raise InputError("-: standard input is empty")
    _stdin_copy = (sys.stdin, path)
    return path


def as_typed(message: str) -> str:
    """`message` with the path of standard input's copy written as the user typed it: `-`."""
    if _stdin_copy is None:
        return message
    return message.replace(str(_stdin_copy[1]), "-")


def _stdin(allow: bool, what: str) -> Path:
    if not allow:
        raise InputError(f"-: standard input is not an input here; give a {what} by name")
    return stdin_file()


# ---------------------------------------------------------------------------------------------
# Chakra traces


def trace_rank(path: PathLike) -> Optional[int]:
    """The rank of a rank file `PREFIX.<rank>.et` (or `.et.gz`, `.json`, `.json.gz`), else None."""
    m = TRACE_NAME.match(Path(path).name)
    return int(m.group("rank")) if m else None


def _is_trace_name(name: str) -> bool:
    if name.endswith(_SIDECARS) or name.startswith("."):
        return False
    return TRACE_NAME.match(name) is not None or name.endswith((".et", ".et.gz"))


# (folder, stem) -> (the folder's (device, inode, mtime), `_rank_files`' answer): one command names
# a job's PREFIX several times (the checks, the simulation, the comm-group file's search), and
# a thousand ranks' listing costs milliseconds each time
_LISTED: dict[tuple[str, Optional[str]], tuple[tuple[int, int, int], dict[str, dict[int, Path]]]] = {}
# a folder changed this recently may change again within its clock's tick, unseen in its mtime
_SETTLED_NS = 2_000_000_000


def _rank_files(folder: Path, stem: Optional[str]) -> dict[str, dict[int, Path]]:
    """prefix name -> rank -> file, for the rank files in `folder` (only those of `stem`, if given).

    A folder listed before and unchanged since (same mtime, settled when listed) is not listed again."""
    try:
        st = os.stat(folder)
    except OSError:
        st = None
    key = (os.fspath(folder), stem)
    if st is not None:
        mark = (st.st_dev, st.st_ino, st.st_mtime_ns)
        got = _LISTED.get(key)
        if got is not None and got[0] == mark:
            return {prefix: dict(ranks) for prefix, ranks in got[1].items()}
    found = _list_rank_files(folder, stem)
    if st is not None and time.time_ns() - st.st_mtime_ns > _SETTLED_NS:
        if len(_LISTED) >= 16:
            _LISTED.clear()
        _LISTED[key] = (mark, {prefix: dict(ranks) for prefix, ranks in found.items()})
    return found


def _list_rank_files(folder: Path, stem: Optional[str]) -> dict[str, dict[int, Path]]:
    """`_rank_files` read from the folder. scandir: the listing says which entries are regular
    files (no stat per rank file, which thousands of ranks notice); symlinks are still followed."""
    found: dict[str, dict[int, Path]] = {}
    with os.scandir(folder) as entries:
        for entry in entries:
            m = TRACE_NAME.match(entry.name)
            if m is None or entry.name.endswith(_SIDECARS) or (stem is not None and m.group("prefix") != stem):
                continue
            if not entry.is_file():
                continue
            ranks = found.setdefault(m.group("prefix"), {})
            rank = int(m.group("rank"))
            # Prefer .et over other forms when several exist for one rank.
            if rank not in ranks or entry.name.endswith(".et"):
                ranks[rank] = folder / entry.name
    return found


def _folder_traces(folder: Path) -> list[tuple[Optional[int], Path]]:
    found = _rank_files(folder, None)
    if not found:
        raise InputError(f"{folder}: no rank files (NAME.<rank>.et) in this folder")
    if len(found) > 1:
        names = ", ".join(sorted(found)[:6]) + (", ..." if len(found) > 6 else "")
        raise InputError(
            f"{folder}: holds the traces of {len(found)} runs ({names}); name one as a PREFIX, "
            f"e.g. {folder / sorted(found)[0]}"
        )
    ((_, ranks),) = found.items()
    return [(rank, ranks[rank]) for rank in sorted(ranks)]


def _pattern_traces(pattern: str) -> list[tuple[Optional[int], Path]]:
    matches = [Path(p) for p in glob.glob(pattern, recursive=True)]
    files = [p for p in matches if _is_trace_name(p.name) and p.is_file()]
    if not files:
        raise InputError(f"{pattern}: the pattern matches no trace file (.et, NAME.<rank>.et)")

    def order(p: Path) -> tuple:
        m = TRACE_NAME.match(p.name)
        return (str(p.parent), m.group("prefix"), int(m.group("rank"))) if m else (str(p.parent), p.name, -1)

    return [(trace_rank(p), p) for p in sorted(files, key=order)]


def expand_traces(args: Sequence[PathLike], *, allow_stdin: bool = True) -> list[tuple[Optional[int], Path]]:
    """Chakra trace arguments as (rank, path) pairs; a PREFIX's, folder's or pattern's ranks sorted.

    The rank comes from a name `X.<rank>.et` (None when the name has none: the caller numbers
    such traces by position). See the module's docstring for what an argument may be.
    """
    out: list[tuple[Optional[int], Path]] = []
    for arg in args:
        text = os.fspath(arg)
        if text == STDIN:
            out.append((None, _stdin(allow_stdin, "trace file or PREFIX")))
            continue
        p = Path(arg)
        if p.is_file():
            out.append((trace_rank(p), p))
            continue
        if p.is_dir():
            out.extend(_folder_traces(p))
            continue
        if is_special(p):
            check_input(p, "trace file")
        if is_pattern(text):
            out.extend(_pattern_traces(text))
            continue
        parent = p.parent if str(p.parent) else Path(".")
        ranks = _rank_files(parent, p.name).get(p.name, {}) if parent.is_dir() else {}
        if not ranks:
            raise InputError(f"{arg}: no such file, folder or PREFIX (no {arg}.<rank>.et files)")
        out.extend((rank, ranks[rank]) for rank in sorted(ranks))
    return out


# ---------------------------------------------------------------------------------------------
# Inputs of converters (other tools' files)


def _has_suffix(name: str, suffixes: tuple[str, ...]) -> bool:
    return not suffixes or name.lower().endswith(suffixes)


def _wanted(found: list[Path], wanted: Optional[Callable[[Path], bool]], skipped: list[Path]) -> list[Path]:
    """The files of a folder or pattern that `wanted` takes; a lone file is kept regardless (the
    converter then says what is wrong with it)."""
    if wanted is None:
        return found
    kept = [p for p in found if wanted(p)]
    if not kept and len(found) == 1:
        return found
    skipped.extend(p for p in found if p not in kept)
    return kept


def expand_files(
    args: Sequence[PathLike],
    suffixes: Sequence[str],
    *,
    wanted: Optional[Callable[[Path], bool]] = None,
    what: str = "input",
    keep_folder: Optional[Callable[[Path], bool]] = None,
    allow_stdin: bool = True,
) -> tuple[list[Path], list[Path]]:
    """(files, skipped) named by a converter's arguments: files as given, folders searched (with
    their subfolders) for files ending in one of `suffixes`, patterns expanded, PREFIXes as every
    `PREFIX.<rank>EXT` (also `_` or `-` before the rank). `skipped`: folder entries and pattern
    matches that `wanted` does not take. `keep_folder(path)`: a folder that is itself one input
    (BigSim logs). A file a folder, pattern or PREFIX names again is taken once; a file named
    twice by hand stays twice (the converter says why that cannot be: two files for one rank)."""
    ends = tuple(s.lower() for s in suffixes)
    files: list[Path] = []
    skipped: list[Path] = []
    for arg in args:
        text = os.fspath(arg)
        if text == STDIN:
            files.append(_stdin(allow_stdin, what))
            continue
        p = Path(arg)
        if p.is_file():
            files.append(p)
        elif p.is_dir():
            if keep_folder is not None and keep_folder(p):
                files.append(p)
                continue
            found = sorted(
                f for f in p.rglob("*") if not f.name.startswith(".") and _has_suffix(f.name, ends) and f.is_file()
            )
            if not found:
                raise InputError(f"{p}: no {what} files ({', '.join(suffixes)}) in this folder")
            _add_new(files, _wanted(found, wanted, skipped))
        elif is_special(p):
            check_input(p, what)
        elif is_pattern(text):
            found = sorted(Path(m) for m in glob.glob(text, recursive=True) if Path(m).is_file())
            if not found:
                raise InputError(f"{text}: the pattern matches no file")
            _add_new(files, _wanted(found, wanted, skipped))
        else:
            found = _prefixed(p, ends)
            if not found:
                raise InputError(f"{arg}: no such file, folder or PREFIX (no {arg}.<rank>... files)")
            _add_new(files, found)
    return files, skipped


def _add_new(files: list[Path], found: list[Path]) -> None:
    """Append the files of `found` that `files` does not hold yet (a set: folders hold thousands)."""
    have = set(files)
    files.extend(f for f in found if f not in have)


def _prefixed(prefix: Path, ends: tuple[str, ...]) -> list[Path]:
    """Files `PREFIX.<rank>EXT` (or `_<rank>`, `-<rank>`) with EXT one of `ends`, sorted by rank."""
    parent = prefix.parent if str(prefix.parent) else Path(".")
    if not parent.is_dir():
        return []
    pattern = re.compile(re.escape(prefix.name) + r"[._-](\d+)(\..+)?\Z", re.DOTALL)
    found = []
    with os.scandir(parent) as entries:
        for entry in entries:
            m = pattern.match(entry.name)
            if m and _has_suffix(entry.name, ends) and entry.is_file():
                found.append((int(m.group(1)), parent / entry.name))
    return [p for _, p in sorted(found)]


# ---------------------------------------------------------------------------------------------
# Names derived from the inputs


def as_path(arg: PathLike) -> Path:
    """One input argument as a path: `-` is standard input's copy (for a command that first looks
    at what one input is, such as a simulation log or a trace)."""
    return stdin_file() if os.fspath(arg) == STDIN else Path(arg)


def _strip_trace_suffix(name: str) -> str:
    for suffix in (".et.gz", ".json.gz", ".et", ".json"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def output_stem(arg: PathLike) -> Path:
    """The name a command's output takes from its first input when no -o is given: a file
    `run/trace.0.et` gives `run/trace.0`, a PREFIX itself, a folder or pattern the PREFIX of the
    rank files it names (`out/` holding `out/ddp2.<rank>.et` gives `out/ddp2`). Standard input has
    no name: an InputError asks for -o."""
    text = os.fspath(arg)
    if text == STDIN:
        raise InputError("-: standard input has no name to put an output beside; give -o")
    p = Path(arg)
    if p.is_file():
        return p.with_name(_strip_trace_suffix(p.name))
    if not (p.is_dir() or is_pattern(text)):
        return p  # a PREFIX
    files = [f for _, f in expand_traces([arg], allow_stdin=False)]
    prefixes = {(f.parent, m.group("prefix")) for f in files if (m := TRACE_NAME.match(f.name))}
    if len(prefixes) == 1:
        ((parent, name),) = prefixes
        return parent / name
    return files[0].with_name(_strip_trace_suffix(files[0].name))

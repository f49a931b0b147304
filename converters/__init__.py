"""Converters from other tools' trace formats to Chakra: one plugin module per input format.

The plugin contract (how to write one: docs/converters.md, "Writing a converter plugin"). A format's
module declares

  NAME: str                       the FORMAT word of `chakra convert FORMAT`
  DESCRIPTION: str                one line for `chakra convert --help` and `chakra convert auto`
  EXTENSIONS: tuple[str, ...]     file name endings its inputs usually have (shown in the help)
  accept(prefix: bytes) -> bool   recognise one input from its first bytes (see `read_prefix`:
                                  already un-gzipped, the first .json member of a tar); cheap,
                                  never raises
  convert(inputs, prefix, **options) -> ConversionResult
                                  the one entry point: `chakra convert NAME` (with the format's
                                  own options) and `chakra convert auto` (defaults) both call it
  add_cli(app: typer.Typer)       registers the typer command `chakra convert NAME`

and optionally `accept_dir(path) -> bool` (formats whose input can be a folder: BigSim logs) and
`COMPANIONS: tuple[str, ...]` (other formats its `convert` takes alongside its own inputs: the
Kineto traces beside PyTorch ETs), which `convert auto` uses when the inputs mix formats.

Every format's inputs are named the same way (`expand_inputs`, through `chakra.inputs`): files,
folders (searched for files with the format's `EXTENSIONS`), quoted patterns, PREFIXes
(`PREFIX.<rank>EXT`) and `-` (standard input), on the plain path and on Dask (`--workers`) alike.

A plugin module stays cheap to import (declarations only): parsing machinery is imported inside
`convert()`, so listing the formats does not load every converter. `PLUGINS` below is the only
list of formats; help texts, `convert auto` and the tests are built from it.
"""

from __future__ import annotations

import importlib
import re
import zlib
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, BinaryIO, Callable, Optional

from chakra.converters.result import ConversionResult
from chakra.errors import InputError
from chakra.files import check_input, is_special

#: FORMAT word -> plugin module, in the order `chakra convert --help` lists them.
PLUGINS: dict[str, str] = {
    "pytorch": "chakra.converters.pytorch",
    "kineto": "chakra.converters.pytorch.kineto_alone",
    "nsys": "chakra.converters.nsys",
    "cupti": "chakra.converters.cupti",
    "bigsim": "chakra.converters.bigsim",
    "flexflow": "chakra.converters.flexflow",
    "text": "chakra.converters.astrasim_text",
    "json": "chakra.converters.chakra_json",
}

#: Bytes of (decompressed) input every plugin's `accept` sees.
PREFIX_BYTES = 64 * 1024
#: A tar whose first members are all something else is not searched further.
_TAR_MEMBERS = 64

__all__ = ["PLUGINS", "PREFIX_BYTES", "ConversionResult", "load", "plugins", "read_prefix", "detect", "detect_format",
           "lazy_exports", "unrecognised_extras", "expand_inputs", "one_input"]  # fmt: skip


def lazy_exports(package: str, table: dict[str, str]) -> Any:
    """A module `__getattr__` serving `table`'s names (name -> submodule of `package`) on first
    use, so that a plugin module stays cheap to import: `__getattr__ = lazy_exports(...)`."""

    def __getattr__(name: str) -> Any:
        if name in table:
            return getattr(importlib.import_module(f"{package}.{table[name]}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__


def load(name: str) -> Optional[ModuleType]:
    """The plugin module for FORMAT `name`, or None if it is not part of this build (or broken)."""
    module_name = PLUGINS[name]
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            _report_broken(name, exc)
        return None
    except Exception as exc:  # a broken converter must not take the others down; tests load each one
        _report_broken(name, exc)
        return None


def _report_broken(name: str, exc: BaseException) -> None:
    import sys

    print(f"chakra: converter {name!r} unavailable: {type(exc).__name__}: {exc}", file=sys.stderr)


def plugins() -> dict[str, ModuleType]:
    """Every format of this build, in `PLUGINS` order."""
    return {name: mod for name in PLUGINS if (mod := load(name)) is not None}


# ---------------------------------------------------------------------------------------------
# Reading an input's first bytes once


class _Gunzip:
    """A read-only stream of a gzip file's decompressed bytes that stops quietly at damage.

    Output per call is bounded (max_length), so a small gzip bomb cannot blow up the sniff.
    """

    def __init__(self, raw: BinaryIO, first: bytes) -> None:
        self._raw = raw
        self._pending = first
        self._inflate = zlib.decompressobj(31)
        self._buf = b""
        self._done = False

    def _fill(self, want: int) -> None:
        while len(self._buf) < want and not self._done:
            data = self._inflate.unconsumed_tail or self._pending or self._raw.read(PREFIX_BYTES)
            self._pending = b""
            if not data:
                self._done = True
                break
            try:
                self._buf += self._inflate.decompress(data, want - len(self._buf))
            except zlib.error:
                self._done = True
            if self._inflate.eof:
                self._done = True

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            n = PREFIX_BYTES  # tarfile's stream mode asks in blocks; never read a whole file here
        self._fill(n)
        out, self._buf = self._buf[:n], self._buf[n:]
        return out


class _Chain:
    """`head` followed by the rest of a stream (so the bytes already read are not read again)."""

    def __init__(self, head: bytes, rest: Any) -> None:
        self._head = head
        self._rest = rest

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            n = PREFIX_BYTES
        if self._head:
            out, self._head = self._head[:n], self._head[n:]
            return out
        return self._rest.read(n)


def _is_tar(head: bytes) -> bool:
    return len(head) > 262 and head[257:262] == b"ustar"


def _first_json_member(stream: Any, size: int) -> bytes:
    """The first `size` bytes of the first .json (or .json.gz) member of a tar stream."""
    import tarfile  # only for a tar (sniffing): its import is start-up every other input would pay

    try:
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            for i, member in enumerate(tar):
                if i >= _TAR_MEMBERS:
                    break
                base = member.name.rsplit("/", 1)[-1]
                # macOS AppleDouble files ("._x.json") ride along in tars made on a Mac.
                if not member.isfile() or base.startswith("._") or not base.endswith((".json", ".json.gz")):
                    continue
                f = tar.extractfile(member)
                if f is None:
                    return b""
                data = f.read(size)
                if data[:2] == b"\x1f\x8b":
                    import io

                    data = _Gunzip(io.BytesIO(data), b"").read(size)
                return data
    except (tarfile.TarError, OSError, EOFError, ValueError):
        pass
    return b""


def read_prefix(path: Path, size: int = PREFIX_BYTES) -> bytes:
    """The first `size` bytes of the input every plugin's `accept` sees.

    The file is read once from its start: a gzip file is decompressed as it is read (once), and a
    tar (plain or gzipped) yields the start of its first .json member, since that is the trace the
    formats that ship as tarballs (PyTorch ETs) hold. Unreadable input gives b"".
    """
    try:
        with open(path, "rb") as f:
            head = f.read(size)
            stream: Any = f
            if head[:2] == b"\x1f\x8b":
                stream = _Gunzip(f, head)
                head = stream.read(size)
            if _is_tar(head):
                return _first_json_member(_Chain(head, stream), size)
            return head
    except OSError:
        return b""


# ---------------------------------------------------------------------------------------------
# Detection


def detect(path: Path) -> list[str]:
    """Every format whose plugin accepts `path` (a folder asks the plugins that take folders)."""
    path = Path(path)
    found = []
    if path.is_dir():
        for name, mod in plugins().items():
            accept_dir = getattr(mod, "accept_dir", None)
            if accept_dir is not None and accept_dir(path):
                found.append(name)
        return found
    prefix = read_prefix(path)
    if not prefix:
        return found
    for name, mod in plugins().items():
        if mod.accept(prefix):
            found.append(name)
    return found


def _is_chakra_et(path: Path) -> bool:
    """A .et file whose metadata and first node decode (only asked once no plugin took the file)."""
    if not path.name.endswith((".et", ".et.gz")):
        return False
    from chakra.errors import ChakraError
    from chakra.io import TraceReader

    try:
        with TraceReader(path) as reader:
            next(iter(reader), None)
        return True
    except (ChakraError, OSError, ValueError):
        return False


def unrecognised_extras(inputs: list[Path]) -> list[Path]:
    """Inputs among several that no format takes and whose names carry no rank number (a
    manifest.json that a shell glob such as DIR/*.json brings along): `convert auto` skips them
    with a note, as the batch converters skip such files in a folder."""
    if len(inputs) < 2:
        return []
    extras = [p for p in inputs if Path(p).is_file() and not re.search(r"\d", Path(p).name) and not detect(p)]
    return extras if len(extras) < len(inputs) else []


def detect_format(inputs: list[Path]) -> str:
    """The format to convert `inputs` with, or an InputError saying which input is the problem.

    Every input must be in one format, or in a format plus its `COMPANIONS` (PyTorch ETs with
    their Kineto traces).
    """
    formats: dict[str, Path] = {}  # format -> its first input
    for path in inputs:
        if not Path(path).exists():
            raise InputError(f"{path}: no such file")
        if is_special(path):  # reading a FIFO's or device's head would block or never end
            check_input(path, "trace file")
        found = detect(path)
        if not found and _is_chakra_et(Path(path)):
            raise InputError(
                f"{path}: already a Chakra trace (.et), nothing to convert: use it as it is "
                f"(chakra validate / stats / simulate {path}); chakra jsonize gives its JSON form"
            )
        if not found:
            names = ", ".join(PLUGINS)
            raise InputError(f"{path}: format not recognised (none of {names}); name it: chakra convert FORMAT ...")
        if len(found) > 1:
            raise InputError(f"{path}: could be any of {', '.join(found)}; name it: chakra convert FORMAT ...")
        formats.setdefault(found[0], Path(path))
    if not formats:
        raise InputError("no input given")
    for fmt in formats:
        module = load(fmt)
        if set(formats) - {fmt} <= set(getattr(module, "COMPANIONS", ())):
            return fmt
    (first, _), (other, path) = list(formats.items())[:2]
    raise InputError(f"{path}: is {other} but earlier inputs are {first}; convert them separately")


# ---------------------------------------------------------------------------------------------
# Naming the inputs


def _suffixes(modules: list[ModuleType]) -> tuple[str, ...]:
    """File name endings of the formats' inputs (EXTENSIONS entries that are endings)."""
    return tuple(dict.fromkeys(e for m in modules for e in getattr(m, "EXTENSIONS", ()) if e.startswith(".")))


def expand_inputs(
    fmt: Optional[str], args: Sequence[Path], *, allow_stdin: bool = True, note: Optional[Callable[[str], None]] = None
) -> tuple[list[Path], list[Path]]:
    """(files, skipped) that a converter's arguments name (`chakra.inputs.expand_files`): files,
    folders searched for the format's files (and its `COMPANIONS`'), quoted patterns, PREFIXes
    and `-`. In a folder or a pattern's matches, a file is kept when the format (or a companion)
    recognises its first bytes (`read_prefix`, 64 KiB): a `manifest.json` or `timing.json` beside
    the traces is skipped, and `-k FOLDER` takes the Kineto traces of a folder that holds the ETs
    too. `fmt` None (`convert auto`): any format's files. A folder the format reads as a whole
    (`accept_dir`: BigSim logs) stays one input, and the files of such a format are all kept (a
    BigSim log set is read together). `note(line)` hears of each file skipped."""
    from chakra.inputs import expand_files

    if fmt is None:
        modules = list(plugins().values())
    else:
        module = load(fmt)
        modules = [m for m in (module, *(load(c) for c in getattr(module, "COMPANIONS", ()))) if m is not None]
    folder_readers = [m.accept_dir for m in modules if hasattr(m, "accept_dir")]

    def keep_folder(path: Path) -> bool:
        return any(accept(path) for accept in folder_readers)

    def is_theirs(path: Path) -> bool:
        head = read_prefix(path)
        return bool(head) and any(m.accept(head) for m in modules)

    whole_sets = fmt is not None and bool(folder_readers)
    files, skipped = expand_files(
        args,
        _suffixes(modules),
        wanted=None if whole_sets else is_theirs,
        what=f"{fmt} input" if fmt else "trace",
        keep_folder=keep_folder if folder_readers else None,
        allow_stdin=allow_stdin and not whole_sets,  # a log set is read by its files' names
    )
    if note is not None:
        for path in skipped:
            note(f"skipped {path}: not {'a ' + fmt + ' input' if fmt else 'a trace of any format'}")
    return files, skipped


def one_input(fmt: str, arg: Path) -> Path:
    """The one file a single-input format (a task graph, a text workload) is given: a file, `-`,
    or a folder, pattern or PREFIX naming exactly one."""
    files, _ = expand_inputs(fmt, [arg])
    if len(files) != 1:
        shown = ", ".join(str(p) for p in files[:4]) + (", ..." if len(files) > 4 else "")
        raise InputError(f"{arg}: names {len(files)} files ({shown}); {fmt} converts one at a time")
    return files[0]

"""Reading and writing Chakra `.et` streams, rank file naming, and format dispatch.

File format (official-chakra.md §1.2): a stream of messages, each a base-128 varint byte length
then the serialized message; the first is a GlobalMetadata, every later one a Node; EOF ends it.
Unlike the official reader, a zero-length message is a valid empty message (a Node with every
field at its default serializes to nothing), and a truncated or corrupt stream is an error naming
the file, the message index and the byte offset, never a silent end.

gzip: detected on read by the magic bytes 1f 8b; chosen on write by a `.gz` suffix. Offsets in
errors on gzip files count uncompressed bytes.
"""

from __future__ import annotations

import gzip
import os
import re
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, BinaryIO, Optional, Union

from google.protobuf.message import DecodeError

from chakra.errors import InputError, TraceFormatError
from chakra.schema import pb
from chakra.trace import Trace

PathLike = Union[str, os.PathLike]

GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 8 << 20  # bytes read per refill; big enough that per-chunk overhead vanishes
_RANK_RE = re.compile(r"^(?P<prefix>.*)\.(?P<rank>\d+)\.(?P<ext>et|et\.gz|json|json\.gz)$")
TRACE_SUFFIXES = (".et", ".et.gz", ".json", ".json.gz")


# ---------------------------------------------------------------------------------------------
# Low level: varints and raw message framing


def encode_varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def open_binary(path: PathLike) -> BinaryIO:
    """Open for reading, transparently gunzipping when the file starts with the gzip magic."""
    try:
        raw = open(path, "rb")  # noqa: SIM115 - returned to the caller
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, expected a trace file") from None
    except PermissionError:
        raise InputError(f"{path}: permission denied") from None
    head = raw.read(2)
    raw.seek(0)
    if head == GZIP_MAGIC:
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    return raw


def iter_raw_messages(path: PathLike, stream: Optional[BinaryIO] = None) -> Iterator[tuple[int, int, bytes]]:
    """Yield (index, byte offset, payload) for every length-delimited message in the file.

    Reads in large chunks and slices payloads out of one buffer: the per-message cost is one
    varint decode and one slice, which keeps the reader close to the bare parse loop.
    """
    own = stream is None
    f = open_binary(path) if own else stream
    assert f is not None
    try:
        buf = b""
        pos = 0
        base = 0  # file offset of buf[0]
        index = 0
        eof = False
        while True:
            # Make sure at least one whole header is buffered (or we are at EOF).
            if len(buf) - pos < 10 and not eof:
                try:
                    more = f.read(_CHUNK)
                except (OSError, EOFError, gzip.BadGzipFile) as exc:
                    raise TraceFormatError(path, f"cannot read: {exc}", index=index, offset=base + pos) from None
                if more:
                    base += pos
                    buf = buf[pos:] + more
                    pos = 0
                else:
                    eof = True
            end_buf = len(buf)
            if pos >= end_buf:
                return
            # Decode the length varint (at most 10 bytes).
            start = pos
            b = buf[pos]
            if b < 0x80:
                length = b
                pos += 1
            else:
                length = 0
                shift = 0
                while True:
                    if pos >= end_buf:
                        raise TraceFormatError(
                            path, "file ends inside a message length prefix", index=index, offset=base + start
                        )
                    b = buf[pos]
                    pos += 1
                    length |= (b & 0x7F) << shift
                    if b < 0x80:
                        break
                    shift += 7
                    if shift >= 64:
                        raise TraceFormatError(
                            path, "malformed length prefix (varint longer than 10 bytes)", index=index, offset=base + start
                        )
            end = pos + length
            if end > end_buf:
                # Refill until the whole payload is buffered.
                while end > len(buf) and not eof:
                    try:
                        more = f.read(max(_CHUNK, end - len(buf)))
                    except (OSError, EOFError, gzip.BadGzipFile) as exc:
                        raise TraceFormatError(path, f"cannot read: {exc}", index=index, offset=base + start) from None
                    if not more:
                        eof = True
                        break
                    base += start
                    buf = buf[start:] + more
                    pos -= start
                    end -= start
                    start = 0
                if end > len(buf):
                    raise TraceFormatError(
                        path,
                        f"truncated: message of {length} bytes but only {len(buf) - pos} remain",
                        index=index,
                        offset=base + start,
                    )
            yield index, base + start, buf[pos:end]
            pos = end
            index += 1
    finally:
        if own:
            f.close()


# ---------------------------------------------------------------------------------------------
# Reading


class TraceReader:
    """Streaming reader of one `.et` file: `.metadata`, then iterate to get Nodes one by one.

    >>> with TraceReader("trace.0.et") as r:
    ...     for node in r: ...
    """

    def __init__(self, path: PathLike) -> None:
        self.path = Path(path)
        self._stream = open_binary(self.path)
        self._messages = iter_raw_messages(self.path, self._stream)
        try:
            first = next(self._messages, None)
        except Exception:
            self.close()
            raise
        if first is None:
            self.close()
            raise TraceFormatError(self.path, "empty file: expected a GlobalMetadata message", index=0, offset=0)
        self.metadata = pb.GlobalMetadata()
        try:
            self.metadata.ParseFromString(first[2])
        except DecodeError as exc:
            self.close()
            raise TraceFormatError(
                self.path, f"not a Chakra trace: cannot decode GlobalMetadata ({exc})", index=0, offset=0
            ) from None

    def __iter__(self) -> Iterator[pb.Node]:
        from_string = pb.Node.FromString
        index = offset = 0
        try:
            for index, offset, payload in self._messages:
                yield from_string(payload)
        except DecodeError as exc:
            raise TraceFormatError(self.path, f"corrupt Node message ({exc})", index=index, offset=offset) from None
        finally:
            self.close()

    def close(self) -> None:
        self._stream.close()

    def __enter__(self) -> TraceReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def is_json_file(path: PathLike) -> bool:
    """True when the (possibly gzipped) file's first non-blank byte opens a JSON document."""
    with open_binary(path) as f:
        head = f.read(64).lstrip()
    return head[:1] in (b"{", b"[")


def read_trace(path: PathLike, rank: Optional[int] = None) -> Trace:
    """Read a whole trace: `.et` (plain or gzip), our JSON form, or the official JSON form."""
    path = Path(path)
    if rank is None:
        rank = rank_from_path(path)
    if is_json_file(path):
        from chakra.jsonform import read_json_trace

        trace = read_json_trace(path)
    else:
        with TraceReader(path) as reader:
            trace = Trace(metadata=reader.metadata, nodes=list(reader))
    trace.path = path
    if trace.rank is None:
        trace.rank = rank
    return trace


def iter_nodes(path: PathLike) -> tuple[pb.GlobalMetadata, Iterator[pb.Node]]:
    """(metadata, node iterator) without holding all nodes; JSON inputs are read whole."""
    if is_json_file(path):
        trace = read_trace(path)
        return trace.metadata, iter(trace.nodes)
    reader = TraceReader(path)
    return reader.metadata, iter(reader)


# ---------------------------------------------------------------------------------------------
# Writing


@contextmanager
def atomic_output(path: PathLike, mode: str = "wb") -> Iterator[IO]:
    """Write to a temporary file next to `path` and rename it into place only on success."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode) as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


class TraceWriter:
    """Streaming writer: `write_metadata` once, then `write_node` / `write_nodes`.

    Output goes to a temporary file renamed on `close()`; on an exception inside the `with`
    block the partial file is removed. A `.gz` suffix gzips the stream.
    """

    def __init__(self, path: PathLike, *, compresslevel: int = 6) -> None:
        self.path = Path(path)
        self._ctx = atomic_output(self.path)
        raw = self._ctx.__enter__()
        self._raw = raw
        self._out = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=compresslevel, mtime=0) if str(
            self.path
        ).endswith(".gz") else raw
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._wrote_metadata = False
        self.nodes_written = 0

    def write_metadata(self, metadata: pb.GlobalMetadata) -> None:
        if self._wrote_metadata:
            raise RuntimeError("GlobalMetadata already written")
        self._append(metadata.SerializeToString())
        self._wrote_metadata = True

    def write_node(self, node: pb.Node) -> None:
        if not self._wrote_metadata:
            self.write_metadata(pb.GlobalMetadata())
        self._append(node.SerializeToString())
        self.nodes_written += 1

    def write_nodes(self, nodes: Iterable[pb.Node]) -> None:
        if not self._wrote_metadata:
            self.write_metadata(pb.GlobalMetadata())
        pending = self._pending
        count = 0
        size = self._pending_bytes
        for node in nodes:
            data = node.SerializeToString()
            n = len(data)
            pending.append(_VARINT_CACHE[n] if n < 16384 else encode_varint(n))
            pending.append(data)
            size += n
            count += 1
            if size > _CHUNK:
                self._pending_bytes = size
                self._flush()
                size = 0
        self._pending_bytes = size
        self.nodes_written += count

    def _append(self, data: bytes) -> None:
        n = len(data)
        self._pending.append(_VARINT_CACHE[n] if n < 16384 else encode_varint(n))
        self._pending.append(data)
        self._pending_bytes += n
        if self._pending_bytes > _CHUNK:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            self._out.write(b"".join(self._pending))
            self._pending.clear()
        self._pending_bytes = 0

    def close(self) -> None:
        if not self._wrote_metadata:
            self.write_metadata(pb.GlobalMetadata())
        self._flush()
        if self._out is not self._raw:
            self._out.close()
        self._ctx.__exit__(None, None, None)

    def abort(self) -> None:
        if self._out is not self._raw:
            self._out.close()
        try:
            self._ctx.__exit__(RuntimeError, RuntimeError("aborted"), None)
        except RuntimeError:
            pass

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


_VARINT_CACHE = [encode_varint(i) for i in range(16384)]


def write_trace(path: PathLike, trace: Trace) -> Path:
    """Write one rank's trace: JSON form when the name ends in .json(.gz), else `.et` (gzip on .gz)."""
    path = Path(path)
    name = path.name
    if name.endswith(".json") or name.endswith(".json.gz"):
        from chakra.jsonform import write_json_trace

        write_json_trace(path, trace)
        return path
    with TraceWriter(path) as w:
        w.write_metadata(trace.metadata)
        w.write_nodes(trace.nodes)
    return path


# ---------------------------------------------------------------------------------------------
# Rank files: PREFIX.<rank>.et


def rank_path(prefix: PathLike, rank: int, suffix: str = ".et") -> Path:
    return Path(f"{os.fspath(prefix)}.{rank}{suffix}")


def rank_from_path(path: PathLike) -> Optional[int]:
    m = _RANK_RE.match(Path(path).name)
    return int(m.group("rank")) if m else None


def write_rank_traces(prefix: PathLike, traces: Iterable[Trace], suffix: str = ".et") -> list[Path]:
    """Write each trace to PREFIX.<rank>.et; every trace must carry its rank."""
    written = []
    for i, trace in enumerate(traces):
        rank = trace.rank if trace.rank is not None else i
        written.append(write_trace(rank_path(prefix, rank, suffix), trace))
    return written


def expand_trace_args(args: Sequence[PathLike]) -> list[tuple[Optional[int], Path]]:
    """Turn CLI trace arguments into (rank, path) pairs, sorted by rank within each prefix.

    An argument naming an existing file is taken as is (rank from its name `X.<rank>.et`, if any).
    Anything else is a PREFIX meaning every `PREFIX.<rank>.et` (or `.et.gz`, `.json`) file.
    """
    out: list[tuple[Optional[int], Path]] = []
    for arg in args:
        p = Path(arg)
        if p.is_file():
            out.append((rank_from_path(p), p))
            continue
        if p.is_dir():
            raise InputError(f"{p}: is a directory; give a trace file or a PREFIX of PREFIX.<rank>.et files")
        parent = p.parent if str(p.parent) else Path(".")
        stem = p.name
        found: dict[int, Path] = {}
        if parent.is_dir():
            for cand in parent.iterdir():
                m = _RANK_RE.match(cand.name)
                if m and m.group("prefix") == stem and cand.is_file():
                    rank = int(m.group("rank"))
                    # Prefer .et over other forms when several exist for one rank.
                    if rank not in found or cand.name.endswith(".et"):
                        found[rank] = cand
        if not found:
            raise InputError(f"{arg}: no such file, and no {arg}.<rank>.et files found")
        out.extend((rank, found[rank]) for rank in sorted(found))
    return out


def read_traces(args: Sequence[PathLike]) -> list[Trace]:
    """Read every trace named by CLI-style arguments (files or PREFIXes); ranks fill in by order."""
    traces = []
    for i, (rank, path) in enumerate(expand_trace_args(args)):
        trace = read_trace(path, rank=rank)
        if trace.rank is None:
            trace.rank = i
        traces.append(trace)
    return traces

"""Reading and writing Chakra `.et` streams, rank file naming, and format dispatch.

File format (docs/chakra-format.md §1.2): a stream of messages, each a base-128 varint byte length
then the serialized message; the first is a GlobalMetadata, every later one a Node; EOF ends it.
Unlike the official reader, a zero-length message is a valid empty message (a Node with every
field at its default serializes to nothing), and a truncated or corrupt stream is an error naming
the file, the message index and the byte offset, never a silent end.

gzip: detected on read by the magic bytes 1f 8b (un-gzipped by `chakra.compression`, which
refuses corrupt data and decompression bombs); chosen on write by a `.gz` suffix. Offsets in
errors on gzip files count uncompressed bytes.
"""

from __future__ import annotations

import functools
import gzip
import io
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from itertools import chain, islice
from pathlib import Path
from typing import IO, Any, BinaryIO, Optional, Union

from google.protobuf.message import DecodeError

from chakra.compression import GZIP_MAGIC, GuardedGzip
from chakra.errors import InputError, OutputError, TraceFormatError, excerpt
from chakra.files import WRITE_ERRNOS, check_input, create_temp, remove_stale_temps, write_error
from chakra.inputs import TRACE_NAME, expand_traces
from chakra.schema import pb
from chakra.trace import Trace

PathLike = Union[str, os.PathLike]
#: The one shape of a progress callback: `progress(done, total)` after each step of long work;
#: `total` is 0 while it is not known (a row count streamed from a database, say).
Progress = Callable[[int, int], None]

_CHUNK = 8 << 20  # bytes read per refill; big enough that per-chunk overhead vanishes
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
_RANK_RE = TRACE_NAME  # PREFIX.<rank>.et (chakra.inputs)
MAX_MESSAGE_BYTES = (2 << 30) - 1  # protobuf cannot parse a bigger message
MAX_EMPTY_MESSAGES = 1000


# ---------------------------------------------------------------------------------------------
# Low level: varints and raw message framing


def encode_varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


@contextmanager
def input_file_errors(path: PathLike, what: str = "trace file") -> Iterator[None]:
    """Open inputs inside this: the usual reasons a file cannot be read become one-line
    InputErrors naming it, and the file is recorded as an input of the running command (so no
    output of that command may replace it)."""
    note_input(path, check_input(path, what))  # one stat for both (a thousand rank files notice)
    try:
        yield
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, expected a {what}") from None
    except PermissionError:
        raise InputError(f"{path}: permission denied") from None
    except OSError as exc:
        if exc.filename is None or os.fspath(exc.filename) != os.fspath(path):
            raise
        raise InputError(f"{path}: cannot read: {exc.strerror}") from None


def _open_raw(path: PathLike) -> BinaryIO:
    with input_file_errors(path):
        return open(path, "rb")  # noqa: SIM115 - returned to the caller


def is_gzip(path: PathLike) -> bool:
    with _open_raw(path) as f:
        return f.read(2) == GZIP_MAGIC


def open_binary(path: PathLike) -> BinaryIO:
    """Open for reading, transparently gunzipping when the file starts with the gzip magic.

    The gunzip is `chakra.compression`'s: corrupt data and decompression bombs become one
    TraceFormatError naming the file.
    """
    raw = _open_raw(path)
    head = raw.read(2)
    raw.seek(0)
    if head == GZIP_MAGIC:
        try:
            return GuardedGzip(raw, path)  # type: ignore[return-value]
        except BaseException:
            raw.close()
            raise
    return raw


def read_input_bytes(path: PathLike) -> bytes:
    """The whole (decompressed) content of an input, within `chakra.compression`'s limits."""
    with open_binary(path) as f:
        return f.read()


def decompress_to(path: PathLike, dst: BinaryIO) -> int:
    """Stream the decompressed content of `path` into `dst`; returns the number of bytes written."""
    n = 0
    with open_binary(path) as src:
        while True:
            chunk = src.read(8 << 20)
            if not chunk:
                return n
            dst.write(chunk)
            n += len(chunk)


#: Files people hand to a trace reader by mistake, by their first bytes: what they are, what to run.
_OTHER_FORMATS = ((b"SQLite format 3\x00", "an SQLite database (an Nsight Systems report?)", "chakra convert nsys"),)


def _refuse_other_formats(path: PathLike, head: bytes) -> None:
    for magic, what, command in _OTHER_FORMATS:
        if head.startswith(magic):
            raise TraceFormatError(
                path, f"{what}, not a Chakra trace: convert it first ({command} {path} -o PREFIX)", index=0, offset=0
            )


def iter_payload_batches(path: PathLike, stream: Optional[BinaryIO] = None) -> Iterator[tuple[int, int, list[bytes]]]:
    """Yield (index of first message, its byte offset, [framed messages]) for runs of whole messages.

    Each item of the list is one message *with* its length prefix. This is the hot loop of every
    reader: it frames messages out of 8 MiB buffers in batches of about 64 KiB, and the
    per-message Python work is one byte test, one slice and one append.
    """
    own = stream is None
    f = open_binary(path) if own else stream
    assert f is not None
    total = _plain_size(f)
    empties = 0
    index = 0
    base = 0  # file offset of buf[0]
    buf = b""
    pos = 0
    eof = False
    try:
        while True:
            n = len(buf)
            if n - pos < (1 << 16) and not eof:
                buf, base, pos, eof = _refill(f, path, buf, base, pos, _CHUNK, index)
                n = len(buf)
                if base == 0 and pos == 0:
                    _refuse_other_formats(path, buf)
            if pos >= n:
                return
            batch: list[bytes] = []
            append = batch.append
            first_index, first_offset = index, base + pos
            stop = min(n, pos + (1 << 16))
            while pos < stop:
                b = buf[pos]
                if b < 0x80:
                    end = pos + 1 + b
                    if end > n:
                        break
                    append(buf[pos:end])
                    pos = end
                    continue
                # Multi-byte length prefix (messages of 128 bytes or more).
                length = b & 0x7F
                shift = 7
                q = pos + 1
                while True:
                    if q >= n:
                        if eof:
                            raise TraceFormatError(
                                path,
                                "file ends inside a message length prefix",
                                index=index + len(batch),
                                offset=base + pos,
                            )
                        break
                    c = buf[q]
                    q += 1
                    length |= (c & 0x7F) << shift
                    if c < 0x80:
                        break
                    shift += 7
                    if shift >= 70:
                        raise TraceFormatError(
                            path,
                            "malformed length prefix (varint longer than 10 bytes)",
                            index=index + len(batch),
                            offset=base + pos,
                        )
                if q > n or (q == n and buf[q - 1] >= 0x80):
                    break
                if length > MAX_MESSAGE_BYTES:
                    _too_long(path, length, index + len(batch), base + pos)
                end = q + length
                if end > n:
                    break
                append(buf[pos:end])
                pos = end
            index += len(batch)
            if batch:
                # A zero-length message is an empty Node (id 0); a real trace has at most one, so
                # many of them mean a run of zero bytes (e.g. a gzip bomb of zeros), which would
                # otherwise become millions of nodes.
                empties += batch.count(b"\x00")
                if empties > MAX_EMPTY_MESSAGES:
                    raise TraceFormatError(
                        path,
                        f"more than {MAX_EMPTY_MESSAGES} empty (zero-length) messages: not a Chakra trace "
                        "(a run of zero bytes?)",
                        index=first_index,
                        offset=first_offset,
                    )
                yield first_index, first_offset, batch
                continue
            # Not even one whole message buffered: read until the pending one fits, or fail.
            if eof:
                length, q = _peek_length(buf, pos)
                raise TraceFormatError(
                    path,
                    f"truncated: message of {length} bytes but only {n - q} remain",
                    index=index,
                    offset=base + pos,
                )
            need = _peek_length(buf, pos)
            if need[0] > MAX_MESSAGE_BYTES:
                _too_long(path, need[0], index, base + pos)
            if need[0] >= 0 and total is not None and base + need[1] + need[0] > total:
                # Known file size: say so now instead of trying to read what is not there.
                raise TraceFormatError(
                    path,
                    f"truncated: message of {need[0]} bytes but only {total - base - need[1]} remain",
                    index=index,
                    offset=base + pos,
                )
            want = max(_CHUNK, (need[1] + need[0]) - n if need[0] >= 0 else _CHUNK)
            buf, base, pos, eof = _refill(f, path, buf, base, pos, want, index)
    finally:
        if own:
            f.close()


def _plain_size(f: BinaryIO) -> Optional[int]:
    """Size of a plain (not decompressed) file, to bound declared message lengths; else None."""
    if not isinstance(f, (io.BufferedReader, io.FileIO)):
        return None
    try:
        return os.fstat(f.fileno()).st_size
    except (OSError, ValueError):
        return None


def _too_long(path: PathLike, length: int, index: int, offset: int) -> None:
    raise TraceFormatError(
        path,
        f"message length prefix claims {length:,} bytes, over protobuf's 2 GiB message limit (corrupt prefix)",
        index=index,
        offset=offset,
    )


def _refill(
    f: BinaryIO, path: PathLike, buf: bytes, base: int, pos: int, size: int, index: int
) -> tuple[bytes, int, int, bool]:
    """Drop consumed bytes and append up to `size` more: (buf, base, pos, eof) for the caller."""
    try:
        more = f.read(size)
    except (OSError, EOFError) as exc:
        raise TraceFormatError(path, f"cannot read: {exc}", index=index, offset=base + pos) from None
    if not more:
        return buf, base, pos, True
    return buf[pos:] + more, base + pos, 0, False


def _peek_length(buf: bytes, pos: int) -> tuple[int, int]:
    """(declared length, payload start) of the message at pos; (-1, end) if the prefix is cut."""
    length = 0
    shift = 0
    q = pos
    while q < len(buf):
        c = buf[q]
        q += 1
        length |= (c & 0x7F) << shift
        if c < 0x80:
            return length, q
        shift += 7
    return -1, q


def iter_raw_messages(path: PathLike, stream: Optional[BinaryIO] = None) -> Iterator[tuple[int, int, bytes]]:
    """Yield (index, byte offset, payload) for every length-delimited message in the file."""
    for index, offset, batch in iter_payload_batches(path, stream):
        for framed in batch:
            yield index, offset, framed[_prefix_size(framed) :]
            index += 1
            offset += len(framed)


def _prefix_size(framed: bytes) -> int:
    k = 0
    while framed[k] >= 0x80:
        k += 1
    return k + 1


#: FieldDescriptorProto's label and type numbers (descriptor.proto) the runtime messages use
REPEATED, MESSAGE, BYTES = 3, 11, 12

#: A runtime message: its name and fields, each (name, number, label, type, type name or "")
RuntimeMessage = tuple[str, tuple[tuple[str, int, int, int, str], ...]]


def runtime_message(name: str, messages: Sequence[RuntimeMessage], dependency: Sequence[str] = ()) -> Any:
    """The class of message `chakra_internal.<name>` in protobuf's default pool: defined the first
    time, with the message types `messages` (in that order) in a file of their own (package
    `chakra_internal`, importing `dependency`). For views of the wire form that one upb call can
    parse; they never appear in files.

    The file's FileDescriptorProto is written here (`_file_descriptor`) rather than built with
    `descriptor_pb2`, whose import builds descriptor.proto's own descriptors: about 8 M
    instructions, 1% of a small `chakra simulate`, which imports this module for `NodeBatch`."""
    from google.protobuf import descriptor_pool
    from google.protobuf.message_factory import GetMessageClass

    full = f"chakra_internal.{name}"
    pool = descriptor_pool.Default()
    try:
        descriptor = pool.FindMessageTypeByName(full)
    except KeyError:
        pool.AddSerializedFile(_file_descriptor(f"chakra_internal/{name.lower()}.proto", dependency, messages))
        descriptor = pool.FindMessageTypeByName(full)
    return GetMessageClass(descriptor)


def _file_descriptor(path: str, dependency: Sequence[str], messages: Sequence[RuntimeMessage]) -> bytes:
    """The serialized FileDescriptorProto of a proto3 file `path` in package `chakra_internal`:
    name (1), package (2), dependency (3), message_type (4: DescriptorProto name 1, field 2:
    FieldDescriptorProto name 1, number 3, label 4, type 5, type_name 6) and syntax (12), in the
    order protobuf writes them."""

    def text(number: int, value: str) -> bytes:
        return _length_field(number, value.encode())

    out = [text(1, path), text(2, "chakra_internal"), *(text(3, d) for d in dependency)]
    for message, fields in messages:
        parts = [text(1, message)]
        for field, number, label, kind, type_name in fields:
            body = text(1, field) + b"\x18" + encode_varint(number) + b"\x20" + encode_varint(label)
            body += b"\x28" + encode_varint(kind) + (text(6, type_name) if type_name else b"")
            parts.append(_length_field(2, body))
        out.append(_length_field(4, b"".join(parts)))
    out.append(text(12, "proto3"))
    return b"".join(out)


def _length_field(number: int, payload: bytes) -> bytes:
    return encode_varint(number << 3 | 2) + encode_varint(len(payload)) + payload


#: `NodeBatch { repeated ChakraProtoMsg.Node nodes = 1; }`. A length-delimited stream becomes the
#: wire form of that repeated field by putting the tag byte 0x0A before each message, so one upb
#: call parses a whole batch of nodes, instead of one Python-level FromString call per node.
NodeBatch = runtime_message(
    "NodeBatch", [("NodeBatch", (("nodes", 1, REPEATED, MESSAGE, ".ChakraProtoMsg.Node"),))], [pb.DESCRIPTOR.name]
)


# ---------------------------------------------------------------------------------------------
# Reading


class TraceReader:
    """Streaming reader of one `.et` file: `.metadata`, then iterate to get Nodes one by one.

    >>> with TraceReader("trace.0.et") as r:
    ...     for node in r: ...
    """

    def __init__(self, path: PathLike, shared: Optional[dict[bytes, pb.Node]] = None) -> None:
        self.path = Path(path)
        self.shared = shared
        self._stream = open_binary(self.path)
        self._batches = iter_payload_batches(self.path, self._stream)
        try:
            first = next(self._batches, None)
        except Exception:
            self.close()
            raise
        if first is None:
            self.close()
            raise TraceFormatError(self.path, "empty file: expected a GlobalMetadata message", index=0, offset=0)
        self.metadata = pb.GlobalMetadata()
        try:
            head = first[2][0]
            self.metadata.ParseFromString(head[_prefix_size(head) :])
        except DecodeError as exc:
            self.close()
            raise TraceFormatError(
                self.path, f"not a Chakra trace: cannot decode GlobalMetadata ({exc})", index=0, offset=0
            ) from None
        first_index, first_offset, first_batch = first
        self._first = (1, first_offset + len(first_batch[0]), first_batch[1:])

    def __iter__(self) -> Iterator[pb.Node]:
        # One upb call parses a whole batch (see NodeBatch); chain() then hands out its nodes at
        # C speed, with no Python frame per node. A DecodeError can only come from the batch
        # parse, so it is caught there and turned into an error naming the message and offset.
        return chain.from_iterable(self._node_batches())

    def _node_batches(self) -> Iterator[Iterable[pb.Node]]:
        parse = NodeBatch.FromString
        shared = self.shared
        try:
            for batch_info in chain((self._first,), self._batches):
                framed = batch_info[2]
                if not framed:
                    continue
                if shared is not None:
                    # only the messages not met before are parsed (as one batch, in order)
                    framed = [m for m in dict.fromkeys(framed) if m not in shared]
                try:
                    nodes = parse(b"\x0a" + b"\x0a".join(framed)).nodes if framed else ()
                except DecodeError:
                    self._raise_decode_error(*batch_info)
                if shared is None:
                    yield nodes
                    continue
                shared.update(zip(framed, nodes))
                yield [shared[m] for m in batch_info[2]]
        finally:
            self.close()

    def _raise_decode_error(self, index: int, offset: int, batch: list[bytes]) -> None:
        for framed in batch:
            try:
                pb.Node.FromString(framed[_prefix_size(framed) :])
            except DecodeError as exc:
                raise TraceFormatError(self.path, f"corrupt Node message ({exc})", index=index, offset=offset) from None
            index += 1
            offset += len(framed)
        raise TraceFormatError(self.path, "corrupt Node message", index=index, offset=offset)

    def close(self) -> None:
        self._stream.close()

    def __enter__(self) -> TraceReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def is_json_file(path: PathLike) -> bool:
    """True when the (possibly gzipped) file's first non-blank byte opens a JSON document.

    Only JSON's own whitespace is skipped: a `.et` file starts with a length prefix, a field tag
    and a string length, and with bytes.lstrip()'s wider set (vertical tab, form feed) a
    GlobalMetadata whose version starts with "{" could pass for JSON.
    """
    name = os.fspath(path)
    # A file named .et is a stream, whatever its first byte: it may well be "[" or "{" (the
    # length prefix of a 91- or 123-byte GlobalMetadata).
    if name.endswith((".et", ".et.gz")):
        return False
    with open_binary(path) as f:
        head = f.read(64).lstrip(b" \t\n\r")
    return head[:1] in (b"{", b"[")


def read_json_trace(path: PathLike) -> Trace:
    """A trace in our JSON form or the official one (`chakra.jsonform`), plain or gzipped."""
    from chakra.jsonform import parse_json_trace  # msgspec + orjson: only for JSON traces

    return parse_json_trace(read_input_bytes(path), path)


def read_trace(path: PathLike, rank: Optional[int] = None, shared: Optional[dict[bytes, pb.Node]] = None) -> Trace:
    """Read a whole trace: `.et` (plain or gzip), our JSON form, or the official JSON form.

    `shared` (a dict kept across calls): nodes whose messages are byte for byte the same, in this
    trace or any other read with the same dict, are one object. Only for reading: a change to one
    node would change every rank holding it. SPMD ranks repeat most of their nodes, so checks
    that memoise per node object run once per distinct node instead of once per rank.
    """
    path = Path(path)
    if rank is None:
        rank = rank_from_path(path)
    if is_json_file(path):
        trace = read_json_trace(path)
    else:
        with TraceReader(path, shared) as reader:
            trace = Trace(metadata=reader.metadata, nodes=list(reader))
    trace.path = path
    if trace.rank is None:
        trace.rank = rank
    return trace


# ---------------------------------------------------------------------------------------------
# Writing


def _file_key(path: PathLike) -> Optional[tuple[int, int]]:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISREG(st.st_mode) else None


# Regular files opened for reading by the running command, by (device, inode), so that an output
# naming one of them (under any spelling) is refused instead of destroying the input. `None` when
# no command is tracking (library use): then only the path checks below apply.
_inputs_read: ContextVar[Optional[set[tuple[int, int]]]] = ContextVar("chakra_inputs_read", default=None)


@contextmanager
def track_inputs() -> Iterator[None]:
    """Remember every input opened inside the block so outputs can never overwrite one of them
    (a nested block shares the outer one's record)."""
    if _inputs_read.get() is not None:
        yield
        return
    token = _inputs_read.set(set())
    try:
        yield
    finally:
        _inputs_read.reset(token)


def note_input(path: PathLike, st: Optional[os.stat_result] = None) -> None:
    """Record that `path` is an input of the running command (done by `input_file_errors`);
    `st`: its stat, where the caller has just taken it."""
    seen = _inputs_read.get()
    if seen is not None:
        key = _file_key(path) if st is None else (st.st_dev, st.st_ino) if stat.S_ISREG(st.st_mode) else None
        if key is not None:
            seen.add(key)


def check_output_path(path: PathLike) -> Path:
    """Refuse outputs that an atomic rename would mishandle, with one line naming the path.

    A rename replaces the directory entry: it would turn a symlink into a plain file instead of
    writing through it, and (as root) swap a FIFO or a device such as /dev/null for a regular
    file. Outputs must also never replace an input of the same command.
    """
    path = Path(path)
    if _CONTROL_RE.search(path.name):
        # Line-based tools (shells, CSV logs, `ls | ...`) and PREFIX matching cannot read such a
        # name back: refuse it now rather than write files no later command finds.
        raise OutputError(f"{excerpt(str(path))}: the name holds a newline or other control character; choose another")
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise OutputError(f"{path}: cannot write here: {exc.strerror}") from None
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            raise OutputError(f"{path}: is a symbolic link; give the path it points to, or remove it first")
        if stat.S_ISDIR(st.st_mode):
            raise OutputError(f"{path}: is a directory; give a file name")
        if not stat.S_ISREG(st.st_mode):
            raise OutputError(f"{path}: is not a regular file (a FIFO, socket or device); refusing to replace it")
        seen = _inputs_read.get()
        if seen and (st.st_dev, st.st_ino) in seen:
            raise OutputError(f"{path}: is also an input of this command; choose another output")
    parent = path.parent
    if not parent.exists():
        raise OutputError(f"{path}: directory {parent} does not exist")
    if not parent.is_dir():
        raise OutputError(f"{path}: {parent} is not a directory")
    return path


def _output_mode(path: Path) -> int:
    """The mode a plain `open(path, "w")` would give: an existing file keeps its mode, a new one
    gets 0666 less the umask (mkstemp's 0600 would make every output private)."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


class _OutputSet:
    """Finished temporary files waiting for their renames (see `output_set`)."""

    def __init__(self) -> None:
        self.pending: list[tuple[str, Path]] = []
        self.targets: set[Path] = set()

    def commit(self) -> None:
        _publish(self.pending)
        self.pending.clear()

    def discard(self) -> None:
        for tmp, _ in self.pending:
            with suppress(OSError):
                os.unlink(tmp)
        self.pending.clear()


_open_set: ContextVar[Optional[_OutputSet]] = ContextVar("chakra_output_set", default=None)


@contextmanager
def output_set() -> Iterator[None]:
    """All or nothing for several outputs (one file per rank): every `atomic_output` inside the
    block writes its temporary file, and the renames happen only when the whole block succeeded.
    On an error no output is created or replaced. Nested sets join the outermost one."""
    if _open_set.get() is not None:
        yield
        return
    outputs = _OutputSet()
    token = _open_set.set(outputs)
    try:
        yield
    except BaseException:
        outputs.discard()
        raise
    finally:
        _open_set.reset(token)
    try:
        outputs.commit()
    except BaseException:
        outputs.discard()
        raise


def adopt_output(tmp: PathLike, path: PathLike) -> None:
    """A finished temporary file written elsewhere (a process-pool worker, which cannot share the
    set) joins the open `output_set`: renamed onto `path` with the others, removed on an error.
    Outside a set it is renamed at once."""
    outputs = _open_set.get()
    if outputs is None:
        _publish([(os.fspath(tmp), Path(path))])
    else:
        outputs.pending.append((os.fspath(tmp), Path(path)))


def _publish(pending: Sequence[tuple[str, Path]]) -> None:
    """Rename finished temporary files onto their outputs, after checking every output first."""
    for _, path in pending:
        check_output_path(path)
    for tmp, path in pending:
        _rename(tmp, Path(path))


def _rename(tmp: str, path: Path) -> None:
    try:
        os.replace(tmp, path)
    except OSError as exc:
        raise write_error(path, exc) from None


@contextmanager
def atomic_output(path: PathLike, mode: str = "wb") -> Iterator[IO]:
    """Write to a temporary file next to `path` and rename it into place only on success.

    The path is checked first (`check_output_path`), and once more just before the rename, since
    an input may be opened after the output. Inside an `output_set` the rename waits for the set.
    """
    path = check_output_path(path)
    outputs = _open_set.get()
    if outputs is not None:
        if path in outputs.targets:
            raise OutputError(f"{path}: written twice by one command (two ranks map to the same file)")
        outputs.targets.add(path)
    remove_stale_temps(path)
    try:
        fd, tmp_path = create_temp(path)
    except OSError as exc:
        raise write_error(path, exc) from None
    tmp = str(tmp_path)
    try:
        os.fchmod(fd, _output_mode(path))
        with os.fdopen(fd, mode) as f:
            yield f
        if outputs is not None:
            outputs.pending.append((tmp, path))
        else:
            check_output_path(path)
            _rename(tmp, path)
    except OSError as exc:
        with suppress(OSError):
            os.unlink(tmp)
        if exc.errno in WRITE_ERRNOS:  # only writing fails this way, never reading an input
            raise write_error(path, exc) from None
        raise
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
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
        self._out = (
            gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=compresslevel, mtime=0)
            if str(self.path).endswith(".gz")
            else raw
        )
        self._varints = _varint_prefixes()
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
        """Serialize and frame nodes in chunks with C-level loops (map/zip/join), no per-node bytecode."""
        serialize = pb.Node.SerializeToString
        it = iter(nodes)
        while True:
            chunk = list(islice(it, 8192))
            if not chunk:
                break
            self.write_serialized(list(map(serialize, chunk)))

    def write_serialized(self, messages: Sequence[bytes]) -> None:
        """Frame and write already-serialized Node messages (for converters that encode bytes themselves)."""
        if not self._wrote_metadata:
            self.write_metadata(pb.GlobalMetadata())
        self._flush()
        try:
            prefixes = map(self._varints.__getitem__, map(len, messages))
            data = b"".join(chain.from_iterable(zip(prefixes, messages)))
        except IndexError:  # a node of 16 KiB or more: frame this batch the slow way
            data = b"".join(chain.from_iterable((encode_varint(len(d)), d) for d in messages))
        self._out.write(data)
        self.nodes_written += len(messages)

    def _append(self, data: bytes) -> None:
        n = len(data)
        self._pending.append(self._varints[n] if n < 16384 else encode_varint(n))
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
        with suppress(RuntimeError):
            self._ctx.__exit__(RuntimeError, RuntimeError("aborted"), None)

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


@functools.cache
def _varint_prefixes() -> list[bytes]:
    """The length prefix of every message under 16 KiB, built by the first writer (not at import:
    a command that only reads traces should not pay for it)."""
    return [bytes((i,)) for i in range(128)] + [bytes(((i & 0x7F) | 0x80, i >> 7)) for i in range(128, 16384)]


def write_json_trace(path: PathLike, trace: Trace) -> None:
    """Write our JSON form (gzip when the name ends in .gz), atomically, one node per line."""
    from chakra.jsonform import json_trace_chunks

    path = Path(path)
    with atomic_output(path) as raw:
        out = gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) if path.name.endswith(".gz") else raw
        for chunk in json_trace_chunks(trace):
            out.write(chunk)
        if out is not raw:
            out.close()


def write_trace(path: PathLike, trace: Trace) -> Path:
    """Write one rank's trace: JSON form when the name ends in .json(.gz), else `.et` (gzip on .gz)."""
    path = Path(path)
    name = path.name
    if name.endswith(".json") or name.endswith(".json.gz"):
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
    with output_set():
        for i, trace in enumerate(traces):
            rank = trace.rank if trace.rank is not None else i
            written.append(write_trace(rank_path(prefix, rank, suffix), trace))
    return written


def expand_trace_args(args: Sequence[PathLike]) -> list[tuple[Optional[int], Path]]:
    """Turn CLI trace arguments into (rank, path) pairs, sorted by rank within each prefix.

    A file is taken as is (rank from its name `X.<rank>.et`, if any); a folder means its rank
    files, a quoted pattern the trace files it matches, `-` standard input, anything else a PREFIX
    meaning every `PREFIX.<rank>.et` (or `.et.gz`, `.json`) file: `chakra.inputs.expand_traces`.
    """
    return expand_traces(args)


def open_each(
    args: Sequence[PathLike], open_one: Callable[[Path, Optional[int]], Any], progress: Optional[Progress] = None
) -> list[Any]:
    """`open_one(path, rank)` for every trace named by CLI-style arguments (files or PREFIXes).

    A trace whose rank neither its name nor its content gives takes its position in the list.
    `progress(done, total)` is called after each file (the CLI drives a progress bar with it).
    """
    pairs = expand_trace_args(args)
    out = []
    for i, (rank, path) in enumerate(pairs):
        trace = open_one(path, rank)
        if trace.rank is None:
            trace.rank = i
        out.append(trace)
        if progress is not None:
            progress(i + 1, len(pairs))
    return out


def read_traces(
    args: Sequence[PathLike], progress: Optional[Progress] = None, shared: Optional[dict[bytes, pb.Node]] = None
) -> list[Trace]:
    """Read every trace named by CLI-style arguments (files or PREFIXes); ranks fill in by order.

    `progress(done, total)` is called after each file (the CLI drives a progress bar with it).
    `shared`: identical nodes are one object across all the traces (see `read_trace`).
    """
    return open_each(args, lambda path, rank: read_trace(path, rank=rank, shared=shared), progress)

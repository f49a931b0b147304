"""Reading one rank's trace: the one way a trace becomes its GlobalMetadata and its nodes' index.

`read_rank(source, ...) -> RankRead` takes every form a rank comes in:

- a plain `.et` file, read and framed by `chakra.io.iter_payload_batches` in one pass: either whole
  (`file_messages`, files up to `WHOLE_FILE_BYTES`: the simulator keeps the bytes for its template
  comparison, `chakra.sim.loading`) or streamed in 64 KiB batches (`payloads=True`, the feeder: only
  the columns are kept, about 40 bytes per node, and the payloads stay on disk for a memory map);
- `.et.gz`: streamed through the decompressor, or for the feeder decompressed to a temporary file
  first (gzip cannot seek; `RankRead.close` removes it);
- a JSON-form file or an in-memory `Trace`: indexed from its nodes, which are kept.

The simulator (`chakra.sim.loading.RankLoader`, which adds the comparison with a template and the
compile), the ASTRA-sim checks (`chakra.sim.loading.FramedFiles.read`) and the feeder
(`chakra.feeder.et_feeder.ETFeeder`) read their ranks here.
"""

from __future__ import annotations

import io
import os
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from google.protobuf.message import DecodeError

from chakra.errors import InputError, TraceFormatError
from chakra.feeder.table import NodeTable, gunzip_to_temp, table_from_et, table_from_messages, table_from_nodes
from chakra.io import (
    GZIP_MAGIC,
    MAX_EMPTY_MESSAGES,
    MAX_MESSAGE_BYTES,
    _peek_length,
    _prefix_size,
    input_file_errors,
    is_gzip,
    is_json_file,
    iter_payload_batches,
    read_trace,
)
from chakra.schema import pb
from chakra.trace import Trace

WHOLE_FILE_BYTES = 32 << 20  # larger rank files are streamed (or hashed in blocks), never held whole


def file_messages(path: Path) -> Optional[list[bytes]]:
    """The framed messages of a plain `.et` file of at most `WHOLE_FILE_BYTES` whose first message
    is a GlobalMetadata, that one first; None for anything else (larger, compressed, JSON, damaged:
    `read_rank` streams those and names what is wrong)."""
    return file_messages_stat(path)[0]


def file_messages_stat(path: Path) -> tuple[Optional[list[bytes]], os.stat_result]:
    """`file_messages` and the stat of the file they were read from (its fstat: what a caller that
    keys the file by device, inode, size and mtime needs, without another stat)."""
    with input_file_errors(path):
        fd = os.open(path, os.O_RDONLY)  # no buffered file object: a thousand small files add up
        try:
            st = os.fstat(fd)
            size = st.st_size
            if size > WHOLE_FILE_BYTES:
                return None, st
            data = os.read(fd, size)
            while len(data) < size and (more := os.read(fd, size - len(data))):
                data += more
        finally:
            os.close(fd)
    if not is_plain(data):
        return None, st
    framed = _frame(data)
    if framed is None:  # anything unusual: the streaming framer's checks, whose errors say what
        framed = []
        try:
            for _, _, batch in iter_payload_batches(path, io.BytesIO(data)):
                framed.extend(batch)
        except TraceFormatError:
            return None, st
    if not framed or not is_metadata(framed[0]):
        return None, st
    return framed, st


def _frame(data: bytes) -> Optional[list[bytes]]:
    """The framed messages of a whole file's bytes, as `iter_payload_batches` frames them, or None
    where it would look closer (a prefix of more than 5 bytes, a message over `MAX_MESSAGE_BYTES`,
    one cut short, many empty ones, another format's header). A thousand small rank files: its
    buffering, per-batch bookkeeping and generator cost more than framing them here."""
    if data.startswith(b"SQLite"):
        return None
    out: list[bytes] = []
    append = out.append
    pos, n = 0, len(data)
    while pos < n:
        b = data[pos]
        if b < 0x80:
            end = pos + 1 + b
        else:
            length, q = _peek_length(data, pos)
            if length < 0 or q - pos > 5 or length > MAX_MESSAGE_BYTES:
                return None
            end = q + length
        if end > n:
            return None
        append(data[pos:end])
        pos = end
    if out.count(b"\x00") > MAX_EMPTY_MESSAGES:
        return None
    return out


def is_plain(head: bytes) -> bool:
    """Whether a file starting with these bytes is neither gzip nor JSON."""
    head = head[:64].lstrip(b" \t\r\n")
    return head[:2] != GZIP_MAGIC and head[:1] not in (b"{", b"[")


def is_metadata(framed: bytes) -> bool:
    """Whether a framed message decodes as a GlobalMetadata."""
    try:
        pb.GlobalMetadata.FromString(framed[_prefix_size(framed) :])
    except DecodeError:
        return False
    return True


@dataclass
class RankRead:
    """One rank as read: its GlobalMetadata, its index, and where its nodes are."""

    metadata: pb.GlobalMetadata
    table: NodeTable
    nodes: Optional[list[Any]] = None  # a JSON-form file's or an in-memory Trace's nodes (file order)
    payloads: Optional[Path] = None  # the plain `.et` file `table.payload_off` points into
    temporary: bool = False  # `payloads` is a decompressed copy, removed by `close`

    def close(self) -> None:
        if self.temporary and self.payloads is not None:
            with suppress(FileNotFoundError):
                self.payloads.unlink()
            self.temporary = False


def read_rank(
    source: Any,
    *,
    attrs: bool = True,
    names: bool = False,
    missing_deps: str = "error",
    memo: Optional[dict] = None,
    messages: Optional[list[bytes]] = None,
    payloads: bool = False,
) -> RankRead:
    """A rank's trace (a path or an in-memory `Trace`) read and indexed (`NodeTable`).

    `attrs`: the simulator's columns too; `names`: the nodes' names; `missing_deps`: "error" refuses
    a dependency on an absent node id, "drop" ignores such edges; `memo`: decoded attributes by a
    node's bytes, shared by the files of one job; `messages`: the file's messages, already framed
    (`file_messages`). `payloads` (the feeder): the payload offsets point into a file kept for a memory
    map and nothing else is held: a plain file is streamed, a compressed one decompressed to a
    temporary file (`RankRead.close` removes it); else (the simulator) a plain file up to
    `WHOLE_FILE_BYTES` is read whole and framed, a compressed one streamed through the decompressor."""
    if isinstance(source, Trace):
        table = table_from_nodes(source.nodes, path=source.path, attrs=attrs, names=names, missing_deps=missing_deps)
        return RankRead(source.metadata, table, source.nodes)
    path = Path(source)
    if payloads and not path.is_file():
        raise InputError(f"{path}: no such file")
    if is_json_file(path):
        trace = read_trace(path)
        table = table_from_nodes(trace.nodes, path=path, attrs=attrs, names=names, missing_deps=missing_deps)
        return RankRead(trace.metadata, table, trace.nodes)
    if messages is None and not payloads and not is_gzip(path):
        messages = file_messages(path)
    if messages is not None:
        metadata, table = table_from_messages(
            path, messages, attrs=attrs, names=names, missing_deps=missing_deps, memo=memo
        )
        return RankRead(metadata, table, payloads=path)
    if payloads and is_gzip(path):
        real = gunzip_to_temp(path)
        try:
            metadata, table = table_from_et(
                real, attrs=attrs, names=names, missing_deps=missing_deps, source=path, memo=memo
            )
        except BaseException:
            with suppress(FileNotFoundError):
                real.unlink()
            raise
        return RankRead(metadata, table, payloads=real, temporary=True)
    metadata, table = table_from_et(path, attrs=attrs, names=names, missing_deps=missing_deps, memo=memo)
    return RankRead(metadata, table, payloads=None if is_gzip(path) else path)

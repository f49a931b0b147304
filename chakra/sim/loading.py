"""Loading one rank for the simulator: read, frame, compare with a template, compile.

One entry, `RankLoader.load(rank, source) -> RankEngine`, holds the whole path a rank's trace takes
before it runs, in this order:

1. read and frame: a plain `.et` file is read in one call and split into its messages, GlobalMetadata
   first (`chakra.sim.twins.file_messages`); these bytes serve every later step, so the file is
   read and framed once;
2. compare with a template: a file whose nodes differ from an earlier rank's only in communication
   attributes (peers, tags, sizes, process groups) takes that rank's compiled arrays with its own
   communication rows (`chakra.sim.twins`); a file whose nodes are byte-identical to an earlier
   one's (SPMD ranks) shares its engine whole;
3. compile: otherwise the messages are indexed (`chakra.feeder.table.table_from_messages`: the
   columns, dependencies, the simulator's attributes) and compiled into a `RankEngine`, which then
   serves as a template for the ranks after it.

Compressed, JSON-form and very large files (over `chakra.sim.twins.WHOLE_FILE_BYTES`) and
in-memory `Trace`s skip step 2's byte comparison and are indexed from their own reader.
"""

from __future__ import annotations

import os
from array import array
from itertools import accumulate, islice
from pathlib import Path
from typing import Any, Optional

from chakra.errors import ConfigError, InputError, TraceFormatError
from chakra.io import input_file_errors, is_json_file, read_trace
from chakra.sim.compiler import RankEngine
from chakra.sim.twins import Twins, file_digest, file_messages
from chakra.sim.twins import digest as nodes_digest
from chakra.trace import Trace

MISSING_DEPS = ("error", "drop")

# Rank files this process has read and framed ahead of their simulation (`read_framed`, for the
# ASTRA-sim checks `chakra simulate` runs first): (device, inode, size, mtime) -> where each message
# ends, taken once by `RankLoader.load`, which then re-reads the file (one system call) and cuts
# it there instead of framing it again. Keeping every file's messages instead would hold the
# whole job's bytes (145 MiB at 1,024 distinct ranks) until the simulation took them.
_FRAMED: dict[tuple[int, int, int, int], array] = {}


def _file_key(path: Any) -> Optional[tuple[int, int, int, int]]:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def read_framed(path: Path, keep: bool = False) -> Optional[list[bytes]]:
    """A plain `.et` file read and framed into its messages, GlobalMetadata first (None: gzip,
    JSON or over `WHOLE_FILE_BYTES`, read those with `chakra.io.read_trace`). `keep`: the next
    `RankLoader.load` of this file in this process takes these messages instead of reading it."""
    messages = file_messages(path)
    if keep and messages is not None:
        key = _file_key(path)
        if key is not None:
            _FRAMED[key] = array("q", accumulate(map(len, messages), initial=0))
    return messages


def forget_framed() -> None:
    """Drop the messages `read_framed(..., keep=True)` kept and no simulation took."""
    _FRAMED.clear()


def _take_framed(path: Path) -> Optional[list[bytes]]:
    """`file_messages` of a file, cut where `read_framed` found its messages when it did."""
    if _FRAMED:
        key = _file_key(path)
        ends = _FRAMED.pop(key, None) if key is not None else None
        if ends is not None:
            with input_file_errors(path):
                fd = os.open(path, os.O_RDONLY)
                try:
                    data = os.read(fd, ends[-1] + 1)
                finally:
                    os.close(fd)
            if len(data) == ends[-1]:  # the same file, whole (else read it afresh)
                return list(map(data.__getitem__, map(slice, ends, islice(ends, 1, None))))
    return file_messages(path)


def shared_nodes(messages: list[bytes], shared: dict[bytes, Any]) -> list[Any]:
    """The Node messages (`messages` without the GlobalMetadata) decoded, a node whose bytes are in
    `shared` (a dict kept across files) taking that object: `chakra.io.read_trace`'s `shared`
    reading, from messages already framed. One upb call per batch of the nodes not met before."""
    from chakra.io import NodeBatch

    parse = NodeBatch.FromString
    out: list[Any] = []
    for i in range(1, len(messages), 1024):
        batch = messages[i : i + 1024]
        got = list(map(shared.get, batch))
        if None in got:
            fresh = list(dict.fromkeys(m for m, g in zip(batch, got) if g is None))
            shared.update(zip(fresh, parse(b"\x0a" + b"\x0a".join(fresh)).nodes))
            got = list(map(shared.__getitem__, batch))
        out.extend(got)
    return out


def load_table(
    source: Any,
    names: bool,
    missing_deps: str = "error",
    memo: Optional[dict] = None,
    messages: Optional[list[bytes]] = None,
) -> Any:
    """The feeder index (`NodeTable`, with the simulator's attributes) of one rank's trace.

    `missing_deps`: "error" rejects a dependency on a node id absent from the trace (naming the
    option that accepts it); "drop" ignores such edges, as traces from the official converter need.
    `messages`: the file's framed messages, already read (`file_messages`)."""
    from chakra.feeder.table import table_from_et, table_from_messages, table_from_nodes

    if missing_deps not in MISSING_DEPS:
        raise ConfigError(f"--missing-deps must be error or drop, not {missing_deps!r}")
    try:
        if messages is not None:
            return table_from_messages(source, messages, names=names, missing_deps=missing_deps, memo=memo)[1]
        if isinstance(source, Trace):
            return table_from_nodes(source.nodes, path=source.path, names=names, missing_deps=missing_deps)
        if is_json_file(source):
            return table_from_nodes(read_trace(source).nodes, path=source, names=names, missing_deps=missing_deps)
        return table_from_et(source, names=names, missing_deps=missing_deps, memo=memo)[1]
    except TraceFormatError as exc:
        if missing_deps == "error" and "does not exist" in str(exc):
            raise InputError(f"{exc} (--missing-deps drop ignores such dependencies)") from None
        raise


class RankLoader:
    """The ranks of one simulation, loaded in turn: what one rank's loading learns (templates,
    digests of whole files, decoded attributes by their bytes) makes the next ones cheaper."""

    def __init__(
        self,
        *,
        system: Any,
        comm_mode: str,
        compat: bool,
        names: bool,
        slots: tuple[int, int, int],
        missing_deps: str,
        groups: Any,
        warnings: list[str],
    ) -> None:
        """`groups`: the `GroupTable` that METADATA nodes' process groups are added to; `warnings`:
        where a rank whose dependencies on absent nodes were dropped is reported."""
        self.system = system
        self.comm_mode = comm_mode
        self.compat = compat
        self.names = names
        self.slots = slots
        self.missing_deps = missing_deps
        self.groups = groups
        self.warnings = warnings
        self.twins = Twins()
        self.by_digest: dict[bytes, RankEngine] = {}
        self.memo: dict = {}  # serialized node -> decoded attributes, across the ranks' files

    def load(self, rank: int, source: Any) -> RankEngine:
        """The engine of `rank` from its trace (a path or an in-memory `Trace`)."""
        in_memory = isinstance(source, Trace)
        messages = None if in_memory else _take_framed(source)
        framed = messages[1:] if messages is not None else None  # the nodes
        engine = self.twins.derive(rank, source, framed) if framed is not None else None
        digest = None
        if engine is None and not in_memory:
            digest = nodes_digest(framed) if framed is not None else file_digest(source)
            first = self.by_digest.get(digest)
            if first is not None and first.shareable:
                engine = first.for_rank(rank, str(source))
        if engine is not None:
            return engine
        table = self._table(source, messages)
        for text in table.metadata_inputs:
            self.groups.add_metadata(text, f"{table.path or f'rank {rank}'} METADATA node")
        engine = RankEngine(
            rank, table, system=self.system, comm_mode=self.comm_mode, compat=self.compat, names=self.names,
            slots=self.slots,
        )  # fmt: skip
        if digest is not None:
            self.by_digest.setdefault(digest, engine)
        if framed is not None:
            self.twins.add(engine, framed, table)
        return engine

    def _table(self, source: Any, messages: Optional[list[bytes]]) -> Any:
        """`load_table`, and with `missing_deps="drop"` one warning line when edges were dropped:
        ASTRA-sim aborts on a dependency on an absent node id, so the user should know."""
        table = load_table(source, self.names, self.missing_deps, self.memo, messages)
        if table.dropped_deps:
            where = table.path if table.path is not None else "<trace>"
            self.warnings.append(
                f"{where}: {table.dropped_deps} dependencies on absent node ids dropped (ASTRA-sim aborts on them); "
                f"first: {table.first_dropped}"
            )
        return table

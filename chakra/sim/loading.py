"""Loading one rank for the simulator: read, frame, compare with a template, compile.

One entry, `RankLoader.load(rank, source) -> RankEngine`, holds the whole path a rank's trace takes
before it runs, in this order:

1. read and frame (`chakra.feeder.reading`, where the feeder reads its ranks too): a plain `.et`
   file is read in one call and split into its messages, GlobalMetadata first (`file_messages`),
   and each Node message becomes a row of the job's `NodeStore` (the distinct messages of all its
   files: real ranks differ in durations but repeat most nodes byte for byte). The ASTRA-sim
   checks `chakra simulate` runs first read the files the same way (`FramedFiles.read`: the decoded
   nodes, one object per distinct message) and hand each file's rows to this step (the same
   `FramedFiles`, passed as `SimOptions.framed`), so a file is read and framed once per command;
2. compare with a template: a file whose nodes differ from an earlier rank's only in communication
   attributes (peers, tags, sizes, process groups) takes that rank's compiled arrays with its own
   communication rows (`chakra.sim.twins`); a file whose nodes are byte-identical to an earlier
   one's (SPMD ranks) shares its engine whole;
3. compile: otherwise the rank is indexed (`NodeStore.table`: each distinct node read from protobuf
   once, the rank's columns, dependencies and the simulator's attributes gathered from the store's
   with numpy) and compiled into a `RankEngine`, which then serves as a template for the ranks
   after it.

Compressed, JSON-form and very large files (over `chakra.feeder.reading.WHOLE_FILE_BYTES`) and
in-memory `Trace`s skip the store and step 2's byte comparison and are indexed as they are read
(`load_table`: `chakra.feeder.reading.read_rank`).
"""

from __future__ import annotations

import os
from itertools import compress, repeat
from operator import is_
from pathlib import Path
from typing import Any, Optional

from chakra.errors import ConfigError, InputError, TraceFormatError
from chakra.feeder.reading import file_messages, file_messages_stat, read_rank
from chakra.feeder.table import MEMO_LIMIT
from chakra.sim.compiler import RankEngine
from chakra.sim.twins import Twins, file_digest, rows_digest
from chakra.sim.twins import digest as nodes_digest
from chakra.trace import Trace

MISSING_DEPS = ("error", "drop")


class NodeStore:
    """The distinct node messages of one job's rank files, each decoded and indexed once.

    A rank file's nodes become `rows` (per node, the distinct message it repeats: dictionary look-ups
    on the bytes, no decoding); the ASTRA-sim checks take the decoded nodes of a rank by its rows
    (`decoded`: one object per distinct node, shared by the ranks), and the simulator's table of a
    rank is gathered from the store's columns (`table`: `chakra.feeder.table.DistinctColumns`)."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        # rows are numbered afresh after a clear: a file's rows name its nodes only within one
        # generation (`rows_digest`)
        self.generation = getattr(self, "generation", -1) + 1
        self.index: dict[bytes, int] = {}
        self.messages: list[bytes] = []  # row -> its framed message
        self.nodes: list[Any] = []  # row -> its decoded node (the first len(nodes) rows)
        self.columns: Any = None  # DistinctColumns of the rows some rank's table needed

    def __len__(self) -> int:
        return len(self.messages)

    def rows(self, framed: list[bytes]) -> Any:
        """The rows of a file's Node messages (file order), new messages added."""
        import numpy as np

        index = self.index
        got = list(map(index.get, framed))
        if None in got:
            start = len(self.messages)
            fresh = list(dict.fromkeys(compress(framed, map(is_, got, repeat(None)))))
            index.update(zip(fresh, range(start, start + len(fresh))))
            self.messages.extend(fresh)
            if len(fresh) * 8 > len(framed):  # a rank of its own (real ranks' durations differ)
                got = list(map(index.__getitem__, framed))
            else:
                at = got.index(None)
                while True:  # the new messages' rows (C-level search: a twin brings few)
                    got[at] = index[framed[at]]
                    try:
                        at = got.index(None, at + 1)
                    except ValueError:
                        break
        return np.array(got, dtype=np.int64)

    def decoded(self, rows: Any) -> list[Any]:
        """The decoded nodes of these rows (one object per distinct message). A message that does
        not decode raises DecodeError and leaves the store as it was before its file's `rows`."""
        self._decode()
        return list(map(self.nodes.__getitem__, rows.tolist()))

    def _decode(self) -> None:
        from google.protobuf.message import DecodeError

        nodes, messages = self.nodes, self.messages
        try:
            nodes.extend(_parse(messages[len(nodes) :]))
        except DecodeError:
            for m in messages[len(nodes) :]:
                del self.index[m]
            del messages[len(nodes) :]
            raise

    def table(self, path: Path, rows: Any, head: int, names: bool, missing_deps: str) -> Any:
        """`load_table` of a plain `.et` file whose nodes are these rows, after a GlobalMetadata
        message of `head` bytes: the rows not met before are read from protobuf (`DistinctColumns.add`)
        and the rank's columns gathered from the store's."""
        from chakra.feeder.table import DistinctColumns

        if self.columns is None:
            self.columns = DistinctColumns()
        fresh = self.columns.missing(rows)
        for i in range(0, len(fresh), 1024):  # decoded a batch at a time: bounded memory
            at = fresh[i : i + 1024]
            framed = list(map(self.messages.__getitem__, at.tolist()))
            if int(at[-1]) < len(self.nodes):
                nodes = list(map(self.nodes.__getitem__, at.tolist()))  # decoded for the checks
            else:
                nodes = _parse(framed)
            self.columns.add(path, at, nodes, framed)
        return self.columns.table(path, rows, head, names, missing_deps, self._node)

    def _node(self, row: int) -> Any:
        return self.nodes[row] if row < len(self.nodes) else _parse([self.messages[row]])[0]


def _parse(framed: list[bytes]) -> list[Any]:
    """Framed Node messages decoded, in batches of 1,024 (one upb call each)."""
    from chakra.io import NodeBatch

    out: list[Any] = []
    for i in range(0, len(framed), 1024):
        out.extend(NodeBatch.FromString(b"\x0a" + b"\x0a".join(framed[i : i + 1024])).nodes)
    return out


def _file_key(path: Any) -> Optional[tuple[int, int, int, int]]:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


class FramedFiles:
    """Rank files read and framed ahead of their simulation, handed from the one to the other: the
    ASTRA-sim checks `chakra simulate` runs first read every file into the job's distinct nodes
    (`read`), and the simulation given the same object (`SimOptions.framed`) takes each file's rows
    instead of reading and framing it again (`take`). A file changed in between (another device,
    inode, size or mtime) is read afresh."""

    def __init__(self) -> None:
        # the job's distinct nodes; None once every file read was taken (the simulation holds them
        # from there, and lets them go with its loader)
        self.store: Optional[NodeStore] = NodeStore()
        # (device, inode, size, mtime) -> the file's GlobalMetadata message, its nodes' rows and
        # its messages where they are the store's own
        self.files: dict[tuple[int, int, int, int], tuple[bytes, Any, Optional[list[bytes]]]] = {}

    def read(self, path: Path) -> Optional[tuple[bytes, list[Any], Any]]:
        """A plain `.et` file's GlobalMetadata message, its decoded nodes (each distinct node one
        object shared with the other files read so) and their rows in `store` (None: gzip, JSON or
        over `WHOLE_FILE_BYTES`, read those with `chakra.io.read_trace`): what the ASTRA-sim checks
        read. Raises DecodeError on a node that does not decode (`chakra.io.read_trace` says where)."""
        messages, st = file_messages_stat(path)
        if messages is None:
            return None
        if self.store is None:
            self.store = NodeStore()
        before = len(self.store)
        rows = self.store.rows(messages[1:])
        nodes = self.store.decoded(rows)
        # a file whose every node was new holds the store's own messages: kept as read (a file
        # repeating others' would keep its copies of their bytes alive, so `take` rebuilds those)
        kept = messages if len(self.store) - before == len(messages) - 1 else None
        # keyed as `take` will find it: by the stat of the file read (a regular one: it was read whole)
        self.files[(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)] = (messages[0], rows, kept)
        return messages[0], nodes, rows

    def take(self, path: Path) -> Optional[tuple[list[bytes], Any]]:
        """A file's messages (`file_messages`) and its nodes' rows in `store`, as `read` left them
        (each file taken once); None when it did not read this file as it is now."""
        key = _file_key(path) if self.files else None
        got = self.files.pop(key, None) if key is not None else None
        if got is None or self.store is None:
            return None
        head, rows, messages = got
        if messages is None:
            messages = [head, *map(self.store.messages.__getitem__, rows.tolist())]
        if not self.files:
            self.store = None  # every file taken: not kept past the simulation's loading
        return messages, rows

    def forget(self) -> None:
        """Drop what no simulation took."""
        self.files.clear()


def _take_framed(
    path: Path, store: NodeStore, shared: bool = True, framed: Optional[FramedFiles] = None
) -> tuple[Optional[list[bytes]], Any]:
    """A file's messages (`file_messages`) and its nodes' rows in `store` (None: not a plain
    `.et` file; no rows unless `shared`), from `framed` when it read the file into this store."""
    if framed is not None and framed.store is not None and framed.store is store:
        got = framed.take(path)
        if got is not None:
            return got
    messages = file_messages(path)
    if messages is None or not shared:
        return messages, None
    if len(store) > MEMO_LIMIT and not (framed is not None and framed.files):  # a job of few repeats: start afresh
        store.clear()
    return messages, store.rows(messages[1:])


def load_table(
    source: Any,
    names: bool,
    missing_deps: str = "error",
    memo: Optional[dict] = None,
    messages: Optional[list[bytes]] = None,
) -> Any:
    """The feeder index (`NodeTable`, with the simulator's attributes) of one rank's trace, read by
    `chakra.feeder.reading.read_rank` (the feeder's reading too).

    `missing_deps`: "error" rejects a dependency on a node id absent from the trace (naming the
    option that accepts it); "drop" ignores such edges, as traces from the official converter need.
    `messages`: the file's framed messages, already read (`file_messages`)."""
    if missing_deps not in MISSING_DEPS:
        raise ConfigError(f"--missing-deps must be error or drop, not {missing_deps!r}")
    try:
        return read_rank(source, names=names, missing_deps=missing_deps, memo=memo, messages=messages).table
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
        ranks: int = 2,
        framed: Optional[FramedFiles] = None,
    ) -> None:
        """`groups`: the `GroupTable` that METADATA nodes' process groups are added to; `warnings`:
        where a rank whose dependencies on absent nodes were dropped is reported; `ranks`: how many
        the job has (one has nothing to share with another: its file is indexed as it is read);
        `framed`: the files the ASTRA-sim checks read (their rows are taken, not read again)."""
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
        # the job's distinct nodes: those the ASTRA-sim checks read (`framed`), else our own
        self.framed = framed if framed is not None and framed.files else None
        self.store = self.framed.store if self.framed is not None else NodeStore()
        self.shared = ranks > 1 or self.framed is not None

    def load(self, rank: int, source: Any) -> RankEngine:
        """The engine of `rank` from its trace (a path or an in-memory `Trace`)."""
        in_memory = isinstance(source, Trace)
        messages, rows = (None, None) if in_memory else _take_framed(source, self.store, self.shared, self.framed)
        framed = messages[1:] if messages is not None else None  # the nodes
        engine = self.twins.derive(rank, source, framed) if framed is not None else None
        digest = None
        if engine is None and not in_memory:
            if rows is not None:
                digest = rows_digest(self.store.generation, rows)
            else:
                digest = nodes_digest(framed) if framed is not None else file_digest(source)
            first = self.by_digest.get(digest)
            if first is not None and first.shareable:
                engine = first.for_rank(rank, str(source))
        if engine is not None:
            return engine
        table = self._table(source, messages, rows)
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

    def _table(self, source: Any, messages: Optional[list[bytes]], rows: Any) -> Any:
        """`load_table` (gathered from the job's distinct nodes when the file was framed), and with
        `missing_deps="drop"` one warning line when edges were dropped: ASTRA-sim aborts on a
        dependency on an absent node id, so the user should know."""
        table = None
        if rows is not None and messages is not None:
            table = self._gathered(source, messages, rows)
        if table is None:
            table = load_table(source, self.names, self.missing_deps, self.memo, messages)
        if table.dropped_deps:
            where = table.path if table.path is not None else "<trace>"
            self.warnings.append(
                f"{where}: {table.dropped_deps} dependencies on absent node ids dropped (ASTRA-sim aborts on them); "
                f"first: {table.first_dropped}"
            )
        return table

    def _gathered(self, source: Path, messages: list[bytes], rows: Any) -> Any:
        """`NodeStore.table` with `load_table`'s errors; None where a node does not decode
        (`load_table` then says which, and where). `file_messages` checked the GlobalMetadata."""
        from google.protobuf.message import DecodeError

        if self.missing_deps not in MISSING_DEPS:
            raise ConfigError(f"--missing-deps must be error or drop, not {self.missing_deps!r}")
        try:
            return self.store.table(source, rows, len(messages[0]), self.names, self.missing_deps)
        except DecodeError:
            return None
        except TraceFormatError as exc:
            if self.missing_deps == "error" and "does not exist" in str(exc):
                raise InputError(f"{exc} (--missing-deps drop ignores such dependencies)") from None
            raise

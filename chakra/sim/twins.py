"""Rank files that are near copies of one another compile once.

The ranks of a data- or tensor-parallel group, or of one pipeline stage, run the same nodes: their
`.et` files differ in the GlobalMetadata (which names the rank) and in the communication
attributes of a few nodes (a send's peer, a collective's process group). Compiling each file on
its own decodes every node of every rank; here a rank file is framed into its node messages (no
decoding), compared byte for byte with the files compiled before it, and when it differs from one
of them only in those attributes, its engine is that one's with the differing rows' `info`
recomputed (`RankEngine.twin`). Anything else about a differing node (an id, a dependency, a
duration, another attribute) sends the file through the full compile, so the result is the one
the full compile gives.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Optional

from google.protobuf.message import DecodeError

from chakra.errors import TraceFormatError
from chakra.feeder.table import MEMO_LIMIT, check_attr_values
from chakra.io import GZIP_MAGIC, _prefix_size, input_file_errors, iter_payload_batches
from chakra.schema import pb
from chakra.schema.attrs import attr_value
from chakra.sim.compiler import RankEngine

#: The attributes in which a twin's nodes may differ from its template's: they only fill the
#: engine's per-row communication `info` (peer, tag, size, process group).
MAY_DIFFER = frozenset({"comm_src", "comm_dst", "comm_tag", "comm_size", "pg_name"})
_TRIES = 8  # earlier templates compared per rank file, most recently matched first
WHOLE_FILE_BYTES = 32 << 20  # larger rank files are hashed in blocks, never held whole


def node_messages(path: Path) -> Optional[list[bytes]]:
    """The framed Node messages of a plain `.et` file of at most `WHOLE_FILE_BYTES` whose first
    message is a GlobalMetadata; None for anything else (larger, compressed, JSON, damaged)."""
    with input_file_errors(path), open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size > WHOLE_FILE_BYTES or not _plain(f):
            return None
        framed: list[bytes] = []
        try:
            for _, _, batch in iter_payload_batches(path, f):
                framed.extend(batch)
        except TraceFormatError:
            return None
    if not framed or not _is_metadata(framed[0]):
        return None
    return framed[1:]


def _plain(f: Any) -> bool:
    """Whether an open file is neither gzip nor JSON (left at its start)."""
    head = f.read(64).lstrip(b" \t\r\n")
    f.seek(0)
    return head[:2] != GZIP_MAGIC and head[:1] not in (b"{", b"[")


def _is_metadata(framed: bytes) -> bool:
    try:
        pb.GlobalMetadata.FromString(framed[_prefix_size(framed) :])
    except DecodeError:
        return False
    return True


def digest(framed: list[bytes]) -> bytes:
    """What the simulator reads of a rank file (its nodes), hashed."""
    return hashlib.blake2b(b"".join(framed), digest_size=20).digest()


def file_digest(path: Path) -> bytes:
    """`digest` of a file too large to hold whole, read in blocks: every byte after the
    GlobalMetadata message (the whole file when its first message is not one, or it is
    compressed or JSON: the full reader then names what is wrong)."""
    h = hashlib.blake2b(digest_size=20)
    with input_file_errors(path), open(path, "rb") as f:
        skip = 0
        if _plain(f):
            try:
                first = next(iter_payload_batches(path, f))[2][0]
                skip = len(first) if _is_metadata(first) else 0
            except (StopIteration, TraceFormatError):
                pass
        f.seek(skip)
        while block := f.read(1 << 22):
            h.update(block)
    return h.digest()


class _Template:
    __slots__ = ("engine", "framed", "sparse")

    def __init__(self, engine: RankEngine, framed: list[bytes], sparse: dict[int, dict[str, Any]]) -> None:
        self.engine = engine
        self.framed = framed
        self.sparse = sparse  # row -> the sparse attributes its table read (rows are file order)


class Twins:
    """The templates of one compile: engines built from whole rank files, by node count."""

    def __init__(self) -> None:
        self.by_count: dict[int, list[_Template]] = {}
        # serialized node -> (the node, the node without its attributes, whether its attribute
        # names are distinct)
        self.decoded: dict[bytes, tuple[Any, Any, bool]] = {}
        # (template row's bytes, a twin's bytes) -> the twin's sparse attributes, None if it differs
        # in more than them: the members of one process group repeat their collectives byte for byte
        self.compared: dict[tuple[bytes, bytes], Optional[dict[str, Any]]] = {}
        self.coll_infos: dict[int, tuple] = {}  # for RankEngine.twin

    def add(self, engine: RankEngine, framed: list[bytes], table: Any) -> None:
        """Offer a freshly compiled rank as a template: one whose rows are its file's order, with
        no METADATA text and no dropped dependency (those the full compile reports per file)."""
        if table.file_pos is not None or table.metadata_inputs or table.dropped_deps:
            return
        kept = self.by_count.setdefault(len(framed), [])
        kept.insert(0, _Template(engine, framed, table.sparse))
        del kept[_TRIES:]  # only the most recent are compared: older ones would only hold memory

    def _decode(self, framed: bytes) -> tuple[Any, Any, bool]:
        got = self.decoded.get(framed)
        if got is None:
            node = pb.Node.FromString(framed[_prefix_size(framed) :])
            bare = pb.Node()
            bare.CopyFrom(node)
            bare.ClearField("attr")
            distinct = len({a.name for a in node.attr}) == len(node.attr)
            if len(self.decoded) >= MEMO_LIMIT:
                self.decoded.clear()
            got = self.decoded[framed] = (node, bare, distinct)
        return got

    def _compare(self, path: Path, base_framed: bytes, base_found: dict[str, Any], framed: bytes) -> Optional[dict]:
        """The sparse attributes of a twin's node that differs from its template's only in
        attributes that may differ, else None."""
        key = (base_framed, framed)
        if key in self.compared:
            return self.compared[key]
        base, base_bare, distinct = self._decode(base_framed)
        node = pb.Node.FromString(framed[_prefix_size(framed) :])
        found: Optional[dict[str, Any]] = None
        # with the template's names distinct and the twin's the same, name for name, each changed
        # attribute is the only one of its name, as the table's last-wins reading needs
        if distinct and len(node.attr) == len(base.attr):
            found = dict(base_found)
            for a, b in zip(node.attr, base.attr):
                if a == b:
                    continue
                name = a.name
                if name != b.name or name not in MAY_DIFFER:
                    found = None
                    break
                found[name] = attr_value(a)
            if found is not None:
                node.ClearField("attr")
                if node != base_bare:
                    found = None
                else:
                    check_attr_values(path, node, found)
        if len(self.compared) >= MEMO_LIMIT:
            self.compared.clear()
            self.coll_infos.clear()
        self.compared[key] = found
        return found

    def derive(self, rank: int, path: Path, framed: list[bytes]) -> Optional[RankEngine]:
        """The engine of `rank` from the closest template, or None (compile the file itself)."""
        candidates = self.by_count.get(len(framed))
        if not candidates:
            return None
        best: Optional[tuple[_Template, list[int]]] = None
        for t in candidates[:_TRIES]:
            rows = [i for i, (a, b) in enumerate(zip(t.framed, framed)) if a != b]
            if best is None or len(rows) < len(best[1]):
                best = (t, rows)
            if len(rows) * 8 <= len(framed):
                break
        assert best is not None
        template, rows = best
        if not rows:  # the same nodes (SPMD ranks): shared whole where no send names a peer
            return template.engine.for_rank(rank, str(path)) if template.engine.shareable else None
        if len(rows) * 2 > len(framed):
            return None  # mostly different files compile whole
        changed: dict[int, dict[str, Any]] = {}
        tframed, tsparse = template.framed, template.sparse
        for row in rows:
            base_found = tsparse.get(row)
            found = None if base_found is None else self._compare(path, tframed[row], base_found, framed[row])
            if found is None:
                return None
            changed[row] = found
        engine = template.engine.twin(rank, str(path), changed, self.coll_infos)
        if engine is not None and candidates[0] is not template:
            candidates.remove(template)
            candidates.insert(0, template)
        return engine

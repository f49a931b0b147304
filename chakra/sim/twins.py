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

from itertools import compress, count
from operator import ne
from pathlib import Path
from typing import Any, Optional

from google.protobuf.message import DecodeError

from chakra.errors import TraceFormatError
from chakra.feeder.reading import file_messages, is_metadata, is_plain
from chakra.feeder.table import MEMO_LIMIT, check_attr_values
from chakra.io import _peek_length, _prefix_size, input_file_errors, iter_payload_batches
from chakra.schema import pb
from chakra.schema.attrs import attr_value
from chakra.sim.compiler import RankEngine

try:  # CPython's BLAKE2, which hashlib.blake2b is: importing hashlib also starts OpenSSL (~5 ms)
    from _blake2 import blake2b
except ImportError:  # another interpreter
    from hashlib import blake2b

#: The attributes in which a twin's nodes may differ from its template's: they only fill the
#: engine's per-row communication `info` (peer, tag, size, process group).
MAY_DIFFER = frozenset({"comm_src", "comm_dst", "comm_tag", "comm_size", "pg_name"})
_TRIES = 8  # earlier templates compared per rank file, most recently matched first
# rows compared first with every template: ranks that share no template (each with its own
# durations) then cost no whole comparison
_HEAD = 64


def node_messages(path: Path) -> Optional[list[bytes]]:
    """The framed Node messages of a plain `.et` file of at most `WHOLE_FILE_BYTES` whose first
    message is a GlobalMetadata; None for anything else (larger, compressed, JSON, damaged)."""
    got = file_messages(path)
    return None if got is None else got[1:]


def digest(framed: list[bytes]) -> bytes:
    """What the simulator reads of a rank file (its nodes), hashed."""
    return blake2b(b"".join(framed), digest_size=20).digest()


def rows_digest(generation: int, rows: Any) -> bytes:
    """The digest of a file read into a job's distinct nodes (`chakra.sim.loading.NodeStore`),
    from its nodes' rows there (`generation`: the store's, since a cleared store numbers its rows
    afresh). Files with the same rows in one generation have the same nodes byte for byte, and the
    rows are a tenth of their bytes to hash; another kind of key than `digest`'s, never equal to one."""
    return blake2b(b"rows%d:" % generation + rows.tobytes(), digest_size=20).digest()


def file_digest(path: Path) -> bytes:
    """`digest` of a file too large to hold whole, read in blocks: every byte after the
    GlobalMetadata message (the whole file when its first message is not one, or it is
    compressed or JSON: the full reader then names what is wrong)."""
    h = blake2b(digest_size=20)
    with input_file_errors(path), open(path, "rb") as f:
        skip = 0
        head = f.read(64)
        f.seek(0)
        if is_plain(head):
            try:
                first = next(iter_payload_batches(path, f))[2][0]
                skip = len(first) if is_metadata(first) else 0
            except (StopIteration, TraceFormatError):
                pass
        f.seek(skip)
        while block := f.read(1 << 22):
            h.update(block)
    return h.digest()


_UNSEEN: Any = object()
_ATTR_TAG = (10 << 3) | 2  # Node.attr: field 10, length-delimited


class _Layout:
    """A serialized Node split where its attributes begin: protobuf encoders write fields in
    number order, and `attr` (10) is the last one."""

    __slots__ = ("head", "fields", "names", "node")

    def __init__(self, head: bytes, fields: list[bytes], names: list[str], node: Any) -> None:
        self.head = head  # every field before the first attribute, as bytes
        self.fields = fields  # each attribute field as on the wire: tag, length, AttributeProto
        self.names = names
        self.node = node  # decoded (names the node in errors)


def _layout(framed: bytes) -> Optional[_Layout]:
    payload = framed[_prefix_size(framed) :]
    start = _first_attr(payload)
    attrs = None if start is None else _attr_fields(payload, start, tagged=True)
    if attrs is None:
        return None
    try:
        node = pb.Node.FromString(payload)
    except DecodeError:
        return None
    names = [a.name for a in node.attr[:]]
    if len(names) != len(attrs) or len(set(names)) != len(names):
        return None
    return _Layout(payload[:start], attrs, names, node)


def _named_value(field: bytes) -> Optional[tuple[str, Any]]:
    try:
        attr = pb.AttributeProto.FromString(field)
    except DecodeError:
        return None
    return attr.name, attr_value(attr)


def _first_attr(payload: bytes) -> Optional[int]:
    """Offset of the first top-level attribute field (the end when there is none); None when the
    message is cut or holds a wire type protobuf no longer writes."""
    pos, end = 0, len(payload)
    while pos < end:
        tag, q = _peek_length(payload, pos)
        if tag < 0:
            return None
        if tag == _ATTR_TAG:
            return pos
        wire = tag & 7
        if wire == 0:
            value, q = _peek_length(payload, q)  # a varint like any other
        elif wire == 2:
            value, q = _peek_length(payload, q)
            q += value
        elif wire in (1, 5):
            value, q = 0, q + (8 if wire == 1 else 4)
        else:
            return None
        if value < 0 or q > end:
            return None
        pos = q
    return pos


def _attr_fields(payload: bytes, pos: int, tagged: bool = False) -> Optional[list[bytes]]:
    """The AttributeProto bytes from `pos` to the end of a Node's bytes (with or without its
    length prefix before), each with its tag and length where `tagged`; None when anything else is
    there."""
    out = []
    end = len(payload)
    while pos < end:
        q, at = _attr_field(payload, pos, end)
        if q < 0:
            return None
        out.append(payload[pos if tagged else q : at])
        pos = at
    return out


def _attr_field(payload: bytes, pos: int, end: int) -> tuple[int, int]:
    """(where its AttributeProto starts, where it ends) of the attribute field at `pos`; (-1, -1)
    when there is none there."""
    if pos + 1 >= end or payload[pos] != _ATTR_TAG:
        return -1, -1
    length = payload[pos + 1]
    q = pos + 2
    if length >= 0x80:  # attributes of 128 bytes or more (a long list)
        length, q = _peek_length(payload, pos + 1)
    if length < 0 or q + length > end:
        return -1, -1
    return q, q + length


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
        self.layouts: dict[bytes, Optional[_Layout]] = {}  # template row's bytes -> its layout
        # an attribute's bytes -> (name, value): a process group's name, a peer's rank, repeat
        # across the rows and files of the twins
        self.attr_values: dict[bytes, Optional[tuple[str, Any]]] = {}
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

    def _layout(self, framed: bytes) -> Optional[_Layout]:
        """A template row's layout (memoised), or None when its attributes are not its last fields
        or their names repeat (the table's last-wins reading would then hide which one counts)."""
        got = self.layouts.get(framed, _UNSEEN)
        if got is _UNSEEN:
            got = _layout(framed)
            if len(self.layouts) >= MEMO_LIMIT:
                self.layouts.clear()
            self.layouts[framed] = got
        return got

    def _compare(self, path: Path, base_framed: bytes, base_found: dict[str, Any], framed: bytes) -> Optional[dict]:
        """The sparse attributes of a twin's node that differs from its template's only in
        attributes that may differ, else None."""
        key = (base_framed, framed)
        found = self.compared.get(key, _UNSEEN)
        if found is _UNSEEN:
            found = self._differing(path, base_framed, base_found, framed)
            if len(self.compared) >= MEMO_LIMIT:
                self.compared.clear()
                self.coll_infos.clear()
            self.compared[key] = found
        return found

    def _differing(self, path: Path, base_framed: bytes, base_found: dict[str, Any], framed: bytes) -> Optional[dict]:
        # Compared on the wire: the fields before the attributes byte for byte (the same bytes are
        # the same values), then attribute by attribute, decoding only those whose bytes differ.
        # Bytes that differ but mean the same (another encoder's choices) only cost a full compile.
        layout = self._layout(base_framed)
        if layout is None:
            return None
        start = 1 if framed[0] < 0x80 else _prefix_size(framed)  # the length prefix
        if not framed.startswith(layout.head, start):
            return None
        # The template's attribute fields in turn: one the twin repeats at the same place (tag,
        # length and bytes) is the same attribute; only the others are cut out and read.
        at = start + len(layout.head)
        end = len(framed)
        found = dict(base_found)
        values = self.attr_values
        for field, name in zip(layout.fields, layout.names):
            if framed.startswith(field, at):
                at += len(field)
                continue
            q, at = _attr_field(framed, at, end)
            if q < 0 or name not in MAY_DIFFER:
                return None
            mine = framed[q:at]
            got = values.get(mine, _UNSEEN)
            if got is _UNSEEN:
                got = _named_value(mine)
                if got is not None:
                    check_attr_values(path, layout.node, dict((got,)))
                if len(values) >= MEMO_LIMIT:
                    values.clear()
                values[mine] = got
            if got is None or got[0] != name:
                return None
            found[name] = got[1]
        return found if at == end else None  # more attributes than the template's, or other fields

    def derive(self, rank: int, path: Path, framed: list[bytes]) -> Optional[RankEngine]:
        """The engine of `rank` from the closest template, or None (compile the file itself)."""
        candidates = self.by_count.get(len(framed))
        if not candidates:
            return None
        best: Optional[tuple[_Template, list[int]]] = None
        head = min(len(framed), _HEAD)
        for t in candidates[:_TRIES]:
            if sum(map(ne, t.framed[:head], framed[:head])) * 2 > head:
                continue  # differs in most of its first rows: not worth the whole comparison
            rows = list(compress(count(), map(ne, t.framed, framed)))  # the rows that differ
            if best is None or len(rows) < len(best[1]):
                best = (t, rows)
            if len(rows) * 2 <= len(framed):  # good enough: the most recently matched is nearly always best
                break
        if best is None:
            return None  # a rank of its own (real ranks differ in every duration)
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

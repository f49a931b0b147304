"""Parsing a big JSON document's main array a few elements at a time.

ET and Kineto files are one object whose bulk is a single array (`nodes` / `traceEvents`) of
small objects. Parsing the whole document at once builds every element's Python tree before the
first one can be dropped, which costs 5-8x the file size in memory. Both producers start every
element with the same key (`"id"` for nested ET nodes, `"name"` for 1.0.1 flat ones, `"ph"` for
Kineto events), and no nested object starts with it, so `}` `,` `{"<key>":` marks element
boundaries. Elements are parsed in short runs (`BATCH_BYTES`), by orjson or by a caller's typed
decoder (`Split.decode_with`), and can be released as soon as they are read; the small header
(keys before the array) and tail (keys after it) are parsed separately.

If the layout is anything else (another key order, a boundary string inside a value, a file
cut short) `split_document` returns None and the caller parses the document whole.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from itertools import chain
from typing import Any, Optional

import orjson

from chakra.errors import TraceFormatError

_MIN_CHUNKED = 1 << 20  # smaller documents are parsed whole: no memory to save


#: bytes of element text parsed per orjson call: enough elements (~20) that the per-call overhead
#: fades, few enough that their Python objects are still in the CPU cache when the caller reads
#: and frees them (1 MB batches ran the ET load 2x slower than 16 KB ones).
BATCH_BYTES = 1 << 14


class Split:
    """Header dict, element iterator, and tail dict (available once the iterator is exhausted)."""

    def __init__(self, header: dict, body: memoryview, pattern: re.Pattern) -> None:
        self.header = header
        self.tail: dict = {}
        self._body = body
        self._pattern = pattern
        self.failed = False
        self._decode_many: Callable[[Any], list] = orjson.loads
        self._decode_one: Callable[[Any], Any] = orjson.loads

    def decode_with(self, many: Callable[[Any], list], one: Callable[[Any], Any]) -> None:
        """Decode elements with these (e.g. msgspec typed decoders) instead of orjson: `many`
        takes a JSON array of elements, `one` a single element; both raise ValueError when the
        text does not fit (the caller then parses the document whole)."""
        self._decode_many, self._decode_one = many, one

    def __iter__(self) -> Iterator[Any]:
        """Elements in order (the batches' elements handed out in C: no generator step per element)."""
        return chain.from_iterable(self._batches())

    def _batches(self) -> Iterator[Any]:
        """Lists of elements in order. Runs of about `BATCH_BYTES` of elements, cut at the next
        boundary after that size, are parsed in one call as a JSON array; the last stretch goes
        element by element, because its final element is followed by the array's end and the tail."""
        body = self._body
        search = self._pattern.search
        many, one = self._decode_many, self._decode_one
        prev = 0
        while True:
            m = search(body, prev + BATCH_BYTES)
            if m is None:
                break
            yield many(b"[" + body[prev : m.start() + 1] + b"]")
            prev = m.end()
        for m in self._pattern.finditer(body, prev):
            yield (one(body[prev : m.start() + 1]),)
            prev = m.end()
        yield self._last(bytes(body[prev:]))
        self._body = memoryview(b"")

    def _last(self, text: bytes) -> Iterator[Any]:
        """The elements after the last boundary (usually one; more when the final elements start
        with another key, as the instant events closing older Kineto traces do), then the tail
        keys after the array (into `self.tail`)."""
        last = text.decode("utf-8", errors="strict")
        decoder = json.JSONDecoder()
        one = None if self._decode_one is orjson.loads else self._decode_one
        pos = _skip_ws(last, 0)
        while True:
            element, end = decoder.raw_decode(last, pos)
            yield element if one is None else one(last[pos:end].encode())
            pos = _skip_ws(last, end)
            if last.startswith(",", pos):
                pos = _skip_ws(last, pos + 1)
                continue
            if not last.startswith("]", pos):
                raise ValueError("main array does not end after its last element")
            break
        rest = last[pos + 1 :].lstrip()
        if rest.startswith(","):
            rest = "{" + rest[1:]
        self.tail = orjson.loads(rest) if rest.strip() != "}" else {}


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def split_document(raw: bytes, array_key: bytes, first_key: bytes) -> Optional[Split]:
    """A Split of `raw` on its `array_key` array, or None when the chunked layout does not apply."""
    if len(raw) < _MIN_CHUNKED:
        return None
    m = re.search(rb'"' + array_key + rb'"\s*:\s*\[', raw[: 1 << 20])
    if m is None:
        return None
    head = raw[: m.start()].rstrip()
    if head.endswith(b","):
        head = head[:-1]
    try:
        header = orjson.loads(head + b"}")
    except orjson.JSONDecodeError:
        return None
    if not isinstance(header, dict):
        return None
    start = m.end()
    while start < len(raw) and raw[start] in b" \t\r\n":
        start += 1
    if raw[start : start + 1] != b"{":
        return None
    body = memoryview(raw)[start:]  # no copy of the (big) array text
    pattern = re.compile(rb'\}\s*,\s*(?=\{\s*"' + first_key + rb'"\s*:)')
    if pattern.search(body, 0, 1 << 16) is None:
        return None
    return Split(header, body, pattern)


def parse_json(name: str, raw: bytes, *, repair_key: Optional[bytes] = None) -> tuple[Any, bool]:
    """orjson-parse `raw`; on failure, optionally repair an unterminated node/event array."""
    try:  # a memory-mapped file (see read_input_bytes) is parsed in place, through a memoryview
        return orjson.loads(raw if isinstance(raw, bytes) else memoryview(raw)), False
    except orjson.JSONDecodeError as first:
        if repair_key is not None and repair_key in raw[: 1 << 20]:
            # Nodes end in "}," but so do nested attrs entries: try the last few candidates.
            cut = len(raw)
            for _ in range(16):
                cut = raw.rfind(b"},", 0, cut)
                if cut <= 0:
                    break
                try:
                    return orjson.loads(raw[: cut + 1] + b"]}"), True
                except orjson.JSONDecodeError:
                    continue
        kind = "empty file" if re.search(rb"\S", raw) is None else f"not valid JSON ({first})"
        raise TraceFormatError(name, kind) from None


def drain(items: list) -> Any:
    """Yield list items, releasing each one from the list as it goes."""
    for i in range(len(items)):
        item = items[i]
        items[i] = None
        yield item

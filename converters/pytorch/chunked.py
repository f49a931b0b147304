"""Parsing a big JSON document's main array one element at a time, with orjson.

ET and Kineto files are one object whose bulk is a single array (`nodes` / `traceEvents`) of
small objects. Parsing the whole document at once builds every element's Python tree before the
first one can be dropped, which costs 5-8x the file size in memory. Both producers start every
element with the same key (`"id"` for nested ET nodes, `"name"` for 1.0.1 flat ones, `"ph"` for
Kineto events), and no nested object starts with it, so `}` `,` `{"<key>":` marks element
boundaries. Each element is parsed by orjson on its own and can be released at once; the small
header (keys before the array) and tail (keys after it) are parsed separately.

If the layout is anything else (another key order, a boundary string inside a value, a file
cut short) `split_document` returns None and the caller parses the document whole.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any, Optional

import orjson

_MIN_CHUNKED = 1 << 20  # smaller documents are parsed whole: no memory to save


class Split:
    """Header dict, element iterator, and tail dict (available once the iterator is exhausted)."""

    def __init__(self, header: dict, body: memoryview, pattern: re.Pattern) -> None:
        self.header = header
        self.tail: dict = {}
        self._body = body
        self._pattern = pattern
        self.failed = False

    def __iter__(self) -> Iterator[Any]:
        body = self._body
        loads = orjson.loads
        prev = 0
        for m in self._pattern.finditer(body):
            end = m.start() + 1
            yield loads(body[prev:end])
            prev = m.end()
        last = bytes(body[prev:]).decode("utf-8", errors="strict")
        element, pos = json.JSONDecoder().raw_decode(last.lstrip())
        rest = last.lstrip()[pos:].lstrip()
        if not rest.startswith("]"):
            raise ValueError("main array does not end after its last element")
        rest = rest[1:].lstrip()
        if rest.startswith(","):
            rest = "{" + rest[1:]
        self.tail = orjson.loads(rest) if rest.strip() != "}" else {}
        yield element
        self._body = memoryview(b"")


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

"""Graphviz record labels: `{ a | b | { c | d } }` -> nested lists of field texts.

Grammar (graphviz "record" shapes): rlabel = field ('|' field)*; field = '{' rlabel '}' or
text with an optional `<port>` name. Backslash escapes `\\{ \\} \\| \\< \\> \\\\ \\ ` stand for the
character itself; `\\n`, `\\l`, `\\r` are line breaks (read as spaces). Field texts are trimmed.
"""

from __future__ import annotations

import re
from typing import Optional, Union

Field = Union[str, list["Field"]]

_LITERAL_ESCAPES = set('{}|<>\\ "')
_LINE_BREAKS = set("nlr")


class RecordError(ValueError):
    pass


_PIECES = re.compile(r"[{}|]|[^{}|]+")


def _parse_plain(label: str) -> list[Field]:
    """Fast path for labels without escapes or ports: the same grammar over regex pieces."""
    fields: list[list[Field]] = [[]]
    texts: list[str] = [""]
    subs: list[Optional[list[Field]]] = [None]
    for piece in _PIECES.findall(label):
        if piece == "{":
            if texts[-1].strip() or subs[-1] is not None:
                raise RecordError("'{' inside a field")
            fields.append([])
            texts.append("")
            subs.append(None)
        elif piece == "}":
            if len(fields) == 1:
                raise RecordError("unbalanced '}'")
            done = fields.pop()
            sub = subs.pop()
            done.append(sub if sub is not None else texts.pop().strip())
            if sub is not None:
                texts.pop()
            subs[-1] = done
        elif piece == "|":
            fields[-1].append(subs[-1] if subs[-1] is not None else texts[-1].strip())
            texts[-1], subs[-1] = "", None
        else:
            if subs[-1] is not None and piece.strip():
                raise RecordError("text after a '}' group")
            texts[-1] += piece
    if len(fields) > 1:
        raise RecordError("unbalanced '{' in record label")
    top = fields[0]
    top.append(subs[0] if subs[0] is not None else texts[0].strip())
    return top


def parse_record(label: str) -> list[Field]:
    """The fields of a record label; one outer `{...}` group spanning the whole label is unwrapped."""
    if "\\" not in label and "<" not in label:
        fields = _parse_plain(label)
        while len(fields) == 1 and isinstance(fields[0], list):
            fields = fields[0]
        return fields
    pos = 0
    n = len(label)

    def group(depth: int) -> list[Field]:
        nonlocal pos
        fields: list[Field] = []
        text: list[str] = []
        sub: list[Field] | None = None
        in_port = False
        while pos < n:
            c = label[pos]
            if c == "\\" and pos + 1 < n:
                nxt = label[pos + 1]
                if nxt in _LITERAL_ESCAPES:
                    if not in_port:
                        text.append(nxt)
                elif nxt in _LINE_BREAKS:
                    text.append(" ")
                else:
                    text.append(c + nxt)
                pos += 2
                continue
            if in_port:
                if c == ">":
                    in_port = False
                pos += 1
                continue
            if c == "<":
                in_port = True
                pos += 1
                continue
            if c == "{":
                if "".join(text).strip() or sub is not None:
                    raise RecordError(f"'{{' inside a field at offset {pos}")
                pos += 1
                sub = group(depth + 1)
                if pos >= n or label[pos] != "}":
                    raise RecordError("unbalanced '{' in record label")
                pos += 1
                continue
            if c == "}":
                if depth == 0:
                    raise RecordError(f"unbalanced '}}' at offset {pos}")
                break
            if c == "|":
                fields.append(sub if sub is not None else "".join(text).strip())
                text, sub = [], None
                pos += 1
                continue
            if sub is not None and not c.isspace():
                raise RecordError(f"text after a '}}' group at offset {pos}")
            text.append(c)
            pos += 1
        if in_port:
            raise RecordError("unterminated <port> in record label")
        fields.append(sub if sub is not None else "".join(text).strip())
        return fields

    fields = group(0)
    if pos != n:
        raise RecordError(f"unbalanced '}}' at offset {pos}")
    while len(fields) == 1 and isinstance(fields[0], list):
        fields = fields[0]
    return fields


def flatten(fields: list[Field]) -> list[str]:
    out: list[str] = []
    for f in fields:
        if isinstance(f, list):
            out.extend(flatten(f))
        else:
            out.append(f)
    return out

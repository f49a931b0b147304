"""A small, strict reader for the graphviz DOT language (no pydot, no eval).

Covers what real DOT writers emit: `strict`/`graph`/`digraph` headers, node, edge and attribute
statements, edge chains (`a -> b -> c`), subgraphs (named, anonymous, and as edge operands),
`node [...]`/`edge [...]` defaults with subgraph scoping, ports (`a:p:n`), IDs as bare words,
numerals, double-quoted strings (with `\\"` escapes, backslash-newline continuation and `+`
concatenation) and HTML strings (`<...>`, nested), and `//`, `/* */` and `#` comments.

Node order matters to the FlexFlow converter (the writer emits tasks in simulated order), so the
graph keeps the order in which node statements appear, separately from first mention.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Union

from chakra.errors import TraceFormatError, excerpt
from chakra.io import input_file_errors

KEYWORDS = frozenset({"strict", "graph", "digraph", "node", "edge", "subgraph"})

_TOKEN = re.compile(
    r"""
    (?P<ws>[ \t\r\n\f\v\ufeff]+)
  | (?P<comment>//[^\n]*|/\*.*?\*/|(?<![^\n])\#[^\n]*)
  | (?P<str>"(?:[^"\\]|\\.|\\\n)*")
  | (?P<id>[A-Za-z_\u0080-\U0010ffff][A-Za-z_0-9\u0080-\U0010ffff]*)
  | (?P<num>-?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?))
  | (?P<edgeop>->|--)
  | (?P<punct>[{}\[\];,=:+])
  | (?P<html><)
    """,
    re.VERBOSE | re.DOTALL,
)


@dataclass
class Token:
    kind: str  # "id" (any ID: word, numeral, quoted or HTML), "edgeop", or the punctuation itself
    value: str
    offset: int
    quoted: bool = False


@dataclass
class DotNode:
    name: str
    attrs: dict[str, str] = field(default_factory=dict)
    offset: int = 0  # of its first node statement (or first mention)
    declared: bool = False  # has a node statement of its own


@dataclass
class DotEdge:
    src: str
    dst: str
    attrs: dict[str, str]
    offset: int


@dataclass
class DotGraph:
    path: Path
    text: str
    name: Optional[str]
    directed: bool
    strict: bool
    nodes: dict[str, DotNode]  # insertion order = order of first mention
    declared: list[str]  # node names in the order of their first node statement
    edges: list[DotEdge]
    graph_attrs: dict[str, str]
    _lines: list[int] = field(default_factory=list, repr=False)

    def line_of(self, offset: int) -> int:
        """1-based line number of a character offset."""
        if not self._lines:
            self._lines = [m.start() for m in re.finditer("\n", self.text)]
        return bisect.bisect_right(self._lines, offset - 1) + 1 if offset else 1


class DotSyntaxError(TraceFormatError):
    pass


def _unquote(raw: str) -> str:
    """A DOT quoted string's value: only \\" is an escape; backslash-newline joins lines."""
    body = raw[1:-1]
    if "\\" not in body:
        return body
    return body.replace("\\\r\n", "").replace("\\\n", "").replace('\\"', '"')


def tokenize(text: str, path: Path) -> list[Token]:
    tokens: list[Token] = []
    pos = 0
    n = len(text)
    match = _TOKEN.match
    lines: list[int] = []

    def fail(offset: int, message: str) -> DotSyntaxError:
        if not lines:
            lines.extend(m.start() for m in re.finditer("\n", text))
        line = bisect.bisect_right(lines, offset - 1) + 1
        return DotSyntaxError(path, message, line=line)

    while pos < n:
        m = match(text, pos)
        if m is None:
            ch = text[pos]
            if ch == '"':
                raise fail(pos, "unterminated quoted string")
            if text.startswith("/*", pos):
                raise fail(pos, "unterminated /* comment")
            raise fail(pos, f"unexpected character {excerpt(ch)}")
        kind = m.lastgroup
        if kind == "ws" or kind == "comment":
            pos = m.end()
            continue
        if kind == "str":
            tokens.append(Token("id", _unquote(m.group()), pos, quoted=True))
        elif kind in ("id", "num"):
            tokens.append(Token("id", m.group(), pos))
        elif kind == "edgeop":
            tokens.append(Token("edgeop", m.group(), pos))
        elif kind == "punct":
            tokens.append(Token(m.group(), m.group(), pos))
        else:  # HTML string: balanced angle brackets
            depth = 0
            end = pos
            while end < n:
                c = text[end]
                if c == "<":
                    depth += 1
                elif c == ">":
                    depth -= 1
                    if depth == 0:
                        break
                end += 1
            if depth:
                raise fail(pos, "unterminated HTML string <...>")
            tokens.append(Token("id", text[pos + 1 : end], pos, quoted=True))
            pos = end + 1
            continue
        pos = m.end()
    return tokens


Operand = Union[str, list[str]]  # a node name, or a subgraph's node names


class _Parser:
    def __init__(self, text: str, path: Path) -> None:
        self.text = text
        self.path = path
        self.tokens = tokenize(text, path)
        self.i = 0
        self.nodes: dict[str, DotNode] = {}
        self.declared: list[str] = []
        self.edges: list[DotEdge] = []
        self.graph_attrs: dict[str, str] = {}
        self.directed = True
        self._lines: list[int] = []

    # -- token helpers
    def fail(self, message: str, tok: Optional[Token] = None) -> DotSyntaxError:
        offset = tok.offset if tok is not None else len(self.text)
        if not self._lines:
            self._lines = [m.start() for m in re.finditer("\n", self.text)]
        line = bisect.bisect_right(self._lines, offset - 1) + 1
        return DotSyntaxError(self.path, message, line=line)

    def peek(self, k: int = 0) -> Optional[Token]:
        j = self.i + k
        return self.tokens[j] if j < len(self.tokens) else None

    def next(self, what: str) -> Token:
        tok = self.peek()
        if tok is None:
            raise self.fail(f"unexpected end of file, expected {what}")
        self.i += 1
        return tok

    def expect(self, kind: str, what: Optional[str] = None) -> Token:
        tok = self.next(what or repr(kind))
        if tok.kind != kind:
            raise self.fail(f"expected {what or repr(kind)}, found {excerpt(tok.value)}", tok)
        return tok

    def is_kw(self, tok: Optional[Token], word: str) -> bool:
        return tok is not None and tok.kind == "id" and not tok.quoted and tok.value.lower() == word

    def id_value(self, what: str) -> Token:
        """An ID, joining `"a" + "b"` concatenations."""
        tok = self.expect("id", what)
        if tok.quoted:
            parts = [tok.value]
            while (plus := self.peek()) is not None and plus.kind == "+":
                self.i += 1
                nxt = self.expect("id", "a quoted string after '+'")
                parts.append(nxt.value)
            if len(parts) > 1:
                return Token("id", "".join(parts), tok.offset, quoted=True)
        return tok

    # -- grammar
    def parse(self) -> DotGraph:
        strict = False
        tok = self.peek()
        if tok is None:
            raise self.fail("empty file: expected 'digraph' or 'graph'")
        if self.is_kw(tok, "strict"):
            strict = True
            self.i += 1
        tok = self.next("'digraph' or 'graph'")
        if self.is_kw(tok, "digraph"):
            self.directed = True
        elif self.is_kw(tok, "graph"):
            self.directed = False
        else:
            raise self.fail(f"expected 'digraph' or 'graph', found {excerpt(tok.value)}", tok)
        name = None
        if (t := self.peek()) is not None and t.kind == "id":
            name = self.id_value("graph name").value
        self.expect("{", "'{'")
        self.stmt_list({}, {})
        self.expect("}", "'}' closing the graph")
        extra = self.peek()
        if extra is not None:
            raise self.fail(f"unexpected {excerpt(extra.value)} after the closing '}}'", extra)
        return DotGraph(
            self.path, self.text, name, self.directed, strict, self.nodes, self.declared, self.edges, self.graph_attrs
        )

    def stmt_list(self, node_defaults: dict[str, str], edge_defaults: dict[str, str]) -> list[str]:
        """Statements up to the closing '}' (not consumed); returns the node names they mention."""
        members: list[str] = []
        node_defaults = dict(node_defaults)
        edge_defaults = dict(edge_defaults)
        while True:
            tok = self.peek()
            if tok is None or tok.kind == "}":
                return members
            if tok.kind == ";":
                self.i += 1
                continue
            self.stmt(node_defaults, edge_defaults, members)

    def attr_list(self) -> dict[str, str]:
        attrs: dict[str, str] = {}
        while (tok := self.peek()) is not None and tok.kind == "[":
            self.i += 1
            while True:
                tok = self.peek()
                if tok is None:
                    raise self.fail("unterminated attribute list, expected ']'")
                if tok.kind == "]":
                    self.i += 1
                    break
                if tok.kind in (",", ";"):
                    self.i += 1
                    continue
                key = self.id_value("an attribute name").value
                if (eq := self.peek()) is not None and eq.kind == "=":
                    self.i += 1
                    attrs[key] = self.id_value(f"a value for attribute {key!r}").value
                else:
                    attrs[key] = "true"
        return attrs

    def node_id(self) -> tuple[str, Token]:
        tok = self.id_value("a node name")
        # Ports (`name:port[:compass]`) do not change which node is meant.
        while (colon := self.peek()) is not None and colon.kind == ":":
            self.i += 1
            self.id_value("a port name")
        return tok.value, tok

    def mention(self, name: str, tok: Token, defaults: dict[str, str], members: list[str]) -> DotNode:
        node = self.nodes.get(name)
        if node is None:
            node = self.nodes[name] = DotNode(name, dict(defaults), tok.offset)
        members.append(name)
        return node

    def subgraph(self, node_defaults: dict[str, str], edge_defaults: dict[str, str]) -> list[str]:
        tok = self.peek()
        if self.is_kw(tok, "subgraph"):
            self.i += 1
            if (t := self.peek()) is not None and t.kind == "id":
                self.id_value("subgraph name")
        self.expect("{", "'{' opening a subgraph")
        members = self.stmt_list(node_defaults, edge_defaults)
        self.expect("}", "'}' closing a subgraph")
        return members

    def operand(self, node_defaults: dict[str, str], edge_defaults: dict[str, str], members: list[str]) -> Operand:
        tok = self.peek()
        if tok is not None and (tok.kind == "{" or self.is_kw(tok, "subgraph")):
            sub = self.subgraph(node_defaults, edge_defaults)
            members.extend(sub)
            return sub
        name, ntok = self.node_id()
        self.mention(name, ntok, node_defaults, members)
        return name

    def stmt(self, node_defaults: dict[str, str], edge_defaults: dict[str, str], members: list[str]) -> None:
        tok = self.peek()
        assert tok is not None
        if tok.kind == "id" and not tok.quoted and tok.value.lower() in ("graph", "node", "edge"):
            nxt = self.peek(1)
            if nxt is not None and nxt.kind == "[":
                self.i += 1
                attrs = self.attr_list()
                kind = tok.value.lower()
                if kind == "node":
                    node_defaults.update(attrs)
                elif kind == "edge":
                    edge_defaults.update(attrs)
                else:
                    self.graph_attrs.update(attrs)
                return
            if tok.value.lower() in ("node", "edge"):
                raise self.fail(f"'{tok.value}' is a keyword here; quote it to use it as a node name", tok)
        if (
            tok.kind == "id"
            and (nxt := self.peek(1)) is not None
            and nxt.kind == "="
            and not self.is_kw(tok, "subgraph")
        ):
            key = self.id_value("an attribute name").value
            self.i += 1
            self.graph_attrs[key] = self.id_value(f"a value for {key!r}").value
            return
        if tok.kind not in ("id", "{"):
            raise self.fail(f"unexpected {excerpt(tok.value)} where a statement should start", tok)
        start = tok
        first = self.operand(node_defaults, edge_defaults, members)
        chain: list[Operand] = [first]
        while (op := self.peek()) is not None and op.kind == "edgeop":
            if (op.value == "->") != self.directed:
                raise self.fail(f"'{op.value}' used in {'a digraph' if self.directed else 'an undirected graph'}", op)
            self.i += 1
            chain.append(self.operand(node_defaults, edge_defaults, members))
        attrs = self.attr_list()
        if len(chain) == 1:
            if isinstance(first, str):
                node = self.nodes[first]
                node.attrs.update(attrs)
                if not node.declared:
                    node.declared = True
                    node.offset = start.offset
                    self.declared.append(first)
            return
        eattrs = {**edge_defaults, **attrs}
        for a, b in zip(chain, chain[1:]):
            for src in [a] if isinstance(a, str) else a:
                for dst in [b] if isinstance(b, str) else b:
                    self.edges.append(DotEdge(src, dst, eattrs, start.offset))


# The exact lines FlexFlow's DotFile writes (docs/input-formats.md §E.1). Files made only of these are
# read line by line, several times faster than the general parser; anything else falls back.
_FF_HEAD = re.compile(r"digraph taskgraph \{\n")
_FF_LINE = re.compile(
    r'  (node\d+) \[label="((?:[^"\\\n]|\\.)*)",shape=record\];\n|  (node\d+) -> (node\d+);\n'
    r"|(subgraph cluster_\d+ \{\n|node\d+;\n|\}\n)"
)


def _parse_flexflow_fast(text: str, path: Path) -> Optional[DotGraph]:
    """The graph if `text` is exactly in FlexFlow's writer format, else None."""
    head = _FF_HEAD.match(text)
    if head is None or not text.endswith("}"):
        return None
    body_end = len(text) - 1
    nodes: dict[str, DotNode] = {}
    declared: list[str] = []
    edges: list[DotEdge] = []
    pos = head.end()
    match = _FF_LINE.match
    while pos < body_end:
        m = match(text, pos)
        if m is None:
            return None
        name = m.group(1)
        if name is not None:
            label = m.group(2)
            if "\\" in label:
                label = _unquote(f'"{label}"')
            node = nodes.get(name)
            if node is None:
                node = nodes[name] = DotNode(name, {}, pos)
            node.attrs.update(label=label, shape="record")
            if not node.declared:
                node.declared = True
                node.offset = pos
                declared.append(name)
        elif m.group(3) is not None:
            src, dst = m.group(3), m.group(4)
            for n in (src, dst):
                if n not in nodes:
                    nodes[n] = DotNode(n, {}, pos)
            edges.append(DotEdge(src, dst, {}, pos))
        pos = m.end()
    return DotGraph(path, text, "taskgraph", True, False, nodes, declared, edges, {})


def parse_dot(path: Path, text: Optional[str] = None) -> DotGraph:
    """Parse a DOT file; raises DotSyntaxError (a TraceFormatError naming file and line)."""
    path = Path(path)
    if text is None:
        with input_file_errors(path, "DOT file"):
            text = path.read_text(encoding="utf-8", errors="replace")
    fast = _parse_flexflow_fast(text, path)
    if fast is not None:
        return fast
    return _Parser(text, path).parse()

"""The DOT reader and record-label parser behind the FlexFlow converter."""

from __future__ import annotations

from pathlib import Path

import pytest

from chakra.converters.flexflow.dot import DotSyntaxError, _parse_flexflow_fast, _Parser, parse_dot
from chakra.converters.flexflow.record import RecordError, flatten, parse_record

DATA = Path(__file__).resolve().parent.parent / "data" / "flexflow"

TRICKY = r"""/* leading block comment
   spanning lines */
# a preprocessor-style line
STRICT DiGraph "my graph" {
  graph [rankdir=LR]; label = "top";
  node [shape=record, color="red"]   // defaults for what follows
  "a node" [label="{ say \"hi\" | Forward | { 0 | 1 } }"];
  b [label="line one \
continued", weight=2; style=bold]
  c [label="con" + "cat" + "enated"]
  d [label=<<b>bold</b> &amp; <i>html</i>>]
  e:port1:n -> b:w;
  "a node" -> b -> c [color=blue];
  b -> {c d}
  subgraph cluster_0 {
    node [shape=box];
    f; g [label="g"];
    f -> g;
  }
  -1.5 -> .5;
  h [label="a // not a comment"]; i [label="a /* nor this */"]
}
"""


def test_tricky_dot(tmp_path: Path) -> None:
    path = tmp_path / "t.dot"
    path.write_text(TRICKY)
    g = parse_dot(path)
    assert g.directed and g.strict and g.name == "my graph"
    assert g.graph_attrs == {"rankdir": "LR", "label": "top"}
    assert g.nodes["a node"].attrs["label"] == '{ say "hi" | Forward | { 0 | 1 } }'
    assert g.nodes["b"].attrs == {"shape": "record", "color": "red", "label": "line one continued", "weight": "2",
                                  "style": "bold"}  # fmt: skip
    assert g.nodes["c"].attrs["label"] == "concatenated"
    assert g.nodes["d"].attrs["label"] == "<b>bold</b> &amp; <i>html</i>"
    assert g.nodes["f"].attrs["shape"] == "box" and g.nodes["a node"].attrs["shape"] == "record"
    assert g.nodes["h"].attrs["label"] == "a // not a comment"
    assert g.nodes["i"].attrs["label"] == "a /* nor this */"
    edges = [(e.src, e.dst) for e in g.edges]
    assert edges == [
        ("e", "b"),
        ("a node", "b"),
        ("b", "c"),
        ("b", "c"),
        ("b", "d"),
        ("f", "g"),
        ("-1.5", ".5"),
    ]
    assert g.edges[1].attrs == {"color": "blue"}
    # Declaration order (node statements), not first mention.
    assert g.declared == ["a node", "b", "c", "d", "f", "g", "h", "i"]
    assert g.line_of(g.nodes["b"].offset) == 8


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_matches_pydot_on_the_taskgraphs() -> None:
    pydot = pytest.importorskip("pydot")  # dev-only cross-check; never used at runtime
    for name in ("dp2_taskgraph.dot", "mp2_taskgraph.dot", "legacy_npu.dot"):
        path = DATA / name
        ours = parse_dot(path)
        (theirs,) = pydot.graph_from_dot_file(str(path))
        labels = {n.get_name(): n.get("label").strip('"') for n in theirs.get_nodes() if n.get("label")}
        assert labels == {k: v.attrs["label"] for k, v in ours.nodes.items()}
        assert [(e.get_source(), e.get_destination()) for e in theirs.get_edges()] == [
            (e.src, e.dst) for e in ours.edges
        ]


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ('digraph {\n a [label="open\n b -> c\n}', 2, "unterminated quoted string"),
        ("digraph {\n a -> b\n", None, "expected '}' closing the graph"),
        ("graph {\n a -> b\n}", 2, "'->' used in an undirected graph"),
        ("digraph {\n a -> b\n}\nextra", 4, "after the closing"),
        ("digraph {\n a [label=]\n}", 2, "a value for attribute 'label'"),
        ("digraph {\n /* never closed\n}", 2, "unterminated /* comment"),
        ("network {\n}", 1, "expected 'digraph' or 'graph'"),
        ("digraph {\n a @ b\n}", 2, "unexpected character '@'"),
    ],
)
def test_syntax_errors_name_the_line(tmp_path: Path, text: str, line, fragment: str) -> None:
    path = tmp_path / "bad.dot"
    path.write_text(text)
    with pytest.raises(DotSyntaxError) as info:
        parse_dot(path)
    assert fragment in str(info.value) and str(path) in str(info.value)
    if line is not None:
        assert info.value.line == line


def test_record_labels() -> None:
    assert parse_record("{ conv1 | Forward | { 0.35 | 1.12 } }") == ["conv1", "Forward", ["0.35", "1.12"]]
    assert parse_record("{ Update | { 2.9 | 2.9 } }") == ["Update", ["2.9", "2.9"]]
    assert parse_record(r"<p0> a\|b | { <x> c\{d\} | e\\f } | g\lh") == ["a|b", ["c{d}", "e\\f"], "g h"]
    assert flatten(parse_record("{a|{b|{c|d}}|e}")) == ["a", "b", "c", "d", "e"]
    for bad in ("{ a | b", "a } b", "{ a | <p b }", "x { a }"):
        with pytest.raises(RecordError):
            parse_record(bad)


def test_fast_path_agrees_with_the_general_parser(tmp_path: Path) -> None:
    # FlexFlow's DotFile::close() appends cluster blocks (nested ones too) before the last '}'.
    text = (DATA / "dp2_taskgraph.dot").read_text()
    assert text.endswith("}")
    clusters = "subgraph cluster_0 {\nnode0;\nnode3;\nsubgraph cluster_1 {\nnode1;\n}\n}\n"
    variants = {"plain": text, "clusters": text[:-1] + clusters + "}"}
    for name, body in variants.items():
        path = tmp_path / f"{name}.dot"
        path.write_text(body)
        fast = _parse_flexflow_fast(body, path)
        assert fast is not None, name
        slow = _Parser(body, path).parse()
        assert fast.declared == slow.declared
        assert {k: v.attrs for k, v in fast.nodes.items()} == {k: v.attrs for k, v in slow.nodes.items()}
        assert [(e.src, e.dst) for e in fast.edges] == [(e.src, e.dst) for e in slow.edges]
        assert [fast.line_of(fast.nodes[n].offset) for n in fast.declared] == [
            slow.line_of(slow.nodes[n].offset) for n in slow.declared
        ]
    # Anything off the writer's exact format goes to the general parser.
    assert _parse_flexflow_fast(text.replace("  node0 -> node1;\n", "  node0 -> node1 [color=red];\n"), path) is None

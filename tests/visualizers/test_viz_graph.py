"""`chakra visualize`: DOT/GraphML/PDF output on real samples and on traces shaped like real ones."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections import Counter
from pathlib import Path

import networkx as nx
import pydot
import pytest

from chakra.io import read_traces, write_rank_traces, write_trace
from chakra.schema import NodeType
from chakra.trace import Trace, make_node
from chakra.visualizers import graph as graph_mod
from chakra.visualizers.graph import TooManyNodes, choose_view, visualize
from chakra.visualizers.select import Filters, build_view

HAVE_DOT = shutil.which("dot") is not None
needs_dot = pytest.mark.skipif(not HAVE_DOT, reason="Graphviz dot not installed")


def _all_reduce(samples_dir: Path) -> str:
    return str(samples_dir / "astrasim" / "all_reduce_8npus_1MB" / "all_reduce")


def _pydot_graph(path: Path) -> pydot.Dot:
    graphs = pydot.graph_from_dot_data(path.read_text(encoding="utf-8"))
    assert graphs, "pydot could not parse the DOT output"
    return graphs[0]


def _all_nodes(g: pydot.Dot) -> list[pydot.Node]:
    out = list(g.get_nodes())
    for sub in g.get_subgraphs():
        out.extend(_all_nodes(sub))
    return [n for n in out if n.get_name().strip('"') not in ("node", "edge", "graph")]


def test_all_reduce_sample_dot_has_rank_clusters_and_collective_hub(samples_dir, tmp_path, run_cli):
    out = tmp_path / "ar.dot"
    res = run_cli("visualize", _all_reduce(samples_dir), "--dot", "-o", str(out), "-q")
    assert res.exit_code == 0, res.stderr
    g = _pydot_graph(out)
    clusters = sorted(s.get_name() for s in g.get_subgraphs())
    assert clusters == sorted(f"cluster_rank{r}" for r in range(8))
    names = {n.get_name().strip('"') for n in _all_nodes(g)}
    assert {f"r{r}_n{r}" for r in range(8)} <= names  # the node id equals the rank in this sample
    assert "coll_0" in names and "legend" in names
    hub_edges = [e for e in g.get_edges() if e.get_destination().strip('"') == "coll_0"]
    assert len(hub_edges) == 8
    text = out.read_text()
    assert text.count("ALL_REDUCE 1.0 MiB") == 9  # 8 nodes + the hub
    assert "shape=hexagon" in text


def test_all_reduce_graphml_loads_in_networkx(samples_dir, tmp_path, run_cli):
    out = tmp_path / "ar.graphml"
    res = run_cli("visualize", _all_reduce(samples_dir), "-o", str(out), "--json")
    assert res.exit_code == 0, res.stderr
    g = nx.read_graphml(out)
    colls = [d for _, d in g.nodes(data=True) if d.get("kind") == "coll"]
    assert len(colls) == 8
    assert sorted(d["rank"] for d in colls) == list(range(8))
    assert all(d["comm"] == "ALL_REDUCE 1.0 MiB" and d["node_type"] == NodeType.COMM_COLL_NODE for d in colls)
    assert g.number_of_edges() == 8
    assert {d["dependency"] for *_, d in g.edges(data=True)} == {"collective"}


@needs_dot
def test_pdf_of_samples_renders_in_seconds(samples_dir, tmp_path, run_cli):
    for trace in (_all_reduce(samples_dir), str(samples_dir / "et" / "official_small_chakra.0.json")):
        out = tmp_path / (Path(trace).name + ".pdf")
        t0 = time.perf_counter()
        res = run_cli("visualize", trace, "-o", str(out), "-q")
        assert res.exit_code == 0, res.stderr
        assert time.perf_counter() - t0 < 10
        assert out.read_bytes()[:5] == b"%PDF-"


def test_official_small_json_nodes_kinds_and_edges(samples_dir, tmp_path):
    traces = read_traces([samples_dir / "et" / "official_small_chakra.0.json"])
    result = visualize(traces, tmp_path / "small.graphml")
    g = nx.read_graphml(tmp_path / "small.graphml")
    kinds = {d["first_id"]: d["kind"] for _, d in g.nodes(data=True)}
    assert kinds == {216: "cpu", 217: "cpu", 430: "gpu", 432: "coll", 433: "coll", 435: "coll", 541: "cpu"}
    expected = {(216, 217), (216, 430), (432, 433), (432, 435), (216, 435), (217, 435)}
    data_edges = {
        (g.nodes[u]["first_id"], g.nodes[v]["first_id"]) for u, v, d in g.edges(data=True) if d["dependency"] == "data"
    }
    assert data_edges == expected
    assert result.view.selected_nodes == 7
    # The CPU-side broadcast collectives are marked as such in the drawing.
    dot = graph_mod.dot_source(result.view)
    assert dot.count("[CPU]") == 2


def test_auto_collapse_keeps_every_node_and_all_time(tmp_path, shapes):
    trace = shapes.pytorch_like(steps=2, layers=12)
    total_dur = sum(n.duration_micros for n in trace.nodes)
    view, notes = choose_view([trace], Filters(), max_nodes=100)
    assert len(trace.nodes) > 100 and len(view.boxes) <= 100
    assert notes and "exceed --max-nodes 100" in notes[0] and "--around" in notes[0]
    assert sum(b.count for b in view.boxes) == len(trace.nodes)
    assert sum(b.duration_us for b in view.boxes) == total_dur
    # The default is the overview: per step, the forward operators, the optimizer, the all-reduce.
    assert view.collapsed_by == "overview"
    steps = {view.cluster_names[(0, b.path[0])].split(" · ")[0] for b in view.boxes if b.path}
    assert steps >= {"ProfilerStep#1", "ProfilerStep#2"}
    # `adaptive`: top-level operators stay visible; the optimizer loop is folded into one box per step.
    view = build_view([trace], Filters(), "adaptive", target=80)
    names = [b.name for b in view.boxes]
    assert names.count("Optimizer.step#Adam.step") == 2
    opt = [b for b in view.boxes if b.name == "Optimizer.step#Adam.step"]
    assert all(b.count == 1 + 2 * 12 * 3 for b in opt)
    assert names.count("aten::linear") == 2 * 6
    linear = next(b for b in view.boxes if b.name == "aten::linear")
    assert linear.count == 5 and linear.kinds == {"cpu": 4, "gpu": 1}
    # The all-reduce kernel keeps its collective colour inside its operator's box.
    allreduce = [b for b in view.boxes if b.name == "c10d::allreduce_"]
    assert len(allreduce) == 2 and all(b.kind == "coll" and b.comm == ["ALL_REDUCE 4.0 MiB"] for b in allreduce)


def test_collapsed_view_draws_annotation_clusters(tmp_path, shapes):
    trace = shapes.pytorch_like(steps=2, layers=8)
    result = visualize([trace], tmp_path / "c.dot", max_nodes=60)
    assert result.view.collapsed_by == "overview"
    g = _pydot_graph(tmp_path / "c.dot")
    labels = [s.get_label() for s in g.get_subgraphs()]
    assert any("ProfilerStep#1" in (lab or "") for lab in labels)
    assert any("ProfilerStep#2" in (lab or "") for lab in labels)


def test_explicit_collapse_modes(tmp_path, shapes):
    trace = shapes.pytorch_like(steps=1, layers=4)
    by_ann, _ = choose_view([trace], Filters(), collapse="annotation")
    # The thread root, the ProfilerStep region (all of it, though the optimizer region comes between
    # its parts in file order), the optimizer region.
    assert sorted(b.name for b in by_ann.boxes) == sorted(
        ["[pytorch|profiler|execution_trace|thread]", "ProfilerStep#1", "Optimizer.step#Adam.step"]
    )
    assert sum(b.count for b in by_ann.boxes) == len(trace.nodes)
    by_prefix, _ = choose_view([trace], Filters(), collapse="prefix")
    assert all(b.count >= 1 for b in by_prefix.boxes)
    assert sum(b.count for b in by_prefix.boxes) == len(trace.nodes)
    assert any(b.name == "aten…" and b.count > 1 for b in by_prefix.boxes)


def test_collapse_none_refuses_too_many_nodes_with_hint(tmp_path, run_cli, shapes):
    path = tmp_path / "big.0.et"
    write_trace(path, shapes.pytorch_like(steps=2, layers=12))
    res = run_cli(
        "visualize", str(path), "--dot", "-o", str(tmp_path / "x.dot"), "--collapse", "none", "--max-nodes", "50"
    )
    assert res.exit_code == 1
    assert "--max-nodes 50" in res.stderr and "--ids A:B" in res.stderr and "--around" in res.stderr
    assert not (tmp_path / "x.dot").exists()
    with pytest.raises(TooManyNodes):
        choose_view([shapes.pytorch_like()], Filters(), collapse="none", max_nodes=10)


def test_filters_select_the_expected_nodes(tmp_path, shapes):
    trace = shapes.pytorch_like(steps=1, layers=4)
    by_id = trace.by_id()

    def ids(**kw):
        view, _ = choose_view([trace], Filters(**kw), collapse="none", max_nodes=10_000)
        return sorted(b.first_id for b in view.boxes)

    assert ids(id_min=5, id_max=9) == [5, 6, 7, 8, 9]
    assert ids(id_min=30) == sorted(i for i in by_id if i >= 30)
    gpu = ids(kinds=frozenset({"gpu"}))
    assert gpu and all(not by_id[i].attr[0].bool_val and by_id[i].type == NodeType.COMP_NODE for i in gpu)
    assert ids(kinds=frozenset({"coll"})) == [n.id for n in trace.nodes if n.type == NodeType.COMM_COLL_NODE]
    assert ids(name=re.compile(r"^aten::linear$")) == [n.id for n in trace.nodes if n.name == "aten::linear"]
    # around: the node, its parents and children within the depth.
    centre = next(n for n in trace.nodes if n.name == "aten::linear")
    near = set(ids(around=centre.id, depth=1))
    parents = set(centre.ctrl_deps) | set(centre.data_deps)
    children = {n.id for n in trace.nodes if centre.id in n.ctrl_deps or centre.id in n.data_deps}
    assert near == {centre.id} | parents | children
    assert len(ids(around=centre.id, depth=2)) > len(near)


def test_filter_cli_options_and_errors(samples_dir, tmp_path, run_cli):
    out = tmp_path / "r.graphml"
    res = run_cli("visualize", _all_reduce(samples_dir), "-o", str(out), "--rank", "2", "--rank", "5", "-q")
    assert res.exit_code == 0, res.stderr
    g = nx.read_graphml(out)
    assert sorted(d["rank"] for _, d in g.nodes(data=True) if "rank" in d) == [2, 5]
    res = run_cli("visualize", _all_reduce(samples_dir), "-o", str(out), "--rank", "9")
    assert res.exit_code == 1 and "--rank 9" in res.stderr
    res = run_cli("visualize", _all_reduce(samples_dir), "-o", str(out), "--type", "send")
    assert res.exit_code == 1 and "no node matches" in res.stderr
    res = run_cli("visualize", _all_reduce(samples_dir), "-o", str(out), "--type", "bogus")
    assert res.exit_code == 1 and "unknown node type" in res.stderr
    res = run_cli("visualize", _all_reduce(samples_dir), "-o", str(out), "--ids", "5:2")
    assert res.exit_code == 1 and "bad id range" in res.stderr
    res = run_cli("visualize", _all_reduce(samples_dir), "--dot", "--svg", "-o", str(out))
    assert res.exit_code == 2


NASTY = 'op<T> "quoted" | {brace} & back\\slash </B> <BR/> ]'


def test_labels_are_escaped(tmp_path):
    t = Trace(rank=0)
    t.nodes.append(make_node(1, NASTY, NodeType.COMP_NODE, duration_micros=3, attrs={"is_cpu_op": True}))
    t.nodes.append(make_node(2, "x" * 300 + "(int, float, double)", NodeType.COMP_NODE, data_deps=[1]))
    visualize([t], tmp_path / "n.dot")
    g = _pydot_graph(tmp_path / "n.dot")
    assert len(g.get_edges()) == 1
    text = (tmp_path / "n.dot").read_text()
    assert "&lt;T&gt; &quot;quoted&quot; | {brace} &amp; back" in text
    visualize([t], tmp_path / "n.graphml")
    names = {d["name"] for _, d in nx.read_graphml(tmp_path / "n.graphml").nodes(data=True)}
    assert NASTY in names
    if HAVE_DOT:
        proc = subprocess.run(["dot", "-Tsvg", str(tmp_path / "n.dot")], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        assert "Warning" not in proc.stderr and "Error" not in proc.stderr


def test_missing_graphviz_gives_one_line_with_install_hint(samples_dir, tmp_path, run_cli, monkeypatch):
    monkeypatch.setattr(graph_mod.shutil, "which", lambda name: None)
    res = run_cli("visualize", _all_reduce(samples_dir), "-o", str(tmp_path / "x.pdf"))
    assert res.exit_code == 1
    assert "apt-get install graphviz" in res.stderr
    assert len(res.stderr.strip().splitlines()) <= 3  # one message, possibly wrapped by the terminal width
    assert not (tmp_path / "x.pdf").exists()
    res = run_cli("visualize", _all_reduce(samples_dir), "--dot", "-o", str(tmp_path / "x.dot"), "-q")
    assert res.exit_code == 0 and (tmp_path / "x.dot").exists()


def test_send_recv_pairs_are_linked_across_ranks(tmp_path, shapes):
    traces = shapes.p2p_pair()
    view, _ = choose_view(traces, Filters())
    peers = sorted((e.src, e.dst) for e in view.edges if e.dep == "peer")
    assert peers == [("r0_n1", "r1_n2"), ("r0_n3", "r1_n4"), ("r1_n1", "r0_n2"), ("r1_n3", "r0_n4")]
    no_links, _ = choose_view(traces, Filters(), links=False)
    assert not [e for e in no_links.edges if e.dep == "peer"]
    write_rank_traces(tmp_path / "p2p", traces)
    visualize(read_traces([tmp_path / "p2p"]), tmp_path / "p2p.dot")
    assert len([e for e in _pydot_graph(tmp_path / "p2p.dot").get_edges() if "dotted" in str(e)]) == 4


@needs_dot
def test_rendered_page_is_readable_size(tmp_path, shapes):
    """A default drawing of a PyTorch-shaped trace stays a sane page (not a 10-metre strip)."""
    result = visualize([shapes.pytorch_like(steps=2, layers=12)], tmp_path / "p.svg", max_nodes=100)
    svg = (tmp_path / "p.svg").read_text()
    width, height = (float(x) for x in re.search(r'width="([\d.]+)pt" height="([\d.]+)pt"', svg).groups())
    assert len(result.view.boxes) <= 100
    assert height < 6000 and width < 3000


def test_converted_pytorch_mlp_sample(samples_dir, tmp_path):
    import chakra.converters.pytorch as pytorch

    mlp = samples_dir / "pytorch" / "mlp"
    written = pytorch.convert([mlp / "et.0.json", mlp / "kineto.0.json"], tmp_path / "mlp").paths
    traces = read_traces([str(p) for p in written])
    n = sum(len(t.nodes) for t in traces)
    t0 = time.perf_counter()
    result = visualize(traces, tmp_path / ("mlp.pdf" if HAVE_DOT else "mlp.dot"))
    assert time.perf_counter() - t0 < 15
    assert n > graph_mod.DEFAULT_MAX_NODES
    assert result.view.collapsed_by is not None and len(result.view.boxes) <= graph_mod.OVERVIEW_BOXES
    assert sum(b.count for b in result.view.boxes) == n
    steps = {name.split(" · ")[0] for name in result.view.cluster_names.values() if name.startswith("ProfilerStep#")}
    assert steps == {"ProfilerStep#1", "ProfilerStep#2"}


def test_too_big_even_collapsed_draws_a_window_and_the_hint_works(tmp_path):
    """An ET-only conversion has no times and no call tree to group by: the default view still
    draws something (the lowest ids of the first rank, within --max-nodes) and its --ids hint
    selects exactly a drawable window (ids are not in file order here)."""
    from chakra.schema import NodeType
    from chakra.trace import make_node
    from chakra.visualizers.select import Filters

    ids = list(range(5000, 0, -1))  # reversed: file order is not id order
    words = ["matmul", "relu", "gelu", "softmax", "dropout", "layernorm", "embedding"]
    nodes = [make_node(i, words[i % 7], NodeType.COMP_NODE, ctrl_deps=[i + 1] if i < 5000 else []) for i in ids]
    trace = Trace(nodes=nodes, rank=0)
    view, notes = choose_view([trace], Filters(), max_nodes=120)
    assert len(view.boxes) <= 120 and notes and "drew the first 120 nodes" in notes[0]
    hint = notes[0].split("e.g. --ids ")[1].split()[0]
    lo, hi = (int(x) for x in hint.split(":"))
    assert (lo, hi) == (1, 120)
    view2, _ = choose_view([trace], Filters(id_min=lo, id_max=hi), max_nodes=120)
    assert len(view2.boxes) == 120


def test_overview_of_many_steps_shows_one_box_per_step_and_expand_opens_one(shapes):
    """Forty profiler steps do not fit as phases: one box per step and lane, and --expand on a
    step's title opens that step only (official converter style: the call tree in ctrl_deps)."""
    trace = shapes.pytorch_like(steps=40, layers=12)
    view, notes = choose_view([trace], Filters())
    assert view.level == "step" and "drew an overview" in notes[0]
    titles = Counter(b.name.split(" (")[0] for b in view.boxes)
    assert all(titles[f"ProfilerStep#{k}"] >= 1 for k in range(1, 41))
    assert sum(b.count for b in view.boxes) == len(trace.nodes)
    opened, _ = choose_view([trace], Filters(), expand=[re.compile(r"^ProfilerStep#3$")])
    names = [b.name for b in opened.boxes]
    assert "ProfilerStep#3" not in names and "ProfilerStep#4" in names
    assert any(n.startswith(("forward", "optimizer")) for n in names)

"""`chakra generate spec` with YAML and Python files, docs and examples run as tests."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

from chakra.io import read_traces
from chakra.schema import NodeType
from chakra.schema.attrs import get_int
from chakra.validate import validate_traces

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p for p in (REPO / "examples").iterdir() if p.suffix in (".py", ".yaml", ".yml"))


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_examples_generate_valid_traces(example, tmp_path, run_cli):
    res = run_cli("generate", "spec", str(example), "-o", str(tmp_path / "ex"), "--json", "-q")
    assert res.exit_code == 0, res.stderr
    summary = orjson.loads(res.stdout)
    traces = read_traces([tmp_path / "ex"])
    assert len(traces) == summary["ranks"] >= 2
    assert sum(len(t.nodes) for t in traces) == summary["nodes"]
    report = validate_traces(traces)
    assert report.ok, [f.message for f in report.errors]
    assert any(n.type in (NodeType.COMM_COLL_NODE, NodeType.COMM_SEND_NODE) for t in traces for n in t.nodes)


def test_yaml_pipeline_example_contents(tmp_path, run_cli):
    res = run_cli(
        "generate", "spec", str(REPO / "examples" / "two_stage_pipeline.yaml"), "-o", str(tmp_path / "p"), "-q"
    )
    assert res.exit_code == 0, res.stderr
    traces = read_traces([tmp_path / "p"])
    sends = [n for n in traces[0].nodes if n.type == NodeType.COMM_SEND_NODE]
    recvs = [n for n in traces[2].nodes if n.type == NodeType.COMM_RECV_NODE]
    assert [get_int(n, "comm_size") for n in sends] == [16 << 20]
    assert [get_int(n, "comm_src") for n in recvs] == [0]
    fwd1 = next(n for n in traces[2].nodes if n.name == "stage1.fwd")
    assert recvs[0].id in fwd1.data_deps
    # 4e12 FLOPs at 100 TFLOP/s = 40 ms (compute bound over 2 GiB at 2000 GB/s = 1.07 ms).
    assert fwd1.duration_micros == 40_000


def test_docs_python_blocks_run(tmp_path, monkeypatch):
    text = (REPO / "docs" / "dsl.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) >= 3
    monkeypatch.chdir(tmp_path)
    for block in blocks:
        exec(compile(block, "docs/dsl.md", "exec"), {"__name__": "docs_example"})  # noqa: S102 - our own docs
    assert len(list(tmp_path.glob("quickstart.*.et"))) == 4


def test_bad_yaml_is_one_clear_error(tmp_path, run_cli):
    bad = tmp_path / "bad.yaml"
    bad.write_text("ranks: 2\nops:\n  - all_reduce: {size: 1MiB, after: [nope]}\n")
    res = run_cli("generate", "spec", str(bad), "-o", str(tmp_path / "x"))
    assert res.exit_code == 1
    assert "bad.yaml: ops[0] (all_reduce)" in res.stderr and "nope" in res.stderr
    assert not list(tmp_path.glob("x.*"))
    broken = tmp_path / "broken.yaml"
    broken.write_text("ranks: [\n")
    res = run_cli("generate", "spec", str(broken), "-o", str(tmp_path / "x"))
    assert res.exit_code == 1 and "not valid YAML" in res.stderr
    typo = tmp_path / "typo.yaml"
    typo.write_text("ranks: 2\nops:\n  - compute: {rank: 0, name: a, flop: 3}\n")
    res = run_cli("generate", "spec", str(typo), "-o", str(tmp_path / "x"))
    assert res.exit_code == 1 and "unknown key(s) ['flop']" in res.stderr


def test_python_spec_without_build(tmp_path, run_cli):
    spec = tmp_path / "nobuild.py"
    spec.write_text("X = 1\n")
    res = run_cli("generate", "spec", str(spec), "-o", str(tmp_path / "x"))
    assert res.exit_code == 1 and "must define build()" in res.stderr


def test_yaml_generic_collective_and_inline_group(tmp_path, run_cli):
    spec = tmp_path / "inline.yaml"
    spec.write_text(
        "ranks: 3\n"
        "ops:\n"
        "  - collective: {id: c, type: reduce_scatter, size: 3KiB, group: [0, 2]}\n"
        "  - compute: {rank: all, name: after, duration_us: 4, after: [c]}\n"
    )
    res = run_cli("generate", "spec", str(spec), "-o", str(tmp_path / "i"), "-q")
    assert res.exit_code == 0, res.stderr
    traces = read_traces([tmp_path / "i"])
    colls = [[n for n in t.nodes if n.type == NodeType.COMM_COLL_NODE] for t in traces]
    assert [len(c) for c in colls] == [1, 0, 1]
    assert get_int(colls[2][0], "comm_size") == 3072 and get_int(colls[2][0], "comm_type") == 7
    # rank 1 is not in the group: its compute has no collective to wait for.
    after = [next(n for n in t.nodes if n.name == "after") for t in traces]
    assert list(after[0].data_deps) == [colls[0][0].id] and list(after[1].data_deps) == []
    assert validate_traces(traces).ok


def test_python_spec_errors_are_one_line(tmp_path, run_cli):
    spec = tmp_path / "boom.py"
    spec.write_text("from chakra.dsl import Workload\n\ndef build():\n    w = Workload(2)\n    return w.nope()\n")
    res = run_cli("generate", "spec", str(spec), "-o", str(tmp_path / "x"))
    assert res.exit_code == 1 and "AttributeError" in res.stderr and "boom.py" in res.stderr
    helper = tmp_path / "sizes_helper.py"
    helper.write_text("BLOCK = 4096\n")
    spec = tmp_path / "uses_helper.py"
    spec.write_text(
        "from chakra.dsl import Workload\nfrom sizes_helper import BLOCK\n\n"
        "def build():\n    w = Workload(2)\n    w.all_reduce(BLOCK)\n    return w\n"
    )
    res = run_cli("generate", "spec", str(spec), "-o", str(tmp_path / "h"), "-q")
    assert res.exit_code == 0, res.stderr
    (t0, _) = read_traces([tmp_path / "h"])
    assert [get_int(n, "comm_size") for n in t0.nodes if n.type == NodeType.COMM_COLL_NODE] == [4096]

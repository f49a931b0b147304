"""ASTRA-sim 1.0 text workloads -> Chakra, on the real samples in samples/astrasim/text_workloads/.

Expected values come from the input columns (read here independently of the converter) and from
ASTRA-sim 1.0's training loops (docs/astra-sim.md §5, docs/chakra-format.md §4).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from chakra.converters import astrasim_text as text_conv
from chakra.converters import detect
from chakra.errors import ChakraError, InputError, TraceFormatError
from chakra.graph import critical_path
from chakra.io import read_traces
from chakra.schema import CollectiveType, NodeType
from chakra.schema.attrs import get_attr, get_int
from chakra.trace import Trace
from chakra.validate import validate_traces


def columns(path: Path) -> list[list[str]]:
    """Layer rows of a sample, split the plain way (the test's own reading of the format)."""
    rows = [line.split() for line in path.read_text().splitlines() if line.strip()]
    return rows[2:]


def compute_only(trace) -> float:
    """Replay with comm taking no time: the critical path over compute durations."""
    return critical_path(trace.nodes, lambda n: n.duration_micros if n.type == NodeType.COMP_NODE else 0)[0]


@pytest.fixture(scope="module")
def text_dir(samples_dir: Path) -> Path:
    return samples_dir / "astrasim" / "text_workloads"


def test_model_parallel_sample(text_dir: Path) -> None:
    path = text_dir / "MLP_ModelParallel.txt"
    rows = columns(path)
    conv = text_conv.convert_text(path, npus=8, passes=2)
    traces = list(conv.traces())
    assert len(traces) == 8
    n = len(rows)
    per_pass = n + n + n + (n - 1) + n  # F, Fc (all ALLGATHER), I, Ic (not layer 0), W; wg comm NONE
    for t in traces:
        assert [node.id for node in t.nodes] == list(range(2 * per_pass))  # ids restart at 0 per rank
    nodes = traces[3].nodes
    comps = [x for x in nodes if x.type == NodeType.COMP_NODE]
    colls = [x for x in nodes if x.type == NodeType.COMM_COLL_NODE]
    assert len(comps) == 2 * 3 * n and len(colls) == 2 * (2 * n - 1)
    # FWD comm: ALLGATHER with the fwd size; IG comm: ALLREDUCE with the ig size, none for layer 0.
    fwd = [x for x in colls if "_FWD_" in x.name][:n]
    assert [get_int(x, "comm_size") for x in fwd] == [int(r[4]) for r in rows]
    assert {get_int(x, "comm_type") for x in fwd} == {CollectiveType.ALL_GATHER}
    ig = [x for x in colls if "_IG_" in x.name][: n - 1]
    assert [get_int(x, "comm_size") for x in ig] == [int(r[7]) for r in reversed(rows[1:])]
    assert all(get_attr(x, "involved_dim") == [True] for x in colls)
    assert not any(get_attr(x, "pg_name") for x in colls)
    # A blocking forward comm: layer i+1's forward waits on layer i's.
    by_name = {x.name: x for x in nodes[:per_pass]}
    f1 = by_name[f"COMP_NODE_{rows[1][0]}_FWD"]
    fc0 = by_name[f"COMM_COLL_NODE_{rows[0][0]}_FWD_ALLGATHER"]
    assert list(f1.data_deps) == [fc0.id]
    # MODEL runs every compute serially, layer 0's input gradient included.
    expected = sum(int(r[2]) + int(r[5]) + int(r[8]) for r in rows)
    assert compute_only(traces[0]) == 2 * expected
    report = validate_traces(traces)
    assert report.ok, [f.message for f in report.errors]


def test_data_parallel_sum_property(text_dir: Path, tmp_path: Path) -> None:
    # The MLP sample's layers under DATA (keyword swapped; built from the real sample): the
    # compute-only replay is Σ fwd + Σ wg + Σ ig of every layer but the first, per pass.
    src = (text_dir / "MLP_ModelParallel.txt").read_text()
    path = tmp_path / "mlp_data.txt"
    path.write_text(src.replace("MODEL", "DATA", 1))
    rows = columns(path)
    conv = text_conv.convert_text(path, npus=4, passes=3)
    expected = sum(int(r[2]) + int(r[8]) for r in rows) + sum(int(r[5]) for r in rows[1:])
    traces = list(conv.traces())
    assert compute_only(traces[2]) == 3 * expected
    # DATA ignores the fwd/ig columns and the wg column is NONE: no collective at all.
    assert not any(x.type == NodeType.COMM_COLL_NODE for x in traces[0].nodes)
    assert len(traces[0].nodes) == 3 * (3 * len(rows) - 1)


def test_micro_sample(text_dir: Path) -> None:
    path = text_dir / "microAllReduce.txt"
    conv = text_conv.convert_text(path, npus=8, passes=3)
    traces = list(conv.traces())
    for t in traces:
        assert len(t.nodes) == 3
        for node in t.nodes:
            assert node.type == NodeType.COMM_COLL_NODE
            assert get_int(node, "comm_type") == CollectiveType.ALL_REDUCE
            assert get_int(node, "comm_size") == 1048576
            assert not node.data_deps
    assert validate_traces(traces).ok


def test_written_files_round_trip(text_dir: Path, tmp_path: Path, run_cli) -> None:
    prefix = tmp_path / "mlp"
    result = run_cli("convert", "text", str(text_dir / "MLP_ModelParallel.txt"), "--npus", "4", "-o", str(prefix), "-q")
    assert result.exit_code == 0, result.stderr
    traces = read_traces([str(prefix)])
    assert [t.rank for t in traces] == [0, 1, 2, 3]
    assert all(len(t.nodes) == 29 for t in traces)
    assert get_attr(traces[0].metadata, "parallelism") == "MODEL"
    assert validate_traces(traces).ok
    result = run_cli("validate", str(prefix))
    assert result.exit_code == 0


def test_none_is_not_a_zero_size_collective(tmp_path: Path) -> None:
    path = tmp_path / "w.txt"
    path.write_text(
        "HYBRID_DATA_MODEL\n2\na -1 10 NONE 0 20 NONE 0 30 NONE 0 1\n"
        "b -1 10 ALLGATHER 64 20 NONE 0 30 ALLREDUCE 128 1\n"
    )
    conv = text_conv.convert_text(path, npus=8, model_group=2)
    colls = [x for x in conv.nodes if x.type == NodeType.COMM_COLL_NODE]
    assert [(x.name, get_int(x, "comm_size")) for x in colls] == [
        ("COMM_COLL_NODE_b_FWD_ALLGATHER", 64),
        ("COMM_COLL_NODE_b_WG_ALLREDUCE", 128),
    ]
    assert all(get_int(x, "comm_size") > 0 for x in colls)


def test_hybrid_groups_and_involved_dim(tmp_path: Path) -> None:
    path = tmp_path / "w.txt"
    path.write_text(
        "HYBRID_DATA_MODEL\n2\na -1 10 ALLGATHER 64 20 ALLREDUCE 32 30 ALLREDUCE 128 1\n"
        "b -1 10 ALLGATHER 64 20 ALLREDUCE 32 30 ALLREDUCE 128 1\n"
    )
    conv = text_conv.convert_text(path, npus=8, dims=[2, 4])
    traces = {t.rank: t for t in conv.traces()}
    groups = conv.groups.as_json()
    # Model on dimension 0 (pairs of neighbours), data on dimension 1 (stride 2).
    assert sorted(map(sorted, groups.values())) == sorted([[0, 1], [2, 3], [4, 5], [6, 7], [0, 2, 4, 6], [1, 3, 5, 7]])
    for rank, t in traces.items():
        for node in t.nodes:
            if node.type != NodeType.COMM_COLL_NODE:
                continue
            members = groups[get_attr(node, "pg_name")]
            assert rank in members
            if "_WG_" in node.name:
                assert get_attr(node, "involved_dim") == [False, True] and len(members) == 4
            else:
                assert get_attr(node, "involved_dim") == [True, False] and len(members) == 2
    assert validate_traces(list(traces.values())).ok
    # HYBRID_MODEL_DATA swaps the dimensions.
    path.write_text(path.read_text().replace("HYBRID_DATA_MODEL", "HYBRID_MODEL_DATA"))
    conv = text_conv.convert_text(path, npus=8, dims=[2, 4])
    wg = next(x for x in conv.rank_nodes(0) if "_WG_" in x.name)
    assert get_attr(wg, "involved_dim") == [True, False]
    assert conv.groups.as_json()[get_attr(wg, "pg_name")] == [0, 1]


def test_hybrid_on_one_dimension_warns(tmp_path: Path) -> None:
    path = tmp_path / "w.txt"
    path.write_text("HYBRID_DATA_MODEL\n1\na -1 10 ALLGATHER 64 20 ALLREDUCE 32 30 ALLREDUCE 128 1\n")
    conv = text_conv.convert_text(path, npus=8)
    assert any("--model-group" in w for w in conv.warnings)
    assert [x.name for x in conv.nodes if x.type == NodeType.COMM_COLL_NODE] == ["COMM_COLL_NODE_a_FWD_ALLGATHER"]


def test_comments_blank_lines_and_passes(tmp_path: Path) -> None:
    path = tmp_path / "w.txt"
    path.write_text(
        "# a comment\nDATA\n\n2   // two layers\n\nx -1 5 NONE 0 6 NONE 0 7 ALLREDUCE 100 1\n"
        "# between\ny -1 8 NONE 0 9 NONE 0 10 REDUCESCATTER 200 1\n\n"
    )
    conv = text_conv.convert_text(path, npus=2, passes=2)
    nodes = conv.nodes
    assert len(nodes) == 2 * (2 + 2 + 1 + 2)
    # Pass 2's forward of layer x waits on pass 1's weight-gradient collective of x.
    second_fx = [x for x in nodes if x.name == "COMP_NODE_x_FWD"][1]
    wc_x = next(x for x in nodes if x.name == "COMM_COLL_NODE_x_WG_ALLREDUCE")
    assert wc_x.id in second_fx.data_deps
    rs = next(x for x in nodes if x.name == "COMM_COLL_NODE_y_WG_REDUCESCATTER")
    assert get_int(rs, "comm_type") == CollectiveType.REDUCE_SCATTER and get_int(rs, "comm_size") == 200


@pytest.mark.parametrize(
    ("content", "line", "fragment"),
    [
        ("PIPELINE\n1\nx -1 5 NONE 0 6 NONE 0 7 NONE 0 1\n", 1, "unknown parallelism keyword 'PIPELINE'"),
        ("DATA\n1\nx -1 5 NONE 0 6 NONE 0 7 ALLREDUCE\n", 3, "layer line has 10 fields, expected 12"),
        ("DATA\n1\nx -1 5 NONE 0 6 NONE 0 7 BROADCAST 9 1\n", 3, "unknown weight-gradient communication type"),
        ("DATA\n1\nx -1 5 NONE 0 6.5 NONE 0 7 NONE 0 1\n", 3, "input-gradient compute time must be an integer"),
        ("DATA\n1\nx -1 5 NONE 0 6 NONE 0 7 NONE 0 1\ny -1 5 NONE 0 6 NONE 0 7 NONE 0 1\n", 4, "more layer lines"),
        ("DATA\nten\n", 2, "layer count must be an integer"),
        ("HYBRID_DLRM\n1\nx -1 5 NONE 0 6 NONE 0 7 NONE 0 1\n", 1, "last bottom-MLP layer"),
        ("HYBRID_CUSTOMIZED\n1\nx -1 5 NONE 0 6 NONE 0 7 NONE 0 1 PIPE\n", 3, "unknown per-layer parallelism"),
    ],
)
def test_malformed_input_names_file_and_line(tmp_path: Path, run_cli, content: str, line: int, fragment: str) -> None:
    path = tmp_path / "bad.txt"
    path.write_text(content)
    with pytest.raises(TraceFormatError) as info:
        text_conv.convert_text(path, npus=2)
    assert info.value.line == line and fragment in str(info.value) and str(path) in str(info.value)
    result = run_cli("convert", "text", str(path), "--npus", "2", "-o", str(tmp_path / "o"))
    assert result.exit_code == 1
    assert len(result.stderr.strip().splitlines()) == 1 and f"line {line}" in result.stderr
    assert not list(tmp_path.glob("o.*"))  # nothing half-written


def test_missing_layers_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "short.txt"
    path.write_text("DATA\n3\nx -1 5 NONE 0 6 NONE 0 7 NONE 0 1\n")
    with pytest.raises(TraceFormatError, match="announces 3 layers but the file has 1"):
        text_conv.parse_text(path)


def test_sniff_and_auto(text_dir: Path, tmp_path: Path) -> None:
    assert detect(text_dir / "MLP_ModelParallel.txt") == ["text"]
    assert detect(text_dir / "microAllReduce.txt") == ["text"]
    other = tmp_path / "x.txt"
    other.write_text("digraph taskgraph {\n}\n")
    assert detect(other) == []
    with pytest.raises(InputError, match="--npus"):
        text_conv.convert([text_dir / "microAllReduce.txt"], tmp_path / "o")


def test_bad_options(text_dir: Path) -> None:
    path = text_dir / "MLP_ModelParallel.txt"
    with pytest.raises(ChakraError, match="--dims"):
        text_conv.convert_text(path, npus=8, dims=[2, 2])
    with pytest.raises(ChakraError, match="--npus"):
        text_conv.convert_text(path, npus=0)


def test_distributed_inference_and_micro_extra_layers(tmp_path: Path) -> None:
    path = tmp_path / "inf.txt"
    path.write_text("DISTRIBUTED_INFERENCE\n2\na -1 10 ALLGATHER 64 20 ALLREDUCE 32 30 ALLREDUCE 128 1\n"
                    "b -1 15 NONE 0 20 ALLREDUCE 32 30 ALLREDUCE 128 1\n")  # fmt: skip
    conv = text_conv.convert_text(path, npus=4, passes=2)
    assert [x.name for x in conv.nodes] == ["COMP_NODE_a_FWD", "COMM_COLL_NODE_a_FWD_ALLGATHER", "COMP_NODE_b_FWD"] * 2
    assert compute_only(Trace(nodes=conv.nodes)) == 2 * (10 + 15)
    path.write_text("MICRO\n2\na -1 5 NONE 0 5 NONE 0 5 ALLTOALL 64 5\nb -1 5 NONE 0 5 NONE 0 5 ALLREDUCE 8 5\n")
    conv = text_conv.convert_text(path, npus=4, passes=2)
    assert [get_int(x, "comm_type") for x in conv.nodes] == [CollectiveType.ALL_TO_ALL] * 2
    assert any("only the first layer" in w for w in conv.warnings)

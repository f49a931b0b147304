"""FlexFlow task graph -> per-device Chakra traces.

No public FlexFlow `--taskgraph` file exists (docs/input-formats.md §E.3). The inputs in
tests/data/flexflow/ are built by make_taskgraphs.py to the writer's format exactly as FlexFlow's
source defines it (`Simulator::simulate_runtime`, `DotFile`, `RecordFormatter`); the legacy
`npu=` file follows the layout the deprecated Chakra converter read. See that script's docstring.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import orjson
import pytest

from chakra.converters import detect
from chakra.converters import flexflow as ff
from chakra.errors import ChakraError, ConfigError, TraceFormatError
from chakra.io import read_traces
from chakra.schema import NodeType
from chakra.schema.attrs import get_attr, get_int
from chakra.validate import validate_traces

DATA = Path(__file__).resolve().parent.parent / "data" / "flexflow"
DP2 = DATA / "dp2_taskgraph.dot"
MP2 = DATA / "mp2_taskgraph.dot"
LEGACY = DATA / "legacy_npu.dot"
DP2_PLACEMENT = "conv1=0,1;fc1=0,1;node18=1;*=0"


def by_name(nodes, name: str):
    return [n for n in nodes if n.name == name]


def messages(traces):
    """tag -> (send node, send rank, recv node, recv rank); each tag must pair exactly once."""
    sends = {}
    recvs = {}
    for t in traces:
        for n in t.nodes:
            if n.type == NodeType.COMM_SEND_NODE:
                assert get_int(n, "comm_tag") not in sends
                sends[get_int(n, "comm_tag")] = (n, t.rank)
            elif n.type == NodeType.COMM_RECV_NODE:
                assert get_int(n, "comm_tag") not in recvs
                recvs[get_int(n, "comm_tag")] = (n, t.rank)
    assert sends.keys() == recvs.keys()
    return {tag: (*sends[tag], *recvs[tag]) for tag in sends}


def test_data_parallel_split_by_placement() -> None:
    conv = ff.convert_flexflow(DP2, placement=DP2_PLACEMENT, bandwidth_gbps=16)
    traces = conv.lowered.traces
    assert [t.rank for t in traces] == [0, 1]
    r0, r1 = traces[0].nodes, traces[1].nodes
    kinds0 = Counter(NodeType(n.type).name for n in r0)
    kinds1 = Counter(NodeType(n.type).name for n in r1)
    assert kinds0 == {"COMP_NODE": 8, "COMM_RECV_NODE": 3, "COMM_SEND_NODE": 3}
    assert kinds1 == {"COMP_NODE": 6, "COMM_SEND_NODE": 3, "COMM_RECV_NODE": 3}
    # Times: ms in the file -> µs.
    f_fc1 = by_name(r0, "fc1")[0]
    assert (f_fc1.start_time_micros, f_fc1.duration_micros) == (500, 300)
    assert get_attr(f_fc1, "task_type") == "Forward"
    b_conv1 = [n for n in r1 if n.name == "conv1" and get_attr(n, "task_type") == "Backward"][0]
    assert (b_conv1.start_time_micros, b_conv1.duration_micros) == (1400, 1000)
    # Six messages: 3 gradient segments 1 -> 0, 3 weight segments 0 -> 1, sizes from 16 GB/s.
    pairs = messages(traces)
    assert len(pairs) == 6
    directions = Counter((s_rank, r_rank) for _, s_rank, _, r_rank in pairs.values())
    assert directions == {(1, 0): 3, (0, 1): 3}
    for send, s_rank, recv, r_rank in pairs.values():
        assert get_int(send, "comm_src") == s_rank and get_int(send, "comm_dst") == r_rank
        assert get_int(recv, "comm_src") == s_rank and get_int(recv, "comm_dst") == r_rank
        assert get_int(send, "comm_size") == get_int(recv, "comm_size")
    assert sorted(get_int(s, "comm_size") for s, *_ in pairs.values()) == [1_800_000] * 2 + [4_000_000] * 4
    # The conv1 update (rank 0) waits for rank 0's barrier and both segments of the gradient.
    updates = [n for n in r0 if get_attr(n, "task_type") == "Update"]
    assert len(updates) == 2
    deps = {r0[d].name for d in updates[0].data_deps}
    assert deps == {"Barrier", "seg 0 from  to", "seg 1 from  to"}
    assert all(r0[d].type in (NodeType.COMP_NODE, NodeType.COMM_RECV_NODE) for d in updates[0].data_deps)
    report = validate_traces(traces)
    assert report.ok, [f.message for f in report.errors]


def test_placement_file_forms_agree(tmp_path: Path) -> None:
    spec = ff.convert_flexflow(DP2, placement=DP2_PLACEMENT)
    as_json = tmp_path / "placement.json"
    as_json.write_bytes(orjson.dumps({"conv1": [0, 1], "fc1": "0-1", "node18": 1, "*": 0}))
    as_text = tmp_path / "placement.txt"
    as_text.write_text("# devices\nconv1 = 0,1\nfc1: 0-1\nnode18 1\n* = 0\n")
    for path in (as_json, as_text):
        conv = ff.convert_flexflow(DP2, placement=str(path))
        assert conv.placement == str(path)
        for a, b in zip(spec.lowered.traces, conv.lowered.traces):
            assert [x.SerializeToString() for x in a.nodes] == [x.SerializeToString() for x in b.nodes]


def test_model_parallel_multi_hop_segments() -> None:
    conv = ff.convert_flexflow(MP2, placement="conv1=0;fc1=1")
    r0, r1 = (t.nodes for t in conv.lowered.traces)
    assert conv.lowered.dropped_link_deps == 1  # the NIC ordering edge between segments
    pairs = messages(conv.lowered.traces)
    assert len(pairs) == 3
    seg0 = next(s for s, *_ in pairs.values() if s.name == "seg 0 from conv1 to fc1")
    # Two hops, 1.25 -> 1.75 ms: one message spanning both.
    assert (seg0.start_time_micros, seg0.duration_micros) == (1250, 500)
    assert [r0[d].name for d in seg0.data_deps] == ["conv1"]
    f_fc1 = by_name(r1, "fc1")[0]
    assert sorted(r1[d].name for d in f_fc1.data_deps) == ["seg 0 from conv1 to fc1", "seg 1 from conv1 to fc1"]
    assert all(r1[d].type == NodeType.COMM_RECV_NODE for d in f_fc1.data_deps)
    b_conv1 = [n for n in r0 if get_attr(n, "task_type") == "Backward"][0]
    assert {r0[d].name for d in b_conv1.data_deps} == {"conv1", "seg 0 from fc1 to conv1"}
    assert any("comm_size is 0" in w for w in conv.warnings)
    assert validate_traces(conv.lowered.traces).ok


def test_no_placement_says_so_and_keeps_order() -> None:
    conv = ff.convert_flexflow(MP2)
    assert len(conv.lowered.traces) == 1
    assert any("records no device" in w and "--placement" in w for w in conv.warnings)
    nodes = conv.lowered.traces[0].nodes
    assert [n.type for n in nodes] == [NodeType.COMP_NODE] * 4
    assert conv.lowered.local_transfers == 3
    f_fc1 = by_name(nodes, "fc1")[0]
    assert [nodes[d].name for d in f_fc1.data_deps] == ["conv1"]


def test_cross_device_edges_without_transfer_get_sync_messages() -> None:
    # conv1 on 0 and fc1 on 1 although FlexFlow put them together: the direct edges
    # (fwd conv1 -> fwd fc1 on each replica; bwd fc1 -> bwd conv1 and -> barrier) cross devices.
    # One message per (producer, device): each bwd fc1 needs one for its two consumers on 0.
    conv = ff.convert_flexflow(DP2, placement="conv1=0;fc1=1;*=0")
    assert conv.lowered.sync_messages == 4
    assert conv.lowered.local_transfers == 6  # every weight transfer now stays on device 0
    pairs = messages(conv.lowered.traces)
    assert all(get_int(s, "comm_size") == 1 for s, *_ in pairs.values())  # ASTRA-sim rejects 0-byte messages
    assert validate_traces(conv.lowered.traces).ok


def test_unplaced_tasks_are_listed() -> None:
    with pytest.raises(ConfigError, match=r"no device for 2 task\(s\): node6 \(Barrier\), node18 \(Barrier\)"):
        ff.convert_flexflow(DP2, placement="conv1=0,1;fc1=0,1")


def test_legacy_npu_labels() -> None:
    conv = ff.convert_flexflow(LEGACY)
    assert conv.taskgraph.variant == "legacy"
    r0, r1 = (t.nodes for t in conv.lowered.traces)
    assert [(n.name, NodeType(n.type).name) for n in r0] == [
        ("conv1_fwd", "COMP_NODE"),
        ("act_conv1_fc1", "COMM_SEND_NODE"),
        ("grad_fc1_conv1", "COMM_RECV_NODE"),
        ("conv1_bwd", "COMP_NODE"),
    ]
    assert [n.duration_micros for n in r0 if n.type == NodeType.COMP_NODE] == [1250, 2250]  # s -> µs
    assert [(n.name, n.duration_micros) for n in r1 if n.type == NodeType.COMP_NODE] == [
        ("fc1_fwd", 500),
        ("fc1_bwd", 1000),
        ("fc1_upd", 100),
    ]
    pairs = messages(conv.lowered.traces)
    assert sorted((s.name, sr, rr, get_int(s, "comm_size")) for s, sr, _, rr in pairs.values()) == [
        ("act_conv1_fc1", 0, 1, 65536),
        ("grad_fc1_conv1", 1, 0, 65536),
    ]
    conv1_bwd = r0[3]
    assert sorted(r0[d].name for d in conv1_bwd.data_deps) == ["conv1_fwd", "grad_fc1_conv1"]
    assert validate_traces(conv.lowered.traces).ok
    assert any("ignored" in w for w in ff.convert_flexflow(LEGACY, placement="*=0").warnings)


def test_cli_writes_ranks(tmp_path: Path, run_cli) -> None:
    prefix = tmp_path / "ff"
    result = run_cli("convert", "flexflow", str(DP2), "--placement", DP2_PLACEMENT, "--npus", "3", "-o", str(prefix))
    assert result.exit_code == 0, result.stderr
    traces = read_traces([str(prefix)])
    assert [len(t.nodes) for t in traces] == [14, 12, 0]
    assert get_attr(traces[2].metadata, "num_npus") == 3
    assert run_cli("validate", str(prefix)).exit_code == 0


def test_sniff_and_auto(tmp_path: Path) -> None:
    assert detect(DP2) == detect(MP2) == detect(LEGACY) == ["flexflow"]
    txt = tmp_path / "w.txt"
    txt.write_text("DATA\n1\nx -1 1 NONE 0 1 NONE 0 1 NONE 0 1\n")
    assert detect(txt) == ["text"]
    written = ff.convert([MP2], tmp_path / "auto").paths
    assert [p.name for p in written] == ["auto.0.et"]


HEAD = "digraph taskgraph {\n"
BAD = {
    "unknown task type 'Sideways'": (HEAD + '  node0 [label="{ a | Sideways | { 0 | 1 } }",shape=record];\n}', 2),
    "is not a FlexFlow task record": (HEAD + '  node0 [label="{ a | Forward | 0 | 1 }",shape=record];\n}', 2),
    "is not a number": ('digraph taskgraph {\n\n  node0 [label="{ a | Forward | { 0 | x } }",shape=record];\n}', 3),
    "unterminated quoted string": ('digraph taskgraph {\n  node0 [label="{ a | Forward | { 0 | 1 } }];\n}', 2),
    "has no task label": (
        'digraph taskgraph {\n  node0 [label="{ a | Forward | { 0 | 1 } }"];\n  node0 -> node1;\n}',
        3,
    ),
    "dependency cycle": (
        'digraph taskgraph {\n  a [label="{ a | Forward | { 0 | 1 } }"];\n  b [label="{ b | Forward | { 1 | 2 } }"];\n'
        "  a -> b;\n  b -> a;\n}",
        2,
    ),
    "has no comm_dst=": (
        'digraph G {\n  x [label="{npu=0 | m | 0 | COMM_SEND_RECV_NODE | comm_src=0 | comm_size=8}"];\n}',
        2,
    ),
    "expected '}' closing the graph": ('digraph taskgraph {\n  node0 [label="{ a | Forward | { 0 | 1 } }"];\n', None),
}


@pytest.mark.parametrize("fragment", sorted(BAD))
def test_malformed_input_one_line_error(tmp_path: Path, run_cli, fragment: str) -> None:
    text, line = BAD[fragment]
    path = tmp_path / "bad.dot"
    path.write_text(text)
    with pytest.raises(TraceFormatError) as info:
        ff.convert_flexflow(path, placement="*=0")
    assert fragment in str(info.value) and str(path) in str(info.value)
    if line is not None:
        assert info.value.line == line
    result = run_cli("convert", "flexflow", str(path), "-o", str(tmp_path / "o"))
    assert result.exit_code == 1 and len(result.stderr.strip().splitlines()) == 1
    assert not list(tmp_path.glob("o.*"))


def test_bad_placement_spec() -> None:
    with pytest.raises(ConfigError, match="neither an existing file"):
        ff.convert_flexflow(DP2, placement="conv1")
    with pytest.raises(ConfigError, match="not an integer"):
        ff.convert_flexflow(DP2, placement="conv1=a;*=0")
    with pytest.raises(ChakraError, match="--npus is 1"):
        ff.convert_flexflow(DP2, placement=DP2_PLACEMENT, npus=1)

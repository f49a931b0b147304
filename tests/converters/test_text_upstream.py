"""ASTRA-sim's own text workloads through the text converter.

Verbatim copies of ASTRA-sim's own text workloads (astra-sim/astra-sim, MIT), for these tests.

They are not in samples/ yet; each constant names its origin. Tabs and trailing spaces are kept.
"""

from __future__ import annotations

import orjson
import pytest

from chakra.converters import astrasim_text as text_conv
from chakra.graph import critical_path
from chakra.schema import CollectiveType, NodeType
from chakra.schema.attrs import get_attr, get_int
from chakra.validate import validate_traces


def rows_of(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.strip()][2:]


def compute_only(nodes) -> float:
    return critical_path(nodes, lambda n: n.duration_micros if n.type == NodeType.COMP_NODE else 0)[0]


def convert(tmp_path, name: str, text: str, **kw) -> text_conv.TextConversion:
    path = tmp_path / name
    path.write_text(text)
    return text_conv.convert_text(path, **kw)


@pytest.mark.parametrize("passes", [1, 2])
def test_resnet50_compute_only_matches_astrasim(tmp_path, passes: int) -> None:
    # docs/astra-sim.md §4.3: 1,082,450 (x1000 cycles in ASTRA-sim 2) for one pass on every rank.
    conv = convert(tmp_path, "resnet.txt", RESNET50_DATA, npus=4, passes=passes)
    rows = rows_of(RESNET50_DATA)
    traces = list(conv.traces())
    for t in traces:
        assert compute_only(t.nodes) == 1_082_450 * passes
        assert len(t.nodes) == passes * (54 + 54 + 53 + 54)
    colls = [n for n in traces[1].nodes if n.type == NodeType.COMM_COLL_NODE][:54]
    assert [get_int(n, "comm_size") for n in colls] == [int(r[10]) for r in reversed(rows)]
    assert {get_int(n, "comm_type") for n in colls} == {CollectiveType.ALL_REDUCE}
    assert validate_traces(traces).ok


@pytest.mark.parametrize("keyword", ["HYBRID_DLRM", "HYBRID_DLRM_ENHANCED"])
def test_dlrm_compute_only_and_embedding_waits(tmp_path, keyword: str) -> None:
    text = DLRM_HYBRID.replace("HYBRID_DLRM", keyword, 1)
    conv = convert(tmp_path, "dlrm.txt", text, npus=8, passes=2)
    nodes = conv.nodes
    assert compute_only(nodes) == 2 * 51_378  # docs/astra-sim.md §4.3: (19,020 + 13,644 + 19,014 - 300)
    assert len(nodes) == 2 * 32
    by = {}
    for n in nodes[:32]:
        by.setdefault(n.name, n)
    a2a_fwd = by["COMM_COLL_NODE_Embedding_FWD_ALLTOALL"]
    a2a_ig = by["COMM_COLL_NODE_Embedding_IG_ALLTOALL"]
    assert get_int(a2a_fwd, "comm_size") == 98304 and get_attr(a2a_fwd, "involved_dim") == [True]
    # The top MLP (layer last_bottom_layer + 1) waits for the embedding all-to-all.
    assert a2a_fwd.id in by["COMP_NODE_MLP_Top_0_FWD"].data_deps
    assert a2a_fwd.id not in by["COMP_NODE_MLP_Bottom_3_FWD"].data_deps
    # Layer 0's input-gradient all-to-all is issued after the top MLP's input gradient.
    assert list(a2a_ig.data_deps) == [by["COMP_NODE_MLP_Top_0_BWD_IG"].id]
    second_f0 = [n for n in nodes if n.name == "COMP_NODE_Embedding_FWD"][1]
    assert (a2a_ig.id in second_f0.data_deps) == (keyword == "HYBRID_DLRM")
    assert validate_traces(list(conv.traces())).ok


def test_transformer_groups_from_header(tmp_path) -> None:
    conv = convert(tmp_path, "tf.txt", TRANSFORMER_HYBRID, npus=16)
    rows = rows_of(TRANSFORMER_HYBRID)
    assert conv.topology.dims == [4, 4]
    nfwd = sum(r[3] != "NONE" for r in rows)
    nig = sum(r[6] != "NONE" for r in rows)
    nwg = sum(r[9] != "NONE" for r in rows)
    assert len(conv.nodes) == 3 * len(rows) + nfwd + nig + nwg
    assert compute_only(conv.nodes) == sum(int(r[2]) + int(r[5]) + int(r[8]) for r in rows)
    groups = conv.groups.as_json()
    for node in conv.rank_nodes(6):
        if node.type != NodeType.COMM_COLL_NODE:
            continue
        members = groups[get_attr(node, "pg_name")]
        if "_WG_" in node.name:
            assert members == [2, 6, 10, 14] and get_attr(node, "involved_dim") == [False, True]
        else:
            assert members == [4, 5, 6, 7] and get_attr(node, "involved_dim") == [True, False]
    assert validate_traces(list(conv.traces())).ok


def test_transformer_model_group_spans_everything(tmp_path) -> None:
    conv = convert(tmp_path, "tf.txt", TRANSFORMER_HYBRID, npus=4)
    assert not any("_WG_" in n.name for n in conv.nodes if n.type == NodeType.COMM_COLL_NODE)
    assert not conv.groups.as_json()


def test_transformer_splits_a_dimension_like_astrasim(tmp_path) -> None:
    # Model group 4 on a 2x8 network: ASTRA-sim breaks the 8 into 2x4 (break_dimension).
    conv = convert(tmp_path, "tf.txt", TRANSFORMER_HYBRID, npus=16, dims=[2, 8])
    assert conv.topology.dims == [2, 2, 4]
    fwd = next(n for n in conv.rank_nodes(0) if n.type == NodeType.COMM_COLL_NODE and "_FWD_" in n.name)
    assert get_attr(fwd, "involved_dim") == [True, True, False]
    assert conv.groups.as_json()[get_attr(fwd, "pg_name")] == [0, 1, 2, 3]


def test_transformer_fwd_in_bckwd_recomputes(tmp_path) -> None:
    # Built from the Transformer sample with the FWD_IN_BCKWD header ASTRA-sim 1.0 reads
    # (`model_parallel_NPU_group: M checkpoints: n l.. checkpoint_initiates: n l..`).
    header = (
        "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 4 checkpoints: 2 0 19 checkpoint_initiates: 2 18 56"
    )
    text = header + "\n" + TRANSFORMER_HYBRID.split("\n", 1)[1]
    rows = rows_of(text)
    conv = convert(tmp_path, "tf_ckpt.txt", text, npus=16)
    recomputed = [n.name for n in conv.nodes if n.name.endswith("_FWD_RECOMPUTE")]
    expected = [f"COMP_NODE_{r[0]}_FWD_RECOMPUTE" for r in rows[19:56] + rows[0:18]]
    assert recomputed == expected
    base = sum(int(r[2]) + int(r[5]) + int(r[8]) for r in rows)
    extra = sum(int(r[2]) for r in rows[19:56] + rows[0:18])
    assert compute_only(conv.nodes) == base + extra
    assert validate_traces(list(conv.traces())).ok


def test_official_converter_rejects_but_we_convert_customized(tmp_path) -> None:
    conv = convert(tmp_path, "custom.txt", PER_LAYER_CUSTOMIZED, npus=16, model_group=4)
    colls = {n.name: n for n in conv.rank_nodes(5) if n.type == NodeType.COMM_COLL_NODE}
    groups = conv.groups.as_json()
    assert len(conv.nodes) == 18 + 13 and len(groups) == 8
    # HYBRID_DATA_MODEL layer: model (fwd) on dimension 0, data (wg) on dimension 1.
    assert groups[get_attr(colls["COMM_COLL_NODE_layer_64_2_mlp0_FWD_ALLGATHER"], "pg_name")] == [4, 5, 6, 7]
    assert groups[get_attr(colls["COMM_COLL_NODE_layer_64_2_mlp0_WG_ALLREDUCE"], "pg_name")] == [1, 5, 9, 13]
    # HYBRID_MODEL_DATA layer: the reverse.
    assert groups[get_attr(colls["COMM_COLL_NODE_layer_64_2_mlp1_WG_ALLREDUCE"], "pg_name")] == [4, 5, 6, 7]
    # DATA layer: no fwd/ig collectives, wg over every NPU (no pg_name); MODEL layers: no wg.
    assert get_attr(colls["COMM_COLL_NODE_layer_64_2_mlp2_WG_ALLREDUCE"], "pg_name") is None
    assert not any(name.startswith("COMM_COLL_NODE_layer_64_2_mlp2_FWD") for name in colls)
    assert not any("mlp3_WG" in name or "mlp4_WG" in name for name in colls)
    assert get_attr(colls["COMM_COLL_NODE_layer_64_2_mlp3_IG_REDUCESCATTER"], "involved_dim") == [True, True]
    assert validate_traces(list(conv.traces())).ok


def test_crlf_and_comm_groups_file(tmp_path) -> None:
    path = tmp_path / "custom.txt"
    path.write_bytes(PER_LAYER_CUSTOMIZED.replace("\n", "\r\n").encode())
    conv = text_conv.convert_text(path, npus=16, model_group=4)
    written = conv.write(tmp_path / "c")
    groups_file = tmp_path / "c.comm_groups.json"
    assert groups_file in written and len(written) == 17
    assert orjson.loads(groups_file.read_bytes()) == conv.groups.as_json()


# ---------------------------------------------------------------------------------------------
# The workloads (module constants, read when the tests run)

# examples/text_converter/text_workloads/Resnet50_DataParallel.txt @ 9d8bad5a
RESNET50_DATA = (
    "DATA\n"
    "54\n"
    "conv1\t-1\t13003\tNONE\t0\t12864\tNONE\t0\t32291\tALLREDUCE\t37632\t3229\n"
    "layer_64_1_conv4\t-1\t3456\tNONE\t0\t3648\tNONE\t0\t7488\tALLREDUCE\t65536\t749\n"
    "layer_64_1_conv1\t-1\t3456\tNONE\t0\t3456\tNONE\t0\t7488\tALLREDUCE\t16384\t749\n"
    "layer_64_1_conv2\t-1\t10944\tNONE\t0\t10368\tNONE\t0\t14144\tALLREDUCE\t147456\t1414\n"
    "layer_64_1_conv3\t-1\t3456\tNONE\t0\t3648\tNONE\t0\t7488\tALLREDUCE\t65536\t749\n"
    "layer_64_2_conv1\t-1\t3648\tNONE\t0\t3456\tNONE\t0\t9984\tALLREDUCE\t65536\t998\n"
    "layer_64_2_conv2\t-1\t10944\tNONE\t0\t10368\tNONE\t0\t14144\tALLREDUCE\t147456\t1414\n"
    "layer_64_2_conv3\t-1\t3456\tNONE\t0\t3648\tNONE\t0\t7488\tALLREDUCE\t65536\t749\n"
    "layer_64_3_conv1\t-1\t3648\tNONE\t0\t3456\tNONE\t0\t9984\tALLREDUCE\t65536\t998\n"
    "layer_64_3_conv2\t-1\t10944\tNONE\t0\t10368\tNONE\t0\t14144\tALLREDUCE\t147456\t1414\n"
    "layer_64_3_conv3\t-1\t3456\tNONE\t0\t3648\tNONE\t0\t7488\tALLREDUCE\t65536\t749\n"
    "layer_128_1_conv4\t-1\t2592\tNONE\t0\t2592\tNONE\t0\t6144\tALLREDUCE\t524288\t614\n"
    "layer_128_1_conv1\t-1\t3648\tNONE\t0\t3520\tNONE\t0\t9984\tALLREDUCE\t131072\t998\n"
    "layer_128_1_conv2\t-1\t6480\tNONE\t0\t5840\tNONE\t0\t6656\tALLREDUCE\t589824\t666\n"
    "layer_128_1_conv3\t-1\t2336\tNONE\t0\t2592\tNONE\t0\t5120\tALLREDUCE\t262144\t512\n"
    "layer_128_2_conv1\t-1\t2592\tNONE\t0\t2336\tNONE\t0\t4096\tALLREDUCE\t262144\t410\n"
    "layer_128_2_conv2\t-1\t6480\tNONE\t0\t5840\tNONE\t0\t6656\tALLREDUCE\t589824\t666\n"
    "layer_128_2_conv3\t-1\t2336\tNONE\t0\t2592\tNONE\t0\t5120\tALLREDUCE\t262144\t512\n"
    "layer_128_3_conv1\t-1\t2592\tNONE\t0\t2336\tNONE\t0\t4096\tALLREDUCE\t262144\t410\n"
    "layer_128_3_conv2\t-1\t6480\tNONE\t0\t5840\tNONE\t0\t6656\tALLREDUCE\t589824\t666\n"
    "layer_128_3_conv3\t-1\t2336\tNONE\t0\t2592\tNONE\t0\t5120\tALLREDUCE\t262144\t512\n"
    "layer_128_4_conv1\t-1\t2592\tNONE\t0\t2336\tNONE\t0\t4096\tALLREDUCE\t262144\t410\n"
    "layer_128_4_conv2\t-1\t6480\tNONE\t0\t5840\tNONE\t0\t6656\tALLREDUCE\t589824\t666\n"
    "layer_128_4_conv3\t-1\t3146\tNONE\t0\t2592\tNONE\t0\t5120\tALLREDUCE\t262144\t512\n"
    "layer_256_1_conv4\t-1\t5664\tNONE\t0\t5664\tNONE\t0\t3856\tALLREDUCE\t2097152\t386\n"
    "layer_256_1_conv1\t-1\t3539\tNONE\t0\t3146\tNONE\t0\t4096\tALLREDUCE\t524288\t410\n"
    "layer_256_1_conv2\t-1\t6372\tNONE\t0\t6372\tNONE\t0\t2756\tALLREDUCE\t2359296\t276\n"
    "layer_256_1_conv3\t-1\t2832\tNONE\t0\t3539\tNONE\t0\t2832\tALLREDUCE\t1048576\t283\n"
    "layer_256_2_conv1\t-1\t3539\tNONE\t0\t2832\tNONE\t0\t1476\tALLREDUCE\t1048576\t148\n"
    "layer_256_2_conv2\t-1\t6372\tNONE\t0\t6372\tNONE\t0\t2756\tALLREDUCE\t2359296\t276\n"
    "layer_256_2_conv3\t-1\t2832\tNONE\t0\t3539\tNONE\t0\t2832\tALLREDUCE\t1048576\t283\n"
    "layer_256_3_conv1\t-1\t3539\tNONE\t0\t2832\tNONE\t0\t1476\tALLREDUCE\t1048576\t148\n"
    "layer_256_3_conv2\t-1\t6372\tNONE\t0\t6372\tNONE\t0\t2756\tALLREDUCE\t2359296\t276\n"
    "layer_256_3_conv3\t-1\t2832\tNONE\t0\t3539\tNONE\t0\t2832\tALLREDUCE\t1048576\t283\n"
    "layer_256_4_conv1\t-1\t3539\tNONE\t0\t2832\tNONE\t0\t1476\tALLREDUCE\t1048576\t148\n"
    "layer_256_4_conv2\t-1\t6372\tNONE\t0\t6372\tNONE\t0\t2756\tALLREDUCE\t2359296\t276\n"
    "layer_256_4_conv3\t-1\t2832\tNONE\t0\t3539\tNONE\t0\t2832\tALLREDUCE\t1048576\t283\n"
    "layer_256_5_conv1\t-1\t3539\tNONE\t0\t2832\tNONE\t0\t1476\tALLREDUCE\t1048576\t148\n"
    "layer_256_5_conv2\t-1\t6372\tNONE\t0\t6372\tNONE\t0\t2756\tALLREDUCE\t2359296\t276\n"
    "layer_256_5_conv3\t-1\t2832\tNONE\t0\t3539\tNONE\t0\t2832\tALLREDUCE\t1048576\t283\n"
    "layer_256_6_conv1\t-1\t3539\tNONE\t0\t2832\tNONE\t0\t1476\tALLREDUCE\t1048576\t148\n"
    "layer_256_6_conv2\t-1\t6372\tNONE\t0\t6372\tNONE\t0\t2756\tALLREDUCE\t2359296\t276\n"
    "layer_256_6_conv3\t-1\t12583\tNONE\t0\t3539\tNONE\t0\t2832\tALLREDUCE\t1048576\t283\n"
    "layer_512_1_conv4\t-1\t17952\tNONE\t0\t17952\tNONE\t0\t10632\tALLREDUCE\t8388608\t1063\n"
    "layer_512_1_conv1\t-1\t14156\tNONE\t0\t12583\tNONE\t0\t2952\tALLREDUCE\t2097152\t295\n"
    "layer_512_1_conv2\t-1\t20196\tNONE\t0\t20196\tNONE\t0\t9826\tALLREDUCE\t9437184\t983\n"
    "layer_512_1_conv3\t-1\t8976\tNONE\t0\t14156\tNONE\t0\t6536\tALLREDUCE\t4194304\t654\n"
    "layer_512_2_conv1\t-1\t14156\tNONE\t0\t8976\tNONE\t0\t4706\tALLREDUCE\t4194304\t471\n"
    "layer_512_2_conv2\t-1\t20196\tNONE\t0\t20196\tNONE\t0\t9826\tALLREDUCE\t9437184\t983\n"
    "layer_512_2_conv3\t-1\t8976\tNONE\t0\t14156\tNONE\t0\t6536\tALLREDUCE\t4194304\t654\n"
    "layer_512_3_conv1\t-1\t14156\tNONE\t0\t8976\tNONE\t0\t4706\tALLREDUCE\t4194304\t471\n"
    "layer_512_3_conv2\t-1\t20196\tNONE\t0\t20196\tNONE\t0\t9826\tALLREDUCE\t9437184\t983\n"
    "layer_512_3_conv3\t-1\t12288\tNONE\t0\t14156\tNONE\t0\t6536\tALLREDUCE\t4194304\t654\n"
    "fc1000\t-1\t16416\tNONE\t0\t27708\tNONE\t0\t9220\tALLREDUCE\t8192000\t922\n"
)

# inputs/workload/ASTRA-sim-1.0/DLRM_HybridParallel.txt @ 15935dab
DLRM_HYBRID = (
    "HYBRID_DLRM\t4\t\t\t\t\t\t\t\t\t\t\t\n"
    "8\t\t\t\t\t\t\t\t\t\t\t\n"
    "Embedding\t-1\t300\tALLTOALL\t98304\t300\tALLTOALL\t98304\t300\tNONE\t0\t98\n"
    "MLP_Bottom_0\t-1\t1280\tNONE\t0\t794\tNONE\t0\t896\tALLREDUCE\t13312\t13\n"
    "MLP_Bottom_1\t-1\t2560\tNONE\t0\t2560\tNONE\t0\t1792\tALLREDUCE\t524288\t524\n"
    "MLP_Bottom_2\t-1\t2560\tNONE\t0\t2560\tNONE\t0\t1792\tALLREDUCE\t524288\t524\n"
    "MLP_Bottom_3\t-1\t800\tNONE\t0\t1280\tNONE\t0\t800\tALLREDUCE\t16384\t16\n"
    "MLP_Top_0\t-1\t6400\tNONE\t0\t6400\tNONE\t0\t4480\tALLREDUCE\t1064960\t1065\n"
    "MLP_Top_1\t-1\t2560\tNONE\t0\t2560\tNONE\t0\t1792\tALLREDUCE\t524288\t524\n"
    "MLP_Top_2\t-1\t2560\tNONE\t0\t2560\tNONE\t0\t1792\tALLREDUCE\t524288\t524\n"
)

# examples/text_converter/text_workloads/Transformer_HybridParallel.txt @ 9d8bad5a
TRANSFORMER_HYBRID = (
    "HYBRID_TRANSFORMER\tmodel_parallel_NPU_group: 4\t\t\t\t\t\t\t\t\t\t\n"
    "57\t\t\t\t\t\t\t\t\t\t\t\n"
    "Embedding\t-1\t300\tALLGATHER\t8388608\t1\tNONE\t0\t1\tNONE\t0\t10\n"
    "Q1\t-1\t3145728\tNONE\t0\t2162688\tALLREDUCE\t8388608\t2228224\tALLREDUCE\t33554432\t10\n"
    "K1\t-1\t3145728\tNONE\t0\t2162688\tNONE\t0\t2228224\tALLREDUCE\t33554432\t10\n"
    "V1\t-1\t3145728\tNONE\t0\t2162688\tNONE\t0\t2228224\tALLREDUCE\t33554432\t10\n"
    "Softmax1\t-1\t768\tNONE\t0\t768\tNONE\t0\t768\tNONE\t0\t16\n"
    "QKV1\t-1\t768\tNONE\t0\t768\tNONE\t0\t768\tNONE\t0\t10\n"
    "Concat1\t-1\t2162688\tALLREDUCE\t8388608\t3145728\tALLGATHER\t134217728\t2228224\tALLREDUCE\t33554432\t10\n"
    "Relu1\t-1\t12582912\tNONE\t0\t8454144\tALLREDUCE\t8388608\t8912896\tALLREDUCE\t134217728\t10\n"
    "X1W2b2\t-1\t8454144\tALLREDUCE\t8388608\t12582912\tNONE\t0\t8912896\tALLREDUCE\t134217728\t10\n"
    "layernorm1\t-1\t196608\tNONE\t0\t196608\tNONE\t0\t139264\tNONE\t0\t10\n"
    "Q2\t-1\t3145728\tNONE\t0\t2162688\tALLREDUCE\t8388608\t2228224\tALLREDUCE\t33554432\t10\n"
    "K2\t-1\t3145728\tNONE\t0\t2162688\tNONE\t0\t2228224\tALLREDUCE\t33554432\t10\n"
    "V2\t-1\t3145728\tNONE\t0\t2162688\tNONE\t0\t2228224\tALLREDUCE\t33554432\t10\n"
    "Softmax2\t-1\t768\tNONE\t0\t768\tNONE\t0\t768\tNONE\t0\t16\n"
    "QKV2\t-1\t768\tNONE\t0\t768\tNONE\t0\t768\tNONE\t0\t10\n"
    "Concat2\t-1\t2162688\tALLREDUCE\t8388608\t3145728\tALLGATHER\t134217728\t2228224\tALLREDUCE\t33554432\t10\n"
    "Relu2\t-1\t12582912\tNONE\t0\t8454144\tALLREDUCE\t8388608\t8912896\tALLREDUCE\t134217728\t10\n"
    "X2W2b2\t-1\t8454144\tALLREDUCE\t8388608\t12582912\tNONE\t0\t8912896\tALLREDUCE\t134217728\t10\n"
    "layernorm2\t-1\t196608\tNONE\t0\t196608\tNONE\t0\t139264\tNONE\t0\t10\n"
    "Q3\t-1\t3145728\tNONE\t0\t2162688\tALLREDUCE\t8388608\t2228224\tALLREDUCE\t33554432\t10\n"
    "K3\t-1\t3145728\tNONE\t0\t2162688\tNONE\t0\t2228224\tALLREDUCE\t33554432\t10\n"
    "V3\t-1\t3145728\tNONE\t0\t2162688\tNONE\t0\t2228224\tALLREDUCE\t33554432\t10\n"
    "Softmax3\t-1\t768\tNONE\t0\t768\tNONE\t0\t768\tNONE\t0\t16\n"
    "QKV3\t-1\t768\tNONE\t0\t768\tNONE\t0\t768\tNONE\t0\t10\n"
    "Concat3\t-1\t2162688\tALLREDUCE\t8388608\t3145728\tALLGATHER\t134217728\t2228224\tALLREDUCE\t33554432\t10\n"
    "Relu3\t-1\t12582912\tNONE\t0\t8454144\tALLREDUCE\t8388608\t8912896\tALLREDUCE\t134217728\t10\n"
    "X3W2b2\t-1\t8454144\tALLREDUCE\t8388608\t12582912\tNONE\t0\t8912896\tALLREDUCE\t134217728\t10\n"
    "layernorm2\t-1\t196608\tNONE\t0\t196608\tNONE\t0\t139264\tNONE\t0\t10\n"
    "Q4\t-1\t3145728\tNONE\t0\t2162688\tALLREDUCE\t8388608\t2228224\tALLREDUCE\t33554432\t10\n"
    "K4\t-1\t3145728\tNONE\t0\t2162688\tNONE\t0\t2228224\tALLREDUCE\t33554432\t10\n"
    "V4\t-1\t3145728\tNONE\t0\t2162688\tNONE\t0\t2228224\tALLREDUCE\t33554432\t10\n"
    "Softmax4\t-1\t768\tNONE\t0\t768\tNONE\t0\t768\tNONE\t0\t16\n"
    "QKV4\t-1\t768\tNONE\t0\t768\tNONE\t0\t768\tNONE\t0\t10\n"
    "Concat4\t-1\t2162688\tALLREDUCE\t8388608\t3145728\tALLGATHER\t134217728\t2228224\tALLREDUCE\t33554432\t10\n"
    "Relu4\t-1\t12582912\tNONE\t0\t8454144\tALLREDUCE\t8388608\t8912896\tALLREDUCE\t134217728\t10\n"
    "X4W2b2\t-1\t8454144\tALLREDUCE\t8388608\t12582912\tNONE\t0\t8912896\tALLREDUCE\t134217728\t10\n"
    "layernorm4\t-1\t196608\tNONE\t0\t196608\tNONE\t0\t139264\tNONE\t0\t10\n"
    "Q5\t-1\t3145728\tNONE\t0\t2162688\tALLREDUCE\t8388608\t2228224\tALLREDUCE\t33554432\t10\n"
    "K5\t-1\t3145728\tNONE\t0\t2162688\tNONE\t0\t2228224\tALLREDUCE\t33554432\t10\n"
    "V5\t-1\t3145728\tNONE\t0\t2162688\tNONE\t0\t2228224\tALLREDUCE\t33554432\t10\n"
    "Softmax5\t-1\t768\tNONE\t0\t768\tNONE\t0\t768\tNONE\t0\t16\n"
    "QKV5\t-1\t768\tNONE\t0\t768\tNONE\t0\t768\tNONE\t0\t10\n"
    "Concat5\t-1\t2162688\tALLREDUCE\t8388608\t3145728\tALLGATHER\t134217728\t2228224\tALLREDUCE\t33554432\t10\n"
    "Relu5\t-1\t12582912\tNONE\t0\t8454144\tALLREDUCE\t8388608\t8912896\tALLREDUCE\t134217728\t10\n"
    "X5W2b2\t-1\t8454144\tALLREDUCE\t8388608\t12582912\tNONE\t0\t8912896\tALLREDUCE\t134217728\t10\n"
    "layernorm5\t-1\t196608\tNONE\t0\t196608\tNONE\t0\t139264\tNONE\t0\t10\n"
    "Q6\t-1\t3145728\tNONE\t0\t2162688\tALLREDUCE\t8388608\t2228224\tALLREDUCE\t33554432\t10\n"
    "K6\t-1\t3145728\tNONE\t0\t2162688\tNONE\t0\t2228224\tALLREDUCE\t33554432\t10\n"
    "V6\t-1\t3145728\tNONE\t0\t2162688\tNONE\t0\t2228224\tALLREDUCE\t33554432\t10\n"
    "Softmax6\t-1\t768\tNONE\t0\t768\tNONE\t0\t768\tNONE\t0\t16\n"
    "QKV6\t-1\t768\tNONE\t0\t768\tNONE\t0\t768\tNONE\t0\t10\n"
    "Concat6\t-1\t2162688\tALLREDUCE\t8388608\t3145728\tALLGATHER\t134217728\t2228224\tALLREDUCE\t33554432\t10\n"
    "Relu6\t-1\t12582912\tNONE\t0\t8454144\tALLREDUCE\t8388608\t8912896\tALLREDUCE\t134217728\t10\n"
    "X6W2b2\t-1\t8454144\tALLREDUCE\t8388608\t12582912\tNONE\t0\t8912896\tALLREDUCE\t134217728\t10\n"
    "layernorm6\t-1\t196608\tNONE\t0\t196608\tNONE\t0\t139264\tNONE\t0\t10\n"
    "fc\t-1\t1769472\tALLGATHER\t73728000\t1217536\tALLREDUCE\t8388608\t1253376\tALLREDUCE\t18432000\t10\n"
    "softmax\t-1\t590976\tNONE\t0\t296224\tNONE\t0\t313344\tNONE\t0\t16\n"
)

# inputs/workload/ASTRA-sim-1.0/sample_per_layer_parallel_HybridCustomized.txt @ 15935dab
PER_LAYER_CUSTOMIZED = (
    "HYBRID_CUSTOMIZED\t\t\t\t\t\t\t\t\t\t\t\n"
    "6\t\t\t\t\t\t\t\t\t\t\t\n"
    "layer_64_2_mlp0\t-1\t32291\tALLGATHER\t37632\t32291\tREDUCESCATTER\t37632\t32291\tALLREDUCE\t37632\t3229 HYBRID_DATA_MODEL\n"  # noqa: E501
    "layer_64_2_mlp1\t-1\t7488\tALLGATHER\t65536\t7488\tREDUCESCATTER\t65536\t7488\tALLREDUCE\t65536\t749\t HYBRID_MODEL_DATA\n"  # noqa: E501
    "layer_64_2_mlp2\t-1\t7488\tNONE\t\t0\t\t7488\tNONE\t\t\t0\t\t7488\tALLREDUCE\t65536\t749\t DATA \n"
    "layer_64_2_mlp3\t-1\t14144\tALLGATHER\t147456\t14144\tREDUCESCATTER\t\t147456\t14144\tNONE\t\t0\t\t1414 MODEL\n"
    "layer_64_2_mlp4\t-1\t7488\tALLGATHER\t65536\t7488\tREDUCESCATTER\t\t65536\t7488\tNONE\t\t0\t\t749\t MODEL\n"
    "layer_64_2_mlp5\t-1\t9984\tALLGATHER\t65536\t9984\tREDUCESCATTER\t65536\t9984\tALLREDUCE\t65536\t998  HYBRID_MODEL_DATA\n"  # noqa: E501
)

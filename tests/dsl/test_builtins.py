"""Built-in workloads: valid across ranks, FLOP totals equal to the textbook closed forms."""

from __future__ import annotations

from collections import Counter

import orjson
import pytest

from chakra.dsl.builtins.dlrm import DLRMConfig, build_dlrm
from chakra.dsl.builtins.microbench import build_microbench, size_sweep
from chakra.dsl.builtins.mlp import MODES, MLPConfig, build_mlp
from chakra.dsl.builtins.transformer import TransformerConfig, build_transformer
from chakra.io import read_traces
from chakra.schema import CollectiveType as CT
from chakra.schema import NodeType
from chakra.schema.attrs import get_attr, get_int
from chakra.validate import validate_traces


def _check(traces):
    report = validate_traces(traces)
    assert report.ok, [f.message for f in report.errors][:5]
    comp = [n for t in traces for n in t.nodes if n.type == NodeType.COMP_NODE]
    assert comp and all(get_attr(n, "num_ops") is not None and get_attr(n, "tensor_size") is not None for n in comp)
    return sum(get_int(n, "num_ops") for n in comp)


def _colls(trace, kind):
    return [n for n in trace.nodes if n.type == NodeType.COMM_COLL_NODE and get_int(n, "comm_type") == kind]


TRANSFORMERS = [
    dict(dp=2, tp=2, pp=2),
    dict(dp=2, tp=1, pp=1, zero=1),
    dict(dp=2, tp=2, pp=1, zero=2, sequence_parallel=True),
    dict(dp=4, tp=1, pp=2, zero=3),
    dict(dp=1, tp=4, pp=1),
]


@pytest.mark.parametrize("par", TRANSFORMERS, ids=lambda d: "-".join(f"{k}{v}" for k, v in d.items()))
def test_transformer_validates_and_flops_match_closed_form(par):
    cfg = TransformerConfig(layers=4, hidden=256, heads=8, seq=128, batch=16, microbatches=4, vocab=1000, **par)
    w = build_transformer(cfg)
    traces = w.traces()
    assert len(traces) == cfg.dp * cfg.tp * cfg.pp
    total = _check(traces)
    L, h, s, B, V = 4, 256, 128, 16, 1000
    params = 12 * L * h * h + V * h
    gemm = 6 * params * B * s + 12 * L * B * s * s * h  # 6PT + attention scores/context
    # Optimizer: 10 FLOPs per parameter a rank updates; stage copies of the tied embedding count twice.
    stored = params + (V * h if cfg.pp > 1 else 0)
    optimizer = 10 * stored * (1 if cfg.zero else cfg.dp)
    assert abs(total - (gemm + optimizer)) / (gemm + optimizer) < 0.01
    assert w.total_flops() == total


def test_transformer_flops_approach_six_p_t():
    # s/(6h) < 1%: the attention term vanishes and the step is 6 x params x tokens.
    cfg = TransformerConfig(
        layers=2, hidden=2048, heads=16, seq=64, batch=32, microbatches=2, dp=2, tp=2, pp=2, vocab=512
    )
    total = _check(build_transformer(cfg).traces())
    six_p_t = 6 * (12 * 2 * 2048**2 + 512 * 2048) * 32 * 64
    assert abs(total - six_p_t) / six_p_t < 0.01


def test_transformer_communication_structure():
    cfg = TransformerConfig(
        layers=4, hidden=256, heads=8, seq=128, batch=16, microbatches=4, dp=2, tp=2, pp=2, vocab=1000
    )
    traces = build_transformer(cfg).traces()
    # rank 0: stage 0, dp 0, tp 0. TP all-reduces: 2 fwd + 2 bwd per layer per microbatch on 2 layers.
    tp_pg = get_attr(_colls(traces[0], CT.ALL_REDUCE)[0], "pg_name")
    tp_ars = [n for n in _colls(traces[0], CT.ALL_REDUCE) if get_attr(n, "pg_name") == tp_pg]
    assert len(tp_ars) == 4 * 2 * 4
    assert all(get_int(n, "comm_size") == 2 * 128 * 256 * 2 for n in tp_ars)  # micro-batch 16/(2x4) x seq x h x 2 B
    # Pipeline: stage 0 sends 4 activations and receives 4 gradients from rank 4 (stage 1).
    sends = [n for n in traces[0].nodes if n.type == NodeType.COMM_SEND_NODE]
    recvs = [n for n in traces[0].nodes if n.type == NodeType.COMM_RECV_NODE]
    assert sorted(get_int(n, "comm_tag") for n in sends) == [0, 2, 4, 6]
    assert sorted(get_int(n, "comm_tag") for n in recvs) == [1, 3, 5, 7]
    assert {get_int(n, "comm_dst") for n in sends} == {4}
    # 1F1B on stage 0 of 2: one warm-up forward, then alternate: F0 F1 B0 F2 B1 F3 B2 B3.
    by_id = sorted(sends + recvs, key=lambda n: n.id)
    assert [n.name for n in by_id] == [
        "mb0.fwd.send",
        "mb1.fwd.send",
        "mb0.bwd.recv",
        "mb2.fwd.send",
        "mb1.bwd.recv",
        "mb3.fwd.send",
        "mb2.bwd.recv",
        "mb3.bwd.recv",
    ]
    # Data-parallel gradient sync: one all-reduce per layer of the stage, on the dp group.
    grads = [n for n in _colls(traces[0], CT.ALL_REDUCE) if n.name.endswith("grad_sync")]
    assert len(grads) == 2 and all(get_int(n, "comm_size") == 12 * 256 * 256 // 2 * 2 for n in grads)
    descs = {g.desc for g in build_transformer(cfg).groups}
    assert {"tp:pp0.dp0", "dp:pp1.tp1", "pp:dp0.tp0", "emb:dp1.tp1"} <= descs


def test_zero3_gathers_parameters_every_microbatch():
    cfg = TransformerConfig(layers=2, hidden=128, heads=4, seq=64, batch=8, microbatches=2, dp=2, zero=3, vocab=256)
    (t0, _) = build_transformer(cfg).traces()
    ags = _colls(t0, CT.ALL_GATHER)
    assert len(ags) == 2 * 2 * 2  # layers x microbatches x (fwd + bwd)
    rs = _colls(t0, CT.REDUCE_SCATTER)
    assert len(rs) == 2 and not _colls(t0, CT.ALL_REDUCE)


@pytest.mark.parametrize("mode", MODES)
def test_mlp_modes(mode):
    cfg = MLPConfig(dim1=2, dim2=4, mode=mode, hidden=512, batch=64)
    traces = build_mlp(cfg).traces()
    total = _check(traces)
    dp = {"mp": 1, "dp-mp": 2, "mp-dp": 4}[mode]
    assert abs(total - (6 * 64 * 6 * 512**2 + 2 * 6 * 512**2 * dp)) / total < 0.01
    dims = Counter(tuple(get_attr(n, "involved_dim")) for n in traces[0].nodes if n.type == NodeType.COMM_COLL_NODE)
    if mode == "mp":
        assert set(dims) == {(True, True)}
    else:
        assert set(dims) == {(True, False), (False, True)}
        grad = next(n for n in traces[0].nodes if n.name.endswith("grad_ar"))
        assert tuple(get_attr(grad, "involved_dim")) == ((True, False) if mode == "dp-mp" else (False, True))


def test_dlrm_flops_and_all_to_all():
    cfg = DLRMConfig(ranks=4, batch=256, tables=6, emb_dim=16, bottom=[64, 32], top=[64, 1])
    traces = build_dlrm(cfg).traces()
    total = _check(traces)
    mlp = [(13, 64), (64, 32), (32, 16), (16 + 7 * 6 // 2, 64), (64, 1)]
    p_mlp = sum(i * o for i, o in mlp)
    expected = 6 * 256 * p_mlp + 6 * 256 * 49 * 16 + 2 * 256 * 6 * 16 + 2 * 4 * p_mlp
    assert abs(total - expected) / expected < 0.01
    sizes = {get_int(n, "comm_size") for t in traces for n in _colls(t, CT.ALL_TO_ALL)}
    assert sizes == {256 * 2 * 16 * 4}  # padded to ceil(6/4) = 2 tables per rank


def test_microbench_every_type_every_size():
    sizes = size_sweep(1024, 1 << 20, 4)
    assert sizes == [1024, 4096, 16384, 65536, 262144, 1048576]
    traces = build_microbench(3, sizes).traces()
    assert validate_traces(traces).ok
    colls = [n for n in traces[2].nodes if n.type == NodeType.COMM_COLL_NODE]
    assert len(colls) == 9 * len(sizes) + 1
    assert Counter(get_int(n, "comm_type") for n in colls)[CT.REDUCE_SCATTER] == len(sizes)


def test_generate_cli_transformer(tmp_path, run_cli):
    res = run_cli(
        "generate", "transformer", "--layers", "2", "--hidden", "128", "--heads", "4", "--seq", "64", "--batch", "8",
        "--microbatches", "2", "--dp", "2", "--tp", "2", "--pp", "2", "--vocab", "256",
        "-o", str(tmp_path / "gpt"), "--json", "-q",
    )  # fmt: skip
    assert res.exit_code == 0, res.stderr
    summary = orjson.loads(res.stdout)
    traces = read_traces([tmp_path / "gpt"])
    assert len(traces) == summary["ranks"] == 8
    assert abs(summary["flops"] - summary["closed_form_flops"]) / summary["closed_form_flops"] < 0.01
    assert validate_traces(traces).ok
    res = run_cli("generate", "transformer", "--heads", "5", "-o", str(tmp_path / "bad"))
    assert res.exit_code == 1 and "not divisible by heads" in res.stderr


def test_generate_cli_other_builtins(tmp_path, run_cli):
    for args in (
        ["mlp", "--mode", "mp-dp", "--dim1", "2", "--dim2", "2", "--hidden", "256", "--batch", "16"],
        ["dlrm", "--ranks", "4", "--batch", "64", "--tables", "8"],
        ["microbench", "--ranks", "4", "--max-size", "64KiB"],
    ):
        res = run_cli("generate", *args, "-o", str(tmp_path / args[0]), "-q", "--json")
        assert res.exit_code == 0, res.stderr
        assert validate_traces(read_traces([tmp_path / args[0]])).ok


def test_comm_group_file_matches_every_rank_metadata(tmp_path):
    from chakra.validate import process_groups

    cfg = TransformerConfig(layers=2, hidden=128, heads=4, seq=64, batch=8, microbatches=2, dp=2, tp=2, pp=2, vocab=256)
    w = build_transformer(cfg)
    w.save(tmp_path / "gpt", metadata_node=True)
    groups = orjson.loads((tmp_path / "gpt.comm_groups.json").read_bytes())
    assert "0" not in groups and all(int(k) > 0 for k in groups)  # ASTRA-sim reserves id 0
    seen = {}
    for t in read_traces([tmp_path / "gpt"]):
        for name, members in process_groups(t).items():
            assert t.rank in members
            seen[name] = members
        # every collective names a group the rank registered
        for n in t.nodes:
            if n.type == NodeType.COMM_COLL_NODE:
                assert get_attr(n, "pg_name") in process_groups(t)
    assert {k: v for k, v in seen.items() if k != "0"} == groups


def test_bad_microbench_type(tmp_path, run_cli):
    res = run_cli("generate", "microbench", "--type", "allsum", "-o", str(tmp_path / "m"))
    assert res.exit_code == 1 and "unknown collective type 'allsum'" in res.stderr

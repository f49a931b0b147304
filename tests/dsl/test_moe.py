"""`chakra generate moe`: expert-parallel layers whose all-to-alls carry the drawn routing."""

from __future__ import annotations

import json

import pytest

from chakra.dsl.builtins.moe import MoEConfig, build_moe, routing
from chakra.dsl.device import Device
from chakra.dsl.workload import DSLError, Workload
from chakra.io import read_traces
from chakra.schema import CollectiveType, NodeType
from chakra.schema.attrs import RECV_BYTES, SEND_BYTES, get_attr
from chakra.validate import validate_traces

SMALL = dict(ranks=4, experts=8, tokens=512, hidden=256, ffn=512, layers=2)


def _share(table: list[list[int]]) -> float:
    """The busiest expert rank's share of a layer's tokens."""
    n = len(table)
    return max(sum(r[j] for r in table) for j in range(n)) / sum(map(sum, table))


def test_generate_moe_cli(run_cli, tmp_path):
    res = run_cli(
        "generate", "moe", "--experts", "8", "--ranks", "4", "--imbalance", "zipf:1.2", "--seed", "3",
        "--tokens", "512", "--hidden", "256", "--ffn", "512", "-o", str(tmp_path / "m"), "--json", "-q",
    )  # fmt: skip
    assert res.exit_code == 0, res.stderr
    summary = json.loads(res.stdout)
    assert summary["flops"] == summary["closed_form_flops"]
    traces = read_traces([tmp_path / "m"])
    assert validate_traces(traces).ok
    table = routing(MoEConfig(**{**SMALL, "imbalance": "zipf:1.2", "seed": 3}))
    row = 256 * 2  # hidden x bf16
    for layer in range(2):
        for t in traces:
            r = t.rank
            a2a = [n for n in t.nodes if n.type == NodeType.COMM_COLL_NODE and n.name.startswith(f"L{layer}.")]
            dispatch, combine = a2a
            assert get_attr(dispatch, "comm_type") == CollectiveType.ALL_TO_ALL
            assert list(get_attr(dispatch, SEND_BYTES)) == [v * row for v in table[layer][r]]
            assert list(get_attr(dispatch, RECV_BYTES)) == [table[layer][j][r] * row for j in range(4)]
            assert list(get_attr(combine, SEND_BYTES)) == list(get_attr(dispatch, RECV_BYTES))
            # each rank sends every token to its expert: the row sums to tokens x top-k
            assert sum(get_attr(dispatch, SEND_BYTES)) == 512 * row


def test_routing_distribution_and_seed():
    uni = routing(MoEConfig(**SMALL, imbalance="uniform", seed=1))
    zipf = routing(MoEConfig(**SMALL, imbalance="zipf:1.5", seed=1))
    assert routing(MoEConfig(**SMALL, imbalance="zipf:1.5", seed=1)) == zipf
    assert routing(MoEConfig(**SMALL, imbalance="zipf:1.5", seed=2)) != zipf
    # 4 ranks: 1/4 when balanced; zipf 1.5 over 8 experts puts most tokens on the hot rank
    assert all(abs(_share(layer) - 0.25) < 0.04 for layer in uni)  # the largest of 4 draws
    assert all(_share(layer) > 0.45 for layer in zipf)
    top2 = routing(MoEConfig(**SMALL, imbalance="uniform", top_k=2))
    assert all(sum(map(sum, layer)) == 4 * 512 * 2 for layer in top2)


@pytest.mark.parametrize(
    "opts,message",
    [
        ({"imbalance": "pareto"}, "uniform or zipf"),
        ({"imbalance": "zipf:x"}, "needs a number"),
        ({"experts": 6}, "do not divide"),
        ({"ranks": 1, "experts": 1}, ">= 2"),
    ],
)
def test_bad_configs(opts, message):
    with pytest.raises(DSLError, match=message):
        build_moe(MoEConfig(**{**SMALL, **opts}), Device())


def test_bad_imbalance_is_one_line(run_cli, tmp_path):
    res = run_cli("generate", "moe", "--imbalance", "zipf", "-o", str(tmp_path / "m"))
    assert res.exit_code == 1 and "zipf:S" in res.stderr and "Traceback" not in res.stderr


def test_per_peer_matrix_must_fit_the_group():
    w = Workload(3)
    with pytest.raises(DSLError, match="3 x 3"):
        w.all_to_all(per_peer=[[0, 1], [1, 0]])

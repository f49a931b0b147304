"""Every built-in workload, at a few sizes, runs to completion in the reference simulator."""

from __future__ import annotations

import pytest

from chakra.dsl.builtins.dlrm import DLRMConfig, build_dlrm
from chakra.dsl.builtins.microbench import build_microbench
from chakra.dsl.builtins.mlp import MLPConfig, build_mlp
from chakra.dsl.builtins.transformer import TransformerConfig, build_transformer
from chakra.schema import NodeType

WORKLOADS = {
    "transformer-dp2tp2pp2": lambda: build_transformer(
        TransformerConfig(
            layers=4, hidden=256, heads=8, seq=128, batch=16, microbatches=4, dp=2, tp=2, pp=2, vocab=1000
        )
    ),
    "transformer-pp4-zero3": lambda: build_transformer(
        TransformerConfig(
            layers=4, hidden=256, heads=8, seq=128, batch=16, microbatches=4, dp=2, pp=4, zero=3, vocab=1000
        )
    ),
    "transformer-sp-zero2": lambda: build_transformer(
        TransformerConfig(
            layers=2, hidden=256, heads=8, seq=128, batch=8, microbatches=2, dp=2, tp=2, zero=2, sequence_parallel=True
        )
    ),
    "transformer-zero1": lambda: build_transformer(
        TransformerConfig(layers=2, hidden=256, heads=8, seq=128, batch=8, microbatches=2, dp=4, zero=1, vocab=512)
    ),
    "mlp-mp": lambda: build_mlp(MLPConfig(dim1=2, dim2=2, mode="mp", hidden=512, batch=64)),
    "mlp-dp-mp": lambda: build_mlp(MLPConfig(dim1=2, dim2=4, mode="dp-mp", hidden=512, batch=64)),
    "mlp-mp-dp": lambda: build_mlp(MLPConfig(dim1=4, dim2=2, mode="mp-dp", hidden=512, batch=64)),
    "dlrm-4": lambda: build_dlrm(DLRMConfig(ranks=4, batch=256, tables=6, emb_dim=16)),
    "dlrm-8": lambda: build_dlrm(DLRMConfig(ranks=8, batch=512, tables=26)),
    "microbench-4": lambda: build_microbench(
        4, [1024, 1 << 20], ["all_reduce", "all_gather", "reduce_scatter", "all_to_all"]
    ),
    "microbench-8": lambda: build_microbench(8, [4096, 1 << 22], ["all_reduce", "all_to_all"]),
}


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_builtin_simulates(name):
    from chakra.sim import simulate

    w = WORKLOADS[name]()
    result = simulate(w.traces(), comm_groups=w.comm_groups())
    assert sorted(result.ranks) == list(range(w.num_ranks))
    assert result.finish_ns > 0
    for t in w.traces():
        rank = result.ranks[t.rank]
        assert rank.nodes == len(t.nodes)  # every node ran: no collective or receive left hanging
        compute_us = sum(n.duration_micros for n in t.nodes if n.type == NodeType.COMP_NODE)
        assert rank.finish_ns >= compute_us * 1000

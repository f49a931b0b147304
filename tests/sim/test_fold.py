"""Folded runs (chakra/sim/fold.py): one slice of replica ranks simulated, each event standing for
its copies, must give every rank exactly what running every rank gives, or not fold at all.

The workloads are `chakra generate` steps (as a user makes them) and seeded random mixes of
parallelism, network shapes and collective algorithms; `fold=False` runs every rank. The real
ASTRA-sim binary checks folded runs too: `test_scale_paths.py` runs generated steps through it,
and those fold (asserted there).
"""

from __future__ import annotations

import itertools
import math
import random

import pytest

from chakra.schema import CollectiveType, NodeType
from chakra.sim import simulate
from chakra.sim.config import NetworkConfig
from chakra.trace import Trace, make_node
from tests.sim.conftest import generate_transformer, write_system


def _both(traces, network, system=None, **kw):
    folded = simulate(traces, network, system, congestion="unaware", record_nodes=True, **kw)
    full = simulate(traces, network, system, congestion="unaware", record_nodes=True, fold=False, **kw)
    assert full.settings["fold"] is None
    for field in ("ranks", "node_times", "finish_ns", "events", "warnings"):
        assert getattr(folded, field) == getattr(full, field), field
    return folded


def test_a_3d_step_folds_its_data_parallel_replicas(tmp_path):
    # dp 4 x tp 2 x pp 2: the generator numbers tp fastest, then dp, so rank r's copies are r + 2k
    prefix = generate_transformer(tmp_path / "t", "--dp", "4", "--tp", "2", "--pp", "2", "--batch", "8",
                                  "--layers", "2", "--microbatches", "2")  # fmt: skip
    net = NetworkConfig(["Ring", "Switch", "Switch"], [2, 4, 2], [50.0] * 3, [500.0] * 3)
    res = _both(str(prefix), net)
    assert res.settings["fold"] == {"copies": 4, "stride": 2}
    assert len(res.ranks) == 16 and res.finish_ns > 0


def test_a_data_parallel_step_runs_one_rank(tmp_path):
    prefix = generate_transformer(tmp_path / "t", "--dp", "16", "--batch", "16", "--layers", "1", "--microbatches", "1")
    res = _both(str(prefix), NetworkConfig(["Switch"], [16], [50.0], [500.0]))
    assert res.settings["fold"] == {"copies": 16, "stride": 1}


def _net(rng: random.Random, n: int) -> NetworkConfig:
    shapes = [c for k in (1, 2, 3) for c in itertools.product([2, 4, 8], repeat=k) if math.prod(c) == n]
    counts = list(rng.choice(shapes))
    topo = [rng.choice(["Ring", "Switch", "FullyConnected"]) for _ in counts]
    return NetworkConfig(topo, counts, [rng.choice([25.0, 50.0, 100.0])] * len(counts), [500.0] * len(counts))


@pytest.mark.parametrize("seed", range(6))
def test_seeded_mixes_fold_to_the_full_runs_answer(tmp_path, seed):
    """Random dp x tp x pp steps on random 1-3 dimensional networks with every built-in
    algorithm and chunking: wherever the run folds, every rank's every node time is the full run's."""
    rng = random.Random(seed)
    tp, pp, dp = rng.choice([1, 2, 4]), rng.choice([1, 2]), rng.choice([2, 4])
    mb = rng.choice([1, 2, 4])
    prefix = generate_transformer(tmp_path / "t", "--dp", str(dp), "--tp", str(tp), "--pp", str(pp), "--heads", "4",
                                  "--batch", str(dp * mb), "--layers", str(max(pp, rng.choice([1, 2]))),
                                  "--microbatches", str(mb))  # fmt: skip
    net = _net(rng, dp * tp * pp)
    algorithm = rng.choice(["ring", "direct", "halvingDoubling", "doubleBinaryTree"])
    impl = [algorithm] * net.dims
    system = write_system(
        tmp_path / "system.json",
        all_reduce_implementation=impl,
        all_gather_implementation=impl,
        reduce_scatter_implementation=impl,
        all_to_all_implementation=["direct"] * net.dims,
        active_chunks_per_dimension=rng.choice([1, 2]),
        preferred_dataset_splits=rng.choice([1, 4, 8]),
    )
    _both(str(prefix), net, str(system))


def _all_reduce(node_id: int, size: int, pg: str):
    attrs = {"is_cpu_op": False, "comm_type": int(CollectiveType.ALL_REDUCE), "comm_size": size, "pg_name": pg}
    return make_node(node_id, f"all_reduce_{pg}", NodeType.COMM_COLL_NODE, attrs=attrs)


def _two_collectives(local_size: int) -> list[Trace]:
    """4 ranks; each issues at 0 an all-reduce of 1 MiB over its replica group {r, r+2} and one
    of `local_size` bytes over its slice group {0, 1} or {2, 3} (two comm slots)."""
    out = []
    for r in range(4):
        t = Trace(rank=r)
        t.nodes = [
            _all_reduce(1, 1 << 20, "1" if r % 2 == 0 else "2"),
            _all_reduce(2, local_size, "3" if r < 2 else "4"),
        ]
        out.append(t)
    return out


def test_a_replica_completion_tied_with_one_booked_beside_it_runs_every_rank():
    """The copies of a replica group's completion are booked by its last copy, the others by each
    copy itself: when both land on one ns from one step, the copies could see them in different
    orders, so the run does not fold (and still gives the full run's answer)."""
    groups = {"1": [0, 2], "2": [1, 3], "3": [0, 1], "4": [2, 3]}
    net = NetworkConfig(["Switch"], [4], [50.0], [500.0])
    tied = _both(_two_collectives(1 << 20), net, comm_groups=groups, slots={"cpu": 1, "gpu": 1, "comm": 2})
    assert tied.settings["fold"] is None
    # the same two collectives ending at different ns fold
    apart = _both(_two_collectives(1 << 19), net, comm_groups=groups, slots={"cpu": 1, "gpu": 1, "comm": 2})
    assert apart.settings["fold"] == {"copies": 2, "stride": 2}


def test_tensor_parallel_ranks_fold_and_pipeline_stages_do_not(tmp_path):
    # tp 4 x pp 2: the four tensor-parallel ranks of a stage run the same nodes, their all-reduce
    # group is their orbit, their pipeline peers are shifted alike: copies of one rank
    prefix = generate_transformer(tmp_path / "t", "--tp", "4", "--pp", "2", "--heads", "4", "--batch", "2",
                                  "--layers", "2", "--microbatches", "2")  # fmt: skip
    res = _both(str(prefix), NetworkConfig(["Ring", "Switch"], [4, 2], [50.0] * 2, [500.0] * 2))
    assert res.settings["fold"] == {"copies": 4, "stride": 1}
    # pipeline stages alone run different nodes
    prefix = generate_transformer(tmp_path / "p", "--pp", "4", "--batch", "2", "--layers", "4", "--microbatches", "2")
    res = _both(str(prefix), NetworkConfig(["Ring"], [4], [50.0], [500.0]))
    assert res.settings["fold"] is None


def test_the_command_says_it_folded_and_no_fold_gives_the_same_ranks(tmp_path, run_cli):
    import json

    prefix = generate_transformer(tmp_path / "t", "--dp", "8", "--batch", "8", "--layers", "1", "--microbatches", "1")
    net = tmp_path / "net.yml"
    net.write_text("topology: [ Switch ]\nnpus_count: [ 8 ]\nbandwidth: [ 50 ]\nlatency: [ 500 ]\n")
    args = ["simulate", str(prefix), "--network", str(net), "--congestion", "unaware"]
    folded = run_cli(*args)
    assert folded.exit_code == 0, folded.stderr
    assert "1 of 8 ranks simulated, each standing for its 8 data-parallel copies" in folded.stderr
    a = json.loads(run_cli(*args, "--json", "-q").stdout)
    b = json.loads(run_cli(*args, "--json", "-q", "--no-fold").stdout)
    assert a["settings"]["fold"] == {"copies": 8, "stride": 1} and b["settings"]["fold"] is None
    assert a["ranks"] == b["ranks"] and a["finish_ns"] == b["finish_ns"] > 0


@pytest.mark.parametrize("change", ["duration", "peer", "group"])
def test_a_rank_that_differs_from_its_copies_is_not_folded(tmp_path, change):
    """One copy made different (a kernel's time, a message's peer, a collective's group): the
    ranks are no longer copies, and the answers are the full run's."""
    import json

    from chakra.io import read_trace, write_trace
    from chakra.schema.attrs import set_attr

    prefix = generate_transformer(tmp_path / "t", "--dp", "4", "--pp", "2", "--batch", "4", "--layers", "2",
                                  "--microbatches", "1")  # fmt: skip
    net = NetworkConfig(["Switch", "Switch"], [4, 2], [50.0] * 2, [500.0] * 2)
    assert _both(str(prefix), net).settings["fold"] is not None
    path = tmp_path / "t.3.et"
    trace = read_trace(path)
    if change == "duration":
        node = next(n for n in trace.nodes if n.type == NodeType.COMP_NODE)
        node.duration_micros += 1
        for a in node.attr:
            if a.name in ("num_ops", "tensor_size"):
                a.int64_val = a.int64_val * 2 if a.name == "num_ops" else a.int64_val
    elif change == "peer":
        node = next(n for n in trace.nodes if n.type == NodeType.COMM_SEND_NODE)
        set_attr(node, "comm_tag", 99)
        recv_path = tmp_path / "t.7.et"  # its receiver, so that the trace still runs
        peer = read_trace(recv_path)
        other = next(n for n in peer.nodes if n.type == NodeType.COMM_RECV_NODE)
        set_attr(other, "comm_tag", 99)
        write_trace(recv_path, peer)
    else:
        groups = json.loads((tmp_path / "t.comm_groups.json").read_text())
        name = next(k for k, v in groups.items() if 3 in v and len(v) == 4)
        groups["99"] = groups[name]
        (tmp_path / "t.comm_groups.json").write_text(json.dumps(groups))
        for r in groups[name]:  # every member renames the group, rank 3 keeps its place
            t = read_trace(tmp_path / f"t.{r}.et")
            for n in t.nodes:
                for a in n.attr:
                    if a.name == "pg_name" and a.string_val == name:
                        a.string_val = "99"
            write_trace(tmp_path / f"t.{r}.et", t)
    if change != "group":
        write_trace(path, trace)
    res = _both(str(prefix), net)
    if change == "group":  # renaming a group changes nothing: still copies
        assert res.settings["fold"] is not None
    else:
        assert res.settings["fold"] is None

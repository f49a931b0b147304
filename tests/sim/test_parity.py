"""Parity with ASTRA-sim: the regression case (docs/astra-sim.md §4.1) and the derived cases (§4.2).

ASTRA-sim 2.x (518bd51) gives exactly these numbers; the 117,780 ns reference is its own CI output
(`refs_stdout.txt`, shipped in the samples).
"""

from __future__ import annotations

import re

import pytest

from chakra.schema import CollectiveType
from chakra.sim import simulate
from tests.sim.conftest import collective_traces, write_network, write_system

AR, AG, RS, A2A = (
    CollectiveType.ALL_REDUCE,
    CollectiveType.ALL_GATHER,
    CollectiveType.REDUCE_SCATTER,
    CollectiveType.ALL_TO_ALL,
)


def reference_finish(rt_dir) -> set[int]:
    text = (rt_dir / "refs_stdout.txt").read_text()
    return {int(x) for x in re.findall(r"finished, (\d+) cycles", text)}


@pytest.mark.parametrize("congestion", ["aware", "unaware"])
def test_regression_case_on_shipped_traces(samples_dir, rt_dir, congestion):
    expected = reference_finish(rt_dir)
    assert expected == {117780}
    res = simulate(
        str(samples_dir / "astrasim/all_reduce_8npus_1MB/all_reduce"),
        rt_dir / "network_cfg.yml",
        rt_dir / "system_cfg.json",
        rt_dir / "remote_memory_cfg.json",
        congestion=congestion,
    )
    assert sorted(res.ranks) == list(range(8))
    for r in res.ranks.values():
        # ASTRA-sim: "finished, 117780 cycles, exposed communication 117780 cycles", Comm time 117780
        assert (r.finish_ns, r.exposed_comm_ns, r.comm_ns, r.compute_ns) == (117780, 117780, 117780, 0)
    assert res.finish_ns == 117780


@pytest.mark.parametrize(
    ("ctype", "expected"),
    [(RS, 86_420), (AG, 151_016), (A2A, 125_480)],
)
def test_derived_8npus_rt_template(rt_dir, ctype, expected):
    res = simulate(collective_traces(8, ctype), rt_dir / "network_cfg.yml", rt_dir / "system_cfg.json")
    assert {r.finish_ns for r in res.ranks.values()} == {expected}


@pytest.mark.parametrize(
    ("npus", "ctype", "expected", "congestion"),
    [
        (8, AR, 64_440, "aware"),  # Ring_8npus.yml + Ring_4chunks.json
        (4, RS, 22_240, "unaware"),  # examples/run_scripts/analytical/congestion_unaware/Ring_reducescatter_4npus.sh
        (16, AG, 323_560, "aware"),  # .../congestion_aware/Ring_allgather_16npus.sh
    ],
)
def test_derived_ring_4chunks(tmp_path, npus, ctype, expected, congestion):
    net = write_network(tmp_path / f"Ring_{npus}npus.yml", ["Ring"], [npus], [50.0], [500.0])
    system = write_system(tmp_path / "Ring_4chunks.json", local_mem_bw=1600)
    res = simulate(collective_traces(npus, ctype), net, system, congestion=congestion)
    assert {r.finish_ns for r in res.ranks.values()} == {expected}


def test_hierarchical_all_reduce_composes_phases(tmp_path):
    """Ring 2 x Ring 4, one chunk, localBWAware: RS(d0) -> AR(d1) -> AG(d0), closed forms of docs/astra-sim.md §3.6."""
    net = write_network(tmp_path / "n.yml", ["Ring", "Ring"], [2, 4], [50.0, 100.0], [500.0, 200.0])
    system = write_system(
        tmp_path / "s.json",
        preferred_dataset_splits=1,
        all_reduce_implementation=["ring", "ring"],
        reduce_scatter_implementation=["ring", "ring"],
        all_gather_implementation=["ring", "ring"],
    )
    ed, lmbw, size = 10, 50, 1 << 20

    def net_t(m, bw, lat):
        return int(lat + m / (bw * 2**30 / 1e9))

    def red(m):
        return 3 * int(m / lmbw)

    # RS on dim 0 (p=2, B=50, L=500) of D, AR on dim 1 (p=4, B=100, L=200) of D/2, AG on dim 0 of D/2.
    m = size // 2
    rs0 = ed + net_t(m, 50, 500) + 0 * (ed + red(m) + net_t(m, 50, 500)) + ed + red(m)
    d1 = size // 2
    m1 = d1 // 4
    ar1 = ed + net_t(m1, 100, 200) + 3 * (ed + red(m1) + net_t(m1, 100, 200)) + 2 * (ed + net_t(m1, 100, 200)) + ed
    ag0 = 1 * (ed + net_t(size // 2, 50, 500)) + ed
    res = simulate(collective_traces(8, AR), net, system, congestion="unaware")
    assert {r.finish_ns for r in res.ranks.values()} == {rs0 + ar1 + ag0}
    # baseline: AR on every dimension with the whole chunk
    system_b = write_system(
        tmp_path / "b.json",
        preferred_dataset_splits=1,
        collective_optimization="baseline",
        all_reduce_implementation=["ring", "ring"],
    )
    m0 = size // 2
    ar0 = ed + net_t(m0, 50, 500) + 1 * (ed + red(m0) + net_t(m0, 50, 500)) + 0 + ed
    m1b = size // 4
    ar1b = ed + net_t(m1b, 100, 200) + 3 * (ed + red(m1b) + net_t(m1b, 100, 200)) + 2 * (ed + net_t(m1b, 100, 200)) + ed
    res_b = simulate(collective_traces(8, AR), net, system_b, congestion="unaware")
    assert {r.finish_ns for r in res_b.ranks.values()} == {ar0 + ar1b}


def test_subgroup_ring_uses_fast_delay_in_compat_and_endpoint_delay_when_corrected(tmp_path, rt_dir):
    groups = tmp_path / "groups.json"
    groups.write_text('{"1": [0, 1], "2": [2, 3]}')
    traces = collective_traces(4, AR)
    for t in traces:
        from chakra.schema.attrs import set_attr

        set_attr(t.nodes[0], "pg_name", "1" if t.rank < 2 else "2")
    net = write_network(tmp_path / "n.yml", ["Ring"], [4], [50.0], [500.0])

    def expect(ed):
        # 2-rank ring AR per chunk: (2p-1) ed + (2p-2) net + (p-1) red, p=2, m = 262144/2
        m = (1 << 20) // 4 // 2
        net_t = int(500 + m / (50 * 2**30 / 1e9))
        return 4 * (3 * ed + 2 * net_t + 3 * int(m / 50))

    res = simulate(traces, net, rt_dir / "system_cfg.json", comm_groups=groups)
    assert {r.finish_ns for r in res.ranks.values()} == {expect(10)}
    system = write_system(tmp_path / "s.json", endpoint_delay=40)
    res = simulate(traces, net, system, comm_groups=str(groups), compat=False)
    assert {r.finish_ns for r in res.ranks.values()} == {expect(40)}
    res = simulate(traces, net, system, comm_groups=str(groups))  # ASTRA-sim ignores endpoint-delay here
    assert {r.finish_ns for r in res.ranks.values()} == {expect(10)}


def _bps(gbps: float) -> float:
    return gbps * 2**30 / 1e9


@pytest.mark.parametrize("congestion", ["unaware", "aware"])
def test_direct_all_reduce_on_fully_connected(tmp_path, congestion):
    """direct: every peer at once (D/p each), reduce, then the all-gather half (FC: one dedicated link each)."""
    net = write_network(tmp_path / "n.yml", ["FullyConnected"], [4], [100.0], [300.0])
    system = write_system(tmp_path / "s.json", preferred_dataset_splits=1, all_reduce_implementation=["direct"])
    size, ed = 1 << 20, 10
    m = size // 4
    net_t = int(300 + m / _bps(100))
    red = 3 * int(m / 50)
    res = simulate(collective_traces(4, AR, size), net, system, congestion=congestion)
    assert {r.finish_ns for r in res.ranks.values()} == {ed + (net_t + ed + red) + (net_t + ed)}


def test_halving_doubling_reduce_scatter_on_ring_unaware(tmp_path):
    net = write_network(tmp_path / "n.yml", ["Ring"], [8], [50.0], [500.0])
    system = write_system(
        tmp_path / "s.json", preferred_dataset_splits=1, reduce_scatter_implementation=["halvingDoubling"]
    )
    # ASTRA-sim 518bd51 (congestion-unaware binary) measured 44,217 ns on every rank. Its halving-doubling
    # starts with the nearest partner (distance 1, 2, 4) with messages D/2, D/4, D/8; an earlier
    # closed form here (farthest partner first) said 75,672 and was wrong.
    size, expected = 1 << 20, 44_217
    res = simulate(collective_traces(8, RS, size), net, system, congestion="unaware")
    assert {r.finish_ns for r in res.ranks.values()} == {expected}


def test_active_chunks_let_chunks_overlap_when_unaware(tmp_path, rt_dir):
    net = rt_dir / "network_cfg.yml"
    two = write_system(tmp_path / "s.json", active_chunks_per_dimension=2)
    res = simulate(collective_traces(8, AR), net, two, congestion="unaware")
    assert {r.finish_ns for r in res.ranks.values()} == {2 * 29_445}  # 4 chunks, 2 at a time, no contention


@pytest.mark.parametrize("congestion", ["aware", "unaware"])
def test_ring_all_reduce_on_a_switch(tmp_path, congestion):
    """Switch = 2 hops: unaware charges 2L + one serialization, aware stores and forwards (2x L + size/B')."""
    net = write_network(tmp_path / "n.yml", ["Switch"], [8], [400.0], [936.25])
    system = write_system(tmp_path / "s.json", local_mem_bw=3350)
    m = (1 << 20) // 4 // 8
    if congestion == "aware":
        net_t = 2 * int(936.25 + m / _bps(400))
    else:
        net_t = int(2 * 936.25 + m / _bps(400))
    ed, red = 10, 3 * int(m / 3350)
    per_chunk = 15 * ed + 14 * net_t + 7 * red  # ring AR, p = 8: (2p-1) ed + (2p-2) net + (p-1) red
    res = simulate(collective_traces(8, AR), net, system, congestion=congestion)
    assert {r.finish_ns for r in res.ranks.values()} == {4 * per_chunk}


def test_involved_dim_skips_dimensions(tmp_path):
    net = write_network(tmp_path / "n.yml", ["Ring", "Switch"], [4, 2], [50.0, 25.0], [500.0, 700.0])
    system = write_system(tmp_path / "s.json", preferred_dataset_splits=1, all_gather_implementation=["ring", "ring"])
    size = 1 << 16
    only_dim1 = simulate(collective_traces(8, AG, size, involved_dim=[False, True]), net, system, congestion="unaware")
    # AG over dim 1 only (p = 2): (p-1)(ed + net) + ed, net over the switch = floor(2L + size/B')
    assert {r.finish_ns for r in only_dim1.ranks.values()} == {10 + int(2 * 700 + size / _bps(25)) + 10}


def test_text_workload_micro_all_reduce(tmp_path, samples_dir, rt_dir, run_cli):
    """ASTRA-sim 1.0 microAllReduce.txt converted by our text converter runs the regression case."""
    src = samples_dir / "astrasim/text_workloads/microAllReduce.txt"
    res = run_cli("convert", "text", str(src), "--npus", "8", "--passes", "1", "-o", str(tmp_path / "micro"), "-q")
    assert res.exit_code == 0, res.stderr
    res = simulate(str(tmp_path / "micro"), rt_dir / "network_cfg.yml", rt_dir / "system_cfg.json")
    assert len(res.ranks) == 8 and {r.finish_ns for r in res.ranks.values()} == {117_780}


def test_two_active_chunks_share_switch_links_when_aware(tmp_path):
    """HGX-like: Switch 8, 400 GB/s, 936.25 ns, 2 active chunks. Both chunks' first messages queue on
    the same uplink: the second waits one serialization (76 ns); afterwards they stay 76 ns apart
    and never collide again. So 4 chunks take 2 T + 76 (aware) and 2 T' (unaware, no contention)."""
    net = write_network(tmp_path / "n.yml", ["Switch"], [8], [400.0], [936.25])
    system = write_system(tmp_path / "s.json", local_mem_bw=3350, active_chunks_per_dimension=2)
    m = (1 << 20) // 4 // 8
    ser = int(m / _bps(400))
    ed, red = 10, 3 * int(m / 3350)
    t_aware = 15 * ed + 14 * 2 * int(936.25 + m / _bps(400)) + 7 * red
    t_unaware = 15 * ed + 14 * int(2 * 936.25 + m / _bps(400)) + 7 * red
    aware = simulate(collective_traces(8, AR), net, system, congestion="aware")
    unaware = simulate(collective_traces(8, AR), net, system, congestion="unaware")
    assert ser == 76
    assert {r.finish_ns for r in aware.ranks.values()} == {2 * t_aware + ser}
    assert {r.finish_ns for r in unaware.ranks.values()} == {2 * t_unaware}

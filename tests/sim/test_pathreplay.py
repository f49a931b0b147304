"""chakra.sim.pathreplay: a replay of recorded durations as longest paths, to the ns of the simulator.

The converter's profiler-cost fit replays a trace a few dozen times with other host durations;
PathReplay must give exactly what `simulate(..., comm_mode="replay", record_nodes=True)` gives
(every node's start and end, every rank's finish, the step), on real converted recordings (one
rank on the CPU, DDP and 3-D parallel jobs, a GPU recording with kernels and queues), and after
durations change; where the simulator models something it must decline.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from chakra.converters.pytorch import Options, convert_files
from chakra.io import read_trace
from chakra.schema import NodeType
from chakra.sim import SimOptions, simulate
from chakra.sim.pathreplay import PathReplay
from chakra.sim.steps import step_time
from chakra.trace import Trace, make_node


def _converted(samples_dir: Path, tmp: Path, folder: Path) -> list[Trace]:
    ets = sorted(folder.glob("et*.json*"))
    kins = sorted(p for p in folder.glob("kineto*.json*") if "only" not in p.name)
    summaries = convert_files(ets, kins, tmp / "out", Options(overhead="keep"))
    return [read_trace(s["output"], rank=s["rank"]) for s in summaries]


def _assert_same(traces: list[Trace]) -> None:
    res = simulate(traces, options=SimOptions(comm_mode="replay", record_nodes=True))
    want = step_time(traces, {r: v.finish_ns for r, v in res.ranks.items()}, res.node_times)
    replay = PathReplay.build(traces)
    assert replay is not None
    got = replay.run()
    for rank, times in res.node_times.items():
        assert got.ranks[rank].finish_ns == res.ranks[rank].finish_ns
        assert all(got.node_times[rank][i] == v for i, v in times.items())
    step = replay.step(got)
    assert (step.step_ns, step.steps_ns) == (want.step_ns, want.steps_ns)


@pytest.mark.parametrize(
    "folder", ["pytorch/mlp", "pytorch/ddp4", "pytorch/mesh3d8", "pytorch/pipe1f1b4", "record/mlp-fused"]
)
def test_same_as_the_simulator_on_converted_recordings(samples_dir, tmp_path, folder):
    traces = _converted(samples_dir, tmp_path, samples_dir / folder)
    assert sum(len(t.nodes) for t in traces) > 500
    _assert_same(traces)


def test_same_after_durations_change_and_on_a_gpu_recording(samples_dir, tmp_path):
    gpu = Path(__file__).resolve().parents[1] / "data" / "gpu" / "fp32"
    for name in ("et.json.gz", "kineto.json.gz"):  # the recorder's names carry no rank
        (tmp_path / name.replace(".json", ".0.json")).write_bytes(gzip.decompress((gpu / name).read_bytes()))
    traces = _converted(samples_dir, tmp_path, tmp_path)
    kinds = {n.name for n in traces[0].nodes}
    assert "queue" in kinds  # kernels waiting for their launch: a graph of many chains
    replay = PathReplay.build(traces)
    for scale in (0.25, 3.0):  # as the fit does: the same nodes, other host durations
        for n in traces[0].nodes:
            n.duration_micros = int(n.duration_micros * scale)
        _assert_same(traces)
        fresh = PathReplay.build(traces)  # the one built before reads the durations as they are now
        assert replay.step(replay.run()).step_ns == fresh.step(fresh.run()).step_ns
    # durations handed over as arrays (the fit's trials) = the same durations written into the nodes
    nodes = traces[0].nodes
    rows = list(range(0, len(nodes), 3))
    doubled = [2 * nodes[i].duration_micros + 1 for i in rows]
    handed = replay.run({0: (rows, doubled)})
    handed_times = {i: handed.node_times[0][i] for i in (n.id for n in nodes)}
    for i, d in zip(rows, doubled):
        nodes[i].duration_micros = d
    _assert_same(traces)
    written = PathReplay.build(traces).run().node_times[0]
    assert handed_times == {i: written[i] for i in handed_times}


def test_declines_what_the_simulator_models_or_refuses():
    comp = NodeType.COMP_NODE
    load = make_node(2, "load", NodeType.MEM_LOAD_NODE, ctrl_deps=[1], attrs={"tensor_size": 64})
    mem = Trace(nodes=[make_node(1, "a", comp, duration_micros=5), load])
    assert PathReplay.build([mem]) is None  # the memory model times it
    cycle = Trace(nodes=[make_node(1, "a", comp, ctrl_deps=[2]), make_node(2, "b", comp, ctrl_deps=[1])])
    assert PathReplay.build([cycle]) is None  # the simulator reports the deadlock
    absent = Trace(nodes=[make_node(1, "a", comp, ctrl_deps=[7])])
    assert PathReplay.build([absent]) is None  # ... and the missing dependency


def test_a_chain_by_hand():
    """Three roots, a join and a chain behind it: starts are the latest parent's end, 0 us lasts 1 ns."""
    comp = NodeType.COMP_NODE
    t = Trace(
        nodes=[
            make_node(1, "a", comp, duration_micros=3),
            make_node(2, "b", comp, duration_micros=5),
            make_node(3, "m", NodeType.METADATA_NODE),
            make_node(4, "join", comp, data_deps=[1, 2], ctrl_deps=[3], duration_micros=0),
            make_node(5, "c", comp, ctrl_deps=[4], duration_micros=2),
        ],
        rank=0,
    )
    backwards = Trace(nodes=list(reversed(t.nodes)), rank=0)  # a file order that is not a topological one
    for trace in (t, backwards):
        got = PathReplay.build([trace]).run()
        times = got.node_times[0]
        assert times[4] == (5000, 5001) and times[5] == (5001, 7001) and times[3] == (0, 0)
        assert got.ranks[0].finish_ns == 7001
        _assert_same([trace])

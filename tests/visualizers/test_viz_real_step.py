"""Pictures of real training steps: the overview graph and the profiler-like timeline.

Inputs are the project's own recordings, converted here with `chakra convert pytorch`:
tests/data/gpu/fp32 (one H200 step of a 4-layer GPT-like model, ET + Kineto; SOURCES.md there),
and the 4-rank DDP and 4-stage pipeline CPU runs in tests/data/samples/pytorch/{ddp4,pp4}.
The drawings are rendered to PNG; what is checked is the box structure a person reads (steps,
lanes, phases, blocks, cross-rank links), not pixels. The timelines are checked against the
rules Perfetto's JSON importer applies (slices nested per track, named tracks, flow pairs bound
to slices); no Perfetto binary can be installed offline here (the `perfetto` wheel downloads its
trace processor at run time).
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter, defaultdict
from pathlib import Path

import jsonschema
import pytest

from chakra.io import read_traces
from chakra.visualizers.chrome_trace import importer_problems, load_schema
from chakra.visualizers.graph import OVERVIEW_BOXES, choose_view, visualize
from chakra.visualizers.select import Filters, View
from chakra.visualizers.timeline import timeline_from_traces

DATA = Path(__file__).resolve().parents[1] / "data"
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot not installed")


def _convert(tmp: Path, name: str, ets: list[Path], kinetos: list[Path]):
    import chakra.converters.pytorch as pytorch

    written = pytorch.convert([*ets, *kinetos], tmp / name).paths
    return read_traces([str(p) for p in written])


@pytest.fixture(scope="module")
def gpu_step(tmp_path_factory):
    d = DATA / "gpu" / "fp32"
    return _convert(tmp_path_factory.mktemp("fp32"), "fp32", [d / "et.json.gz"], [d / "kineto.json.gz"])


def _ranks(tmp_path_factory, name: str):
    d = DATA / "samples" / "pytorch" / name
    ets = [d / f"et.{r}.json.gz" for r in range(4)]
    kinetos = [d / f"kineto.{r}.json.gz" for r in range(4)]
    return _convert(tmp_path_factory.mktemp(name), name, ets, kinetos)


@pytest.fixture(scope="module")
def ddp4(tmp_path_factory):
    return _ranks(tmp_path_factory, "ddp4")


@pytest.fixture(scope="module")
def pp4(tmp_path_factory):
    return _ranks(tmp_path_factory, "pp4")


def _lane_boxes(view: View, rank: int, step: str, lane: str) -> list[str]:
    """Titles of the boxes of one lane of one step, in the order they start."""
    names = view.cluster_names
    out = []
    for b in sorted(view.boxes, key=lambda b: b.start_us):
        if b.rank != rank or len(b.path) < 2:
            continue
        if names[(rank, b.path[0])].split(" · ")[0] == step and names[(rank, b.path[-1])] == lane:
            out.append(b.name)
    return out


def test_gpu_step_overview_shows_steps_phases_layers_and_streams(gpu_step, tmp_path):
    nodes = sum(len(t.nodes) for t in gpu_step)
    view, notes = choose_view(gpu_step, Filters())
    assert nodes > 10_000 and view.level == "block" and 20 <= len(view.boxes) <= OVERVIEW_BOXES
    assert "drew an overview" in notes[0] and "--expand" in notes[0]
    assert sum(b.count for b in view.boxes) == nodes  # every node in exactly one box
    lanes = {name for (r, c), name in view.cluster_names.items() if (r, c) in view.lanes}
    assert lanes >= {"CPU thread 1", "CPU thread 2 (autograd)", "GPU stream 7"}
    # The reference of the box structure of step 1 (checked by eye on the rendered PNG): the 4
    # transformer layers show as 4 forward and 4 backward blocks; the GPU stream repeats the host's
    # blocks with the kernels they launched.
    forward = [f"forward block {k}/4" for k in range(1, 5)]
    backward = [f"backward block {k}/4" for k in range(1, 5)]
    assert _lane_boxes(view, 0, "ProfilerStep#1", "CPU thread 1") == [
        "forward: to … embedding",
        *forward,
        "forward: add … ones_like",
        "optimizer",
        "other",
    ]
    autograd = _lane_boxes(view, 0, "ProfilerStep#1", "CPU thread 2 (autograd)")
    assert autograd[1:5] == backward and autograd[0].startswith("backward: NllLossBackward0")
    stream = _lane_boxes(view, 0, "ProfilerStep#1", "GPU stream 7")
    assert [f"{b} (kernels)" for b in forward] == stream[1:5]
    assert [f"{b} (kernels)" for b in backward] == stream[7:11]
    assert "optimizer (kernels)" in stream
    # Each box says how many nodes and how much time it holds; kernels hang off their launching block.
    block1 = next(b for b in view.boxes if b.name == "forward block 1/4" and b.rank == 0)
    assert block1.count > 100 and block1.duration_us > 0 and "linear" in block1.detail
    kernels1 = next(b for b in view.boxes if b.name == "forward block 1/4 (kernels)")
    assert any(e.src == block1.key and e.dst == kernels1.key for e in view.edges)


def test_expand_opens_one_box_and_keeps_the_rest(gpu_step):
    base, _ = choose_view(gpu_step, Filters())
    opened, notes = choose_view(gpu_step, Filters(), expand=[re.compile(r"^forward block 1/4")])
    names = Counter(b.name for b in opened.boxes)
    assert names["forward block 1/4"] == 0 and names["forward block 2/4"] == 2  # both steps
    assert names["aten::scaled_dot_product_attention"] == 2 and names["aten::linear"] == 8
    assert len(opened.boxes) > len(base.boxes)
    assert sum(b.count for b in opened.boxes) == sum(b.count for b in base.boxes)


@needs_dot
def test_gpu_step_png_is_readable(gpu_step, tmp_path):
    out = tmp_path / "step.png"
    result = visualize(gpu_step, out)
    header = out.read_bytes()[:24]
    width, height = int.from_bytes(header[16:20], "big"), int.from_bytes(header[20:24], "big")
    assert header[:8] == b"\x89PNG\r\n\x1a\n" and len(result.view.boxes) <= OVERVIEW_BOXES
    # 96 dpi: at most ~3 A4 page widths across, so boxes stay legible when printed or zoomed.
    assert width < 3 * 1123 and height < 4 * 1587
    # One step of one rank prints on one A4 page at more than half size (10 pt titles print >= 5.5 pt).
    one = visualize(gpu_step, tmp_path / "step1.svg", filters=Filters(step=re.compile(r"^ProfilerStep#1$")))
    assert 20 <= len(one.view.boxes) <= 40 and one.view.level == "block"
    svg = (tmp_path / "step1.svg").read_text()
    w_pt, h_pt = (float(x) for x in re.search(r'width="([\d.]+)pt" height="([\d.]+)pt"', svg).groups())
    assert min(595 / w_pt, 842 / h_pt) >= 0.55, (w_pt, h_pt)
    assert {b.path[0] for b in one.view.boxes} == {one.view.boxes[0].path[0]}  # all in ProfilerStep#1


def test_ddp_overview_links_the_all_reduces_of_the_four_ranks(ddp4, tmp_path):
    view, _ = choose_view(ddp4, Filters())
    assert view.ranks == [0, 1, 2, 3] and len(view.boxes) <= OVERVIEW_BOXES and view.level == "block"
    assert len(view.hubs) == 4 and all(len(h.members) == 4 for h in view.hubs)
    assert all("ALL_REDUCE" in h.label for h in view.hubs)
    for rank in range(4):
        lane = _lane_boxes(view, rank, "ProfilerStep#1", "communication")
        assert lane.count("gloo:all_reduce") == 4
        host = _lane_boxes(view, rank, "ProfilerStep#1", "CPU thread 1")
        # two micro-batches: 3-layer forward then 6 backward blocks, twice; the optimizer at the end
        assert host.count("forward block 1/3") == 2 and "backward block 6/6" in host
        assert host[-1].startswith("optimizer")


def test_pipeline_overview_shows_1f1b_and_the_messages(pp4):
    view, _ = choose_view(pp4, Filters())
    assert len(view.boxes) <= OVERVIEW_BOXES
    peers = [e for e in view.edges if e.dep == "peer"]
    assert len(peers) == 24  # every send joined to its receive
    phases = [n.split()[0].rstrip(":") for n in _lane_boxes(view, 1, "ProfilerStep#1", "CPU thread 1")]
    runs = [p for i, p in enumerate(phases) if i == 0 or p != phases[i - 1]]
    # stage 1 of 4 stages, 4 micro-batches, 1F1B: warm-up forwards, then alternating, then cool-down
    assert runs[:6] == ["forward", "backward", "forward", "backward", "forward", "backward"]


# ---------------------------------------------------------------------------------------------
# Timelines


def _check_perfetto_rules(doc: dict) -> dict:
    """Schema, then what Perfetto's JSON importer needs (`importer_problems`); returns the track names."""
    jsonschema.validate(doc, load_schema())
    assert importer_problems(doc) == []
    return {(e["pid"], e["tid"]): e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "thread_name"}


def test_importer_rules_catch_what_perfetto_drops():
    """The checker itself: a crossing slice, an unnamed track, a flow with no end or outside slices."""
    meta = [
        {"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": "rank 0"}},
        {"name": "thread_name", "ph": "M", "pid": 0, "tid": 1, "args": {"name": "CPU thread 1"}},
    ]
    good = {"name": "a", "cat": "cpu", "ph": "X", "pid": 0, "tid": 1, "ts": 0, "dur": 10, "args": {"node_id": 1}}
    crossing = {**good, "name": "b", "ts": 5, "dur": 10}
    unnamed = {**good, "tid": 9}
    s = {"name": "launch", "cat": "launch", "ph": "s", "id": 1, "pid": 0, "tid": 1, "ts": 2}
    f_out = {**s, "ph": "f", "bp": "e", "ts": 50}
    assert importer_problems({"traceEvents": [*meta, good, {**good, "ts": 2, "dur": 3}]}) == []
    problems = importer_problems({"traceEvents": [*meta, good, crossing, unnamed, s, f_out]})
    assert any("after its parent's end" in p for p in problems)
    assert any("unnamed process or track (0, 9)" in p for p in problems)
    assert any("inside no slice" in p for p in problems)
    assert any("expected one s and one f" in p for p in importer_problems({"traceEvents": [*meta, good, s]}))


def test_gpu_step_timeline_has_threads_streams_nesting_and_launch_arrows(gpu_step, tmp_path):
    out = tmp_path / "t.json"
    result = timeline_from_traces(gpu_step, out)
    doc = json.loads(out.read_text())
    tracks = _check_perfetto_rules(doc)
    assert {"CPU thread 1", "CPU thread 2", "GPU stream 7"} <= set(tracks.values())
    assert result.processes == 1
    kernels = [e for e in doc["traceEvents"] if e["ph"] == "X" and tracks[(e["pid"], e["tid"])] == "GPU stream 7"]
    launches = [e for e in doc["traceEvents"] if e.get("cat") == "launch" and e["ph"] == "f"]
    assert len(kernels) > 1000 and len(launches) == len(kernels)  # every kernel tied to its launch
    # Operators nest: aten::linear holds its aten::addmm / aten::mm callee on the same track.
    x = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    linear = next(e for e in x if e["name"] == "aten::linear")
    inside = [
        e["name"]
        for e in x
        if e["tid"] == linear["tid"] and linear["ts"] <= e["ts"] and e["ts"] + e["dur"] <= linear["ts"] + linear["dur"]
    ]
    assert any(n in ("aten::addmm", "aten::mm", "aten::matmul") for n in inside)
    assert doc["otherData"]["launch_flows"] == len(kernels)


def test_ddp_and_pipeline_timelines_have_flows_between_ranks(ddp4, pp4, tmp_path):
    timeline_from_traces(ddp4, tmp_path / "ddp.json")
    doc = json.loads((tmp_path / "ddp.json").read_text())
    tracks = _check_perfetto_rules(doc)
    assert {pid for pid, _ in tracks} == {0, 1, 2, 3}
    colls = [e for e in doc["traceEvents"] if e.get("cat") == "collective" and e["ph"] == "f"]
    assert len(colls) == 4 * 3 and {e["pid"] for e in colls} == {1, 2, 3}  # from rank 0 to the others
    timeline_from_traces(pp4, tmp_path / "pp.json")
    doc = json.loads((tmp_path / "pp.json").read_text())
    _check_perfetto_rules(doc)
    msgs = [(s["pid"], f["pid"]) for s, f in _flow_pairs(doc, "p2p")]
    assert len(msgs) == 24 and all(abs(a - b) == 1 for a, b in msgs)  # stage to neighbouring stage


def _flow_pairs(doc: dict, cat: str) -> list[tuple[dict, dict]]:
    by_id: dict[int, dict[str, dict]] = defaultdict(dict)
    for e in doc["traceEvents"]:
        if e.get("cat") == cat and e["ph"] in "sf":
            by_id[e["id"]][e["ph"]] = e
    return [(v["s"], v["f"]) for v in by_id.values()]


def test_simulated_and_recorded_side_by_side(pp4, tmp_path):
    import chakra.sim as sim
    from chakra.io import write_rank_traces
    from chakra.visualizers.timeline import RECORDED_PID, timeline_from_log

    prefix = tmp_path / "pp"
    write_rank_traces(prefix, pp4)
    log = tmp_path / "sim.csv"
    sim.simulate(str(prefix), log_path=log)
    traces = read_traces([str(prefix)])
    timeline_from_log(log, tmp_path / "both.json", traces=traces)
    doc = json.loads((tmp_path / "both.json").read_text())
    _check_perfetto_rules(doc)
    names = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "process_name"}
    assert names[0] == "NPU 0" and names[RECORDED_PID] == "rank 0 · recorded"
    order = {e["pid"]: e["args"]["sort_index"] for e in doc["traceEvents"] if e.get("name") == "process_sort_index"}
    assert sorted(names, key=order.get)[:4] == [0, RECORDED_PID, 1, RECORDED_PID + 1]
    recorded = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["pid"] >= RECORDED_PID]
    assert recorded and min(e["ts"] for e in recorded) == 0


def test_simulate_timeline_shows_the_recording_beside_the_run(pp4, tmp_path, run_cli):
    """`chakra simulate --timeline` on a converted recording draws what `chakra timeline LOG --trace`
    draws: each rank's simulated run with its recorded one under it."""
    from chakra.io import write_rank_traces
    from chakra.visualizers.timeline import RECORDED_PID

    prefix = tmp_path / "pp"
    write_rank_traces(prefix, pp4)
    out = tmp_path / "t.json"
    res = run_cli("simulate", str(prefix), "--comm", "replay", "--timeline", str(out), "-q")
    assert res.exit_code == 0, res.stderr
    doc = json.loads(out.read_text())
    _check_perfetto_rules(doc)
    names = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "process_name"}
    assert [names[r] for r in range(4)] == [f"NPU {r}" for r in range(4)]
    assert [names[RECORDED_PID + r] for r in range(4)] == [f"rank {r} · recorded" for r in range(4)]


def test_cli_overview_note_expand_and_errors(gpu_step, tmp_path, run_cli):
    from chakra.io import write_rank_traces

    prefix = tmp_path / "gpu"
    write_rank_traces(prefix, gpu_step)
    out = tmp_path / "g.dot"
    res = run_cli("visualize", str(prefix), "--dot", "-o", str(out), "--expand", "^backward block 2/4")
    assert res.exit_code == 0, res.stderr
    assert "drew an overview" in res.stderr and "--expand" in res.stderr
    text = out.read_text()
    assert "backward block 1/4" in text and "backward block 2/4<" not in text  # opened into operators
    assert "GPU stream 7" in text and "CPU thread 2 (autograd)" in text
    res = run_cli("visualize", str(prefix), "--dot", "-o", str(out), "--expand", "(")
    assert res.exit_code == 1 and "Traceback" not in res.stderr
    res = run_cli("visualize", str(prefix), "--dot", "-o", str(out), "--expand", "x", "--collapse", "op")
    assert res.exit_code == 1 and "--expand opens boxes of the overview" in res.stderr

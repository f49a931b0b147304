"""The PyTorch converter on real GPU runs (tests/data/gpu/, recorded on an H200: SOURCES.md there).

Every expected count comes from the Kineto file itself (its kernel, memcpy, memset and runtime
events), and every expected time from its ProfilerStep annotations, so nothing here is tuned to
the converter's output.
"""

from __future__ import annotations

import gzip
from collections import Counter, defaultdict
from pathlib import Path

import orjson
import pytest

from chakra.converters.pytorch import Options, convert_files
from chakra.io import read_trace
from chakra.schema import CollectiveType, NodeType
from chakra.schema.attrs import get_attr
from chakra.sim import SimOptions, simulate

GPU = Path(__file__).resolve().parents[1] / "data" / "gpu"
SINGLE = ["fp32", "amp", "fused", "foreach", "cudagraph", "compile", "big-fp32", "big-amp", "big-fused", "big-foreach"]
ACTIVITY = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCH_CALLS = {"cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx"}
UNLIMITED = {"cpu": 0, "gpu": 0, "comm": 0}

_CACHE: dict[str, tuple] = {}


def _files(variant: str) -> list[tuple[Path, Path]]:
    d = GPU / variant
    if variant == "ddp2":
        return [(d / f"et.{r}.json.gz", d / f"kineto.{r}.json.gz") for r in (0, 1)]
    return [(d / "et.json.gz", d / "kineto.json.gz")]


def converted(variant: str, tmp_root: Path) -> tuple[list, list, list]:
    """(traces, summaries, Kineto events per rank), converted once per test session."""
    if variant not in _CACHE:
        pairs = _files(variant)
        # recorded (profiled) durations: replayed against the profiler's own steps
        summaries = convert_files(
            [e for e, _ in pairs], [k for _, k in pairs], tmp_root / variant, Options(overhead="keep")
        )
        traces = [read_trace(s["output"]) for s in summaries]
        events = [orjson.loads(gzip.decompress(k.read_bytes()))["traceEvents"] for _, k in pairs]
        _CACHE[variant] = (traces, summaries, events)
    return _CACHE[variant]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("gpu")


def is_device(n) -> bool:
    return n.type == NodeType.COMP_NODE and get_attr(n, "is_cpu_op") is False


def activity_nodes(trace) -> list:
    """Nodes made from Kineto GPU activities (queue nodes are the stream's wait, not activities)."""
    return [n for n in trace.nodes if is_device(n) and get_attr(n, "queue_of") is None]


def step_window_us(events) -> float:
    """From the first ProfilerStep's start to the last one's end (host annotations), µs."""
    steps = [e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    return max(e["ts"] + e["dur"] for e in steps) - min(e["ts"] for e in steps)


@pytest.mark.parametrize("variant", [*SINGLE, "ddp2"])
def test_every_gpu_activity_is_one_node_in_its_streams_order(variant, root):
    traces, summaries, events = converted(variant, root)
    for trace, ev in zip(traces, events):
        acts = [e for e in ev if e.get("cat") in ACTIVITY]
        nodes = activity_nodes(trace)
        # counts by kind, straight from the Kineto file
        assert Counter(e["cat"] for e in acts)["gpu_memcpy"] == sum(n.name.startswith("Memcpy") for n in nodes)
        assert Counter(e["cat"] for e in acts)["gpu_memset"] == sum(n.name.startswith("Memset") for n in nodes)
        assert Counter(e["name"] for e in acts) == Counter(n.name for n in nodes)
        # stream order: per stream, the nodes by start are Kineto's events by start, name for name
        by_stream: dict[int, list] = defaultdict(list)
        for e in acts:
            by_stream[e["args"]["stream"]].append(e)
        nodes_by_stream: dict[int, list] = defaultdict(list)
        for n in nodes:
            nodes_by_stream[get_attr(n, "stream")].append(n)
        assert set(by_stream) == set(nodes_by_stream)
        ids = trace.by_id()
        for s, evs in by_stream.items():
            evs.sort(key=lambda e: (e["ts"], e["ts"] + e["dur"]))
            ns = sorted(nodes_by_stream[s], key=lambda n: (n.start_time_micros, n.id))
            assert [e["name"] for e in evs] == [n.name for n in ns]
            # each follows the previous one on its stream (ctrl), directly or through its queue node
            on_stream = {n.id for n in ns}
            for i, n in enumerate(ns[1:], start=1):
                deps = set(n.ctrl_deps)
                deps |= {d for q in deps if get_attr(ids[q], "queue_of") is not None for d in ids[q].ctrl_deps}
                done = [p for p in ns[:i] if p.start_time_micros + p.duration_micros <= n.start_time_micros]
                if variant != "cudagraph":
                    assert ns[i - 1].id in deps, (s, n.name)
                else:  # replays overlap kernels (by a few ns, or more): one that had ended (µs)
                    assert deps & on_stream <= {p.id for p in done}, (s, n.name)


def _launch_records(ev) -> dict:
    """Kineto: kernel/memcpy/memset correlation -> the Record function id of the op whose runtime call launched it."""
    rf_by_ext = {e["args"]["External id"]: e["args"].get("Record function id") for e in ev if e.get("cat") == "cpu_op"}
    out = {}
    for e in ev:
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "External id" in e.get("args", {}):
            out[e["args"]["correlation"]] = rf_by_ext.get(e["args"]["External id"])
    return out


@pytest.mark.parametrize("variant", ["fp32", "amp", "fused", "compile", "big-fp32", "ddp2"])
def test_each_kernel_is_launched_by_the_op_of_its_runtime_call(variant, root):
    traces, summaries, events = converted(variant, root)
    for trace, s, ev in zip(traces, summaries, events):
        launched_by = _launch_records(ev)
        calls = Counter(e["name"] for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver"))
        kernels = [e for e in ev if e.get("cat") == "kernel"]
        # one launch call per kernel (torch.compile's Triton kernels: cuLaunchKernel)
        assert len(kernels) == sum(calls[c] for c in LAUNCH_CALLS)
        cats = Counter(e.get("cat") for e in ev)
        assert cats["gpu_memcpy"] == calls["cudaMemcpyAsync"] and cats["gpu_memset"] == calls["cudaMemsetAsync"]
        if variant == "compile":
            assert calls["cuLaunchKernel"] > 0
        assert s["gpu_ops_without_launcher"] == 0
        ids = trace.by_id()
        order = {}
        for e in ev:
            if e.get("cat") in ACTIVITY:
                order.setdefault((e["args"]["stream"], e["name"]), []).append(e)
        nodes: dict = defaultdict(list)
        for n in activity_nodes(trace):
            nodes[(get_attr(n, "stream"), n.name)].append(n)
        checked = 0
        for key, evs in order.items():
            evs.sort(key=lambda e: e["ts"])
            for e, n in zip(evs, sorted(nodes[key], key=lambda n: (n.start_time_micros, n.id))):
                launcher = ids[get_attr(n, "launcher")]
                assert get_attr(launcher, "rf_id") == launched_by[e["args"]["correlation"]]
                # the launch edge: from a host segment that started before the kernel did
                hosts = [ids[d] for d in n.data_deps if get_attr(ids[d], "is_cpu_op")]
                assert hosts and all(h.start_time_micros <= n.start_time_micros for h in hosts)
                checked += 1
        assert checked == len(activity_nodes(trace))


def test_cuda_graph_replays_are_attributed_to_the_ops_that_recorded_them(root):
    (trace,), (s,), (ev,) = converted("cudagraph", root)
    calls = sorted((e for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver")), key=lambda e: e["ts"])
    begin = next(e["ts"] for e in calls if e["name"] == "cudaStreamBeginCapture")
    end = next(e["ts"] for e in calls if e["name"] == "cudaStreamEndCapture")
    recorded = [e for e in calls if begin < e["ts"] < end and e["name"] in LAUNCH_CALLS]
    memsets = [e for e in calls if begin < e["ts"] < end and e["name"] == "cudaMemsetAsync"]
    launches = [e for e in calls if e["name"] == "cudaGraphLaunch"]
    replay_corr = {e["args"]["correlation"] for e in launches}
    replayed = [e for e in ev if e.get("cat") in ACTIVITY and e["args"]["correlation"] in replay_corr]
    # three launches (capture step + 2 replays), each replaying every recorded kernel and memset
    assert len(launches) == 3
    assert len(replayed) == 3 * (len(recorded) + len(memsets)) == s["graph_ops_attributed"]
    assert s["graph_ops_unattributed"] == 0 and s["gpu_ops_without_launcher"] == 0
    # the k-th replayed kernel belongs to the op that made the k-th launch call of the capture
    launched_by = _launch_records(ev)
    want = [launched_by[e["args"]["correlation"]] for e in recorded]
    ids = trace.by_id()
    # Kineto times are µs from its base; the nodes' are absolute: the offset from ProfilerStep#1
    step1 = next(e for e in ev if e.get("cat") == "user_annotation" and e["name"] == "ProfilerStep#1")
    offset = next(n.start_time_micros for n in trace.nodes if n.name == "ProfilerStep#1") - step1["ts"]
    lo, hi = launches[1]["ts"] + offset, step1["ts"] + step1["dur"] + offset  # the first pure replay
    replay = [
        n
        for n in activity_nodes(trace)
        if not n.name.startswith(("Memset", "Memcpy")) and lo <= n.start_time_micros <= hi
    ]
    replay.sort(key=lambda n: (n.start_time_micros, n.id))
    assert len(replay) == len(recorded)
    assert [get_attr(ids[get_attr(n, "launcher")], "rf_id") for n in replay] == want
    streams = {e["args"]["stream"] for e in replayed}
    assert {get_attr(n, "stream") for n in replay} == streams


@pytest.mark.parametrize("variant", ["fp32", "big-fp32", "amp"])
def test_item_copy_and_synchronize_are_waits(variant, root):
    (trace,), _, (ev,) = converted(variant, root)
    # loss.item() (and GradScaler's inf check): DtoH memcpys, each waited for by the host
    dtoh = [n for n in activity_nodes(trace) if n.name.startswith("Memcpy DtoH")]
    assert len(dtoh) == sum(1 for e in ev if e.get("cat") == "gpu_memcpy" and "DtoH" in e["name"]) >= 2
    for copy in dtoh:
        waits = [n for n in trace.nodes if get_attr(n, "is_cpu_op") and copy.id in n.data_deps]
        assert waits, copy.name
        # the host resumes when the copy ended (never before)
        assert all(copy.start_time_micros + copy.duration_micros <= w.start_time_micros for w in waits)
    assert "aten::_local_scalar_dense" in {
        n.name for n in trace.nodes if get_attr(n, "is_cpu_op") and {c.id for c in dtoh} & set(n.data_deps)
    }
    # no host segment waits on a plain kernel: the CPU never blocked on one (the sync calls came
    # after the last kernel of the step had ended, behind the item() copy)
    kernels = {n.id for n in activity_nodes(trace) if not n.name.startswith(("Memcpy", "Memset"))}
    assert not [n for n in trace.nodes if get_attr(n, "is_cpu_op") and kernels & set(n.data_deps)]


def test_ddp_over_gloo_on_cuda_gives_all_reduces_of_every_gradient(root):
    traces, summaries, events = converted("ddp2", root)
    import json

    params = json.loads((GPU / "ddp2" / "timing.json").read_text())["model"]["params"]
    for trace, ev in zip(traces, events):
        gloo = [e for e in ev if e.get("cat") == "user_annotation" and e["name"] == "gloo:all_reduce"]
        coll = [n for n in trace.nodes if n.type == NodeType.COMM_COLL_NODE]
        assert len(coll) == len(gloo) == 6  # 3 buckets x 2 steps
        assert {get_attr(n, "comm_type") for n in coll} == {CollectiveType.ALL_REDUCE}
        # two steps' fp32 gradients of every parameter
        assert sum(get_attr(n, "comm_size") for n in coll) == 2 * 4 * params


def test_roofline_numbers_on_gemm_kernels_match_the_model(root):
    import json

    (trace,), _, _ = converted("fp32", root)
    m = json.loads((GPU / "fp32" / "timing.json").read_text())["model"]
    tokens, d, layers, vocab = m["batch"] * m["seq"], m["d"], m["layers"], m["vocab"]
    ids = trace.by_id()
    flops: Counter = Counter()
    for n in activity_nodes(trace):
        flops[ids[get_attr(n, "launcher")].name] += get_attr(n, "num_ops", 0) or 0
    linears = [(d, 3 * d), (d, d), (d, 4 * d), (4 * d, d)]  # qkv, proj, fc1, fc2 (with bias: addmm)
    addmm = sum(2 * tokens * k * n + tokens * n for k, n in linears) * layers
    head = 2 * tokens * d * vocab  # no bias: mm
    steps = 2
    assert flops["aten::addmm"] == steps * addmm
    # forward head + backward (input and weight gradients of every linear), shared out by kernel duration
    backward = 2 * (2 * tokens * sum(k * n for k, n in linears) * layers + head)
    assert flops["aten::mm"] == pytest.approx(steps * (head + backward), rel=1e-9)


REPLAY = [*SINGLE, "ddp2"]


@pytest.mark.parametrize("variant", REPLAY)
def test_replay_of_recorded_durations_gives_the_traced_steps(variant, root):
    """Replay = `chakra simulate` with every node its recorded duration (collectives too): the
    simulated finish against the Kineto window from the first ProfilerStep's start to the last
    one's end, within 2%. Single-GPU runs use the default one-CPU-task/one-GPU-task slots (the
    ASTRA-sim model); ddp2's gloo threads ran beside autograd's on other cores, so it replays with
    unlimited slots."""
    traces, _, events = converted(variant, root)
    # `chakra simulate`'s defaults: one CPU and one GPU task at a time per rank (ASTRA-sim's model)
    options = SimOptions(comm_mode="replay", slots=UNLIMITED) if variant == "ddp2" else SimOptions()
    assert variant == "ddp2" or options.slot_caps() == {"cpu": 1, "gpu": 1, "comm": 1}
    res = simulate(traces, None, None, options=options)
    for r, ev in enumerate(events):
        measured = step_window_us(ev)
        got = res.ranks[r].finish_ns / 1e3
        assert abs(got - measured) / measured < 0.02, (variant, r, got, measured)

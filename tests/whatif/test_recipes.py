"""What-if recipes on hand-built traces with exact expected times, plus the CLI."""

from __future__ import annotations

import json

import pytest

from chakra.errors import InputError
from chakra.io import read_traces, write_rank_traces
from chakra.schema import NodeType
from chakra.schema.attrs import get_attr
from chakra.sim import simulate
from chakra.sim.config import default_network
from chakra.trace import Trace, make_node
from chakra.whatif.recipes import (
    _sim_allreduce_ns,
    amp,
    apply_recipe,
    calibrate_network,
    data_parallel,
    ddp_buckets,
    drop_comm,
    fused_optimizer,
    grad_bytes,
    network_bandwidth,
    predict,
    scale_compute,
    share_cores,
)

from .helpers import T, allreduce, cpu, gpu


def finish(traces, network=None):
    return simulate(traces, network).finish_ns


def amp_trace():
    # CPU a (10) launches gemm (30 µs, 100 FLOP/B) -> relu (20 µs, 0.1 FLOP/B) -> odd (6 µs, no attrs)
    return Trace(
        nodes=[
            cpu(0, "a", 10),
            gpu(1, "sgemm_128x64", 30, [0], num_ops=1000, tensor_size=10),
            gpu(2, "relu_kernel", 20, [1], num_ops=10, tensor_size=100),
            gpu(3, "mystery", 6, [2]),
        ],
        rank=0,
    )


def test_amp_divides_compute_bound_by_3_memory_bound_by_2_and_leaves_cpu():
    base = [amp_trace()]
    assert finish(base) == 66_000
    w = amp(base)
    durs = {n.name: n.duration_micros for n in w.traces[0].nodes}
    assert durs == {"a": 10, "sgemm_128x64": 10, "relu_kernel": 10, "mystery": 6}
    assert finish(w.traces) == 36_000
    assert base[0].nodes[1].duration_micros == 30  # input untouched
    # host time is left as recorded, and the notes say what that leaves out
    assert any("autocast's own host work" in n and "upper bound" in n for n in w.notes)


def test_amp_classifies_by_name_without_flops():
    tr = Trace(nodes=[gpu(0, "volta_sgemm", 30), gpu(1, "elementwise_kernel", 20, [0])], rank=0)
    w = amp([tr])
    assert [n.duration_micros for n in w.traces[0].nodes] == [10, 10]


def optimizer_trace():
    """fwd(10) | Optimizer.step (2, inclusive 40) > m1 (10, flops) gap(8) m2 (12, flops) book (8) | next (5)."""
    spec = [
        ("fwd", 10, {}),
        ("Optimizer.step#Adam.step", 2, {"inclusive_dur": 40}),
        ("aten::lerp_", 10, {"num_ops": 5}),
        ("gap", 8, {}),
        ("aten::addcdiv_", 12, {"num_ops": 5}),
        ("aten::item", 8, {}),
        ("next", 5, {}),
    ]
    nodes = []
    t = 0
    for i, (name, d, attrs) in enumerate(spec):
        n = cpu(i, name, d, [i - 1] if i else (), **attrs)
        n.start_time_micros = t
        t += d
        nodes.append(n)
    return Trace(nodes=nodes, rank=0)


def test_fused_optimizer_keeps_only_the_compute_of_the_step():
    base = [optimizer_trace()]
    assert finish(base) == 55_000
    w = fused_optimizer(base)
    names = [n.name for n in w.traces[0].nodes]
    assert names == ["fwd", "fused_optimizer_step", "next"]
    assert finish(w.traces) == (10 + 10 + 12 + 5) * 1000
    with pytest.raises(InputError, match="no optimizer step"):
        fused_optimizer(base, pattern="SGD")


def test_fused_optimizer_bytes_model_drops_the_per_call_overhead():
    # Three steps of three ops each: duration = 4 µs per call + 1 µs per 100 bytes.
    nodes, t, i = [], 0, 0
    for _step in range(3):
        anchor = cpu(i, "Optimizer.step#Adam.step", 1, [i - 1] if i else (), inclusive_dur=60)
        anchor.start_time_micros = t
        nodes.append(anchor)
        t, i = t + 1, i + 1
        for size in (600, 1200, 2400):
            n = cpu(i, "aten::mul_", 4 + size // 100, [i - 1], num_ops=size // 4, tensor_size=size)
            n.start_time_micros = t
            nodes.append(n)
            t, i = t + n.duration_micros, i + 1
        t += 10
    w = fused_optimizer([Trace(nodes=nodes, rank=0)], cost="bytes")
    assert [n.duration_micros for n in w.traces[0].nodes] == [4 + 42] * 3
    assert "bytes model: 4 µs" in w.notes[0]


def test_fused_optimizer_on_device_kernels_keeps_one_launch():
    nodes = [
        cpu(0, "Optimizer.step", 1, inclusive_dur=20),
        cpu(1, "launch1", 4, [0]),
        gpu(2, "adam_kernel_1", 6, [1]),
        cpu(3, "launch2", 6, [1]),
        gpu(4, "adam_kernel_2", 6, [3, 2]),
        cpu(5, "after", 3, [3, 4]),
    ]
    for n, s in zip(nodes, (0, 1, 5, 5, 11, 30)):
        n.start_time_micros = s
    w = fused_optimizer([Trace(nodes=nodes, rank=0)])
    by = {n.name: n for n in w.traces[0].nodes}
    assert by["fused_optimizer_kernel"].duration_micros == 12
    assert by["fused_optimizer_launch"].duration_micros == 6  # median of the launching CPU tasks (4, 6)
    assert finish(w.traces) == (6 + 12 + 3) * 1000


def test_scale_compute_and_drop_comm():
    tr = Trace(nodes=[cpu(0, "a", 10), allreduce(1, 1 << 20, [0]), cpu(2, "b", 30, [1])], rank=0)
    tr2 = Trace(nodes=[cpu(0, "a", 10), allreduce(1, 1 << 20, [0]), cpu(2, "b", 30, [1])], rank=1)
    base = [tr, tr2]
    comm_ns = _sim_allreduce_ns(2, 1 << 20, 50.0, 500.0)
    assert finish(base) == 40_000 + comm_ns
    assert finish(scale_compute(base, factor=2).traces) == 20_000 + comm_ns
    d = drop_comm(base)
    assert all(n.type != NodeType.COMM_COLL_NODE for t in d.traces for n in t.nodes)
    assert finish(d.traces) == 40_000


def test_network_bandwidth_makes_a_faster_network():
    base = [Trace(nodes=[allreduce(0, 8 << 20)], rank=r) for r in range(4)]
    w = network_bandwidth(base, factor=2)
    assert w.network.bandwidth == [100.0]
    assert finish(w.traces, w.network) == finish(base, default_network(4).scaled(bandwidth=2))
    assert finish(w.traces, w.network) < finish(base)


def ddp_trace(numels=(1 << 18, 1 << 18, 1 << 18)):
    """fwd(10) then per parameter: backward op (10) + AccumulateGrad (2), then Optimizer.step (20)."""
    nodes = [cpu(0, "fwd", 10)]
    i = 1
    for numel in numels:
        nodes.append(cpu(i, "bwd", 10, [i - 1]))
        g = cpu(i + 1, "torch::autograd::AccumulateGrad", 2, [i])
        g.inputs.values = json.dumps([[7, 7, 0, numel, 4, "cpu"]])
        g.inputs.shapes = json.dumps([[numel]])
        nodes.append(g)
        i += 2
    nodes.append(cpu(i, "Optimizer.step#Adam.step", 20, [i - 1]))
    t = 0
    for n in nodes:
        n.start_time_micros = t
        t += n.duration_micros
    return Trace(nodes=nodes, rank=0)


def test_ddp_buckets_reproduce_the_recorded_pytorch_buckets():
    # Gradient sizes of the recorded MLP (8 x Linear(256,256) + Linear(256,10)) in backward order,
    # bucket_cap_mb=0.5: the DDP recording's all_reduce sizes were 536616 then 526336 bytes.
    sizes = [40, 10240] + [1024, 262144] * 8
    buckets = ddp_buckets(sizes, cap_bytes=int(0.5 * 2**20), first_cap_bytes=int(0.5 * 2**20))
    totals = [sum(sizes[i] for i in b) for b in buckets]
    assert totals[:4] == [536616, 526336, 526336, 526336]


def test_data_parallel_inserts_bucketed_allreduces_and_copies_ranks():
    base = [ddp_trace()]
    assert grad_bytes(base[0].nodes[2]) == 1 << 20
    w = data_parallel(base, ranks=4, bucket_mb=2, first_bucket_mb=1)
    assert len(w.traces) == 4 and [t.rank for t in w.traces] == [0, 1, 2, 3]
    colls = [n for n in w.traces[0].nodes if n.type == NodeType.COMM_COLL_NODE]
    assert [get_attr(n, "comm_size") for n in colls] == [1 << 20, 2 << 20]
    opt = next(n for n in w.traces[0].nodes if n.name.startswith("Optimizer"))
    assert {c.id for c in colls} <= set(opt.ctrl_deps)
    # Exact time: bucket 0 starts when its gradient is ready (t=22 µs), bucket 1 after the last
    # gradient (46 µs) and after bucket 0 (one collective at a time); the step waits for both.
    t0 = _sim_allreduce_ns(4, 1 << 20, 50.0, 500.0)
    t1 = _sim_allreduce_ns(4, 2 << 20, 50.0, 500.0)
    end_comm = max(46_000, 22_000 + t0) + t1
    assert finish(w.traces) == max(46_000, end_comm) + 20_000


def test_data_parallel_needs_one_rank_and_gradients():
    with pytest.raises(InputError):
        data_parallel([ddp_trace(), ddp_trace()], ranks=2)
    with pytest.raises(InputError, match="gradient"):
        data_parallel([Trace(nodes=[cpu(0, "x", 1)], rank=0)], ranks=2)


def test_calibrated_network_reproduces_measured_allreduce_times():
    measured = {s: 150e-6 + s * 2e-9 for s in (1 << 14, 1 << 16, 1 << 18, 1 << 20)}
    net, report = calibrate_network(measured, 2)
    for row in report["sizes"]:
        assert row["simulated_us"] == pytest.approx(row["measured_us"], rel=0.01)
    assert net.npus_count == [2]


def test_predict_reports_per_step_breakdown():
    base = [amp_trace()]
    rep = predict(base, amp(base), steps=2)
    assert rep["baseline"]["step_ns"] == 33_000 and rep["predicted"]["step_ns"] == 18_000
    b = rep["predicted"]["breakdown_per_step_ns"]
    assert b["cpu_only"] == 5_000 and b["gpu_only"] == 13_000 and b["exposed_comm"] == 0


def test_apply_recipe_checks_names_and_required_options():
    with pytest.raises(InputError, match="unknown recipe"):
        apply_recipe("turbo", [amp_trace()])
    with pytest.raises(InputError, match="--factor"):
        apply_recipe("scale-compute", [amp_trace()])


def test_whatif_cli_writes_traces_and_prints_prediction(tmp_path, run_cli):
    write_rank_traces(tmp_path / "one", [ddp_trace()])
    out = tmp_path / "dp2"
    res = run_cli(
        "whatif", str(tmp_path / "one"), "--recipe", "data-parallel", "--ranks", "2",
        "--bucket-mb", "2", "-o", str(out), "--json",
    )  # fmt: skip
    assert res.exit_code == 0, res.stderr
    rep = json.loads(res.stdout)
    assert rep["baseline"]["step_ns"] == 66_000
    assert rep["predicted"]["step_ns"] > rep["baseline"]["step_ns"]
    assert len(read_traces([str(out)])) == 2
    bad = run_cli("whatif", str(tmp_path / "one"), "--recipe", "scale-compute")
    assert bad.exit_code == 1 and "--factor" in bad.stderr
    net = run_cli(
        "whatif", str(out), "--recipe", "network-bandwidth", "--factor", "4", "-o", str(tmp_path / "fast"), "-q"
    )
    assert net.exit_code == 0, net.stderr
    assert "bandwidth: [ 200 ]" in (tmp_path / "fast.network.yml").read_text()


def test_make_node_helper_types():
    n = make_node(1, "x", T.COMP_NODE)
    assert n.type == T.COMP_NODE


def test_data_parallel_bucket_copies_cost_comes_from_the_traces_copies():
    base = ddp_trace()
    # Copies in the trace: 2 µs per call + 1 µs per 1000 bytes of tensor_size.
    extra = [
        cpu(100 + k, "aten::copy_", 2 + 3 * s // 1000, tensor_size=3 * s) for k, s in enumerate((1000, 4000, 8000))
    ]
    for n in extra:
        n.start_time_micros = 1000
    base.nodes.extend(extra)
    w = data_parallel([base], ranks=2, bucket_mb=2, first_bucket_mb=1, bucket_copies=True)
    nodes = w.traces[0].nodes
    to_bucket = [n for n in nodes if n.name == "ddp: copy grad to bucket"]
    back = [n for n in nodes if n.name == "ddp: copy bucket to grads"]
    per_grad = 2 + 3 * (1 << 20) / 1000
    # Into the bucket: DDP's division by the world size (an aten::mul) plus the copy, two passes.
    assert [n.duration_micros for n in to_bucket] == [round(2 * per_grad)] * 3
    assert [n.duration_micros for n in back] == [round(per_grad), round(2 * per_grad)]
    colls = [n for n in nodes if n.type == NodeType.COMM_COLL_NODE]
    # Each all-reduce waits for its last gradient's copy; each copy back waits for its all-reduce.
    assert all(len(c.ctrl_deps) == 1 and c.ctrl_deps[0] in {n.id for n in to_bucket} for c in colls)
    assert [list(n.ctrl_deps) for n in back] == [[colls[0].id], [colls[1].id]]
    assert "bucket copies" in w.notes[1]


def test_shared_cores_serialize_collectives_and_slow_compute():
    # 4 ranks on 2 cores: CPU tasks x2 (fwd 20, bwd 20, grad 4, optimizer 40 µs) and each all-reduce
    # blocks the CPU chain after its gradient: bucket 0 (1 MiB) after the first gradient at 44 µs,
    # the rest of the backward (48 µs) after it, bucket 1 (2 MiB) after the last gradient, then the step.
    w = data_parallel([ddp_trace()], ranks=4, bucket_mb=2, first_bucket_mb=1, cores=2)
    t0 = _sim_allreduce_ns(4, 1 << 20, 50.0, 500.0)
    t1 = _sim_allreduce_ns(4, 2 << 20, 50.0, 500.0)
    assert finish(w.traces) == 44_000 + t0 + 48_000 + t1 + 40_000
    assert "CPU tasks x2" in w.notes[-1] and "2 collective(s) serialized" in w.notes[-1]
    # 2 ranks on 2 cores: compute keeps its speed, the collectives still cannot overlap it.
    w2 = data_parallel([ddp_trace()], ranks=2, bucket_mb=2, first_bucket_mb=1, cores=2)
    u0 = _sim_allreduce_ns(2, 1 << 20, 50.0, 500.0)
    u1 = _sim_allreduce_ns(2, 2 << 20, 50.0, 500.0)
    assert finish(w2.traces) == 22_000 + u0 + 24_000 + u1 + 20_000
    # Dedicated cores (2 ranks x 2 threads on 4 cores): the overlapping model, unchanged.
    free = data_parallel([ddp_trace()], ranks=2, bucket_mb=2, first_bucket_mb=1, cores=4)
    plain = data_parallel([ddp_trace()], ranks=2, bucket_mb=2, first_bucket_mb=1)
    assert finish(free.traces) == finish(plain.traces) < finish(w2.traces)
    assert "no CPU sharing" in free.notes[-1]
    with pytest.raises(InputError, match="--cores"):
        share_cores([], ranks=2, cores=0)


def test_shared_cores_with_a_measured_cpu_fraction_of_the_collectives():
    # 4 ranks on 2 cores, half of each all-reduce is CPU work: a CPU task of 0.5 x its simulated
    # time follows each collective's issuing gradient in the CPU chain; the collective overlaps.
    net = default_network(4)
    w = data_parallel(
        [ddp_trace()], ranks=4, bucket_mb=2, first_bucket_mb=1, cores=2, comm_cpu_fraction=0.5, network=net
    )
    t0 = _sim_allreduce_ns(4, 1 << 20, 50.0, 500.0)
    t1 = _sim_allreduce_ns(4, 2 << 20, 50.0, 500.0)
    w0, w1 = round(0.5 * t0 / 1000) * 1000, round(0.5 * t1 / 1000) * 1000
    work = [n for n in w.traces[0].nodes if n.name.startswith("gloo: collective CPU work")]
    assert [n.duration_micros * 1000 for n in work] == [w0, w1]
    # Bucket 0 issued at 44 µs; backward resumes after its CPU share and ends 48 µs later;
    # bucket 1 starts when both its gradient and the comm slot are free; the step waits for it
    # and for the CPU chain (which carries bucket 1's CPU share).
    end1 = max(92_000 + w0, 44_000 + t0) + t1
    assert finish(w.traces) == max(end1, 92_000 + w0 + w1) + 40_000
    assert "CPU share (50%" in w.notes[-1]
    with pytest.raises(InputError, match="needs the network"):
        data_parallel([ddp_trace()], ranks=4, cores=2, comm_cpu_fraction=0.5)
    with pytest.raises(InputError, match="within"):
        data_parallel([ddp_trace()], ranks=4, cores=2, comm_cpu_fraction=1.5, network=net)

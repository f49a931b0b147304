"""The profiler-cost pass reads what it needs of every node once (overhead._Facts): from the
converter's own serialized bytes where they settle it, else from the nodes. Both ways must agree
on real recordings (CPU, DDP, GPU with kernels and queues), and the bytes must settle every node
the converter writes (else the fast way is never taken)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from chakra.converters.kineto.trace import load_kineto
from chakra.converters.pytorch import driver
from chakra.converters.pytorch.et import load_et
from chakra.converters.pytorch.overhead import _Facts, remove_overhead
from chakra.io import TraceWriter

GPU = Path(__file__).resolve().parents[1] / "data" / "gpu"


def _fresh(folder: Path, tmp: Path) -> list[tuple[object, list[bytes]]]:
    """Each rank converted and read back, as `convert pytorch` holds one: (trace, serialized nodes)."""
    ets = sorted(folder.glob("et*.json*"))
    kins = sorted(p for p in folder.glob("kineto*.json*") if "only" not in p.name)
    out = []
    for ri in driver.gather_inputs(ets, kins):
        et, kf = load_et(ri.et, ri.et_raw, keep_io=True), load_kineto(ri.kineto, ri.kineto_raw)
        path = str(tmp / f"rank{ri.rank}.et")
        with TraceWriter(path) as w:
            driver.convert_rank(et, kf, ri.rank, driver.Options(), writer=w)
        out.append(driver._read_back(path, ri.rank))
    return out


def _same(a: _Facts, b: _Facts) -> bool:
    return (a.cpu, a.gap_of, a.profiled, a.recorded) == (b.cpu, b.gap_of, b.profiled, b.recorded) and [
        type(x) for x in a.cpu
    ] == [type(x) for x in b.cpu]


@pytest.mark.parametrize("folder", ["pytorch/mlp", "pytorch/ddp2", "record/mlp-fused"])
def test_bytes_and_nodes_agree_on_cpu_recordings(samples_dir, tmp_path, folder):
    for trace, messages in _fresh(samples_dir / folder, tmp_path):
        from_nodes, from_bytes = _Facts(trace), _Facts(trace, messages)
        assert _same(from_nodes, from_bytes)
        assert any(g for g in from_bytes.gap_of) and True in from_bytes.cpu
        probe = _Facts(trace)
        assert all(probe._from_bytes(i, m) for i, m in enumerate(messages))  # the bytes settled every node


def test_bytes_and_nodes_agree_on_a_gpu_recording(tmp_path):
    for name in ("et.json.gz", "kineto.json.gz"):
        (tmp_path / name.replace(".json", ".0.json")).write_bytes(gzip.decompress((GPU / "fp32" / name).read_bytes()))
    (trace, messages), = _fresh(tmp_path, tmp_path)  # fmt: skip
    from_bytes = _Facts(trace, messages)
    assert _same(_Facts(trace), from_bytes)
    assert False in from_bytes.cpu  # kernels and GPU queue nodes: is_cpu_op false


def test_after_a_pass_the_nodes_are_read(samples_dir, tmp_path):
    """Once a pass marked nodes with profiled_dur_us, their bytes no longer settle them."""
    (trace, _), = _fresh(samples_dir / "pytorch" / "mlp", tmp_path)  # fmt: skip
    remove_overhead([trace])
    messages = [n.SerializeToString() for n in trace.nodes]
    from_bytes = _Facts(trace, messages)
    assert _same(_Facts(trace), from_bytes)
    assert sum(p is not None for p in from_bytes.profiled) > 100


@pytest.mark.parametrize("overhead", ["estimate", "remove"])
def test_the_reports_replays_leave_the_output_alone(samples_dir, tmp_path, overhead):
    """`overhead_replay` replays the profiled trace for the report; a rank held in memory until it
    is written must still be written with its converted durations."""
    d = samples_dir / "pytorch" / "mlp"
    ets, kins = [d / "et.0.json"], [d / "kineto.0.json"]
    plain = driver.convert_files(ets, kins, tmp_path / "a", driver.Options(overhead=overhead))
    replayed = driver.convert_files(ets, kins, tmp_path / "b", driver.Options(overhead=overhead, overhead_replay=True))
    assert Path(plain[0]["output"]).read_bytes() == Path(replayed[0]["output"]).read_bytes()
    report = replayed[0]["profiler_overhead"]
    assert report["replay_profiled_ns"] > report["predicted_step_ns"]

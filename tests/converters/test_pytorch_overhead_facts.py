"""The profiler-cost pass reads what it needs of every node once (overhead._Facts): from the
converter's own serialized bytes where they settle it, else from the nodes. Both ways must agree
on real recordings (CPU, DDP, GPU with kernels and queues), and the bytes must settle every node
the converter writes (else the fast way is never taken)."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from chakra.converters.kineto.trace import load_kineto
from chakra.converters.pytorch import driver
from chakra.converters.pytorch.columns import RankColumns
from chakra.converters.pytorch.et import load_et
from chakra.converters.pytorch.overhead import _carried_rounding, _Facts, column_facts, remove_overhead
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


def _columns(folder: Path, tmp: Path) -> list[tuple[object, list[bytes], RankColumns]]:
    """Each rank converted twice, as `_fresh` (streamed, read back) and into the converter's columns."""
    out = []
    for (trace, messages), ri in zip(_fresh(folder, tmp), driver.gather_inputs(*_inputs(folder))):
        cols = RankColumns()
        et, kf = load_et(ri.et, ri.et_raw, keep_io=True), load_kineto(ri.kineto, ri.kineto_raw)
        driver.convert_rank(et, kf, ri.rank, driver.Options(), columns=cols)
        out.append((trace, messages, cols))
    return out


def _inputs(folder: Path) -> tuple[list[Path], list[Path]]:
    return sorted(folder.glob("et*.json*")), sorted(p for p in folder.glob("kineto*.json*") if "only" not in p.name)


@pytest.mark.parametrize("folder", ["pytorch/mlp", "record/mlp-fused", "gpu-fp32"])
def test_columns_hold_what_the_written_nodes_say(samples_dir, tmp_path, folder):
    """The converter's columns (what the profiler-cost passes read when a rank is held in memory)
    agree with the nodes it writes, field by field, and frame to the same bytes."""
    if folder == "gpu-fp32":
        src = tmp_path / "src"
        src.mkdir()
        for name in ("et.json.gz", "kineto.json.gz"):
            (src / name.replace(".json", ".0.json")).write_bytes(gzip.decompress((GPU / "fp32" / name).read_bytes()))
        folder_path = src
    else:
        folder_path = samples_dir / folder
    for trace, messages, cols in _columns(folder_path, tmp_path):
        nodes = trace.nodes
        assert len(cols) == len(nodes) > 1000
        assert cols.ids == [n.id for n in nodes] and cols.names == [n.name for n in nodes]
        assert cols.types == [n.type for n in nodes] and cols.durations == [n.duration_micros for n in nodes]
        assert [list(d) for d in cols.data] == [list(n.data_deps) for n in nodes]
        assert [list(c) for c in cols.ctrl] == [list(n.ctrl_deps) for n in nodes]
        from_nodes, from_columns = _Facts(trace), _Facts(None, columns=cols)
        assert _same(from_nodes, from_columns)
        assert from_nodes.recorded_steps_ns() == from_columns.recorded_steps_ns() != []
        # framed as the stream frames them (each message after its length prefix)
        assert [m[m.index(next(b for b in m if b < 0x80)) + 1 :] for m in messages] == cols.messages()


def test_a_held_rank_writes_what_a_read_back_one_does(samples_dir, tmp_path):
    """Removing the profiler's cost on the columns gives the bytes the same passes give on nodes
    read back from the streamed file (both ways, fitted to the recording's manifest)."""
    d = samples_dir / "pytorch" / "mlp"
    (trace, _), = _fresh(d, tmp_path)  # fmt: skip
    ri, = driver.gather_inputs(*_inputs(d))  # fmt: skip
    cols = RankColumns()
    driver.convert_rank(load_et(ri.et, ri.et_raw), load_kineto(ri.kineto, ri.kineto_raw), 0, columns=cols)
    held = driver.Trace(metadata=cols.metadata, nodes=[], rank=0)
    for step in (None, 7e6):
        a = remove_overhead([trace], step)
        b = remove_overhead([held], step, facts=[column_facts(cols)])
        assert a.as_dict() == b.as_dict()
    assert any(p is not None for p in cols.profiled)
    path = tmp_path / "held.et"
    path.write_bytes(b"")
    cols.write(str(path))
    nodes_path = tmp_path / "nodes.et"
    with TraceWriter(nodes_path) as w:
        w.write_metadata(trace.metadata)
        w.write_nodes(trace.nodes)
    assert path.read_bytes() == nodes_path.read_bytes()


def _rounded_one_by_one(exacts: list[float]) -> list[int]:
    carry, out = 0.0, []
    for exact in exacts:
        exact += carry
        new = round(exact)
        carry = exact - new
        out.append(new)
    return out


@pytest.mark.parametrize("zero_share", [0.0, 0.6, 0.95, 1.0])
def test_carried_rounding_over_the_nonzero_values_only_gives_the_same_durations(zero_share):
    """The fit rounds each host duration with the error carried from the one before; where most
    are 0 it runs over the others only. Halves (ties to even), -0.0 and big values included."""
    rng = np.random.default_rng(7)
    n = 20000
    values = rng.random(n) * rng.choice([1.0, 40.0, 3e5], n) + rng.choice([0.0, 0.5, 0.25], n)
    values[rng.random(n) < zero_share] = 0.0
    values[::997] = -0.0
    values[5::331] = 2.5
    assert _carried_rounding(values) == _rounded_one_by_one(values.tolist())

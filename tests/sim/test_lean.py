"""The lean path (chakra/sim/lean.py) gives what the numpy path gives, to the byte.

A small job is indexed, checked and compiled in plain Python into `array`s so that `chakra
simulate` never imports numpy; a large one (or any job once numpy is imported, as in this test
process) uses numpy. Here both paths are forced on the same real inputs (ASTRA-sim's own sample
workloads and configs, converted PyTorch recordings, generated multi-dimensional steps, and
edited copies that reach the odd corners: ids out of order, absent and self dependencies,
duplicate ids, roofline timing) and everything they produce is compared: every column of the
index, every compiled array of every rank, every rank's finish and the whole `--json` output of
the command, or the one-line error.
"""

from __future__ import annotations

import json
import shutil
from array import array
from pathlib import Path

import numpy as np
import pytest

import chakra.sim.lean
import chakra.sim.loading
from chakra.feeder.table import NodeTable, table_from_messages
from chakra.io import read_trace, read_traces, write_trace
from chakra.schema import NodeType
from chakra.sim import simulate
from chakra.sim.compiler import RankEngine
from chakra.sim.config import default_system, load_system
from chakra.sim.twins import file_messages
from chakra.trace import make_node
from tests.sim.conftest import generate_transformer, write_system

AS = "astrasim"
EX = f"{AS}/examples"
# (trace prefix, network, system) under tests/data/samples, as ASTRA-sim's run scripts pair them
NET, SYS = f"{EX}/network/analytical", f"{EX}/system"
ASTRA_CASES = {
    "all_reduce_rt": (f"{AS}/all_reduce_8npus_1MB/all_reduce", f"{AS}/configs_rt_template/network_cfg.yml",
                      f"{AS}/configs_rt_template/system_cfg.json"),
    "all_gather_16": (f"{EX}/workload/microbenchmarks/all_gather/16npus_1MB/all_gather",
                      f"{NET}/Ring_16npus.yml", f"{SYS}/native_collectives/Ring_4chunks.json"),
    "reduce_scatter_4": (f"{EX}/workload/microbenchmarks/reduce_scatter/4npus_1MB/reduce_scatter",
                         f"{NET}/Ring_4npus.yml", f"{SYS}/native_collectives/Ring_4chunks.json"),
    "hgx": (f"{EX}/workload/microbenchmarks/all_reduce/8npus_1MB/all_reduce",
            f"{NET}/HGX-H100-validated.yml", f"{SYS}/native_collectives/HGX-H100-validated.json"),
    "custom_ring": (f"{AS}/custom_ring_allreduce_8npus_1MB/custom_allreduce", f"{NET}/Ring_8npus.yml",
                    f"{SYS}/custom_collectives/custom_collective.json"),
}  # fmt: skip
# PyTorch recordings converted as a user does: collectives, data parallel, memory nodes, pipeline
# sends/receives, expert all-to-alls (per-peer sizes)
PYTORCH = ("mlp", "ddp2", "ddp2mem", "collectives2", "pipe1f1b4", "moe4")


@pytest.fixture
def force(monkeypatch):
    """force(True): every job lean; force(False): every job with numpy."""

    def set_path(lean: bool) -> None:
        budget = (lambda: 1 << 62) if lean else (lambda: 0)
        monkeypatch.setattr(chakra.sim.loading, "lean_budget", budget)
        monkeypatch.setattr(chakra.sim.lean, "lean_budget", budget)

    yield set_path
    # a command refused after its ASTRA-sim checks framed the files leaves them framed for a
    # simulation that never came (harmless in its own process; not for the tests after these)
    chakra.sim.loading.forget_framed()


@pytest.fixture(scope="module")
def converted(samples_dir, tmp_path_factory) -> dict[str, Path]:
    import chakra.converters.pytorch as pytorch

    out = tmp_path_factory.mktemp("lean_pt")
    prefixes = {}
    for name in PYTORCH:
        folder = samples_dir / "pytorch" / name
        inputs = sorted(folder.glob("et.*.json*")) + sorted(folder.glob("kineto.*.json*"))
        pytorch.convert(inputs, out / name)
        prefixes[name] = out / name
    return prefixes


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("lean_gen")
    return {
        "3d": generate_transformer(out / "3d", "--dp", "2", "--tp", "2", "--pp", "2", "--batch", "4", "--layers", "2",
                                   "--microbatches", "2"),
        "dp4": generate_transformer(out / "dp4", "--dp", "4", "--batch", "4", "--layers", "1", "--microbatches", "1"),
    }  # fmt: skip


def _rank_files(prefix: Path) -> list[Path]:
    return sorted(prefix.parent.glob(f"{prefix.name}.*.et"), key=lambda p: int(p.name.split(".")[-2]))


def _columns(table: NodeTable) -> dict:
    """Every field of a table, arrays as (item size, values) so the two paths compare exactly."""
    out = {}
    for name, value in vars(table).items():
        if isinstance(value, array):
            out[name] = (value.itemsize, value.tolist())
        elif isinstance(value, np.ndarray):
            out[name] = (value.dtype.itemsize, value.tolist())
        else:
            out[name] = value
    return out


def _compiled(e: RankEngine) -> dict:
    """Every compiled array and attribute of an engine, as plain values."""

    def plain(v):
        return v.tolist() if isinstance(v, (array, np.ndarray)) else v

    names = ("ids", "kind", "slot", "delay", "ptr", "cidx", "info", "gpu_sum", "n", "replayed", "shareable")
    got = {name: plain(getattr(e, name)) for name in names}
    got.update(static=e.static, warnings=e.warnings, peers=e.peers, path=e.path, names=e.names)
    return got


def _both(build):
    """build(lean) on both paths: (lean result, numpy result)."""
    return build(True), build(False)


def _tables_and_engines(files: list[Path], system) -> None:
    for path in files:
        messages = file_messages(path)
        assert messages is not None, path
        lean, full = _both(
            lambda lean, m=messages, p=path: table_from_messages(p, m, names=True, missing_deps="drop", lean=lean)[1]
        )
        assert isinstance(lean.ids, array) and isinstance(full.ids, np.ndarray)
        assert _columns(lean) == _columns(full), path
        rank = int(path.name.split(".")[-2])
        for comm_mode in ("model", "replay"):
            for compat in (True, False):
                engines = [
                    RankEngine(rank, t, system=system, comm_mode=comm_mode, compat=compat, names=True)
                    for t in (lean, full)
                ]
                assert isinstance(engines[0].ids, array)
                assert _compiled(engines[0]) == _compiled(engines[1]), (path, comm_mode, compat)


def _cli_both(run_cli, force, *args: str):
    """`chakra simulate ARGS --json` on both paths: (exit code, stdout, stderr) each."""
    out = []
    for lean in (True, False):
        force(lean)
        res = run_cli("simulate", *args, "--json", "-q")
        out.append((res.exit_code, res.stdout, res.stderr))
    return out


@pytest.mark.parametrize("case", sorted(ASTRA_CASES))
@pytest.mark.parametrize("congestion", ["aware", "unaware"])
def test_astrasim_samples(samples_dir, run_cli, force, case, congestion):
    prefix, network, system = (samples_dir / p for p in ASTRA_CASES[case])
    _tables_and_engines(_rank_files(prefix), load_system(system))
    lean, full = _cli_both(run_cli, force, str(prefix), "--network", str(network), "--system", str(system),
                           "--congestion", congestion)  # fmt: skip
    assert lean == full
    assert lean[0] == 0 and json.loads(lean[1])["ranks"], lean


@pytest.mark.parametrize("name", PYTORCH)
def test_converted_pytorch_samples(converted, run_cli, force, name, tmp_path):
    prefix = converted[name]
    system = write_system(tmp_path / "roof.json", roofline_enabled=1, peak_perf=100, local_mem_bw=1000)
    _tables_and_engines(_rank_files(prefix), load_system(system))
    for extra in ([], ["--comm", "replay"], ["--system", str(system)], ["--corrected"], ["--astra-sim-breakdown"]):
        lean, full = _cli_both(run_cli, force, str(prefix), *extra)
        assert lean == full, extra
        assert lean[0] == 0, lean
    # node times too (what `--log` and the step figures are made of), from the files and from
    # traces in memory (`simulate([Trace, ...])`, indexed by `table_from_nodes`)
    times = []
    for lean in (True, False):
        force(lean)
        for source in (str(prefix), read_traces([prefix])):
            res = simulate(source, record_nodes=True)
            times.append((res.node_times, {r: v.finish_ns for r, v in res.ranks.items()}, res.to_json()))
    assert times[0] == times[2] and times[1] == times[3]
    assert times[0][1] == times[1][1]  # files and memory agree on the finishes


@pytest.mark.parametrize("shape", ["3d", "dp4"])
def test_generated_steps(generated, run_cli, force, shape, tmp_path):
    prefix = generated[shape]
    system = write_system(tmp_path / "roof.json", roofline_enabled=1, peak_perf=100, local_mem_bw=1000)
    _tables_and_engines(_rank_files(prefix), load_system(system))
    for extra in ([], ["--system", str(system)], ["--no-fold"], ["--congestion", "unaware"]):
        lean, full = _cli_both(run_cli, force, str(prefix), *extra)
        assert lean == full, extra
        assert lean[0] == 0, lean


def _edited(src: Path, dst: Path, edit) -> Path:
    """Copies of a job's rank files, each rank's nodes passed through `edit(nodes)`."""
    dst.mkdir()
    for path in _rank_files(src):
        trace = read_trace(path)
        nodes = list(trace.nodes)
        edit(nodes)
        del trace.nodes[:]
        trace.nodes.extend(nodes)
        write_trace(dst / path.name.replace(src.name, "e"), trace)
    for extra in src.parent.glob(f"{src.name}.comm_groups.json"):
        shutil.copy(extra, dst / "e.comm_groups.json")
    return dst / "e"


def _reverse(nodes) -> None:
    nodes.reverse()  # ids descending in the file: rows are reordered by id


def _renumber(nodes) -> None:
    # ids scattered and out of order (dependencies follow): another sort order, gaps
    new = {n.id: (n.id * 7919) % 100_003 + 1 for n in nodes}
    for n in nodes:
        n.id = new[n.id]
        n.data_deps[:] = [new[d] for d in n.data_deps]
        n.ctrl_deps[:] = [new[d] for d in n.ctrl_deps]
    nodes.sort(key=lambda n: (n.id % 5, n.id))


def _absent_parents(nodes) -> None:
    for n in nodes[1::3]:
        n.data_deps.append(10**9 + n.id)  # dropped with --missing-deps drop, refused otherwise


def _both_kinds(nodes) -> None:
    # the same parent as data and control dependency, and ctrl-only parents
    for a, b in zip(nodes, nodes[1:]):
        b.ctrl_deps.append(a.id)
        if b.id % 2:
            b.data_deps.append(a.id)


def _metadata_memory_and_cpu(nodes) -> None:
    # nodes the converted samples lack: a METADATA node (ASTRA-sim aborts on it: a warning),
    # local and remote memory loads after the first node, and CPU work
    top = max(n.id for n in nodes)
    first = nodes[0].id
    nodes.append(make_node(top + 1, "meta", NodeType.METADATA_NODE))
    for k, loc in enumerate(("local", "remote")):
        attrs = {"tensor_size": 1 << (20 + k), "tensor_loc": loc}
        nodes.append(make_node(top + 2 + k, f"load_{loc}", NodeType.MEM_LOAD_NODE, data_deps=[first], attrs=attrs))
    nodes.append(make_node(top + 4, "host", NodeType.COMP_NODE, duration_micros=7, ctrl_deps=[first],
                           attrs={"is_cpu_op": True}))  # fmt: skip


@pytest.mark.parametrize("edit", [_reverse, _renumber, _absent_parents, _both_kinds, _metadata_memory_and_cpu])
def test_edited_traces(converted, generated, run_cli, force, tmp_path, edit):
    for name, src in (("ddp2", converted["ddp2"]), ("3d", generated["3d"])):
        prefix = _edited(src, tmp_path / f"{name}_{edit.__name__}", edit)
        _tables_and_engines(_rank_files(prefix), default_system())
        memory = tmp_path / "per_npu.json"  # astra-memory-analytical's per-NPU expansion (docs/astra-sim.md §2.4)
        memory.write_text('{"memory-type": "PER_NPU_MEMORY_EXPANSION", "remote-mem-latency": 500, "remote-mem-bw": 50}')
        for extra in ([], ["--missing-deps", "drop"], ["--comm", "replay", "--missing-deps", "drop"]):
            extra = [*extra, "--memory", str(memory)]
            lean, full = _cli_both(run_cli, force, str(prefix), *extra)
            assert lean == full, (name, extra)
            refused = edit is _absent_parents and "drop" not in extra  # an error unless dropped
            assert lean[0] == (1 if refused else 0), lean
            if edit is _metadata_memory_and_cpu and "replay" not in extra:
                out = json.loads(lean[1])
                assert any("METADATA" in w for w in out["warnings"]), out["warnings"]
                assert all(r["mem_ns"] > 0 for r in out["ranks"].values())


def _self_dependency(nodes) -> None:
    nodes[len(nodes) // 2].data_deps.append(nodes[len(nodes) // 2].id)


def _duplicate_ids(nodes) -> None:
    nodes[-1].id = nodes[0].id


@pytest.mark.parametrize("edit", [_self_dependency, _duplicate_ids, _absent_parents])
def test_the_same_one_line_errors(converted, run_cli, force, tmp_path, edit):
    prefix = _edited(converted["ddp2"], tmp_path / "bad", edit)
    lean, full = _cli_both(run_cli, force, str(prefix))
    assert lean == full
    assert lean[0] == 1 and lean[2].count("\n") == 1 and "Traceback" not in lean[2], lean


def test_a_small_job_is_lean_and_a_large_one_is_not(samples_dir, monkeypatch):
    """The budget decides per job: within it every rank compiles lean; past it, numpy."""
    prefix = samples_dir / ASTRA_CASES["all_reduce_rt"][0]
    seen = []
    real = RankEngine.__init__

    def spy(self, rank, table, **kw):
        seen.append(isinstance(table.ids, array))
        real(self, rank, table, **kw)

    monkeypatch.setattr(RankEngine, "__init__", spy)
    monkeypatch.setattr(chakra.sim.loading, "lean_budget", lambda: chakra.sim.lean.LEAN_NODES)
    simulate(str(prefix))
    assert seen and all(seen)
    seen.clear()
    monkeypatch.setattr(chakra.sim.loading, "lean_budget", lambda: 0)
    simulate(str(prefix))
    assert seen and not any(seen)

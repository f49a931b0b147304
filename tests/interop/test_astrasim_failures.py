"""ASTRA-sim's failure kinds, on the real binaries (both backends): what the binary does on the
raw files, that `chakra simulate` says it (stderr and --json), and that the files `chakra export
astra-sim` writes run to the end there, with the finishes `chakra simulate` gives for them.

The inputs are truth-harness specs (tools/truthcases.py: traces built with the project's writer
to the Chakra schema, configs in ASTRA-sim's formats), each the smallest shape of one kind.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.truthcases import BINARY_NAMES, binary_args, simulate_args, write_case

from .astrasim import bin_dir, run

BIN, WHY = bin_dir()
pytestmark = pytest.mark.skipif(BIN is None, reason=WHY)

SYSTEM = {k: ["ring"] for k in ("all-reduce-implementation", "all-gather-implementation",
                                "reduce-scatter-implementation", "all-to-all-implementation")}  # fmt: skip
RING4 = {"topology": ["Ring"], "npus_count": [4], "bandwidth": [50], "latency": [500]}
FC4 = {"topology": ["FullyConnected"], "npus_count": [4], "bandwidth": [100], "latency": [300]}
MEMORY = {
    "PER_NPU_MEMORY_EXPANSION": {"memory-type": "PER_NPU_MEMORY_EXPANSION", "remote-mem-latency": 100,
                                 "remote-mem-bw": 64},
    "MEMORY_POOL": {"memory-type": "MEMORY_POOL", "remote-mem-latency": 20, "remote-mem-bw": 256},
}  # fmt: skip


def _spec(name: str, backend: str, network: dict, nodes: list, **kw) -> dict:
    return {"name": f"failures/{backend}/{name}", "cls": "failures", "backend": backend, "network": network,
            "system": {**SYSTEM, **kw.pop("system", {})}, "nodes": nodes, **kw}  # fmt: skip


def _binary(spec: dict, paths: dict, cwd: Path) -> tuple[dict[int, int], str]:
    return run([str(BIN / BINARY_NAMES[spec["backend"]]), *binary_args(spec, paths)], cwd)


def _simulate(run_cli, args: list[str]) -> tuple[dict, str]:
    res = run_cli(*args, "--json", "-q")
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    flat = " ".join(res.stderr.split())
    assert all(" ".join(w.split()) in flat for w in out["warnings"]), "a --json warning missing from stderr"
    return out, res.stderr


def _export_and_run(spec: dict, paths: dict, tmp_path: Path, run_cli) -> None:
    """The export's files run to the end on the binary, with `chakra simulate`'s finishes."""
    out = tmp_path / "x"
    res = run_cli("export", "astra-sim", str(paths["workload"]), "-o", str(out), "--backend", spec["backend"],
                  "--network", str(paths["network"]), "--system", str(paths["system"]),
                  "--memory", str(paths["memory"]), "--json", "-q")  # fmt: skip
    assert res.exit_code == 0, res.stderr
    summary = json.loads(res.stdout)
    assert summary["not_fixed"] == [], summary["not_fixed"]
    argv = summary["command"].split()
    argv[0] = str(BIN / argv[0])
    finished, log = run(argv, Path.cwd())
    n = summary["ranks"]
    assert sorted(finished) == list(range(n)), log[-2000:]
    sim, _ = _simulate(run_cli, ["simulate", *summary["simulate_command"].split()[2:]])
    assert {int(r): v["finish_ns"] for r, v in sim["ranks"].items()} == finished


@pytest.mark.parametrize("memory", sorted(MEMORY))
@pytest.mark.parametrize("backend", ["aware", "unaware"])
def test_memory_rank_ending_on_a_message(backend, memory, tmp_path, run_cli, monkeypatch):
    """Every rank loads, then passes a message round the ring and ends on it: the first rank to end
    aborts the binary in its statistics report; the export ends each rank on a compute node."""
    monkeypatch.chdir(tmp_path)
    ring = [[r, (r + 1) % 4] for r in range(4)]
    nodes = [
        {"id": 1, "op": "load", "size": 65536},
        {"id": 2, "op": "send", "pairs": ring, "size": 65536, "tag": 7, "deps": [1]},
        {"id": 3, "op": "recv", "pairs": ring, "size": 65536, "tag": 7, "deps": [1]},
    ]
    spec = _spec("mem-ends-on-p2p", backend, FC4, nodes, memory=MEMORY[memory])
    paths = write_case(spec, tmp_path / "raw")
    finished, log = _binary(spec, paths, tmp_path)
    assert "Only GPU and COMM types are supported for overlap extraction" in log
    assert "terminate called" in log and len(finished) < 4, log[-2000:]
    sim, _ = _simulate(run_cli, simulate_args(spec, paths))
    said = [w for w in sim["warnings"] if "memory-node-abort" in w]
    assert len(said) == 1 and "exit 134" in said[0], sim["warnings"]
    _export_and_run(spec, paths, tmp_path, run_cli)


@pytest.mark.parametrize("backend", ["aware", "unaware"])
def test_memory_rank_ending_on_compute_runs_to_the_end(backend, tmp_path, run_cli, monkeypatch):
    """The same throw, caught inside the event loop: every finish printed, exit 0; said as a log."""
    monkeypatch.chdir(tmp_path)
    nodes = [{"id": 1, "op": "load", "size": 65536}, {"id": 2, "op": "comp", "us": 3, "deps": [1]}]
    spec = _spec("mem-ends-on-compute", backend, FC4, nodes, memory=MEMORY["MEMORY_POOL"])
    paths = write_case(spec, tmp_path / "raw")
    finished, log = _binary(spec, paths, tmp_path)
    assert sorted(finished) == [0, 1, 2, 3] and "a callable is removed before call" in log
    sim, _ = _simulate(run_cli, simulate_args(spec, paths))
    assert {int(r): v["finish_ns"] for r, v in sim["ranks"].items()} == finished
    assert [w for w in sim["warnings"] if "memory-node-report" in w] and not [
        w for w in sim["warnings"] if "would fail" in w
    ], sim["warnings"]


@pytest.mark.parametrize("backend", ["aware", "unaware"])
def test_zero_endpoint_delay(backend, tmp_path, run_cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = _spec("ed0", backend, FC4, [{"id": 1, "op": "coll", "coll": "ALL_REDUCE", "size": 1 << 20}],
                 system={"endpoint-delay": 0})  # fmt: skip
    paths = write_case(spec, tmp_path / "raw")
    finished, log = _binary(spec, paths, tmp_path)
    assert "current_event_list.get_event_time() > current_time" in log and not finished, log[-2000:]
    sim, _ = _simulate(run_cli, simulate_args(spec, paths))
    assert any("zero-endpoint-delay" in w for w in sim["warnings"]), sim["warnings"]
    _export_and_run(spec, paths, tmp_path, run_cli)


@pytest.mark.parametrize("backend", ["aware", "unaware"])
def test_zero_ns_memory(backend, tmp_path, run_cli, monkeypatch):
    """A 0-byte store with latency 0 and no dependency, the first node issued at t=0; beside it,
    one issued when a message ends, which ASTRA-sim runs (and which is not called a failure)."""
    monkeypatch.chdir(tmp_path)
    ring = [[r, (r + 1) % 4] for r in range(4)]
    nodes = [
        {"id": 1, "op": "store", "size": 0},
        {"id": 2, "op": "send", "pairs": ring, "size": 4096, "tag": 5},
        {"id": 3, "op": "recv", "pairs": ring, "size": 4096, "tag": 5},
        {"id": 4, "op": "store", "size": 0, "deps": [3]},
        {"id": 5, "op": "comp", "us": 1, "deps": [4]},
    ]
    memory = {"memory-type": "PER_NPU_MEMORY_EXPANSION", "remote-mem-latency": 0, "remote-mem-bw": 64}
    spec = _spec("zero-ns-store", backend, FC4, nodes, memory=memory)
    paths = write_case(spec, tmp_path / "raw")
    finished, log = _binary(spec, paths, tmp_path)
    assert "current_event_list.get_event_time() > current_time" in log, log[-2000:]
    sim, _ = _simulate(run_cli, simulate_args(spec, paths))
    said = [w for w in sim["warnings"] if "zero-ns-memory" in w]
    assert len(said) == 1 and "node 1" in said[0] and "4 such" in said[0], sim["warnings"]
    _export_and_run(spec, paths, tmp_path, run_cli)


@pytest.mark.parametrize("backend", ["aware", "unaware"])
def test_tiny_all_reduce_on_halving_doubling(backend, tmp_path, run_cli, monkeypatch):
    """What `generate microbench --min-size 1` gives, on a halvingDoubling system."""
    monkeypatch.chdir(tmp_path)
    hd = {k: ["halvingDoubling"] for k in SYSTEM if "all-to-all" not in k}
    spec = _spec("hd-8B", backend, FC4, [{"id": 1, "op": "coll", "coll": "ALL_REDUCE", "size": 8}], system=hd)
    paths = write_case(spec, tmp_path / "raw")
    finished, log = _binary(spec, paths, tmp_path)
    assert "chunk_size > 0" in log and not finished, log[-2000:]
    sim, _ = _simulate(run_cli, simulate_args(spec, paths))
    assert any("sends 0 bytes" in w for w in sim["warnings"]), sim["warnings"]
    _export_and_run(spec, paths, tmp_path, run_cli)


def test_a_finding_the_export_cannot_fix_is_one_line_with_its_ranks(tmp_path, run_cli, monkeypatch):
    """A world collective after a subgroup collective only some ranks ran: never finishes; the
    export says so once, naming the ranks, not once per rank."""
    monkeypatch.chdir(tmp_path)
    nodes = [
        {"id": 1, "op": "coll", "coll": "ALL_REDUCE", "size": 65536, "pg": "1", "ranks": [0, 1]},
        {"id": 2, "op": "coll", "coll": "ALL_REDUCE", "size": 65536, "ctrl": [1]},
    ]
    spec = _spec("world-after-sub", "aware", RING4, nodes, groups={"1": [0, 1]})
    paths = write_case(spec, tmp_path / "raw")
    finished, log = _binary(spec, paths, tmp_path)
    assert not finished and "unreleased nodes" in log, log[-2000:]
    sim, _ = _simulate(run_cli, simulate_args(spec, paths))
    assert any("world-after-subgroups" in w for w in sim["warnings"]), sim["warnings"]
    res = run_cli("export", "astra-sim", str(paths["workload"]), "-o", str(tmp_path / "x"),
                  "--comm-group", str(paths["groups"]))  # fmt: skip
    assert res.exit_code == 0, res.stderr
    lines = [x for x in res.stderr.splitlines() if "not fixed" in x]
    assert len(lines) == 1 and "world-after-subgroups (rank 0, node 2)" in lines[0], res.stderr


@pytest.mark.parametrize("size", [1, 7, 50])
def test_tiny_first_message_on_the_aware_binary(size, tmp_path, run_cli, monkeypatch):
    """A send with no dependency of about a nanosecond on a 50 GB/s link: the aware binary aborts,
    the unaware one runs it; said for the aware one only, and the export's variant runs."""
    monkeypatch.chdir(tmp_path)
    nodes = [{"id": 1, "op": "send", "pairs": [[3, 0]], "size": size, "tag": 9},
             {"id": 2, "op": "recv", "pairs": [[3, 0]], "size": size, "tag": 9}]  # fmt: skip
    net = {"topology": ["Switch"], "npus_count": [4], "bandwidth": [50], "latency": [100]}
    for backend in ("aware", "unaware"):
        spec = _spec(f"tiny-{size}", backend, net, nodes)
        spec["nodes"] = [*nodes, {"id": 900, "op": "comp", "us": 0, "ranks": [1, 2]}]
        paths = write_case(spec, tmp_path / backend)
        finished, log = _binary(spec, paths, tmp_path)
        sim, _ = _simulate(run_cli, simulate_args(spec, paths))
        said = [w for w in sim["warnings"] if "tiny-first-message" in w]
        if backend == "unaware":
            assert sorted(finished) == [0, 1, 2, 3] and not said, (log[-1500:], said)
            continue
        assert "current_event_list.get_event_time() > current_time" in log and not finished, log[-1500:]
        assert len(said) == 1, sim["warnings"]
        _export_and_run(spec, paths, tmp_path / "aware", run_cli)

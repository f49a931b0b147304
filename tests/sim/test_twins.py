"""Rank files that differ from an earlier one only in communication attributes compile from it
(`chakra.sim.twins`), and the simulation is the one the same traces give in memory, where every
rank compiles on its own: per-rank results, every node's times, and the errors."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from chakra.errors import ChakraError
from chakra.io import read_trace, write_trace
from chakra.schema import NodeType
from chakra.sim import api, simulate
from chakra.sim.api import SimOptions
from chakra.sim.config import NetworkConfig
from tests.sim.conftest import generate_transformer

# dp 4 x tp 2 x pp 2: the ranks of a pipeline stage differ in their send/recv peers and groups
SHAPE = ("--dp", "4", "--tp", "2", "--pp", "2", "--batch", "8", "--layers", "2", "--microbatches", "2")
NET = NetworkConfig(["Ring", "Switch", "Switch"], [2, 2, 4], [50.0] * 3, [500.0] * 3)


def _prefix(tmp_path: Path) -> Path:
    return generate_transformer(tmp_path / "t", *SHAPE)


def _outcome(traces, prefix: Path, congestion: str = "unaware", **kw):
    """Per-rank results and node times, or the error's class and text."""
    groups = json.loads(Path(f"{prefix}.comm_groups.json").read_text())
    try:
        res = simulate(traces, NET, congestion=congestion, record_nodes=True, comm_groups=groups, **kw)
    except ChakraError as exc:
        return type(exc).__name__, str(exc)
    return res.ranks, res.node_times


def _in_memory(prefix: Path) -> list:
    return [read_trace(f"{prefix}.{r}.et", rank=r) for r in range(16)]


def _files(prefix: Path) -> list[str]:
    return [f"{prefix}.{r}.et" for r in range(16)]


@pytest.mark.parametrize("congestion", ["unaware", "aware"])
def test_stage_ranks_are_twins_and_simulate_as_in_memory(tmp_path, congestion):
    prefix = _prefix(tmp_path)
    opts = SimOptions(congestion="unaware")
    engines = api._compile(api._prepare(_files(prefix), NET, None, None, opts), opts)
    compiled = {id(e.static) for e in engines}
    assert len(compiled) == 2  # one compile per pipeline stage
    assert len({id(e.info) for e in engines}) == 16  # every rank its own peers and groups
    sends = [e.info[row] for e in engines for row in e.info if len(e.info[row]) == 3]
    assert len({s[0] for s in sends}) > 2  # the twins' sends name their own peers
    files = _outcome(_files(prefix), prefix, congestion)
    assert files == _outcome(_in_memory(prefix), prefix, congestion)
    assert not isinstance(files[0], str) and len(files[0]) == 16, files


def test_a_file_differing_elsewhere_compiles_whole(tmp_path):
    prefix = _prefix(tmp_path)
    t = read_trace(f"{prefix}.5.et", rank=5)
    comp = next(n for n in t.nodes if n.type == NodeType.COMP_NODE and n.duration_micros > 0)
    comp.duration_micros *= 7
    write_trace(f"{prefix}.5.et", t)
    opts = SimOptions(congestion="unaware")
    engines = api._compile(api._prepare(_files(prefix), NET, None, None, opts), opts)
    assert sum(e.static is engines[5].static for e in engines) == 1  # its own compile
    files = _outcome(_files(prefix), prefix)
    assert files == _outcome(_in_memory(prefix), prefix)
    assert files[0][5].compute_ns != files[0][4].compute_ns  # the longer node counts


def test_a_twin_send_naming_another_rank_is_refused_as_alone(tmp_path):
    prefix = _prefix(tmp_path)
    t = read_trace(f"{prefix}.6.et", rank=6)
    send = next(n for n in t.nodes if n.type == NodeType.COMM_SEND_NODE)
    next(a for a in send.attr if a.name == "comm_src").int32_val = 2
    write_trace(f"{prefix}.6.et", t)
    files = _outcome(_files(prefix), prefix)
    assert files[0] == "ConfigError" and "t.6.et" in files[1] and "comm_src=2" in files[1], files
    assert files == _outcome(_in_memory(prefix), prefix)


@pytest.mark.parametrize("seed", range(6))
def test_seeded_edits_of_rank_files_simulate_as_in_memory(tmp_path, seed):
    """Random edits of a few ranks' nodes (peers, tags, sizes, groups, durations, dependencies,
    other attributes): files and in-memory traces agree, result or error."""
    rng = random.Random(seed)
    prefix = _prefix(tmp_path)
    for r in rng.sample(range(16), 3):
        t = read_trace(f"{prefix}.{r}.et", rank=r)
        for _ in range(rng.randint(1, 3)):
            n = rng.choice(t.nodes)
            what = rng.choice(["attr", "attr", "duration", "deps"])
            if what == "duration":
                n.duration_micros += rng.randint(1, 50)
            elif what == "deps" and n.data_deps:
                del n.data_deps[-1]
            elif n.attr:
                a = rng.choice(list(n.attr))
                arm = a.WhichOneof("value")
                if arm in ("int32_val", "int64_val", "uint64_val"):
                    setattr(a, arm, max(0, getattr(a, arm) + rng.choice([-1, 1, 4096])))
                elif arm == "string_val":
                    a.string_val = rng.choice(["1", "2", "3", "9"])
                elif arm == "bool_val":
                    a.bool_val = not a.bool_val
        write_trace(f"{prefix}.{r}.et", t)
    assert _outcome(_files(prefix), prefix, missing_deps="drop") == _outcome(
        _in_memory(prefix), prefix, missing_deps="drop"
    )


def test_files_too_large_to_hold_are_hashed_in_blocks_and_still_shared(tmp_path, monkeypatch):
    """Past `WHOLE_FILE_BYTES` a rank file is not held whole: byte-identical SPMD ranks still share
    one engine (hashed in blocks, GlobalMetadata left out), near copies compile on their own."""
    from chakra.feeder import reading
    from chakra.sim import twins

    prefix = generate_transformer(tmp_path / "dp", "--dp", "8", "--batch", "8", "--layers", "1", "--microbatches", "1")
    net = NetworkConfig(["Switch"], [8], [50.0], [500.0])
    files = [f"{prefix}.{r}.et" for r in range(8)]
    small = simulate(files, net, congestion="unaware", record_nodes=True)
    monkeypatch.setattr(reading, "WHOLE_FILE_BYTES", 16)
    assert twins.node_messages(Path(files[0])) is None
    assert twins.file_digest(Path(files[0])) == twins.file_digest(Path(files[5]))
    opts = SimOptions(congestion="unaware")
    engines = api._compile(api._prepare(files, net, None, None, opts), opts)
    assert all(e.static is engines[0].static for e in engines)
    big = simulate(files, net, congestion="unaware", record_nodes=True)
    assert (big.ranks, big.node_times) == (small.ranks, small.node_times)


def test_fields_after_the_attributes_are_not_missed(tmp_path):
    """Encoders write a node's fields in number order, attributes (10) last, and the twins compare
    the bytes before them whole. A field written after the attributes (legal protobuf: the last
    value wins) must still be seen: here it turns one of rank 6's collectives into a compute node,
    so its group waits forever, in the files as in memory."""
    from chakra.io import encode_varint, iter_raw_messages
    from chakra.schema import pb

    prefix = _prefix(tmp_path)
    path = Path(f"{prefix}.6.et")
    payloads = [p for _, _, p in iter_raw_messages(path)]
    t = read_trace(path, rank=6)
    row = next(i for i, n in enumerate(t.nodes) if n.type == NodeType.COMM_COLL_NODE)
    payloads[1 + row] += bytes([3 << 3]) + encode_varint(pb.COMP_NODE)
    path.write_bytes(b"".join(encode_varint(len(p)) + p for p in payloads))
    assert read_trace(path, rank=6).nodes[row].type == NodeType.COMP_NODE
    files = _outcome(_files(prefix), prefix)
    assert files == _outcome(_in_memory(prefix), prefix)
    assert files[0] == "SimDeadlock", files

"""Memory of the commands that read a whole rank (validate, stats, analyze) on a long dependency chain.

They keep columns (ids, types, durations, edges: tens of bytes a node), never the decoded nodes
(about 400 bytes a node as protobuf objects), so their peak grows by a small multiple of the
file's bytes. The chain is written with the project's own writer; its expected figures follow from
how it is built (n nodes, each depending on the one before, durations 1..7 µs in turn).
"""

from __future__ import annotations

import orjson

from chakra.io import TraceWriter
from chakra.schema import NodeType, pb

from .faultlib import chakra

NODES = 200_000


def _chain(path, n: int) -> int:
    """An n-node chain; returns its critical path (every node is on it)."""
    with TraceWriter(path) as w:
        w.write_metadata(pb.GlobalMetadata(version="0.0.4"))
        for s in range(0, n, 20_000):
            w.write_nodes(
                [
                    pb.Node(
                        id=i,
                        name=f"op{i}",
                        type=NodeType.COMP_NODE,
                        duration_micros=1 + i % 7,
                        data_deps=[i - 1] if i else [],
                    )  # fmt: skip
                    for i in range(s, min(n, s + 20_000))
                ]
            )
    return sum(1 + i % 7 for i in range(n))


def test_validate_and_stats_memory_is_a_small_multiple_of_the_file(tmp_path):
    path = tmp_path / "chain.0.et"
    length = _chain(path, NODES)
    size_mb = path.stat().st_size / 2**20
    # what the interpreter, protobuf and numpy cost before any node is read
    base = chakra("validate", "--json", "-q", tmp_path / "absent.et").max_rss_mb

    run = chakra("validate", "--json", "-q", path, timeout=60)
    assert run.rc == 0, run.stderr[-2000:]
    report = orjson.loads(run.stdout)
    assert report["ok"] and report["nodes"] == NODES and report["error_count"] == 0
    assert run.max_rss_mb - base < 8 * size_mb + 20, (run.max_rss_mb, base, size_mb)

    run = chakra("stats", "--json", "-q", path, timeout=60)
    assert run.rc == 0, run.stderr[-2000:]
    rank = orjson.loads(run.stdout)["ranks"]["0"]
    assert rank["nodes"] == NODES and rank["critical_path_nodes"] == NODES
    assert rank["critical_path_us"] == length and rank["compute_us"] == length
    assert run.max_rss_mb - base < 8 * size_mb + 20, (run.max_rss_mb, base, size_mb)


def test_analyze_memory_is_a_small_multiple_of_the_file(tmp_path):
    """analyze keeps the same columns plus a schedule (two int64 a node) and the names as bytes,
    with the dependency-only schedule and with the simulator's."""
    path = tmp_path / "chain.0.et"
    length = _chain(path, NODES)
    size_mb = path.stat().st_size / 2**20
    base = chakra("validate", "--json", "-q", tmp_path / "absent.et").max_rss_mb
    for schedule, source in (("asap", "asap"), ("auto", "simulated")):
        run = chakra("analyze", "--schedule", schedule, "--json", "-q", path, timeout=60)
        assert run.rc == 0, run.stderr[-2000:]
        report = orjson.loads(run.stdout)
        assert report["schedule"] == source
        rank = report["ranks"]["0"]
        # one rank of compute nodes back to back: every node is on both paths, nothing overlaps
        assert rank["nodes"] == NODES and rank["breakdown"]["step"] == length * 1000
        assert rank["critical_path"]["nodes"] == NODES and rank["critical_path"]["length_ns"] == length * 1000
        assert rank["schedule_path"]["nodes"] == NODES and rank["schedule_path"]["busy_ns"] == length * 1000
        assert rank["critical_path"]["top_nodes"][0] == {"id": 6, "name": "op6", "ns": 7000, "share": 7 / length}
        assert run.max_rss_mb - base < 12 * size_mb + 20, (schedule, run.max_rss_mb, base, size_mb)

"""Streaming .et I/O on the real ASTRA-sim samples and on damaged files."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from chakra.errors import InputError, TraceFormatError
from chakra.io import TraceReader, TraceWriter, expand_trace_args, read_trace, read_traces, write_trace
from chakra.schema import CollectiveType, NodeType, pb
from chakra.schema.attrs import get_attr
from chakra.trace import Trace, make_metadata, make_node


def astrasim_prefix(samples_dir: Path) -> Path:
    return samples_dir / "astrasim" / "all_reduce_8npus_1MB" / "all_reduce"


def test_every_astrasim_sample_reads_back(samples_dir):
    traces = read_traces([astrasim_prefix(samples_dir)])
    assert [t.rank for t in traces] == list(range(8))
    for t in traces:
        assert t.metadata.version == "0.0.4"
        assert len(t.nodes) == 1
        node = t.nodes[0]
        assert node.type == NodeType.COMM_COLL_NODE
        assert get_attr(node, "comm_type") == CollectiveType.ALL_REDUCE
        assert get_attr(node, "comm_size") == 1048576
        assert get_attr(node, "is_cpu_op") is False


def test_shared_nodes_are_one_object_per_distinct_message(samples_dir, tmp_path):
    plain = read_traces([astrasim_prefix(samples_dir)])
    shared: dict = {}
    traces = read_traces([astrasim_prefix(samples_dir)], shared=shared)
    assert [t.nodes for t in traces] == [t.nodes for t in plain]
    assert len(shared) == 8  # ASTRA-sim's ranks number their one node by rank: 8 messages
    # the same file as two ranks: every node is one object for both
    for r in (0, 1):
        shutil.copy(astrasim_prefix(samples_dir).with_name("all_reduce.3.et"), tmp_path / f"x.{r}.et")
    twins = read_traces([tmp_path / "x"], shared=shared)
    assert twins[0].nodes[0] is twins[1].nodes[0] is traces[3].nodes[0] and len(shared) == 8
    # a damaged node is still found where it is
    path = tmp_path / "c.0.et"
    framed = next(iter(shared))
    path.write_bytes(b"\x00" + framed + b"\x03\x08\xff\xff")
    with pytest.raises(TraceFormatError) as info:
        read_trace(path, shared=shared)
    assert info.value.index == 2 and info.value.offset == 1 + len(framed)


def test_rewrite_of_sample_is_byte_identical(samples_dir, tmp_path):
    for src in sorted(astrasim_prefix(samples_dir).parent.glob("*.et")):
        dst = tmp_path / src.name
        write_trace(dst, read_trace(src))
        assert dst.read_bytes() == src.read_bytes()


def sample_trace(n: int = 50) -> Trace:
    t = Trace(metadata=make_metadata(schema="test"))
    for i in range(n):
        t.nodes.append(
            make_node(
                i,
                f"op{i}",
                NodeType.COMP_NODE,
                data_deps=[i - 1] if i else [],
                duration_micros=i,
                attrs={"is_cpu_op": bool(i % 2), "num_ops": i * 1000},
            )
        )
    return t


def test_gzip_written_by_suffix_and_detected_by_magic(tmp_path):
    t = sample_trace()
    write_trace(tmp_path / "a.0.et.gz", t)
    assert (tmp_path / "a.0.et.gz").read_bytes()[:2] == b"\x1f\x8b"
    # A gzipped stream under a plain .et name is still read (detection is by content).
    shutil.copy(tmp_path / "a.0.et.gz", tmp_path / "b.0.et")
    back = read_trace(tmp_path / "b.0.et")
    assert back.nodes == t.nodes and back.metadata == t.metadata


def test_zero_length_message_is_an_empty_node_not_eof(tmp_path):
    path = tmp_path / "z.0.et"
    with TraceWriter(path) as w:
        w.write_metadata(pb.GlobalMetadata())  # serializes to 0 bytes as well
        w.write_node(pb.Node(id=0))  # every field default: 0 bytes on the wire
        w.write_node(pb.Node(id=1, name="after"))
    data = path.read_bytes()
    assert data[:2] == b"\x00\x00"
    nodes = read_trace(path).nodes
    assert [(n.id, n.name) for n in nodes] == [(0, ""), (1, "after")]


def test_truncated_stream_names_file_index_and_offset(tmp_path):
    path = tmp_path / "t.0.et"
    write_trace(path, sample_trace(10))
    data = path.read_bytes()
    path.write_bytes(data[:-3])
    with pytest.raises(TraceFormatError) as info:
        read_trace(path)
    msg = str(info.value)
    assert str(path) in msg and "message 10" in msg and "byte offset" in msg and "truncated" in msg
    # The offset is where the last message's length prefix starts.
    assert info.value.offset == len(data) - _last_message_size(data)


def _last_message_size(data: bytes) -> int:
    pos, last = 0, 0
    while pos < len(data):
        length, start = data[pos], pos
        pos += 1
        assert length < 128
        pos += length
        last = pos - start
    return last


def test_garbage_bytes_are_an_error(tmp_path):
    path = tmp_path / "g.0.et"
    path.write_bytes(b"\x05hello\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff")
    with pytest.raises(TraceFormatError) as info:
        read_trace(path)
    assert str(path) in str(info.value)


def test_corrupt_node_payload(tmp_path):
    path = tmp_path / "c.0.et"
    path.write_bytes(b"\x00" + b"\x03\x08\xff\xff")  # metadata, then a node whose varint field never ends
    with pytest.raises(TraceFormatError) as info:
        read_trace(path)
    assert info.value.index == 1 and info.value.offset == 1


def test_writer_leaves_nothing_on_failure(tmp_path):
    path = tmp_path / "w.0.et"
    with pytest.raises(RuntimeError), TraceWriter(path) as w:
        w.write_node(pb.Node(id=1))
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_prefix_expands_ranks_numerically(tmp_path):
    for r in (0, 1, 2, 10, 11):
        write_trace(tmp_path / f"p.{r}.et", sample_trace(2))
    (tmp_path / "p.notarank.et").write_bytes(b"")
    (tmp_path / "p.3.et").mkdir()  # not a rank file
    (tmp_path / "elsewhere.et").write_bytes((tmp_path / "p.2.et").read_bytes())
    (tmp_path / "p.12.et").symlink_to(tmp_path / "elsewhere.et")  # followed, as a file
    (tmp_path / "p.13.et").symlink_to(tmp_path / "gone.et")  # dangling: not a file
    pairs = expand_trace_args([tmp_path / "p"])
    assert [r for r, _ in pairs] == [0, 1, 2, 10, 11, 12]
    assert pairs[-1][1] == tmp_path / "p.12.et"
    assert [r for r, _ in expand_trace_args([tmp_path / "p.10.et"])] == [10]
    with pytest.raises(InputError):
        expand_trace_args([tmp_path / "missing"])


def test_streaming_reader_over_large_chunks(tmp_path):
    # More than one 8 MiB read chunk, with messages straddling chunk borders.
    t = Trace()
    big = "x" * 3000
    t.nodes = [make_node(i, big, NodeType.COMP_NODE, data_deps=[i - 1] if i else []) for i in range(6000)]
    path = tmp_path / "big.0.et"
    write_trace(path, t)
    assert path.stat().st_size > 16 << 20
    with TraceReader(path) as reader:
        ids = [n.id for n in reader]
    assert ids == list(range(6000))


def test_gzip_truncation_is_reported(tmp_path):
    path = tmp_path / "t.0.et.gz"
    write_trace(path, sample_trace(200))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceFormatError) as info:
        read_trace(path)
    assert str(path) in str(info.value)
    assert gzip  # the module under test is gzip-backed


def test_output_set_is_all_or_nothing_and_track_inputs_guards_inputs(tmp_path, samples_dir):
    import os

    import pytest

    from chakra.errors import OutputError
    from chakra.io import atomic_output, output_set, read_trace, track_inputs

    with pytest.raises(RuntimeError), output_set():
        for r in range(3):
            with atomic_output(tmp_path / f"x.{r}.txt", "w") as f:
                f.write("data")
        raise RuntimeError("rank 3 failed")
    assert list(tmp_path.iterdir()) == []  # neither the finished files nor their temp files
    with output_set():
        with output_set(), atomic_output(tmp_path / "a.txt", "w") as f:  # a nested set joins the outer one
            f.write("a")
        assert not (tmp_path / "a.txt").exists()
    assert (tmp_path / "a.txt").read_text() == "a"
    # An input of the running command, under another spelling (a hard link), is never an output.
    src = tmp_path / "in.0.et"
    src.write_bytes((samples_dir / "astrasim" / "all_reduce_8npus_1MB" / "all_reduce.0.et").read_bytes())
    os.link(src, tmp_path / "alias.et")
    with track_inputs():
        read_trace(src)
        with pytest.raises(OutputError, match="also an input"), atomic_output(tmp_path / "alias.et") as f:
            f.write(b"x")
    assert read_trace(src).nodes

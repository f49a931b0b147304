"""ETFeeder: dependency order (data + ctrl), official API, lazy decoding, and error reports."""

from __future__ import annotations

import pytest

from chakra.errors import TraceFormatError
from chakra.feeder import ETFeeder, FeederError
from chakra.io import write_trace
from chakra.schema import NodeType
from chakra.schema.attrs import get_attr
from chakra.trace import Trace, make_node

COMP = NodeType.COMP_NODE


def diamond() -> Trace:
    """5 <- 1 (data), 3 <- 1 (ctrl), 2 <- 3 (data) and 5 (ctrl); 4 independent; ids out of file order."""
    t = Trace(rank=0)
    t.nodes = [
        make_node(5, "b", COMP, data_deps=[1]),
        make_node(1, "root", COMP),
        make_node(3, "a", COMP, ctrl_deps=[1]),
        make_node(2, "join", COMP, data_deps=[3], ctrl_deps=[5]),
        make_node(4, "free", COMP),
    ]
    return t


def drain(feeder: ETFeeder) -> list[int]:
    order = []
    while feeder.has_nodes_to_issue():
        node = feeder.get_next_issuable_node()
        assert node is not None
        order.append(node.id)
        feeder.free_children_nodes(node.id)
    return order


def test_astrasim_sample_single_collective(samples_dir):
    path = samples_dir / "astrasim/all_reduce_8npus_1MB/all_reduce.5.et"
    with ETFeeder(path) as f:
        assert f.metadata.version == "0.0.4"
        nodes = list(f)
    assert [n.id for n in nodes] == [5]  # node id = rank in ASTRA-sim's microbenchmarks
    assert nodes[0].type == NodeType.COMM_COLL_NODE
    assert get_attr(nodes[0], "comm_size") == 1048576


def test_order_honours_data_and_ctrl_deps_smallest_id_first():
    f = ETFeeder(diamond())
    assert f.ready_ids() == [1, 4]
    assert drain(f) == [1, 3, 4, 5, 2]


def test_child_waits_for_every_parent_of_both_kinds():
    f = ETFeeder(diamond())
    assert f.get_next_issuable_node().id == 1
    assert f.get_next_issuable_node().id == 4
    assert f.get_next_issuable_node() is None  # 1 and 4 outstanding, nothing else ready
    f.free_children_nodes(1)
    assert f.ready_ids() == [3, 5]
    f.free_children_nodes(4)
    assert f.get_next_issuable_node().id == 3
    f.free_children_nodes(3)
    assert f.ready_ids() == [5]  # join (2) still waits on its ctrl parent 5
    assert f.get_next_issuable_node().id == 5
    f.free_children_nodes(5)
    assert f.get_next_issuable_node().id == 2
    f.free_children_nodes(2)
    assert not f.has_nodes_to_issue()


def test_push_back_and_lookup():
    f = ETFeeder(diamond())
    first = f.get_next_issuable_node()
    f.push_back_issuable_node(first.id)
    assert f.get_next_issuable_node().id == first.id
    assert f.lookup_node(2).name == "join"
    with pytest.raises(FeederError, match="no node with id 99"):
        f.lookup_node(99)
    with pytest.raises(FeederError, match="not issued"):
        f.push_back_issuable_node(2)
    with pytest.raises(FeederError, match="never issued"):
        f.free_children_nodes(3)


def test_fifo_order_is_order_of_becoming_ready():
    t = diamond()
    t.nodes.append(make_node(0, "late_in_file", COMP))
    assert drain(ETFeeder(t)) == [0, 1, 3, 4, 5, 2]
    # fifo: initially ready nodes in file order (1, 4, 0), then 1's children as they were freed
    assert drain(ETFeeder(t, order="fifo")) == [1, 4, 0, 3, 5, 2]


def test_file_forms_agree(tmp_path):
    t = diamond()
    paths = [write_trace(tmp_path / "d.0.et", t), write_trace(tmp_path / "g.0.et.gz", t)]
    paths.append(write_trace(tmp_path / "j.0.json", t))
    for p in paths:
        with ETFeeder(p) as f:
            assert drain(f) == [1, 3, 4, 5, 2], p


def test_lazy_decoding_keeps_at_most_cache_size_nodes(tmp_path):
    t = Trace(rank=0)
    t.nodes = [make_node(i, f"n{i}", COMP, data_deps=[i - 1] if i else []) for i in range(500)]
    path = write_trace(tmp_path / "chain.0.et", t)
    f = ETFeeder(path, cache_size=8)
    seen = 0
    for node in f:
        assert node.name == f"n{node.id}"
        seen += 1
        assert len(f._cache) <= 8
    assert seen == 500
    assert f.lookup_node(123).name == "n123"  # any node, after the fact, by offset


def test_missing_dependency_names_both_ids(tmp_path):
    t = Trace(rank=0)
    t.nodes = [make_node(1, "a", COMP), make_node(2, "b", COMP, ctrl_deps=[77])]
    path = write_trace(tmp_path / "m.0.et", t)
    with pytest.raises(TraceFormatError, match=r"node 2 -> missing 77"):
        ETFeeder(path)
    f = ETFeeder(path, missing_deps="ignore")
    assert drain(f) == [1, 2]


def test_cycle_is_reported_with_node_ids():
    t = Trace(rank=0)
    t.nodes = [
        make_node(1, "ok", COMP),
        make_node(2, "x", COMP, data_deps=[1, 3]),
        make_node(3, "y", COMP, data_deps=[2]),
    ]
    f = ETFeeder(t)
    assert f.get_next_issuable_node().id == 1
    f.free_children_nodes(1)
    with pytest.raises(FeederError, match=r"node 2 waits on \[3\].*node 3 waits on \[2\]"):
        f.get_next_issuable_node()
    t.nodes = [make_node(2, "x", COMP, data_deps=[3]), make_node(3, "y", COMP, data_deps=[2])]
    with pytest.raises(FeederError, match="no dependency-free node"):
        ETFeeder(t)


def test_duplicate_ids_rejected():
    t = Trace(rank=0)
    t.nodes = [make_node(1, "a", COMP), make_node(1, "b", COMP)]
    with pytest.raises(TraceFormatError, match="duplicate node id"):
        ETFeeder(t)


def test_official_json_sample(samples_dir):
    f = ETFeeder(samples_dir / "et/official_small_chakra.0.json")
    order = drain(f)
    assert sorted(order) == [216, 217, 430, 432, 433, 435, 541]
    pos = {nid: i for i, nid in enumerate(order)}
    assert pos[216] < pos[217] < pos[435] and pos[432] < pos[433]


def test_index_is_compact_and_payloads_stay_on_disk(tmp_path):
    """Bounded memory: the index costs a few tens of bytes per node, decoded nodes are capped."""
    from chakra.io import TraceWriter
    from chakra.trace import make_metadata

    n = 50_000
    path = tmp_path / "big.0.et"
    with TraceWriter(path) as w:
        w.write_metadata(make_metadata())
        w.write_nodes(
            make_node(i, f"op_{i}", COMP, data_deps=[i - 4] if i >= 4 else [], duration_micros=1) for i in range(n)
        )
    f = ETFeeder(path, cache_size=100)
    t = f.table
    index_bytes = sum(a.nbytes for a in (t.ids, t.types, t.dep_count, t.child_ptr, t.child_idx, t.payload_off))
    index_bytes += t.payload_len.nbytes
    assert index_bytes / n < 48
    assert t.names is None and t.sparse == {}
    count = 0
    while f.has_nodes_to_issue():
        ids = [f.get_next_issuable_id() for _ in range(len(f.ready_ids()))]
        for nid in ids:
            f.free_children_nodes(nid)
        count += len(ids)
    assert count == n
    assert f.lookup_node(n - 1).name == f"op_{n - 1}" and len(f._cache) <= 100


def test_feeder_and_simulator_read_a_rank_through_one_path(samples_dir, tmp_path, run_cli):
    """The feeder and the simulator read ranks through `chakra.feeder.reading.read_rank`: on a
    converted recording (plain and gzip) and its JSON form, the feeder's index holds the nodes, the
    dependencies and the payload offsets the simulator's reading finds."""
    import gzip

    import numpy as np

    from chakra.feeder import reading
    from chakra.sim.loading import load_table

    d = samples_dir / "pytorch" / "ddp2"
    res = run_cli(
        "convert", "pytorch", str(d / "et.0.json"), "-k", str(d / "kineto.0.json"), "-o", str(tmp_path / "c"), "-q"
    )
    assert res.exit_code == 0, res.stderr
    plain = tmp_path / "c.0.et"
    packed = tmp_path / "z.0.et.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    sim = load_table(plain, False)
    sim_columns = ("is_cpu", "num_ops", "tensor_size")
    assert len(sim) > 100
    for path in (plain, packed):
        with ETFeeder(path, attrs=True) as f:
            for col in (*("ids", "types", "dur_us", "dep_count", "child_ptr", "child_idx"), *sim_columns):
                assert np.array_equal(getattr(f.table, col), getattr(sim, col)), (path, col)
            assert f.table.sparse == sim.sparse
            assert np.array_equal(f.table.payload_off, sim.payload_off)
            assert f.lookup_node(int(sim.ids[-1])).id == int(sim.ids[-1])  # decoded from the memory map
            tmp = f._tmp
            assert (tmp is not None) == (path == packed)  # gzip: a temporary copy to map
        assert tmp is None or not tmp.exists()  # removed on close
    assert reading.file_messages(packed) is None and reading.file_messages(plain)


def test_whole_files_are_framed_as_the_streaming_framer_frames_them(samples_dir, tmp_path, run_cli):
    """`file_messages` frames a small file in one loop (`reading._frame`) and hands anything unusual
    to `iter_payload_batches`: on a converted recording (messages of 128 bytes and more, multi-byte
    length prefixes), with empty messages, cut short, and with more empty messages than a trace
    holds, both give the same messages, or both refuse the file."""
    import io

    from chakra.feeder import reading
    from chakra.io import MAX_EMPTY_MESSAGES, iter_payload_batches

    d = samples_dir / "pytorch" / "ddp2"
    res = run_cli(
        "convert", "pytorch", str(d / "et.0.json"), "-k", str(d / "kineto.0.json"), "-o", str(tmp_path / "c"), "-q"
    )
    assert res.exit_code == 0, res.stderr
    data = (tmp_path / "c.0.et").read_bytes()

    def streamed(blob: bytes):
        try:
            return [m for _, _, batch in iter_payload_batches("x", io.BytesIO(blob)) for m in batch]
        except TraceFormatError:
            return None

    framed = reading._frame(data)
    assert framed == streamed(data) and any(m[0] >= 0x80 for m in framed)  # long messages among them
    assert reading.file_messages(tmp_path / "c.0.et") == framed
    for blob, ours in (
        (data + b"\x00\x00", True),  # two empty Node messages
        (data[:-3], False),  # the last message cut short
        (data + b"\x00" * (MAX_EMPTY_MESSAGES + 1), False),  # a run of zero bytes
    ):
        path = tmp_path / "odd.0.et"
        path.write_bytes(blob)
        assert (reading._frame(blob) is not None) == ours
        assert reading.file_messages(path) == streamed(blob)

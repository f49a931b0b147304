"""Validation finds what would break a replay, single-rank and across ranks."""

from __future__ import annotations

from chakra.io import read_traces
from chakra.schema import CollectiveType, NodeType, pb
from chakra.trace import Trace, make_metadata, make_node
from chakra.validate import validate_traces


def codes(report) -> set[str]:
    return {code for (_, code) in report.counts}


def coll(i, ctype, size, pg="0", deps=()):
    return make_node(
        i,
        f"c{i}",
        NodeType.COMM_COLL_NODE,
        data_deps=deps,
        attrs={"comm_type": int(ctype), "comm_size": size, "pg_name": pg, "is_cpu_op": False},
    )


def p2p(i, kind, src, dst, tag, size):
    return make_node(i, f"p{i}", kind, attrs={"comm_src": src, "comm_dst": dst, "comm_tag": tag, "comm_size": size})


def test_astrasim_samples_are_valid(samples_dir):
    report = validate_traces(read_traces([samples_dir / "astrasim" / "all_reduce_8npus_1MB" / "all_reduce"]))
    assert report.ok and report.warning_count == 0 and report.nodes == 8


def test_structural_errors():
    t = Trace(rank=0)
    t.nodes = [
        make_node(1, "a", NodeType.COMP_NODE),
        make_node(1, "dup", NodeType.COMP_NODE),
        make_node(2, "self", NodeType.COMP_NODE, ctrl_deps=[2]),
        make_node(3, "dangling", NodeType.COMP_NODE, data_deps=[99]),
        make_node(4, "invalid", NodeType.INVALID_NODE),
    ]
    report = validate_traces([t])
    assert {"duplicate-id", "self-dependency", "dangling-dependency", "bad-node-type"} <= codes(report)
    assert not report.ok


def test_cycle_is_found_iteratively_on_a_long_chain():
    n = 200_000
    t = Trace(rank=0)
    t.nodes = [make_node(i, "x", NodeType.COMP_NODE, data_deps=[(i - 1) % n]) for i in range(n)]
    report = validate_traces([t])
    assert "cycle" in codes(report)
    t.nodes[0].ClearField("data_deps")
    assert validate_traces([t]).ok


def test_comm_attribute_checks():
    t = Trace(rank=0)
    t.nodes = [
        make_node(0, "no type", NodeType.COMM_COLL_NODE, attrs={"comm_size": 4}),
        make_node(1, "send without peer", NodeType.COMM_SEND_NODE, attrs={"comm_size": 4}),
        p2p(2, NodeType.COMM_SEND_NODE, 1, 0, 0, 4),  # a send on rank 0 must have comm_src 0
    ]
    wrong_arm = pb.Node(id=3, name="wrong arm", type=NodeType.COMM_COLL_NODE)
    wrong_arm.attr.add(name="comm_type", int64_val=0)
    wrong_arm.attr.add(name="comm_size", uint64_val=8)  # the official feeder reads int64_val: gets 0
    t.nodes.append(wrong_arm)
    report = validate_traces([t])
    assert {"comm-missing-attr", "p2p-wrong-rank", "wrong-arm"} <= codes(report)
    assert report.counts[("error", "comm-missing-attr")] == 4  # comm_type; comm_src, comm_dst, comm_tag


def test_cross_rank_collective_sequences_and_p2p():
    md = make_metadata()
    r0 = Trace(md, [coll(0, CollectiveType.ALL_REDUCE, 1024), coll(1, CollectiveType.ALL_GATHER, 64, deps=[0])], rank=0)
    r1 = Trace(md, [coll(0, CollectiveType.ALL_REDUCE, 1024), coll(1, CollectiveType.ALL_GATHER, 64, deps=[0])], rank=1)
    assert validate_traces([r0, r1]).ok
    r1.nodes[1] = coll(1, CollectiveType.REDUCE_SCATTER, 64, deps=[0])
    assert "collective-order-mismatch" in codes(validate_traces([r0, r1]))
    r1.nodes[1] = coll(1, CollectiveType.ALL_GATHER, 32, deps=[0])
    assert "collective-size-mismatch" in codes(validate_traces([r0, r1]))
    r1.nodes.pop()
    assert "collective-count-mismatch" in codes(validate_traces([r0, r1]))

    s0 = Trace(md, [p2p(0, NodeType.COMM_SEND_NODE, 0, 1, 5, 100)], rank=0)
    s1 = Trace(md, [p2p(0, NodeType.COMM_RECV_NODE, 0, 1, 5, 100)], rank=1)
    assert validate_traces([s0, s1]).ok
    s1.nodes[0] = p2p(0, NodeType.COMM_RECV_NODE, 0, 1, 6, 100)
    assert {"unmatched-send", "unmatched-recv"} <= codes(validate_traces([s0, s1]))
    s1.nodes[0] = p2p(0, NodeType.COMM_RECV_NODE, 0, 1, 5, 99)
    assert "p2p-size-mismatch" in codes(validate_traces([s0, s1]))


def test_process_groups_from_metadata_node():
    # pg "1" holds ranks 0 and 2 only: rank 1 not issuing its collectives is fine.
    meta = make_node(
        100,
        "## process_group:init ##",
        NodeType.METADATA_NODE,
        inputs={"values": '["[{\\"pg_name\\": \\"1\\", \\"ranks\\": [0, 2]}]"]'},
    )
    traces = [
        Trace(make_metadata(), [meta, coll(0, CollectiveType.ALL_REDUCE, 8, pg="1")], rank=0),
        Trace(make_metadata(), [meta], rank=1),
        Trace(make_metadata(), [meta, coll(0, CollectiveType.ALL_REDUCE, 8, pg="1")], rank=2),
    ]
    assert validate_traces(traces).ok
    traces[2].nodes.pop()
    assert "collective-count-mismatch" in codes(validate_traces(traces))


def _comp(i, us, deps=()):
    return make_node(i, f"k{i}", NodeType.COMP_NODE, duration_micros=us, data_deps=deps, attrs={"is_cpu_op": False})


def test_collectives_a_rank_may_issue_in_either_order():
    """Two collectives of one group with no dependency path between them meet in whichever order
    each rank reaches them; here rank 0 reaches the all-gather first and rank 1 the all-reduce, so
    the simulator's rendezvous refuses the trace, and validate (same rule) must not call it OK."""
    from chakra.sim import simulate
    from chakra.sim.core import SimDeadlock

    md = make_metadata()
    ar, ag = CollectiveType.ALL_REDUCE, CollectiveType.ALL_GATHER
    r0 = Trace(md, [_comp(0, 10), coll(1, ar, 1024, deps=[0]), coll(2, ag, 64)], rank=0)
    r1 = Trace(md, [coll(1, ar, 1024), _comp(0, 10), coll(2, ag, 64, deps=[0])], rank=1)
    report = validate_traces([r0, r1])
    # rank 0 issues the all-gather at once and the all-reduce after 10 µs, or (0 µs) the other way
    # round; rank 1's all-reduce is a root, issued first on every run: only rank 0 is open
    assert report.counts[("error", "collective-order-open")] == 1
    assert report.errors[0].rank == 0
    try:
        simulate([r0, r1])
    except SimDeadlock as exc:
        assert "does not match" in str(exc)
    else:
        raise AssertionError("simulate accepted collectives met in different orders")
    # Ordered through another node (transitively): one order on every rank, OK.
    r0.nodes[2] = coll(2, ag, 64, deps=[1])
    r1.nodes[2] = coll(2, ag, 64, deps=[0, 1])
    assert validate_traces([r0, r1]).ok
    # Siblings (the same dependencies: ready at one instant, issued in file order) are one order.
    r0.nodes[2] = coll(2, ag, 64, deps=[0])
    assert "collective-order-open" not in codes(validate_traces([r0]))
    # Unordered but alike (same type and size), or on different groups: either order meets the same.
    for a, b in (((ar, 1024, "0"), (ar, 1024, "0")), ((ar, 1024, "0"), (ag, 64, "1"))):
        t = Trace(md, [coll(1, a[0], a[1], a[2]), coll(2, b[0], b[1], b[2])], rank=0)
        assert "collective-order-open" not in codes(validate_traces([t])), (a, b)

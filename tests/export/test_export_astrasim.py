"""`chakra export astra-sim`, `chakra validate --for astra-sim` and `--missing-deps`, on real traces.

These run without the ASTRA-sim binaries; tests/interop runs the results through them.
"""

from __future__ import annotations

import json
import tarfile
from collections import Counter
from pathlib import Path

import pytest

from chakra.graph import find_cycle
from chakra.io import read_trace, read_traces
from chakra.schema import CollectiveType, NodeType
from chakra.schema.attrs import get_attr, get_int
from chakra.validate import validate_traces


def _convert_pytorch(run_cli, samples_dir: Path, name: str, ranks: int, out: Path, *extra: str) -> Path:
    d = samples_dir / "pytorch" / name
    args = [str(d / f"et.{r}.json") for r in range(ranks)]
    for r in range(ranks):
        args += ["-k", str(d / f"kineto.{r}.json")]
    res = run_cli("convert", "pytorch", *args, "-o", str(out), "-q", *extra)
    assert res.exit_code == 0, res.stderr
    return out


@pytest.fixture(scope="module")
def feeder_trace(samples_dir, tmp_path_factory) -> Path:
    """The official feeder's test trace (written by the official converter)."""
    folder = tmp_path_factory.mktemp("feeder")
    with tarfile.open(samples_dir / "et" / "feeder_tests_trace.tar.gz") as tar:
        tar.extractall(folder, filter="data")
    return folder / "tests" / "data" / "chakra.0.et"


def _colls(trace) -> Counter:
    return Counter(
        CollectiveType(get_int(n, "comm_type")).name for n in trace.nodes if n.type == NodeType.COMM_COLL_NODE
    )


def test_collectives2_rewrites_every_unimplemented_collective(samples_dir, tmp_path, run_cli):
    raw = _convert_pytorch(run_cli, samples_dir, "collectives2", 2, tmp_path / "c2")
    before = [_colls(t) for t in read_traces([raw])]
    res = run_cli("validate", "--for", "astra-sim", str(raw), "--json")
    assert res.exit_code == 1
    codes = Counter(f["code"] for f in json.loads(res.stdout)["findings"])
    assert codes["unsupported-reduce"] == 4 and codes["unsupported-gather"] == 4 and codes["unsupported-barrier"] == 4

    res = run_cli("export", "astra-sim", str(raw), "-o", str(tmp_path / "out"), "--json", "-q")
    assert res.exit_code == 0, res.stderr
    summary = json.loads(res.stdout)
    assert summary["changes"]["REDUCE -> REDUCE_SCATTER"] == 4
    assert summary["changes"]["GATHER -> ALL_GATHER"] == 4
    assert summary["changes"]["SCATTER -> ALL_TO_ALL"] == 4
    assert summary["changes"]["BARRIER -> ALL_REDUCE"] == 4
    assert summary["changes"]["BROADCAST -> ALL_GATHER"] == 4
    argv = summary["command"].split()
    assert Path(argv[0]).name == "AstraSim_Analytical_Congestion_Aware"  # in $ASTRA_SIM_BIN when set
    assert argv[1] == f"--workload-configuration={tmp_path / 'out'}"
    after = read_traces([tmp_path / "out"])
    for b, t in zip(before, after):
        a = _colls(t)
        assert set(a) <= {"ALL_REDUCE", "ALL_GATHER", "REDUCE_SCATTER", "ALL_TO_ALL"}
        assert a["REDUCE_SCATTER"] == b["REDUCE_SCATTER"] + b["REDUCE"]
        assert a["ALL_GATHER"] == b["ALL_GATHER"] + b["GATHER"] + b["BROADCAST"]
        assert sum(a.values()) == sum(b.values())  # nothing turned into compute
    # same bytes: every collective keeps its comm_size
    sizes = lambda ts: sorted(get_int(n, "comm_size") for t in ts for n in t.nodes if n.type == NodeType.COMM_COLL_NODE)  # noqa: E731
    assert sizes(after) == sizes(read_traces([raw]))
    assert validate_traces(after).ok
    net = (tmp_path / "out.network.yml").read_text()
    assert "FullyConnected" in net and "[ 2 ]" in net  # the aware binary asserts on a Ring of 2
    assert run_cli("validate", "--for", "astra-sim", str(tmp_path / "out")).exit_code == 0


def test_compute_option_keeps_recorded_time(samples_dir, tmp_path, run_cli):
    raw = _convert_pytorch(run_cli, samples_dir, "collectives2", 2, tmp_path / "c2")
    res = run_cli("export", "astra-sim", str(raw), "-o", str(tmp_path / "out"), "--unsupported", "compute", "-q")
    assert res.exit_code == 0, res.stderr
    src = {n.id: n for n in read_trace(tmp_path / "c2.0.et").nodes}
    replaced = [n for n in read_trace(tmp_path / "out.0.et").nodes if get_attr(n, "export_replaced")]
    assert len(replaced) == 10  # 2 each of REDUCE, GATHER, SCATTER, BARRIER, BROADCAST on rank 0
    for n in replaced:
        assert n.type == NodeType.COMP_NODE and n.duration_micros == src[n.id].duration_micros
        assert list(n.data_deps) == list(src[n.id].data_deps)


def test_metadata_node_only_on_request_and_dropped_by_export(samples_dir, tmp_path, run_cli):
    plain = _convert_pytorch(run_cli, samples_dir, "ddp2", 2, tmp_path / "plain")
    assert not [n for t in read_traces([plain]) for n in t.nodes if n.type == NodeType.METADATA_NODE]
    meta = _convert_pytorch(run_cli, samples_dir, "ddp2", 2, tmp_path / "meta", "--metadata-node")
    assert sum(n.type == NodeType.METADATA_NODE for t in read_traces([meta]) for n in t.nodes) == 2
    res = run_cli("validate", "--for", "astra-sim", str(meta), "--json")
    assert res.exit_code == 1
    assert [f["code"] for f in json.loads(res.stdout)["findings"]].count("metadata-node") == 2
    res = run_cli("export", "astra-sim", str(meta), "-o", str(tmp_path / "out"), "--json", "-q")
    assert json.loads(res.stdout)["changes"]["METADATA nodes dropped"] == 2
    out = read_traces([tmp_path / "out"])
    assert not [n for t in out for n in t.nodes if n.type == NodeType.METADATA_NODE]
    assert [len(t.nodes) for t in out] == [len(t.nodes) for t in read_traces([plain])]


def test_generated_groups_live_beside_the_trace(tmp_path, run_cli):
    """Subgroup collectives resolve from PREFIX.comm_groups.json with no option and no METADATA node."""
    out = tmp_path / "gpt"
    res = run_cli("generate", "transformer", "--layers", "2", "--hidden", "256", "--heads", "4", "--seq", "64",
                  "--batch", "8", "--microbatches", "2", "--dp", "2", "--tp", "2", "-o", str(out), "-q")  # fmt: skip
    assert res.exit_code == 0, res.stderr
    traces = read_traces([out])
    assert not [n for t in traces for n in t.nodes if n.type == NodeType.METADATA_NODE]
    pgs = {get_attr(n, "pg_name") for t in traces for n in t.nodes if n.type == NodeType.COMM_COLL_NODE}
    groups = json.loads((tmp_path / "gpt.comm_groups.json").read_text())
    assert pgs <= set(groups) and len(groups) == 4
    beside = json.loads(run_cli("simulate", str(out), "--json", "-q").stdout)
    given = run_cli("simulate", str(out), "--comm-group", str(tmp_path / "gpt.comm_groups.json"), "--json", "-q")
    assert beside["ranks"] == json.loads(given.stdout)["ranks"]
    assert run_cli("validate", str(out)).exit_code == 0
    # every rank all-reduces on its TP and its DP subgroup: ASTRA-sim frees the ring twice at exit
    res = run_cli("validate", "--for", "astra-sim", str(out), "--json")
    assert res.exit_code == 1
    assert {f["code"] for f in json.loads(res.stdout)["findings"]} == {"subgroup-double-free"}
    # ASTRA-sim silently ignores a comm-group path containing "empty": refused up front
    res = run_cli("export", "astra-sim", str(out), "-o", str(tmp_path / "empty_run"), "-q")
    assert res.exit_code == 1 and "contains 'empty'" in res.stderr
    # the groups file is what makes them resolvable: without it the subgroups are unknown
    (tmp_path / "gpt.comm_groups.json").unlink()
    res = run_cli("simulate", str(out), "-q")
    assert res.exit_code == 1 and "unknown process group" in res.stderr


def test_missing_deps_error_names_the_option(feeder_trace, tmp_path, run_cli):
    res = run_cli("simulate", str(feeder_trace), "-q")
    assert res.exit_code == 1
    assert "does not exist" in res.stderr and "--missing-deps drop" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    res = run_cli("export", "astra-sim", str(feeder_trace), "-o", str(tmp_path / "x"), "-q")
    assert res.exit_code == 1 and "1277 such dependencies" in res.stderr and "--missing-deps drop" in res.stderr
    assert not list(tmp_path.glob("x.*"))  # nothing written


def test_feeder_trace_exports_to_a_runnable_dag(feeder_trace, tmp_path, run_cli):
    res = run_cli("validate", "--for", "astra-sim", str(feeder_trace), "--json")
    codes = Counter(f["code"] for f in json.loads(res.stdout)["findings"])
    assert res.exit_code == 1 and codes["missing-dep"] == 21 and codes["self-dep"] == 383 and codes["cycle"] > 0
    res = run_cli("export", "astra-sim", str(feeder_trace), "-o", str(tmp_path / "f"), "--missing-deps", "drop",
                  "--json", "-q")  # fmt: skip
    assert res.exit_code == 0, res.stderr
    s = json.loads(res.stdout)
    assert s["changes"]["dependencies on absent ids dropped"] == 1277
    assert s["changes"]["self-dependencies removed"] == 383
    assert s["padded_rank"] is True and s["ranks"] == 2  # one rank: ASTRA-sim needs a second NPU
    t0, t1 = read_traces([tmp_path / "f"])
    assert len(t0.nodes) == len(read_trace(feeder_trace).nodes) and len(t1.nodes) == 1
    assert find_cycle(t0.nodes) is None
    ids = {n.id for n in t0.nodes}
    assert all(d in ids and d != n.id for n in t0.nodes for d in (*n.data_deps, *n.ctrl_deps))
    # one rank: its collectives move no data and become compute nodes of their recorded time
    assert not [n for n in t0.nodes if n.type == NodeType.COMM_COLL_NODE]
    res = run_cli("simulate", str(tmp_path / "f"), "--network", str(tmp_path / "f.network.yml"), "--json", "-q")
    assert res.exit_code == 0, res.stderr


def test_user_network_is_checked_for_the_backend(tmp_path, run_cli):
    out = tmp_path / "mb"
    assert run_cli("generate", "microbench", "--ranks", "2", "--max-size", "4KiB", "-o", str(out), "-q").exit_code == 0
    ring2 = tmp_path / "ring2.yml"
    ring2.write_text("topology: [ Ring ]\nnpus_count: [ 2 ]\nbandwidth: [ 50 ]\nlatency: [ 500 ]\n")
    res = run_cli("export", "astra-sim", str(out), "-o", str(tmp_path / "x"), "--network", str(ring2), "-q")
    assert res.exit_code == 1 and "Ring of 2" in res.stderr
    res = run_cli("export", "astra-sim", str(out), "-o", str(tmp_path / "x"), "--network", str(ring2),
                  "--backend", "unaware", "--json", "-q")  # fmt: skip
    assert res.exit_code == 0, res.stderr
    assert Path(json.loads(res.stdout)["command"].split()[0]).name == "AstraSim_Analytical_Congestion_Unaware"


def test_broadcast_replay_keeps_astrasims_own_handling(samples_dir, tmp_path, run_cli):
    raw = _convert_pytorch(run_cli, samples_dir, "ddp2", 2, tmp_path / "ddp2")
    res = run_cli("export", "astra-sim", str(raw), "-o", str(tmp_path / "out"), "--broadcast", "replay", "--json", "-q")
    assert res.exit_code == 0, res.stderr
    # BROADCAST is kept; the CPU operators still lose is_cpu_op (ASTRA-sim's report throws on them)
    changes = json.loads(res.stdout)["changes"]
    assert list(changes) == ["is_cpu_op cleared on compute nodes"] and changes[list(changes)[0]] > 0
    assert [_colls(t)["BROADCAST"] for t in read_traces([tmp_path / "out"])] == [2, 2]
    res = run_cli("export", "astra-sim", str(raw), "-o", str(tmp_path / "out"), "--broadcast", "bogus", "-q")
    assert res.exit_code == 1 and "--broadcast must be network or replay" in res.stderr


def _summary_figures(p) -> tuple:
    """Everything a summarised plan holds, its tallies' node ids as `grouped` keeps them."""
    tallies = {c: (t.count, sorted(t.ranks), sorted(t.nodes)[:20], t.unfixed) for c, t in p.tallies.items()}
    return (*_plan_figures(p), p.tails, p.p2p_ends, p.config, tallies)


def _plan_figures(p) -> tuple:
    fixes = {r: {i: (f.compute, f.attrs, f.drop_deps) for i, f in per.items()} for r, per in p.fixes.items()}
    return (p.issues, fixes, p.groups, p.missing, p.pad_rank, dict(p.counts), p.idle, p.split, p.roofline_peak)


@pytest.mark.parametrize("source", ["collectives2", "ddp2-metadata", "transformer-3d", "transformer-3d-gzip"])
def test_checks_on_shared_nodes_find_what_the_plain_reading_finds(source, samples_dir, tmp_path, run_cli):
    """`chakra simulate` reads the traces for its ASTRA-sim checks with shared nodes (SPMD ranks
    repeat most nodes byte for byte, and each distinct node is checked once): the findings and
    fixes must be exactly those of traces read node by node."""
    from chakra.commgroups import groups_beside
    from chakra.export.astrasim import grouped, plan, simulate_plan, warning_lines

    if source.startswith("transformer-3d"):
        prefix = tmp_path / "t"
        shape = "--layers 2 --microbatches 2 --seq 64 --hidden 64 --heads 2 --dp 2 --tp 2 --pp 2 --batch 4"
        res = run_cli("generate", "transformer", *shape.split(), "-o", str(prefix), "-q")
        assert res.exit_code == 0, res.stderr
        if source.endswith("gzip"):  # two ranks compressed: read apart from the job's store
            import gzip

            for r in (1, 5):
                f = tmp_path / f"t.{r}.et"
                (tmp_path / f"t.{r}.et.gz").write_bytes(gzip.compress(f.read_bytes()))
                f.unlink()
    elif source == "ddp2-metadata":
        prefix = _convert_pytorch(run_cli, samples_dir, "ddp2", 2, tmp_path / "m", "--metadata-node")
    else:
        prefix = _convert_pytorch(run_cli, samples_dir, source, 2, tmp_path / "c")
    groups = groups_beside([prefix])
    for backend in ("unaware", "aware", None):
        plain = plan(read_traces([prefix]), groups, backend=backend)
        shared: dict = {}
        traces = read_traces([prefix], shared=shared)
        assert _plan_figures(plan(traces, groups, backend=backend, shared_nodes=True)) == _plan_figures(plain)
        assert plain.issues or source.startswith("transformer-3d")
        # `chakra simulate`'s form: each kind of finding tallied, not one object per node; what it
        # prints (and every summary figure) is the same
        summary = plan(traces, groups, backend=backend, shared_nodes=True, summarise=True)
        assert warning_lines(summary) == warning_lines(plain)
        assert grouped(summary.issues, summary.tallies) == grouped(plain.issues)
        assert dict(summary.counts) == dict(plain.counts)
        assert len(summary.issues) == len({i.code for i in plain.issues})
        # ... and as the command reads them (framed once, for the simulation too; a compute node's
        # findings replayed on the compute nodes with the same attributes)
        read = simulate_plan(str(prefix), None, None, None, backend)
        assert warning_lines(read) == warning_lines(plain)
        assert grouped(read.issues, read.tallies) == grouped(plain.issues)
        assert dict(read.counts) == dict(plain.counts)
        # the command's reading walks each distinct communication row's reading inline
        # (`_plain_rows`); the node-by-node walk of the same summary must give the whole plan
        assert _summary_figures(read) == _summary_figures(summary)
    if source == "transformer-3d":  # 8 ranks, 4 of each node: far fewer distinct nodes than nodes
        assert len(shared) * 2 < sum(len(t.nodes) for t in traces)


def test_a_tally_keeps_the_smallest_node_ids_of_many():
    """A summarised kind with thousands of findings (every kernel of an unexported trace) keeps a
    bounded set of node ids, and still the 20 smallest, as the full list gives them."""
    from chakra.export.astrasim import Issue, Tally, grouped

    ids = [(7919 * k) % 10007 for k in range(1, 5001)]  # distinct, in no order
    issues = [Issue(k % 3, i, "n", "cpu-compute", "why", "fix") for k, i in enumerate(ids)]
    tally = Tally()
    for issue in issues:
        tally.add(issue)
    assert len(tally.nodes) <= 64 * 20 + 1
    assert grouped(issues[:1], {"cpu-compute": tally}) == grouped(issues)


def test_attributes_read_from_their_bytes_are_read_attrs(samples_dir, tmp_path, run_cli):
    """`chakra simulate`'s checks read shared communication nodes' attributes from their bytes, each
    distinct attribute decoded once (`read_attr_bytes`): values and misplaced arms must be what
    `read_attrs` reads from the decoded node, on a converted recording and on attributes written in
    an arm ASTRA-sim does not read, an attribute twice and an empty one."""
    from chakra.schema.attrs import read_attr_bytes, read_attrs, set_attr
    from chakra.trace import make_node

    prefix = _convert_pytorch(run_cli, samples_dir, "collectives2", 2, tmp_path / "c")
    nodes = [n for t in read_traces([prefix]) for n in t.nodes]
    odd = make_node(7, "odd", NodeType.COMM_COLL_NODE)
    set_attr(odd, "comm_size", 4096, arm="int32_val")  # ASTRA-sim reads int64_val
    set_attr(odd, "comm_type", 1)
    odd.attr.add(name="comm_type").int64_val = 2  # a second of the name: the first one counts
    odd.attr.add(name="pg_name")  # no arm set
    memo: dict = {}
    for n in [*nodes, odd, odd]:
        assert read_attr_bytes([a.SerializeToString() for a in n.attr], memo) == read_attrs(n), n.name
    values, misplaced = read_attr_bytes([a.SerializeToString() for a in odd.attr], memo)
    assert (
        values["comm_size"] == 4096
        and values["comm_type"] == 1
        and ("comm_size", "int32_val", "int64_val") in misplaced
    )
    assert len(memo) < sum(len(n.attr) for n in nodes)  # attributes repeat across nodes: decoded once


def _rank_figures(c) -> tuple:
    return ([id(n) for n in c.order], c.types.tolist(), sorted(c.suspects), c.later, [id(n) for n in c.metadata],
            c.rows.tolist(), c.ids.tolist())  # fmt: skip


@pytest.mark.parametrize("case", ["transformer-3d", "ddp2-metadata", "odd-deps", "odd-order"])
def test_every_ranks_columns_at_once_are_each_ranks_own(case, samples_dir, tmp_path, run_cli):
    """The checks index every rank's rows in one pass (`_all_ranks_columns`: nodes keyed by rank
    and id): the node order, types, suspect dependencies (on themselves, later or absent ids) and
    METADATA nodes must be what each rank indexed alone gives, on a generated 3-D step, a converted
    recording with METADATA nodes, and ranks with ids out of order, a self-dependency, a dependency
    on an absent id and one on an id of 2^40 and more (the one-pass key's limit)."""
    import numpy as np

    from chakra.export.astrasim import _all_ranks_columns, _Columns, _rank_columns

    if case == "ddp2-metadata":
        prefix = _convert_pytorch(run_cli, samples_dir, "ddp2", 2, tmp_path / "m", "--metadata-node")
    else:
        prefix = tmp_path / "t"
        shape = "--layers 2 --microbatches 2 --seq 64 --hidden 64 --heads 2 --dp 2 --tp 2 --pp 2 --batch 4"
        assert run_cli("generate", "transformer", *shape.split(), "-o", str(prefix), "-q").exit_code == 0
    shared: dict = {}
    traces = read_traces([prefix], shared=shared)
    if case == "odd-deps":
        t = traces[3]
        t.nodes[5].data_deps.append(t.nodes[5].id)  # on itself
        t.nodes[6].ctrl_deps.append(987_654)  # absent
        t.nodes[7].data_deps.append(1 << 41)  # absent, beyond the key
        t.nodes[2].data_deps.append(t.nodes[9].id)  # a later id
    if case == "odd-order":
        traces[5].nodes.reverse()  # ids out of order: that rank sorts them (every rank alone)
    distinct = list({id(n): n for t in traces for n in t.nodes}.values())
    row = {id(n): i for i, n in enumerate(distinct)}
    rows_of = [np.array([row[id(n)] for n in t.nodes], dtype=np.int64) for t in traces]
    cols = _Columns(distinct)
    alone = [_rank_columns(t.nodes, cols, r) for t, r in zip(traces, rows_of)]
    together = _all_ranks_columns([t.nodes for t in traces], cols, rows_of)
    assert [_rank_figures(c) for c in together] == [_rank_figures(c) for c in alone]
    one_pass = together[1].types.base is not None and together[1].types.base is together[0].types.base
    if case != "ddp2-metadata":  # (the converter writes ids out of order there: every rank alone)
        assert one_pass == (case != "odd-order")
    if case == "odd-deps":
        assert len(alone[3].suspects) == 4 and alone[3].later
    if case == "ddp2-metadata":
        assert all(c.metadata for c in alone)
    # ids of 2^40 and more: every rank alone, the same
    big = _Columns(distinct)
    big.ids = big.ids + np.uint64(1 << 40)
    alone = [_rank_columns(t.nodes, big, r) for t, r in zip(traces, rows_of)]
    assert [_rank_figures(c) for c in _all_ranks_columns([t.nodes for t in traces], big, rows_of)] == [
        _rank_figures(c) for c in alone
    ]


def test_the_checks_run_with_the_garbage_collector_paused_and_give_it_back(tmp_path, run_cli):
    import gc

    from chakra.export import astrasim

    prefix = tmp_path / "t"
    shape = "--layers 1 --microbatches 1 --seq 64 --hidden 64 --heads 2 --dp 2 --tp 2 --batch 4"
    assert run_cli("generate", "transformer", *shape.split(), "-o", str(prefix), "-q").exit_code == 0
    seen = []
    plan = astrasim.plan

    def spy(*args, **kwargs):
        seen.append(gc.isenabled())
        return plan(*args, **kwargs)

    astrasim.plan = spy
    try:
        assert gc.isenabled()
        assert astrasim.simulate_plan(str(prefix), None, None, None, "unaware") is not None
    finally:
        astrasim.plan = plan
    assert seen == [False] and gc.isenabled()

"""What makes many-rank simulations cheap keeps them exact.

- SPMD rank files that differ only in their GlobalMetadata share one decoded engine, and give what
  the same traces give in memory (no sharing there);
- a rank that shares another's nodes still has its own GlobalMetadata checked, named in the error;
- node attributes remembered across files (by the node's bytes) index every file as alone;
- generated data-parallel and 3-D parallel steps at moderate scale finish on every rank at the
  ns the real ASTRA-sim binary prints (their replica ranks folded, chakra/sim/fold.py).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from chakra.errors import TraceFormatError
from chakra.io import read_trace
from chakra.sim import api, simulate
from chakra.sim.api import SimOptions
from chakra.sim.config import NetworkConfig
from chakra.sim.twins import file_messages
from feeder.table import table_from_et
from tests.sim.conftest import RT_SYSTEM, generate_transformer, write_network
from tools.truthcases import BINARY_NAMES, find_binaries, finish_cycles

DP8 = ("--dp", "8", "--batch", "8", "--layers", "1", "--microbatches", "1")
THREE_D = ("--dp", "2", "--tp", "2", "--pp", "2", "--batch", "4", "--layers", "2", "--microbatches", "2")


def test_spmd_files_share_one_engine_and_match_in_memory_traces(tmp_path):
    prefix = generate_transformer(tmp_path / "t", *DP8)
    files = [Path(f"{prefix}.{r}.et") for r in range(8)]
    assert files[0].read_bytes() != files[1].read_bytes()  # the header names the rank
    net = NetworkConfig(["Switch"], [8], [50.0], [500.0])
    opts = SimOptions(congestion="unaware")
    setup = api._prepare(str(prefix), net, None, None, opts)
    engines = api._compile(setup, opts)
    assert all(e.static is engines[0].static for e in engines)
    assert [e.path for e in engines] == [str(f) for f in files]
    from_files = simulate(str(prefix), net, congestion="unaware", record_nodes=True)
    traces = []
    for r, f in enumerate(files):
        t = read_trace(f)
        t.rank = r
        traces.append(t)
    groups = json.loads(Path(f"{prefix}.comm_groups.json").read_text())
    in_memory = simulate(traces, net, congestion="unaware", record_nodes=True, comm_groups=groups)
    assert from_files.ranks == in_memory.ranks
    assert from_files.node_times == in_memory.node_times
    assert from_files.finish_ns > 0


def test_corrupt_metadata_of_a_sharing_rank_is_named(tmp_path):
    prefix = generate_transformer(tmp_path / "t", *DP8)
    bad = Path(f"{prefix}.3.et")
    data = bytearray(bad.read_bytes())
    length = data[0]  # a GlobalMetadata of under 128 bytes: one-byte length prefix
    assert length < 0x80
    data[1 : 1 + length] = b"\xff" * length  # wire type 7 does not exist: undecodable
    bad.write_bytes(bytes(data))
    with pytest.raises(TraceFormatError, match=r"t\.3\.et.*GlobalMetadata"):
        simulate(str(prefix), NetworkConfig(["Switch"], [8], [50.0], [500.0]), congestion="unaware")


def test_files_read_for_the_checks_are_taken_by_the_simulation_and_stay_exact(tmp_path):
    """`chakra simulate` reads every rank file for its ASTRA-sim checks into the job's distinct
    nodes (`loading.FramedFiles.read`) and keeps each file's rows; the simulation given the same
    `FramedFiles` (`SimOptions.framed`, no module state) takes those rows instead of reading and
    framing the file again. The run must be the one of files read afresh, and a file changed in
    between is read afresh."""
    import os

    from chakra.sim import loading

    prefix = generate_transformer(tmp_path / "t", *THREE_D)
    net = NetworkConfig(["Switch"], [8], [50.0], [500.0])
    alone = simulate(str(prefix), net, congestion="unaware", record_nodes=True, fold=False)
    files = [Path(f"{prefix}.{r}.et") for r in range(8)]
    framed = loading.FramedFiles()
    read = [framed.read(f) for f in files]
    assert all(read) and len(framed.files) == 8
    assert len(framed.store) < sum(len(r[1]) for r in read)  # the ranks repeat nodes: one object each
    assert read[1][1][-1] is framed.store.nodes[int(read[1][2][-1])]
    messages, rows = framed.take(files[0])
    assert messages == loading.file_messages(files[0])  # the file's own messages, not re-read
    assert [framed.store.nodes[i] for i in rows.tolist()] == read[0][1]
    assert framed.take(files[0]) is None  # taken once
    framed.read(files[0])
    other = loading.FramedFiles()  # another job's reading is not this simulation's
    other.read(files[0])
    stale = loading._file_key(files[5])
    st = files[5].stat()
    os.utime(files[5], ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # changed after the checks
    after = simulate(str(prefix), net, congestion="unaware", record_nodes=True, fold=False, framed=framed)
    assert list(framed.files) == [stale]  # every file taken but the changed one (read afresh)
    assert len(other.files) == 1
    assert after.ranks == alone.ranks and after.node_times == alone.node_times
    assert alone.finish_ns > 0
    # the module keeps nothing between runs: a simulation without `framed` reads its files itself
    assert not any(isinstance(v, loading.FramedFiles) for v in vars(loading).values())
    # every file taken: the job's nodes are not kept past the simulation's loading
    framed = loading.FramedFiles()
    assert all(framed.read(f) for f in files)
    whole = simulate(str(prefix), net, congestion="unaware", record_nodes=True, fold=False, framed=framed)
    assert framed.store is None and not framed.files
    assert whole.ranks == after.ranks and whole.node_times == after.node_times


def test_remembered_attributes_index_every_file_as_alone(tmp_path):
    prefix = generate_transformer(tmp_path / "t", *THREE_D)
    memo: dict = {}
    for r in range(8):
        f = Path(f"{prefix}.{r}.et")
        alone = table_from_et(f)[1]
        shared = table_from_et(f, memo=memo)[1]
        for col in ("ids", "types", "dur_us", "is_cpu", "num_ops", "tensor_size", "child_ptr", "child_idx"):
            assert np.array_equal(getattr(alone, col), getattr(shared, col)), col
        assert alone.sparse == shared.sparse
    assert memo  # later files found nodes the earlier ones had


@pytest.mark.parametrize("case", ["generated-3d", "ddp2-metadata"])
def test_tables_gathered_from_the_jobs_distinct_nodes_are_the_files_own(case, tmp_path, samples_dir, run_cli):
    """The simulator indexes each rank from the job's distinct nodes (`loading.NodeStore.table`:
    columns read once per distinct node, then gathered per rank): every column, the child lists in
    their order, the sparse attributes, the METADATA text and dropped edges must be what indexing
    the file alone gives, on a generated step and on a converted recording with METADATA nodes."""
    from chakra.sim.loading import NodeStore, load_table

    if case == "generated-3d":
        prefix = generate_transformer(tmp_path / "t", *THREE_D)
        files = [Path(f"{prefix}.{r}.et") for r in range(8)]
    else:
        d = samples_dir / "pytorch" / "ddp2"
        args = [a for r in range(2) for a in (str(d / f"et.{r}.json"), "-k", str(d / f"kineto.{r}.json"))]
        res = run_cli("convert", "pytorch", *args, "-o", str(tmp_path / "m"), "-q", "--metadata-node")
        assert res.exit_code == 0, res.stderr
        files = [tmp_path / f"m.{r}.et" for r in range(2)]
    store = NodeStore()
    columns = ("ids", "types", "dur_us", "is_cpu", "num_ops", "tensor_size", "dep_count", "child_ptr", "child_idx")
    for f in files * 2:  # the second time every node is met before
        messages = file_messages(f)
        for names in (False, True):
            alone = load_table(f, names, "drop", messages=messages)
            got = store.table(f, store.rows(messages[1:]), len(messages[0]), names, "drop")
            for col in (*columns, "payload_off", "payload_len"):
                assert np.array_equal(getattr(alone, col), getattr(got, col)), col
            assert got.sparse == alone.sparse and got.names == alone.names
            assert got.metadata_inputs == alone.metadata_inputs
            assert (got.dropped_deps, got.first_dropped) == (alone.dropped_deps, alone.first_dropped)
        assert alone.metadata_inputs or case == "generated-3d"
    assert len(store) < sum(len(file_messages(f)) for f in files)


BIN = find_binaries()


def _astrasim(
    tmp: Path, prefix: Path, network: Path, system: Path | None = None, memory: Path | None = None
) -> dict[int, int]:
    """Every rank's finish as the real congestion-unaware binary prints it (the rt_template system
    and no remote memory unless given)."""
    if BIN is None:
        pytest.skip("ASTRA-sim binaries not found ($ASTRA_SIM_BIN or ../shared/tools/astra-sim/bin)")
    if system is None:
        system = tmp / "system.json"
        system.write_text(json.dumps(RT_SYSTEM))
    if memory is None:
        memory = tmp / "memory.json"
        memory.write_text(json.dumps({"memory-type": "NO_MEMORY_EXPANSION"}))
    cmd = [
        str(BIN / BINARY_NAMES["unaware"]),
        f"--workload-configuration={prefix}",
        f"--system-configuration={system}",
        f"--network-configuration={network}",
        f"--remote-memory-configuration={memory}",
        f"--logging-folder={tmp / 'log'}",
    ]
    if Path(f"{prefix}.comm_groups.json").exists():
        cmd.append(f"--comm-group-configuration={prefix}.comm_groups.json")
    best: dict[int, int] = {}
    for _ in range(3):  # the binary now and then aborts in its statistics after some ranks printed
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp)
        if "error while loading shared libraries" in out.stderr:
            pytest.skip(f"ASTRA-sim binaries do not load: {out.stderr.strip().splitlines()[-1]}")
        got = finish_cycles(out.stdout + out.stderr)
        if len(got) > len(best):
            best = got
    return best


@pytest.mark.parametrize(
    ("args", "topology", "counts", "ranks"),
    [
        (("--dp", "64", "--batch", "64", "--layers", "1", "--microbatches", "1", "--hidden", "256", "--heads", "4"),
         ["Switch"], [64], 64),
        (("--dp", "4", "--tp", "4", "--pp", "2", "--batch", "8", "--layers", "2", "--microbatches", "2",
          "--heads", "4"), ["Ring", "Switch", "Switch"], [4, 2, 4], 32),
    ],
    ids=["dp64-switch", "3d32-ring-switch-switch"],
)  # fmt: skip
def test_generated_steps_finish_where_the_real_astrasim_does(tmp_path, args, topology, counts, ranks):
    prefix = generate_transformer(tmp_path / "t", *args)
    k = len(topology)
    network = write_network(tmp_path / "network.yml", topology, counts, [50.0] * k, [500.0] * k)
    astra = _astrasim(tmp_path, prefix, network)
    system = tmp_path / "system.json"
    ours = simulate(str(prefix), network, system, congestion="unaware")
    assert len(astra) == ranks, f"ASTRA-sim printed {len(astra)} of {ranks} ranks"
    assert {r: v.finish_ns for r, v in ours.ranks.items()} == astra
    # both steps are replicas of one slice: the answer came from the folded run (chakra/sim/fold.py)
    assert ours.settings["fold"] is not None and ours.settings["fold"]["copies"] >= 4


def test_distinct_ranks_of_a_recorded_run_finish_where_the_real_astrasim_does(tmp_path, samples_dir):
    """Real-shaped ranks: a recorded 8-rank DDP run, synthesized to 32 ranks (each with its own
    durations, so no two ranks are copies and nothing folds), exported for ASTRA-sim. Members reach
    each all-reduce at their own times: the skewed closed form (chakra/sim/lockstep.py) answers
    them, and every rank must finish at the ns the real binary prints."""
    from typer.testing import CliRunner

    from chakra.cli import app

    ddp8 = samples_dir / "pytorch" / "ddp8"
    cli = CliRunner()
    steps = [
        ["convert", "pytorch", *(str(ddp8 / f"et.{r}.json.gz") for r in range(8)),
         *(x for r in range(8) for x in ("-k", str(ddp8 / f"kineto.{r}.json.gz"))), "-o", str(tmp_path / "ddp8"), "-q"],
        ["synthesize", str(tmp_path / "ddp8"), "--ranks", "32", "-o", str(tmp_path / "s"), "-q"],
        ["export", "astra-sim", str(tmp_path / "s"), "--backend", "unaware", "-o", str(tmp_path / "a"), "-q"],
    ]  # fmt: skip
    for args in steps:
        res = cli.invoke(app, args)
        assert res.exit_code == 0, res.output
    prefix = tmp_path / "a"
    files = [Path(f"{prefix}.{r}.et").read_bytes() for r in range(32)]
    assert len(set(files)) == 32
    network, system, memory = (Path(f"{prefix}.{x}") for x in ("network.yml", "system.json", "memory.json"))
    astra = _astrasim(tmp_path, prefix, network, system, memory)
    ours = simulate(str(prefix), network, system, memory, congestion="unaware")
    assert len(astra) == 32, f"ASTRA-sim printed {len(astra)} of 32 ranks"
    assert {r: v.finish_ns for r, v in ours.ranks.items()} == astra
    assert len(set(astra.values())) > 1  # the ranks really differ
    assert ours.settings["fold"] is None


def test_work_read_from_the_bytes_equals_the_decoded_attributes(tmp_path):
    """Compute nodes whose num_ops and tensor_size are zero (int64 or uint64 arm, as converters
    write kernels of unknown work) are indexed from their bytes without decoding; the columns must
    be those of the decoded nodes, also where a string holds the very bytes of such attributes and
    the node's real num_ops is not zero, or where a string says num_ops and no attribute does."""
    from chakra.feeder.table import table_from_messages, table_from_nodes
    from chakra.io import write_trace
    from chakra.schema import NodeType
    from chakra.schema.attrs import make_attr
    from chakra.sim.twins import file_messages
    from chakra.trace import Trace, make_node

    tail = b"R\x0b\n\x07num_opsH\x00R\x0f\n\x0btensor_sizeh\x00".decode("latin-1")
    nodes = []
    for i in range(300):
        n = make_node(i + 1, f"k{i}", NodeType.COMP_NODE, duration_micros=i % 7, data_deps=[i] if i else [])
        kind = i % 6
        arms = ("int64_val", "uint64_val")
        if kind in (0, 1, 2):  # zero work, in either arm
            n.attr.extend([make_attr("is_cpu_op", kind == 2), make_attr("num_ops", 0, arms[kind % 2]),
                           make_attr("tensor_size", 0, arms[(kind + 1) % 2])])  # fmt: skip
        elif kind == 3:  # real work
            n.attr.extend([make_attr("is_cpu_op", False), make_attr("num_ops", 1000 + i),
                           make_attr("tensor_size", 64 + i)])  # fmt: skip
        elif kind == 4:  # real work, and a last attribute ending in the zero attributes' bytes
            n.attr.extend([make_attr("num_ops", 7 + i), make_attr("tensor_size", 3),
                           make_attr("note", "x" + tail, "string_val")])  # fmt: skip
        else:  # no work attribute, and a last attribute ending in their bytes
            n.attr.extend([make_attr("note", tail, "string_val")])
        nodes.append(n)
    t = Trace(rank=0)
    t.nodes = nodes
    path = tmp_path / "t.0.et"
    write_trace(path, t)
    decoded = table_from_nodes(nodes)
    for table in (table_from_et(path)[1], table_from_messages(path, file_messages(path))[1]):
        for col in ("ids", "types", "dur_us", "is_cpu", "num_ops", "tensor_size", "child_ptr", "child_idx"):
            assert np.array_equal(getattr(table, col), getattr(decoded, col)), col
    assert decoded.num_ops.any() and decoded.is_cpu.any()

"""Custom collective algorithms: the generator, the checks (provenance, matching, deadlock), the
libstdc++ set order the simulator replays, and the CLI around them."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from chakra.collective_algorithm import COMP, RECV, SEND, Op, check, load
from chakra.dsl.collectives import ALGORITHMS, from_description, generate
from chakra.sim.stdhash import StdHashSet

SAMPLE = Path(__file__).resolve().parents[1] / "data/samples/astrasim/custom_ring_allreduce_8npus_1MB/custom_allreduce"

KINDS = [
    (a, c)
    for c in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")
    for a in ALGORITHMS
    if c == "all-reduce" or a in ("ring", "direct") or (a == "halving-doubling" and c != "all-to-all")
]


@pytest.mark.parametrize("ranks", [4, 8, 6])
@pytest.mark.parametrize("algorithm,collective", KINDS)
def test_generated_algorithms_move_their_collectives_data(algorithm, collective, ranks):
    if algorithm == "halving-doubling" and ranks == 6:
        with pytest.raises(Exception, match="power-of-two"):
            generate(algorithm, ranks, collective, 1 << 20)
        return
    alg = generate(algorithm, ranks, collective, 1 << 20)
    report = check(alg)
    assert report.ok and not report.notes, report.problems
    sent = alg.bytes_sent()
    if algorithm == "ring" and collective == "all-reduce":
        # the bandwidth-optimal 2 (p-1)/p of the buffer leaves every rank
        assert sent == [2 * (ranks - 1) * ((1 << 20) // ranks)] * ranks
    if collective == "all-to-all":
        per_peer = (1 << 20) // ranks
        direct = sum(1 for op in alg.ranks[0] if op.kind == SEND)
        assert algorithm != "direct" or (direct == ranks - 1 and sent[0] == (ranks - 1) * per_peer)


def test_round_trip_through_files_keeps_every_node(tmp_path):
    alg = generate("double-binary-tree", 8, "all-reduce", 1 << 20, reduce_us=2)
    alg.save(tmp_path / "dbt")
    back = load(tmp_path / "dbt")
    assert back.collective == "all-reduce" and back.chunk_count == alg.chunk_count and back.size == 8
    for a, b in zip(alg.ranks, back.ranks):
        assert [(o.id, o.kind, o.peer, o.size, o.tag, o.us, o.deps, o.chunks) for o in a] == [
            (o.id, o.kind, o.peer, o.size, o.tag, o.us, o.deps, o.chunks) for o in b
        ]
    assert check(back).ok


def test_missing_half_of_an_all_reduce_is_found():
    alg = generate("ring", 4, "reduce-scatter", 1 << 20)
    alg.collective = "all-reduce"  # a reduce-scatter passed off as an all-reduce
    report = check(alg)
    assert not report.ok
    assert any("ends without chunk" in p and "reduced from every rank" in p for p in report.problems)


def test_unmatched_receive_size_mismatch_and_cycle_are_found():
    alg = generate("ring", 4, "all-reduce", 1 << 20)
    first_send = next(i for i, op in enumerate(alg.ranks[0]) if op.kind == SEND)
    dropped = alg.ranks[0][first_send]
    alg.ranks[0][first_send] = Op(dropped.id, COMP)  # the send is gone, its receive waits forever
    problems = check(alg).problems
    assert any(f"({0}->{dropped.peer}, tag {dropped.tag}) has no send" in p for p in problems)

    alg = generate("direct", 4, "all-to-all", 4096)
    op = next(o for o in alg.ranks[2] if o.kind == RECV)
    op.size += 1
    assert any("expects" in p and "never matches" in p for p in check(alg).problems)

    # rank 0 and 1 each receive before they send: neither send can start
    a = [Op(0, RECV, peer=1, size=8, tag=0), Op(1, SEND, peer=1, size=8, tag=0, deps=(0,))]
    b = [Op(0, RECV, peer=0, size=8, tag=0), Op(1, SEND, peer=0, size=8, tag=0, deps=(0,))]
    from chakra.collective_algorithm import Algorithm

    assert any("deadlock" in p for p in check(Algorithm("", [a, b])).problems)


def test_description_double_counting_is_refused(tmp_path):
    desc = tmp_path / "bad.yaml"
    desc.write_text(
        "collective: all-reduce\nranks: 2\nchunks: 1\nsize: 1024\nsteps:\n"
        "  - [{from: 0, to: 1, chunks: [0]}]\n"
        "  - [{from: 1, to: 0, chunks: [0], reduce: true}]\n"
    )
    report = check(from_description(desc))
    assert any("twice" in p for p in report.problems)


def test_astrasim_example_passes_matching_and_deadlock_checks():
    alg = load(SAMPLE)
    assert alg.size == 8 and alg.messages() == 8 * 14
    report = check(alg, "all-reduce")
    assert report.ok and report.notes  # no chunk names: provenance cannot be checked


# ---- libstdc++ unordered_set order ---------------------------------------------------------------


def test_std_hash_set_order_matches_recorded_libstdcxx():
    # recorded from GCC 12's libstdc++ (the library ASTRA-sim's build links): insert 0..20, then
    # erase 5 and 17, insert 40 and 3 again
    s = StdHashSet(range(21))
    assert list(s) == [20, 19, 18, 17, 16, 15, 14, 13, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]
    s.erase(5)
    s.erase(17)
    s.insert(40)
    s.insert(3)
    assert list(s) == [20, 19, 18, 16, 15, 14, 13, 0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 40, 11, 12]


@pytest.mark.skipif(shutil.which("g++") is None, reason="no g++ to build the libstdc++ reference")
def test_std_hash_set_order_matches_libstdcxx_on_random_sequences(tmp_path):
    src = tmp_path / "t.cpp"
    src.write_text(
        "#include <unordered_set>\n#include <cstdio>\n#include <cstdint>\n#include <iostream>\n#include <string>\n"
        "int main(){std::unordered_set<uint64_t> s;std::string op;uint64_t k;"
        'while(std::cin>>op){if(op=="i"){std::cin>>k;s.insert(k);}else if(op=="e"){std::cin>>k;s.erase(k);}'
        'else{for(auto x:s)printf("%lu ",x);printf("\\n");}}}\n'
    )
    exe = tmp_path / "t"
    subprocess.run(["g++", "-O0", "-o", str(exe), str(src)], check=True)
    rnd = random.Random(7)
    for _ in range(40):
        s, ops, want, live = StdHashSet(), [], [], []
        for _ in range(rnd.randint(1, 300)):
            if live and rnd.random() < 0.4:
                k = live.pop(rnd.randrange(len(live)))
                ops.append(f"e {k}")
                s.erase(k)
            else:
                k = rnd.randint(0, rnd.choice([20, 200, 3000]))
                ops.append(f"i {k}")
                s.insert(k)
                if k not in live:
                    live.append(k)
        ops.append("p")
        want = " ".join(map(str, s))
        got = subprocess.run([str(exe)], input="\n".join(ops) + "\n", capture_output=True, text=True).stdout.strip()
        assert got == want


# ---- CLI ----------------------------------------------------------------------------------------


def test_generate_validate_visualize_cli(run_cli, tmp_path):
    prefix = tmp_path / "algos" / "hd8"
    res = run_cli(
        "generate", "collective", "halving-doubling", "--ranks", "8", "--size", "1MiB", "-o", str(prefix), "--json"
    )
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    assert (
        out["messages"] == 48 and out["system_config"] == f'"all-reduce-implementation-custom": ["{prefix.resolve()}"]'
    )
    assert len(list(prefix.parent.glob("hd8.*.et"))) == 8
    res = run_cli("validate", "--algorithm", "all-reduce", str(prefix), "--json")
    assert res.exit_code == 0 and json.loads(res.stdout)["ok"]
    res = run_cli("validate", "--algorithm", "all-gather", str(prefix))
    assert res.exit_code == 1 and "sends chunk 4 it does not hold" in res.stdout
    res = run_cli("visualize", "--algorithm", str(prefix), "--dot", "-o", str(tmp_path / "hd.dot"), "--json")
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["steps"] == 6
    assert (tmp_path / "hd.dot").read_text().count("constraint=false") == 48


def test_generate_cli_errors_are_one_line(run_cli, tmp_path):
    res = run_cli("generate", "collective", "halving-doubling", "--ranks", "6", "-o", str(tmp_path / "x"))
    assert res.exit_code == 1 and "power-of-two" in res.stderr and "Traceback" not in res.stderr
    res = run_cli("generate", "collective", "butterfly", "-o", str(tmp_path / "x"))
    assert res.exit_code == 1 and "unknown algorithm" in res.stderr
    assert not list(tmp_path.glob("x*"))


# ---- every generated kind on the real ASTRA-sim and in `chakra simulate` ------------------------

BIN = __import__("tools.truthcases", fromlist=["find_binaries"]).find_binaries()
WORKLOAD = Path(__file__).resolve().parents[1] / "data/samples/astrasim/all_reduce_8npus_1MB/all_reduce"
DESCRIBED = (
    """\
collective: all-reduce
ranks: 8
chunks: 8
size: 1048576
steps:   # reduce to rank 0 along a chain, then pass the sum back up
"""
    + "".join(f"  - [{{from: {r}, to: {r - 1}, chunks: [0, 1, 2, 3, 4, 5, 6, 7]}}]\n" for r in range(7, 0, -1))
    + "".join(f"  - [{{from: {r}, to: {r + 1}, chunks: [0, 1, 2, 3, 4, 5, 6, 7], reduce: false}}]\n" for r in range(7))
)


@pytest.mark.skipif(
    BIN is None, reason="ASTRA-sim binaries not found ($ASTRA_SIM_BIN or ../shared/tools/astra-sim/bin)"
)
@pytest.mark.parametrize("backend,topology", [("aware", "Ring"), ("unaware", "Switch")])
def test_every_generated_kind_finishes_as_on_astrasim(run_cli, tmp_path, backend, topology):
    from tools.truthcases import BINARY_NAMES, finish_cycles

    (tmp_path / "net.yml").write_text(
        f"topology: [ {topology} ]\nnpus_count: [ 8 ]\nbandwidth: [ 50 ]\nlatency: [ 500 ]\n"
    )
    (tmp_path / "mem.json").write_text('{"memory-type": "NO_MEMORY_EXPANSION"}')
    (tmp_path / "chain.yaml").write_text(DESCRIBED)
    kinds = [*ALGORITHMS, str(tmp_path / "chain.yaml")]
    for kind in kinds:
        prefix = tmp_path / "algos" / Path(kind).stem
        res = run_cli("generate", "collective", kind, "--ranks", "8", "--reduce-us", "1", "-o", str(prefix), "--json")
        assert res.exit_code == 0, res.stderr
        system = {
            "scheduling-policy": "LIFO",
            "endpoint-delay": 10,
            "active-chunks-per-dimension": 1,
            "preferred-dataset-splits": 1,
            "all-reduce-implementation": ["ring"],
            "collective-optimization": "localBWAware",
            "local-mem-bw": 50,
            **json.loads("{" + json.loads(res.stdout)["system_config"] + "}"),
        }
        (tmp_path / "sys.json").write_text(json.dumps(system))
        args = [
            f"--workload-configuration={WORKLOAD}",
            f"--system-configuration={tmp_path / 'sys.json'}",
            f"--network-configuration={tmp_path / 'net.yml'}",
            f"--remote-memory-configuration={tmp_path / 'mem.json'}",
        ]
        # its log folder (log/log.log) goes under tmp_path, not into the directory the suite runs in
        proc = subprocess.run(
            [str(BIN / BINARY_NAMES[backend]), *args, f"--logging-folder={tmp_path / 'log'}"],
            capture_output=True, text=True, timeout=60, cwd=tmp_path,
        )  # fmt: skip
        truth = finish_cycles(proc.stdout)
        assert sorted(truth) == list(range(8)), (kind, proc.stdout[-500:])
        res = run_cli(
            "simulate", str(WORKLOAD), "-n", str(tmp_path / "net.yml"), "-s", str(tmp_path / "sys.json"),
            "--congestion", backend, "--json", "-q",
        )  # fmt: skip
        assert res.exit_code == 0, res.stderr
        ours = json.loads(res.stdout)["ranks"]
        assert [ours[str(r)]["finish_ns"] for r in range(8)] == [truth[r] for r in range(8)], kind

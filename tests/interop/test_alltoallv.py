"""All-to-all with per-peer sizes against the real ASTRA-sim: `export astra-sim` turns each one into
a custom algorithm of exactly its sends (per-rank `.a2av.<k>.<pos>.et` files named by the
`per-node-custom-implementation` YAML), both binaries run it to the end, `chakra simulate` gives the
same finish on every rank, and routing imbalance costs time in ASTRA-sim's figures too.

Inputs: the recorded `pytorch/moeskew4` run (Zipf-routed tokens, real torch + gloo) and generated
MoE layers (`chakra generate moe`, zipf and uniform routing).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chakra.converters.pytorch import convert
from chakra.dsl.builtins.moe import MoEConfig, build_moe
from chakra.dsl.device import Device
from chakra.io import read_trace, read_traces, write_rank_traces
from chakra.schema import NodeType
from chakra.schema.attrs import SEND_BYTES, get_attr
from chakra.whatif.recipes import rebalance_routing, scale_compute

from .astrasim import bin_dir, run

BIN, WHY = bin_dir()
TOLERANCE = 1e-3
needs_astrasim = pytest.mark.skipif(BIN is None, reason=WHY)


@pytest.fixture(scope="module")
def recorded(samples_dir: Path, tmp_path_factory) -> Path:
    d = samples_dir / "pytorch" / "moeskew4"
    prefix = tmp_path_factory.mktemp("moeskew4") / "raw"
    convert(
        [d / f"et.{r}.json.gz" for r in range(4)], prefix, kineto=[d / f"kineto.{r}.json.gz" for r in range(4)], jobs=1
    )
    return prefix


def _export_and_run(run_cli, prefix: Path, out: Path, backend: str) -> tuple[dict[int, int], dict[int, int], dict]:
    """(ASTRA-sim finish per rank, chakra simulate finish per rank, export summary)."""
    res = run_cli("export", "astra-sim", str(prefix), "-o", str(out), "--backend", backend, "--json", "-q")
    assert res.exit_code == 0, res.stderr[-2000:]
    summary = json.loads(res.stdout)
    sim = run_cli("simulate", *summary["simulate_command"].split()[2:], "--json", "-q")
    assert sim.exit_code == 0, sim.stderr[-2000:]
    ours = {int(r): v["finish_ns"] for r, v in json.loads(sim.stdout)["ranks"].items()}
    if BIN is None:
        return {}, ours, summary
    argv = summary["command"].split()
    argv[0] = str(BIN / argv[0])
    finished, log = run(argv, out.parent)
    assert sorted(finished) == list(range(summary["ranks"])), log[-1500:]
    off = {r: (ours[r], t) for r, t in finished.items() if abs(ours[r] - t) > TOLERANCE * t}
    assert not off, f"rank: (chakra simulate, ASTRA-sim) ns differing by more than 0.1%: {off}"
    return finished, ours, summary


def test_export_writes_the_sends(recorded, tmp_path, run_cli):
    out = tmp_path / "x"
    assert run_cli("export", "astra-sim", str(recorded), "-o", str(out), "-q").exit_code == 0
    system = json.loads(Path(f"{out}.system.json").read_text())
    assert system["per-node-custom-implementation"] == f"{out}.a2av.yaml"
    assert system["preferred-dataset-splits"] == 1  # a custom algorithm is one stream
    mapping = dict(line.split(": ") for line in Path(f"{out}.a2av.yaml").read_text().splitlines()[1:])
    assert len(mapping) == 4  # dispatch and combine, forward and backward
    exported = read_traces([out])
    for k, (node_id, algo) in enumerate(sorted(mapping.items())):
        assert algo.strip('"') == f"{out}.a2av.{k}"
        # the collective got that id on every rank, and each rank's algorithm sends its list
        for t in exported:
            node = next(n for n in t.nodes if n.id == int(node_id))
            want = {j: b for j, b in enumerate(get_attr(node, SEND_BYTES)) if j != t.rank and b}
            algo_trace = read_trace(f"{out}.a2av.{k}.{t.rank}.et")
            sends = {
                get_attr(n, "comm_dst"): get_attr(n, "comm_size")
                for n in algo_trace.nodes
                if n.type == NodeType.COMM_SEND_NODE
            }
            assert sends == want


@needs_astrasim
@pytest.mark.parametrize("backend", ["aware", "unaware"])
def test_recorded_moe_on_astrasim_and_imbalance(recorded, tmp_path, run_cli, backend):
    """The recorded routing and the same run rebalanced (same bytes): both finish on ASTRA-sim with
    our figures, and with compute taken out (so the all-to-alls are what the step waits for) the
    recorded, imbalanced routing is the slower one on ASTRA-sim."""
    traces = read_traces([recorded])
    _export_and_run(run_cli, recorded, tmp_path / "rec", backend)
    fast = scale_compute(traces, factor=1e9).traces
    variants = {"recorded": fast, "rebalanced": rebalance_routing(fast).traces}
    ends = {}
    for name, tr in variants.items():
        write_rank_traces(tmp_path / name, tr)
        astra, _, _ = _export_and_run(run_cli, tmp_path / name, tmp_path / f"{name}_x", backend)
        ends[name] = max(astra.values())
    assert ends["recorded"] > ends["rebalanced"], ends


@pytest.mark.parametrize("backend", ["aware", "unaware"])
def test_generated_moe_imbalance(tmp_path, run_cli, backend):
    """Generated layers: zipf routing is slower than the same layers rebalanced, which are no faster
    than uniformly drawn routing; every variant matches ASTRA-sim (when present) on every rank."""
    cfg = dict(ranks=4, experts=8, tokens=1024, hidden=512, ffn=1024, layers=1, seed=5)
    skew = build_moe(MoEConfig(**cfg, imbalance="zipf:1.5"), Device())
    skew.save(tmp_path / "skew")
    uni = build_moe(MoEConfig(**cfg, imbalance="uniform"), Device())
    uni.save(tmp_path / "uni")
    write_rank_traces(tmp_path / "rebal", rebalance_routing(read_traces([tmp_path / "skew"])).traces)
    ends = {}
    for name in ("skew", "rebal", "uni"):
        astra, ours, _ = _export_and_run(run_cli, tmp_path / name, tmp_path / f"{name}_x", backend)
        ends[name] = max((astra or ours).values())
    assert ends["skew"] > ends["rebal"], ends
    # rebalancing moves traffic only: the hot rank's experts still compute its extra tokens
    assert ends["rebal"] > ends["uni"], ends


@pytest.mark.parametrize("backend", ["aware", "unaware"])
def test_per_peer_all_to_all_beside_p2p_traffic(tmp_path, run_cli, backend):
    """Written all-to-all-vs (zero pairs, ranks with nothing to move) sharing the links with a send:
    the simulator runs them on the shared clock (live mode) and matches ASTRA-sim."""
    from chakra.dsl.workload import Workload

    w = Workload(4)
    c = w.compute(w.all_ranks, "c", duration_us=5)
    m = [[0, 100000, 5000, 7000], [20000, 0, 300000, 1000], [0, 0, 0, 50000], [1000, 2000, 3000, 4000]]
    a = w.all_to_all(per_peer=m, after=c)
    w.send(1, 3, 200000, after=c.on(1))
    # ranks 2 and 3 move nothing here: their algorithm is one 1 ns compute node
    quiet = [[0, 1000, 0, 0], [1000, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]]
    b = w.all_to_all(per_peer=quiet, after=a)
    w.compute(w.all_ranks, "d", duration_us=3, after=b)
    w.save(tmp_path / "w")
    astra, ours, summary = _export_and_run(run_cli, tmp_path / "w", tmp_path / "x", backend)
    assert summary["changes"]["all-to-alls with per-peer sizes as custom algorithms"] == 2
    assert ours[1] > ours[3]  # rank 1 sends 300 kB to rank 2; rank 3 moves 10 kB


def test_per_node_mapping_of_another_collective_is_refused(samples_dir, tmp_path, run_cli):
    """`chakra simulate` runs a per-node custom algorithm only where it is the all-to-all's own
    per-peer sends (what the export writes); a mapping that names another collective (here the
    all-reduce of ASTRA-sim's own example) is refused in one line rather than run natively."""
    d = samples_dir / "astrasim"
    node = read_trace(d / "all_reduce_8npus_1MB" / "all_reduce.0.et").nodes[0]
    system = json.loads((d / "configs_rt_template" / "system_cfg.json").read_text())
    (tmp_path / "map.yaml").write_text(f'{node.id}: "{tmp_path}/algo"\n')
    system["per-node-custom-implementation"] = str(tmp_path / "map.yaml")
    (tmp_path / "system.json").write_text(json.dumps(system))
    args = ["simulate", str(d / "all_reduce_8npus_1MB" / "all_reduce"), "-s", str(tmp_path / "system.json")]
    sim = run_cli(*args, "-n", str(d / "configs_rt_template" / "network_cfg.yml"), "-q")
    assert sim.exit_code == 1
    lines = [x for x in sim.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and f"names node {node.id} of rank 0" in lines[0], sim.stderr

"""Run one workload through the real ASTRA-sim and through `chakra.sim.simulate`, per-rank side by side.

A development aid for simulator parity (the recorded truth table lives in tests/data/astrasim_truth/).
The ASTRA-sim binaries are found via $ASTRA_SIM_BIN or ../shared/tools/astra-sim/bin next to the repo.

    from tools.sim_vs_astrasim import compare
    compare(traces, net_yml, sys_json, aware=True, groups={"1": [0, 1]})
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Optional

from chakra.io import write_trace
from chakra.trace import Trace

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tools.truthcases
from tools.truthcases import find_binaries, finish_cycles  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def run_astrasim(
    traces: list[Trace],
    network: Path,
    system: Path,
    *,
    aware: bool = True,
    groups: Optional[dict[str, list[int]]] = None,
    memory: Optional[Path] = None,
    extra_args: tuple[str, ...] = (),
    timeout: float = 120,
) -> dict[int, int]:
    """{rank: finish ns} from ASTRA-sim's `sys[i] finished, T cycles` lines (missing ranks: absent)."""
    bindir = find_binaries()
    if bindir is None:
        raise RuntimeError("ASTRA-sim binaries not found (set ASTRA_SIM_BIN)")
    binary = bindir / ("AstraSim_Analytical_Congestion_Aware" if aware else "AstraSim_Analytical_Congestion_Unaware")
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        for i, tr in enumerate(traces):
            write_trace(t / f"w.{tr.rank if tr.rank is not None else i}.et", tr)
        if memory is None:
            memory = t / "mem.json"
            memory.write_text(json.dumps({"memory-type": "NO_MEMORY_EXPANSION"}))
        cmd = [
            str(binary),
            f"--workload-configuration={t}/w",
            f"--system-configuration={system}",
            f"--network-configuration={network}",
            f"--remote-memory-configuration={memory}",
            f"--logging-folder={t}/log",
            *extra_args,
        ]
        if groups:
            (t / "groups.json").write_text(json.dumps(groups))
            cmd.append(f"--comm-group-configuration={t}/groups.json")
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=t)
        if os.environ.get("SIM_VS_ASTRASIM_VERBOSE"):
            print("\n".join((out.stdout + out.stderr).splitlines()[-4:]))
    return finish_cycles(out.stdout)


def compare(traces: list[Trace], network: Path, system: Path, *, aware: bool = True, **kw: Any) -> dict:
    from chakra.sim import simulate

    groups = kw.pop("groups", None)
    ours_kw = kw.pop("ours", {})
    truth = run_astrasim(traces, network, system, aware=aware, groups=groups, **kw)
    res = simulate(traces, network, system, comm_groups=groups, congestion="aware" if aware else "unaware", **ours_kw)
    ours = {r: v.finish_ns for r, v in res.ranks.items()}
    return {"astra": truth, "ours": ours, "equal": truth == ours, "warnings": res.warnings}


# ---- random workloads: `python tools/sim_vs_astrasim.py --fuzz 200 [--seed 0]` --------------------


def random_case(seed: int) -> tuple[list[Trace], list[str], list[int], dict, bool, dict]:
    """A small random workload and configs: chained compute and collectives (random type, size,
    algorithm, process group, involved_dim), a few sends/receives, 8 ranks on a 1-D or 2 x 4 network."""
    import random

    from chakra.schema import CollectiveType as C
    from chakra.schema import NodeType
    from chakra.trace import make_node

    rnd = random.Random(seed)
    aware = rnd.random() < 0.5
    two_d = not aware and rnd.random() < 0.5
    topo = [rnd.choice(["Ring", "Switch", "FullyConnected"]) for _ in range(2 if two_d else 1)]
    npus = [2, 4] if two_d else [8]
    sysk: dict = {
        "preferred_dataset_splits": rnd.choice([1, 2, 4]),
        "active_chunks_per_dimension": rnd.choice([1, 1, 2]),
        "collective_optimization": rnd.choice(["localBWAware", "baseline"]),
        "local_mem_bw": rnd.choice([50, 1600]),
    }
    for k in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all"):
        pool = ["ring", "direct"] + (["halvingDoubling"] if k != "all_to_all" else [])
        sysk[f"{k}_implementation"] = [rnd.choice(pool) for _ in topo]
    if not two_d and rnd.random() < 0.2:
        sysk["all_reduce_implementation"] = ["doubleBinaryTree"]
    perm = list(range(8))
    rnd.shuffle(perm)
    groups = {"1": perm[:4], "2": perm[4:]}
    traces = [Trace(rank=r) for r in range(8)]
    last: dict[int, int] = {}

    def add(r: int, typ: int, attrs: dict, dur: int = 0) -> None:
        i = len(traces[r].nodes) + 1
        deps = [last[r]] if r in last else []
        traces[r].nodes.append(
            make_node(i, f"n{i}", typ, data_deps=deps, duration_micros=dur, attrs={"is_cpu_op": False, **attrs})
        )
        last[r] = i

    for _ in range(rnd.randint(1, 3)):
        for r in range(8):
            add(r, NodeType.COMP_NODE, {}, rnd.randint(1, 9))
        ctype = int(rnd.choice([C.ALL_REDUCE, C.ALL_GATHER, C.REDUCE_SCATTER, C.ALL_TO_ALL]))
        size = rnd.choice([1 << 16, 1 << 20, 999_999])
        pg = rnd.choice(["", "", "1"])
        for r in range(8):
            if pg == "1":
                g = "1" if r in groups["1"] else "2"
                add(r, NodeType.COMM_COLL_NODE, {"comm_type": ctype, "comm_size": size, "pg_name": g})
            else:
                add(r, NodeType.COMM_COLL_NODE, {"comm_type": ctype, "comm_size": size})
        if rnd.random() < 0.4:
            a, b = rnd.sample(range(8), 2)
            size = rnd.choice([1 << 14, 1 << 20])
            add(a, NodeType.COMM_SEND_NODE, {"comm_dst": b, "comm_size": size, "comm_tag": len(traces[a].nodes)})
            add(b, NodeType.COMM_RECV_NODE, {"comm_src": a, "comm_size": size, "comm_tag": len(traces[a].nodes) - 1})
    return traces, topo, npus, sysk, aware, groups


def fuzz(count: int, seed: int = 0) -> int:
    """Run `count` random cases through both simulators; print each mismatch; return how many."""
    import tempfile

    from tests.sim.conftest import write_network, write_system

    bad = 0
    for s in range(seed, seed + count):
        traces, topo, npus, sysk, aware, groups = random_case(s)
        with tempfile.TemporaryDirectory() as d:
            net = write_network(Path(d) / "n.yml", topo, npus, [50.0] * len(topo), [500.0] * len(topo))
            system = write_system(Path(d) / "s.json", **sysk)
            r = compare(traces, net, system, aware=aware, groups=groups)
        if not r["equal"] and not r["warnings"]:
            bad += 1
            print(f"seed {s}: {topo} {npus} {'aware' if aware else 'unaware'} {sysk}")
            print(f"  astra {r['astra']}\n  ours  {r['ours']}")
    print(f"{count - bad} of {count} random cases give ASTRA-sim's per-rank finish times")
    return bad


if __name__ == "__main__":
    import argparse
    import sys

    sys.path.insert(0, str(REPO))  # the config writers live with the tests
    ap = argparse.ArgumentParser(description="Random workloads through ASTRA-sim and chakra.sim, compared per rank.")
    ap.add_argument("--fuzz", type=int, default=100, help="number of random cases")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    sys.exit(1 if fuzz(args.fuzz, args.seed) else 0)

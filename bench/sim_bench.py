"""Simulator speed and scale (congestion-unaware analytical backend). Prints figures; not a test.

(a) 64 ranks (Ring 8 x Switch 8) x 10,000 nodes per rank: 9,000 compute nodes of 10 us and 1,000
    all-reduces of 1 MiB (every 10th node), once as one dependency chain per rank ("chained"),
    once with compute as a chain and each all-reduce hanging off the compute node before it, free
    to queue behind compute ("queued");
(b) 512 ranks (Ring 8 x Ring 8 x Switch 8) x 10,000 nodes, chained.

Traces are written as PREFIX.<rank>.et files and simulated from the PREFIX, so the figures include
reading the files. By default one rank is serialised and the others are hard links (a
data-parallel trace is the same on every rank): the simulator then indexes that content once and
shares the read-only arrays. `--distinct` gives every rank its own file (metadata names the
rank); the simulator compares the nodes after the metadata, so those are indexed once too
(before 2026-11-26 this measured indexing every rank). Reference: ASTRA-sim built on this machine took 15.6 s for
(a) chained, 378 s for (a) queued, 590 s / 5.9 GB for (b).

    .venv/bin/python bench/sim_bench.py [--only a|b] [--nodes 10000] [--congestion aware] [--no-astra-sim]

When ASTRA-sim's analytical binaries are found ($ASTRA_SIM_BIN, else ../shared/tools/astra-sim/bin
next to the repository), every case also runs through the real ASTRA-sim on the same files and
configs, and the line shows both times, both peak resident memories (ASTRA-sim's measured by GNU
time), the ratios, and whether every rank's finish time agrees. `--congestion aware` uses
ASTRA-sim's congestion-aware backend, which takes 1-D networks only: the cases then run on one
Switch of all ranks.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

from chakra.io import TraceWriter
from chakra.schema import CollectiveType, NodeType
from chakra.sim import simulate
from chakra.sim.config import NetworkConfig, bundled_config_dir
from chakra.trace import make_metadata, make_node

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tools.truthcases
from astrasim_run import run_timed  # noqa: E402

from tools.truthcases import find_binaries  # noqa: E402


def write_rank_files(prefix: Path, ranks: int, nodes: int, chained: bool, distinct: bool = False) -> None:
    first = Path(f"{prefix}.0.et")
    with TraceWriter(first) as w:
        w.write_metadata(make_metadata())
        prev_comp = -1
        for i in range(nodes):
            if i % 10 == 9:
                deps = [i - 1]
                node = make_node(
                    i,
                    f"all_reduce_{i // 10}",
                    NodeType.COMM_COLL_NODE,
                    data_deps=deps,
                    attrs={"is_cpu_op": False, "comm_type": int(CollectiveType.ALL_REDUCE), "comm_size": 1 << 20},
                )
            else:
                deps = [i - 1] if chained and i else ([prev_comp] if prev_comp >= 0 else [])
                node = make_node(
                    i,
                    f"compute_{i}",
                    NodeType.COMP_NODE,
                    data_deps=deps,
                    duration_micros=10,
                    attrs={"is_cpu_op": False},
                )
                prev_comp = i
            w.write_node(node)
    if not distinct:
        for r in range(1, ranks):
            os.link(first, f"{prefix}.{r}.et")
        return
    # Every rank file different (its GlobalMetadata names the rank): no identical-file sharing.
    data = first.read_bytes()
    head = data[0]  # metadata length (< 128 bytes here)
    body = data[1 + head :]
    for r in range(ranks):
        md = make_metadata(rank=r).SerializeToString()
        Path(f"{prefix}.{r}.et").write_bytes(bytes([len(md)]) + md + body)


def write_configs(tmp: Path, net: NetworkConfig) -> tuple[Path, Path, Path]:
    """The network YAML, system JSON (ring on every dimension) and memory JSON both simulators read."""
    npath, spath, mpath = tmp / "network.yml", tmp / "system.json", tmp / "memory.json"
    npath.write_text(
        f"topology: {json.dumps(net.topology)}\nnpus_count: {json.dumps(net.npus_count)}\n"
        f"bandwidth: {json.dumps(net.bandwidth)}\nlatency: {json.dumps(net.latency)}\n"
    )
    data = json.loads((bundled_config_dir() / "system.json").read_text())
    for coll in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all"):
        data[f"{coll}-implementation"] = ["ring"] * net.dims  # one algorithm per dimension
    spath.write_text(json.dumps(data))
    mpath.write_text(json.dumps({"memory-type": "NO_MEMORY_EXPANSION"}))
    return npath, spath, mpath


def run_astrasim(
    bindir: Path, prefix: Path, cfgs: tuple[Path, Path, Path], aware: bool
) -> tuple[float, float, float, dict]:
    """(wall s, cpu s, peak RSS MiB, {rank: finish ns}) of one ASTRA-sim run (`astrasim_run`)."""
    binary = bindir / ("AstraSim_Analytical_Congestion_Aware" if aware else "AstraSim_Analytical_Congestion_Unaware")
    npath, spath, mpath = cfgs
    cmd = [
        str(binary),
        f"--workload-configuration={prefix}",
        f"--system-configuration={spath}",
        f"--network-configuration={npath}",
        f"--remote-memory-configuration={mpath}",
        f"--logging-folder={prefix.parent / 'astra-log'}",
    ]
    got = run_timed(cmd, prefix.parent)
    return got["wall"], got["cpu"], got["rss_mib"], got["finish"]


def run(
    label: str,
    net: NetworkConfig,
    ranks: int,
    nodes: int,
    chained: bool,
    tmp: Path,
    distinct: bool,
    congestion: str = "unaware",
    astra: Path | None = None,
) -> None:
    prefix = tmp / label.replace(" ", "_")
    t0 = time.perf_counter()
    write_rank_files(prefix, ranks, nodes, chained, distinct)
    t_gen = time.perf_counter() - t0
    cfgs = write_configs(tmp, net)
    t1 = time.perf_counter()
    c1 = time.process_time()
    res = simulate(str(prefix), cfgs[0], cfgs[1], congestion=congestion)
    wall = time.perf_counter() - t1
    cpu = time.process_time() - c1
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    total = ranks * nodes
    print(
        f"{label:<10} ranks={ranks:<4} nodes={total:>9,}  wall {wall:6.2f} s (cpu {cpu:6.2f} s)  "
        f"{total / wall:>9,.0f} node events/s (per cpu s {total / cpu:>9,.0f})  peak RSS {peak:5.0f} MiB  "
        f"simulated finish {res.finish_ns / 1e6:,.3f} ms  (trace generation {t_gen:.1f} s)",
        flush=True,
    )
    if astra is not None:
        a_wall, a_cpu, a_rss, a_finish = run_astrasim(astra, prefix, cfgs, congestion == "aware")
        ours = {r: v.finish_ns for r, v in res.ranks.items()}
        same = "every rank's finish identical" if a_finish == ours else f"DIFFERENT finish ({len(a_finish)} ranks)"
        print(
            f"{'':<10} ASTRA-sim: wall {a_wall:6.2f} s (cpu {a_cpu:6.2f} s), peak RSS {a_rss:6.0f} MiB  ->  ours is "
            f"{a_wall / wall:5.1f}x faster in wall time ({a_cpu / cpu:5.1f}x in cpu time), "
            f"{a_rss / peak:5.1f}x smaller; {same}",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=["a", "b"], default=None)
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument(
        "--distinct",
        action="store_true",
        help="give every rank its own file whose metadata names it (the nodes, still the same, are indexed once)",
    )
    ap.add_argument("--congestion", choices=["unaware", "aware"], default="unaware")
    ap.add_argument("--no-astra-sim", action="store_true", help="do not run the real ASTRA-sim beside ours")
    ap.add_argument("--no-queued", action="store_true", help="skip the (a) queued case")
    args = ap.parse_args()
    astra = None if args.no_astra_sim else find_binaries()
    aware = args.congestion == "aware"
    kw = {"congestion": args.congestion, "astra": astra}
    with tempfile.TemporaryDirectory(prefix="chakra-simbench-") as d:
        tmp = Path(d)
        if args.only in (None, "a"):
            net = NetworkConfig(["Ring", "Switch"], [8, 8], [50.0, 50.0], [500.0, 500.0])
            if aware:
                net = NetworkConfig(["Switch"], [64], [50.0], [500.0])
            run("a chained", net, 64, args.nodes, True, tmp, args.distinct, **kw)
            if not args.no_queued:
                run("a queued", net, 64, args.nodes, False, tmp, args.distinct, **kw)
        if args.only in (None, "b"):
            net = NetworkConfig(["Ring", "Ring", "Switch"], [8, 8, 8], [50.0] * 3, [500.0] * 3)
            if aware:
                net = NetworkConfig(["Switch"], [512], [50.0], [500.0])
            run("b chained", net, 512, args.nodes, True, tmp, args.distinct, **kw)
    sys.stdout.flush()


if __name__ == "__main__":
    main()

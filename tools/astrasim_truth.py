#!/usr/bin/env python3
"""Record ASTRA-sim's own results for a deterministic matrix of small cases (the truth table).

    .venv/bin/python tools/astrasim_truth.py [--bin DIR] [--out tests/data/astrasim_truth]
                                              [--jobs 2] [--only CLASS ...] [--timeout 5]

Each case (a compact spec, see `tools/truthcases.py`) is written to a temp folder as
`PREFIX.<rank>.et` traces plus network/system/memory/comm-group configs, run through the real
analytical binary of its backend, and recorded as `{"status", "finish", "exposed", "message"}`:

- `finished`: every rank printed `sys[i] finished, T cycles` (T in ns);
- `unfinished`: exit 0 but some ranks printed nothing (`finish` has null for them);
- `abort`: a non-zero exit (assert, uncaught exception, exit(1)); `message` is ASTRA-sim's last
  error line;
- `timeout`: still running after `--timeout` seconds (a hang).

One JSON file per feature class under `--out`; the script prints cases per class and status.
The binaries come from `--bin`, `$ASTRA_SIM_BIN` or `../shared/tools/astra-sim/bin`.

    .venv/bin/python tools/astrasim_truth.py --said --seed fresh1 --count 40 [--only random random_edge]

records nothing: it draws the random classes under fresh seeds, runs each case on the real binary
and through `chakra simulate --json` as a user would, and lists every ASTRA-sim failure that the
command did not say on stderr and in --json's `warnings` (exit 1 when there is one).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools.truthcases import (  # noqa: E402
    BINARY_NAMES,
    IMPL_KEYS,
    binary_args,
    find_binaries,
    node_ranks,
    num_npus,
    simulate_args,
    write_case,
)

MIB = 1 << 20
TYPES = ("ALL_REDUCE", "ALL_GATHER", "REDUCE_SCATTER", "ALL_TO_ALL")
UNIMPLEMENTED = ("REDUCE", "GATHER", "SCATTER", "BROADCAST", "REDUCE_SCATTER_BLOCK", "BARRIER")
ALGOS_1D = (
    "ring",
    "direct",
    "direct2",
    "halvingDoubling",
    "doubleBinaryTree",
    "oneRing",
    "oneDirect",
    "oneHalvingDoubling",
)
TOPOS = ("Ring", "FullyConnected", "Switch")
BACKENDS = ("aware", "unaware")
LINK = {"Ring": (50, 500), "FullyConnected": (100, 300), "Switch": (200, 900)}
SHORT = {"Ring": "R", "FullyConnected": "FC", "Switch": "SW"}
ABBR = {"ALL_REDUCE": "AR", "ALL_GATHER": "AG", "REDUCE_SCATTER": "RS", "ALL_TO_ALL": "A2A"}

_FINISHED = re.compile(r"sys\[(\d+)\] finished, (\d+) cycles, exposed communication (\d+) cycles")
_PREFIX = re.compile(r"^\[[^\]]*\] \[[^\]]*\] \[[^\]]*\] ")


def net(topos: Any, npus: Any, bw: Any = None, lat: Any = None) -> dict[str, Any]:
    topos = [topos] if isinstance(topos, str) else list(topos)
    npus = [npus] if isinstance(npus, int) else list(npus)
    bw = bw if bw is not None else [LINK[t][0] for t in topos]
    lat = lat if lat is not None else [LINK[t][1] for t in topos]
    return {"topology": topos, "npus_count": npus, "bandwidth": list(bw), "latency": list(lat)}


def impls(algo: Any, dims: int = 1) -> dict[str, list[str]]:
    """The same algorithm (or per-dim list) for all four collectives."""
    per = [algo] * dims if isinstance(algo, str) else list(algo)
    return {
        k: list(per)
        for k in (
            "all-reduce-implementation",
            "all-gather-implementation",
            "reduce-scatter-implementation",
            "all-to-all-implementation",
        )
    }


def coll(ctype: str, size: int, nid: int = 1, **kw: Any) -> dict[str, Any]:
    return {"id": nid, "op": "coll", "coll": ctype, "size": size, **kw}


IDLE_ID = 900


def case(name: str, cls: str, backend: str, network: dict, nodes: list, fill: bool = True, **kw: Any) -> dict[str, Any]:
    """A spec; ranks holding no node get a 0 us compute node (id 900) unless `fill` is False,
    because ASTRA-sim aborts on an empty rank trace ("No dependancy free nodes found")."""
    spec = {"name": f"{cls}/{backend}/{name}", "cls": cls, "backend": backend, "network": network}
    n = num_npus(spec)
    busy = {r for e in nodes for r in node_ranks(e, n)}
    idle = [r for r in range(n) if r not in busy]
    if fill and idle:
        nodes = [*nodes, {"id": IDLE_ID, "op": "comp", "us": 0, "ranks": idle}]
    for key in ("system", "memory", "groups", "options", "custom"):
        if kw.get(key):
            spec[key] = kw[key]
    spec["nodes"] = nodes
    return spec


# ---------------------------------------------------------------------------------------------
# The matrix, one generator per feature class


def coll_1d() -> Iterator[dict]:
    """Every collective x algorithm x 1-D topology x 4/8 NPUs, 1 MiB, both backends."""
    for b in BACKENDS:
        for topo in TOPOS:
            for n in (4, 8):
                for algo in ALGOS_1D:
                    for t in TYPES:
                        yield case(
                            f"{ABBR[t]}-{algo}-{SHORT[topo]}{n}",
                            "coll_1d",
                            b,
                            net(topo, n),
                            [coll(t, MIB)],
                            system=impls(algo),
                        )


def coll_sizes() -> Iterator[dict]:
    """NPU counts 2..16 (incl. non powers of two) x odd and tiny sizes x splits."""
    sizes = (1, 7, 1000, 65536, 1_000_003, 4 * MIB)
    for b in BACKENDS:
        for topo, algo in (("Ring", "ring"), ("Switch", "direct"), ("FullyConnected", "halvingDoubling")):
            for n in (2, 3, 4, 6, 8, 16):
                for size in sizes:
                    for t in TYPES:
                        if size in (65536, 4 * MIB) and t in ("REDUCE_SCATTER", "ALL_TO_ALL"):
                            continue
                        if (t == "ALL_GATHER" and size == 1) or (t == "ALL_TO_ALL" and algo == "halvingDoubling"):
                            continue  # a hang (chunk of 0 B) / an exit: one case each in `fail`
                        yield case(
                            f"{ABBR[t]}-{algo}-{SHORT[topo]}{n}-{size}B",
                            "coll_sizes",
                            b,
                            net(topo, n),
                            [coll(t, size)],
                            system=impls(algo),
                        )


MULTI_SHAPES = (
    (("Ring", "Ring"), (2, 4)),
    (("Ring", "FullyConnected"), (4, 2)),
    (("FullyConnected", "Switch"), (2, 4)),
    (("Switch", "Switch"), (4, 4)),
    (("Ring", "FullyConnected", "Switch"), (2, 2, 2)),
    (("Ring", "Ring", "Ring"), (2, 2, 4)),
    (("FullyConnected", "Ring", "Switch"), (4, 2, 2)),
)
BW3, LAT3 = (200, 100, 50), (50, 500, 2000)


def multi_net(topos: tuple, npus: tuple) -> dict:
    return net(topos, npus, BW3[: len(topos)], LAT3[: len(topos)])


def coll_multidim() -> Iterator[dict]:
    """2-D and 3-D networks (unaware backend): algorithm sets x localBWAware/baseline."""
    for topos, npus in MULTI_SHAPES:
        d = len(topos)
        algo_sets = {
            "ring": "ring",
            "direct": "direct",
            "hd": "halvingDoubling",
            "mixed": ["ring", "direct", "halvingDoubling"][:d],
            "oneRing": "oneRing",
            "oneDirect": "oneDirect",
        }
        shape = "x".join(f"{SHORT[t]}{n}" for t, n in zip(topos, npus))
        for label, algo in algo_sets.items():
            for opt in ("localBWAware", "baseline"):
                for t in TYPES:
                    system = {**impls(algo, d), "collective-optimization": opt}
                    yield case(
                        f"{ABBR[t]}-{label}-{opt}-{shape}",
                        "coll_multidim",
                        "unaware",
                        multi_net(topos, npus),
                        [coll(t, MIB)],
                        system=system,
                    )


def involved_dim() -> Iterator[dict]:
    """Collectives restricted to some dimensions with the `involved_dim` bool_list."""
    shapes = (
        (("Ring", "Ring"), (2, 4)),
        (("Ring", "FullyConnected", "Switch"), (2, 2, 2)),
        (("Switch", "Ring", "FullyConnected"), (4, 2, 2)),
    )
    for topos, npus in shapes:
        d = len(topos)
        shape = "x".join(f"{SHORT[t]}{n}" for t, n in zip(topos, npus))
        masks = [[bool(m >> i & 1) for i in range(d)] for m in range(1 << d)]
        masks += [[True], [False, True, True, True, True][: d + 2]]  # shorter / longer than dims
        for mask in masks:
            for t in TYPES:
                label = "".join("1" if x else "0" for x in mask)
                yield case(
                    f"{ABBR[t]}-{shape}-dims{label}",
                    "involved_dim",
                    "unaware",
                    multi_net(topos, npus),
                    [coll(t, MIB, involved_dim=mask)],
                    system=impls("ring", d),
                )


def skew() -> Iterator[dict]:
    """Compute of different lengths before a collective on each rank (late arrivals)."""
    nets = [
        ("aware", net("Ring", 8), 1),
        ("unaware", net("Ring", 8), 1),
        ("aware", net("Switch", 8), 1),
        ("unaware", multi_net(("Ring", "Switch"), (2, 4)), 2),
    ]
    patterns = {
        "ascending": lambda r: 5 * r,
        "one-late": lambda r: 200 if r == 3 else 1,
        "one-early": lambda r: 1 if r == 5 else 80,
        "zigzag": lambda r: (r * 37) % 11 * 3,
    }
    for b, network, d in nets:
        n = num_npus({"network": network})
        shape = "x".join(f"{SHORT[t]}{k}" for t, k in zip(network["topology"], network["npus_count"]))
        for pname, fn in patterns.items():
            us = [fn(r) for r in range(n)]
            for t in TYPES:
                nodes = [{"id": 1, "op": "comp", "us": us}, coll(t, MIB, 2, deps=[1])]
                yield case(f"{ABBR[t]}-{pname}-{shape}", "skew", b, network, nodes, system=impls("ring", d))
            # compute after, and a second collective waiting on both
            nodes = [
                {"id": 1, "op": "comp", "us": us},
                coll("ALL_REDUCE", MIB, 2, deps=[1]),
                {"id": 3, "op": "comp", "us": [u // 2 + 1 for u in us], "deps": [2]},
                coll("ALL_GATHER", 65536, 4, deps=[3]),
            ]
            yield case(f"chain-{pname}-{shape}", "skew", b, network, nodes, system=impls("ring", d))
            # a collective next to independent compute (overlap of the comp and comm slots)
            nodes = [
                {"id": 1, "op": "comp", "us": us},
                coll("ALL_REDUCE", MIB, 2),
                {"id": 3, "op": "comp", "us": 50, "deps": [1]},
            ]
            yield case(f"overlap-{pname}-{shape}", "skew", b, network, nodes, system=impls("ring", d))
        # two independent collectives on every rank: issued in id order, one comm slot
        nodes = [coll("ALL_REDUCE", MIB, 1), coll("ALL_TO_ALL", 3 * MIB, 2), coll("ALL_GATHER", 100_000, 3)]
        yield case(f"independent-colls-{shape}", "skew", b, network, nodes, system=impls("ring", d))


SYSTEM_VARIANTS: dict[str, dict] = {
    "splits1": {"system": {"preferred-dataset-splits": 1}},
    "splits2": {"system": {"preferred-dataset-splits": 2}},
    "splits3": {"system": {"preferred-dataset-splits": 3}},
    "splits16": {"system": {"preferred-dataset-splits": 16}},
    "splits64": {"system": {"preferred-dataset-splits": 64}},
    "active2": {"system": {"active-chunks-per-dimension": 2}},
    "active4-splits8": {"system": {"active-chunks-per-dimension": 4, "preferred-dataset-splits": 8}},
    "fifo-active2": {"system": {"scheduling-policy": "FIFO", "active-chunks-per-dimension": 2}},
    "fifo": {"system": {"scheduling-policy": "FIFO"}},
    "ed0": {"system": {"endpoint-delay": 0}},
    "ed100": {"system": {"endpoint-delay": 100}},
    "lmbw1600": {"system": {"local-mem-bw": 1600}},
    "lmbw12.5": {"system": {"local-mem-bw": 12.5}},
    "boost1": {"system": {"boost-mode": 1}},
    "intra-SCF": {"system": {"intra-dimension-scheduling": "SCF"}},
    "inter-themis": {"system": {"inter-dimension-scheduling": "themis"}},
    "inter-offlineGreedy": {"system": {"inter-dimension-scheduling": "offlineGreedy"}},
    "local-reduction-delay5": {"system": {"local-reduction-delay": 5}},
    "shared-bus": {"system": {"model-shared-bus": 1, "L": 100, "o": 20, "g": 10, "G": 0.02}},
    "baseline": {"system": {"collective-optimization": "baseline"}},
    "injection-scale2": {"options": {"injection-scale": 2}},
    "comm-scale2": {"options": {"comm-scale": 2}},
    "queues2": {"options": {"num-queues-per-dim": 2}},
    "queues2-active2": {"options": {"num-queues-per-dim": 2}, "system": {"active-chunks-per-dimension": 2}},
}


def system_opts() -> Iterator[dict]:
    """Chunking and system options (and the binaries' command-line scales) on 3 networks."""
    nets = [
        ("aware", net("Ring", 8), 1),
        ("aware", net("Switch", 8), 1),
        ("unaware", multi_net(("Ring", "FullyConnected"), (4, 2)), 2),
    ]
    for b, network, d in nets:
        shape = "x".join(f"{SHORT[t]}{k}" for t, k in zip(network["topology"], network["npus_count"]))
        for vname, var in SYSTEM_VARIANTS.items():
            system = {**impls("ring", d), **var.get("system", {})}
            for t in TYPES:
                yield case(
                    f"{ABBR[t]}-{vname}-{shape}",
                    "system_opts",
                    b,
                    network,
                    [coll(t, MIB)],
                    system=system,
                    options=var.get("options"),
                )
            # two back-to-back collectives sharing the queues (LIFO/FIFO and active chunks matter)
            nodes = [coll("ALL_REDUCE", MIB, 1), coll("ALL_REDUCE", 2 * MIB, 2, deps=[1])]
            yield case(
                f"AR2-{vname}-{shape}", "system_opts", b, network, nodes, system=system, options=var.get("options")
            )


def p2p() -> Iterator[dict]:
    """Send/recv patterns; the rendezvous protocol option."""
    nets = [
        ("aware", net("Ring", 8)),
        ("unaware", net("Ring", 8)),
        ("aware", net("Switch", 8)),
        ("unaware", net("Switch", 8)),
        ("aware", net("FullyConnected", 8)),
        ("unaware", multi_net(("Ring", "Switch"), (2, 4))),
    ]
    for b, network in nets:
        n = 8
        shape = "x".join(f"{SHORT[t]}{k}" for t, k in zip(network["topology"], network["npus_count"]))
        for rdv in (False, True):
            opts = {"rendezvous-protocol": True} if rdv else None
            tagr = "-rdv" if rdv else ""
            for size in (1000, MIB):
                pat: dict[str, list] = {}
                pat["pair"] = [
                    {"id": 1, "op": "send", "pairs": [[0, 1]], "size": size, "tag": 7},
                    {"id": 2, "op": "recv", "pairs": [[0, 1]], "size": size, "tag": 7},
                ]
                pat["far"] = [
                    {"id": 1, "op": "send", "pairs": [[0, 5]], "size": size, "tag": 3},
                    {"id": 2, "op": "recv", "pairs": [[0, 5]], "size": size, "tag": 3},
                ]
                ring = [[r, (r + 1) % n] for r in range(n)]
                pat["ring"] = [
                    {"id": 1, "op": "send", "pairs": ring, "size": size, "tag": 1},
                    {"id": 2, "op": "recv", "pairs": ring, "size": size, "tag": 1},
                ]
                inc = [
                    {"id": 1 + k, "op": "send", "pairs": [[s, 0]], "size": size, "tag": 10 + s}
                    for k, s in enumerate((1, 2, 3, 4))
                ]
                inc += [
                    {"id": 10 + s, "op": "recv", "pairs": [[s, 0]], "size": size, "tag": 10 + s} for s in (1, 2, 3, 4)
                ]
                pat["incast4"] = inc
                pat["bidir"] = [
                    {"id": 1, "op": "send", "pairs": [[0, 1], [1, 0]], "size": size, "tag": 5},
                    {"id": 2, "op": "recv", "pairs": [[1, 0], [0, 1]], "size": size, "tag": 5},
                ]
                pat["recv-late"] = [
                    {"id": 1, "op": "send", "pairs": [[2, 6]], "size": size, "tag": 9},
                    {"id": 3, "op": "comp", "us": 30, "ranks": [6]},
                    {"id": 2, "op": "recv", "pairs": [[2, 6]], "size": size, "tag": 9, "deps": [3]},
                ]
                pat["two-msgs-same-tag"] = [
                    {"id": 1, "op": "send", "pairs": [[0, 1]], "size": size, "tag": 4},
                    {"id": 2, "op": "send", "pairs": [[0, 1]], "size": size, "tag": 4, "deps": [1]},
                    {"id": 3, "op": "recv", "pairs": [[0, 1]], "size": size, "tag": 4},
                    {"id": 4, "op": "recv", "pairs": [[0, 1]], "size": size, "tag": 4, "deps": [3]},
                ]
                pat["send-next-to-coll"] = [
                    coll("ALL_REDUCE", MIB, 1),
                    {"id": 2, "op": "send", "pairs": [[0, 1]], "size": size, "tag": 2},
                    {"id": 3, "op": "recv", "pairs": [[0, 1]], "size": size, "tag": 2},
                ]
                pat["coll-after-send"] = [
                    {"id": 1, "op": "send", "pairs": [[r, (r + 1) % n] for r in range(n)], "size": size, "tag": 1},
                    {"id": 2, "op": "recv", "pairs": [[(r - 1) % n, r] for r in range(n)], "size": size, "tag": 1},
                    coll("ALL_GATHER", 65536, 3, deps=[1, 2]),
                ]
                for pname, nodes in pat.items():
                    yield case(
                        f"{pname}-{size}B{tagr}-{shape}",
                        "p2p",
                        b,
                        network,
                        nodes,
                        options=opts,
                        system=impls("ring", len(network["topology"])),
                    )


def groups() -> Iterator[dict]:
    """Collectives on process subgroups through the comm-group JSON."""
    layouts = {
        "halves": ({"1": [0, 1, 2, 3], "2": [4, 5, 6, 7]}, lambda r: "1" if r < 4 else "2"),
        "strided": ({"1": [0, 2, 4, 6], "2": [1, 3, 5, 7]}, lambda r: "1" if r % 2 == 0 else "2"),
        "pairs": ({"1": [0, 1], "2": [2, 3], "3": [4, 5], "4": [6, 7]}, lambda r: str(r // 2 + 1)),
        "world-as-group": ({"1": list(range(8))}, lambda r: "1"),
        "unordered": ({"1": [3, 0, 2, 1], "2": [7, 5, 6, 4]}, lambda r: "1" if r < 4 else "2"),
    }
    nets = [
        ("aware", net("Ring", 8), 1),
        ("unaware", net("Ring", 8), 1),
        ("aware", net("Switch", 8), 1),
        ("unaware", multi_net(("Ring", "FullyConnected"), (2, 4)), 2),
    ]
    for b, network, d in nets:
        shape = "x".join(f"{SHORT[t]}{k}" for t, k in zip(network["topology"], network["npus_count"]))
        for lname, (gmap, pg) in layouts.items():
            pgs = [pg(r) for r in range(8)]
            for t in TYPES:
                for ed in (10, 40):
                    system = {**impls("ring", d), "endpoint-delay": ed}
                    yield case(
                        f"{ABBR[t]}-{lname}-ed{ed}-{shape}",
                        "groups",
                        b,
                        network,
                        [coll(t, MIB, pg=pgs)],
                        system=system,
                        groups=gmap,
                    )
        # a subgroup collective on some ranks only, then a world all-reduce
        gmap = {"1": [0, 1, 2, 3]}
        nodes = [coll("ALL_REDUCE", MIB, 1, pg="1", ranks=[0, 1, 2, 3]), coll("ALL_REDUCE", MIB, 2, deps=[1])]
        yield case(f"subset-then-world-{shape}", "groups", b, network, nodes, system=impls("ring", d), groups=gmap)
        gm2 = {"1": [0, 1, 2, 3], "2": [4, 5, 6, 7], "3": [0, 2, 4, 6], "4": [1, 3, 5, 7]}
        nodes = [
            coll("ALL_GATHER", MIB, 1, pg=[("1" if r < 4 else "2") for r in range(8)]),
            coll("ALL_REDUCE", MIB, 2, pg=[("3" if r % 2 == 0 else "4") for r in range(8)], deps=[1]),
        ]
        yield case(f"two-layouts-{shape}", "groups", b, network, nodes, system=impls("ring", d), groups=gm2)


def memory() -> Iterator[dict]:
    """MEM_LOAD/MEM_STORE nodes through the remote memory models (tensor_loc local/remote)."""
    mems = {
        "per-npu": {"memory-type": "PER_NPU_MEMORY_EXPANSION", "remote-mem-latency": 100, "remote-mem-bw": 64},
        "per-npu-lat0": {"memory-type": "PER_NPU_MEMORY_EXPANSION", "remote-mem-latency": 0, "remote-mem-bw": 512},
        "per-node": {
            "memory-type": "PER_NODE_MEMORY_EXPANSION",
            "remote-mem-latency": 50,
            "remote-mem-bw": 128,
            "num-nodes": 2,
            "num-npus-per-node": 4,
        },
        "pool": {"memory-type": "MEMORY_POOL", "remote-mem-latency": 20, "remote-mem-bw": 256},
    }
    for b in BACKENDS:
        network = net("Ring", 8)
        for mname, mem in mems.items():
            for loc in (None, "local", "remote"):
                extra = {"loc": loc} if loc else {}
                tag = f"-{loc}" if loc else ""
                yield case(
                    f"load-{mname}{tag}",
                    "memory",
                    b,
                    network,
                    [{"id": 1, "op": "load", "size": 1_000_003, **extra}],
                    memory=mem,
                )
                yield case(
                    f"load-store-chain-{mname}{tag}",
                    "memory",
                    b,
                    network,
                    [
                        {"id": 1, "op": "load", "size": MIB, **extra},
                        {"id": 2, "op": "comp", "us": 7, "deps": [1]},
                        {"id": 3, "op": "store", "size": [65536 * (r + 1) for r in range(8)], "deps": [2], **extra},
                    ],
                    memory=mem,
                )
            # two independent loads on every rank and a collective: one comm slot for all three
            yield case(
                f"loads-and-coll-{mname}",
                "memory",
                b,
                network,
                [
                    {"id": 1, "op": "load", "size": MIB},
                    {"id": 2, "op": "store", "size": 4096},
                    coll("ALL_REDUCE", MIB, 3),
                ],
                memory=mem,
            )


def compute() -> Iterator[dict]:
    """Compute replay (0 us = 1 ns, serial GPU slot), roofline and replay-only."""
    network = net("Ring", 4)
    for b in BACKENDS:
        yield case("zero-us", "compute", b, network, [{"id": 1, "op": "comp", "us": 0}])
        yield case(
            "chain",
            "compute",
            b,
            network,
            [
                {"id": 1, "op": "comp", "us": 3},
                {"id": 2, "op": "comp", "us": 0, "deps": [1]},
                {"id": 3, "op": "comp", "us": 11, "deps": [2]},
            ],
        )
        yield case(
            "independent-serial", "compute", b, network, [{"id": i, "op": "comp", "us": 2 * i} for i in range(1, 6)]
        )
        yield case(
            "ctrl-deps",
            "compute",
            b,
            network,
            [{"id": 1, "op": "comp", "us": 4}, {"id": 2, "op": "comp", "us": 6, "ctrl": [1]}],
        )
        yield case("per-rank", "compute", b, network, [{"id": 1, "op": "comp", "us": [1, 10, 100, 1000]}])
        yield case(
            "diamond",
            "compute",
            b,
            network,
            [
                {"id": 1, "op": "comp", "us": 2},
                {"id": 2, "op": "comp", "us": 5, "deps": [1]},
                {"id": 3, "op": "comp", "us": 3, "deps": [1]},
                {"id": 4, "op": "comp", "us": 1, "deps": [2, 3]},
            ],
        )
        yield case(
            "replay-only-coll",
            "compute",
            b,
            network,
            [{"id": 1, "op": "comp", "us": 5}, coll("ALL_REDUCE", MIB, 2, deps=[1], us=12)],
            system={"replay-only": 1},
        )
        yield case("broadcast-replayed", "compute", b, network, [coll("BROADCAST", MIB, 1, us=9)])
        yield case("broadcast-zero-us", "compute", b, network, [coll("BROADCAST", MIB, 1)])


def mix() -> Iterator[dict]:
    """Compute, memory, collectives and p2p in one DAG (a small training-step shape)."""
    mem = {"memory-type": "PER_NPU_MEMORY_EXPANSION", "remote-mem-latency": 100, "remote-mem-bw": 64}
    nets = [
        ("aware", net("Ring", 8), 1),
        ("unaware", net("Ring", 8), 1),
        ("aware", net("Switch", 8), 1),
        ("unaware", multi_net(("Ring", "Switch"), (2, 4)), 2),
        ("aware", net("FullyConnected", 8), 1),
    ]
    for b, network, d in nets:
        shape = "x".join(f"{SHORT[t]}{k}" for t, k in zip(network["topology"], network["npus_count"]))
        n = 8
        for variant in range(3):
            scale = variant + 1
            ring = [[r, (r + 1) % n] for r in range(n)]
            nodes = [
                {"id": 1, "op": "load", "size": 256 * 1024 * scale},
                {"id": 2, "op": "comp", "us": [3 + (r * 5 + variant) % 7 for r in range(n)], "deps": [1]},
                {"id": 3, "op": "send", "pairs": ring, "size": 32768 * scale, "tag": 1, "deps": [2]},
                {"id": 4, "op": "recv", "pairs": [[(r - 1) % n, r] for r in range(n)], "size": 32768 * scale, "tag": 1},
                {"id": 5, "op": "comp", "us": 4 * scale, "deps": [4]},
                coll("ALL_REDUCE", 1_000_003 * scale, 6, deps=[2]),
                {"id": 7, "op": "comp", "us": 6, "deps": [5]},
                coll("ALL_GATHER", 131072, 8, deps=[6, 7]),
                {"id": 9, "op": "store", "size": 65536, "deps": [8]},
                coll("REDUCE_SCATTER", 2 * MIB, 10, deps=[7]),
            ]
            yield case(f"step{variant}-{shape}", "mix", b, network, nodes, memory=mem, system=impls("ring", d))


# ---------------------------------------------------------------------------------------------
# Random mixes: seeded random DAGs under random configs, so a combination nobody wrote a class
# for still gets sampled. Case i draws everything from `random.Random(f"random-mix-{i}")` (string
# seeds hash the same in every run), so the matrix and the recorded files are reproducible.

RANDOM_CASES = 600
#: Seeds are drawn from "<SEED_PREFIX>-<i>" ("random-mix" and "random-edge" are the recorded
#: tables); `--seed NAME` draws a fresh set under another name (for `--said` checks).
SEED_PREFIX = {"random": "random-mix", "random_edge": "random-edge"}
_SIZES = (4096, 65536, 100_000, 262_144, MIB, 1_000_003)


def _weighted(rnd: random.Random, table: dict) -> Any:
    keys = list(table)
    return rnd.choices(keys, weights=[table[k] for k in keys])[0]


def _random_network(rnd: random.Random, backend: str) -> dict:
    dims = 1 if backend == "aware" else _weighted(rnd, {1: 2, 2: 3, 3: 3})
    topos = [rnd.choice(TOPOS) for _ in range(dims)]
    if dims == 1:
        npus = [rnd.choice((3, 4, 5, 6, 8))]
    else:
        while True:
            npus = [rnd.choice((2, 2, 3, 4)) for _ in range(dims)]
            if math.prod(npus) <= 16:
                break
    bw = [rnd.choice((25, 50, 100, 200)) for _ in range(dims)]
    lat = [rnd.choice((100, 300, 500, 900)) for _ in range(dims)]
    return net(topos, npus, bw, lat)


def _random_system(rnd: random.Random, network: dict, kinds: set) -> dict:
    npus = network["npus_count"]
    dims = len(npus)
    system: dict[str, Any] = {}
    if rnd.random() < 0.15:
        flat = rnd.choice(("oneRing", "oneDirect"))
        system.update(impls(flat, dims))
        kinds.add(f"algo-{flat}")
    else:
        for key in IMPL_KEYS:
            per = []
            for n in npus:
                pool = {"ring": 4, "direct": 3}
                if n & (n - 1) == 0 and key != "all-to-all-implementation":
                    pool["halvingDoubling"] = 2
                if dims == 1 and n & (n - 1) == 0:
                    pool["doubleBinaryTree"] = 1
                per.append(_weighted(rnd, pool))
            system[key] = per
            kinds.update(f"algo-{a}" for a in per)
    system["preferred-dataset-splits"] = rnd.choice((1, 2, 4, 4, 8))
    system["active-chunks-per-dimension"] = rnd.choice((1, 1, 2))
    system["scheduling-policy"] = rnd.choice(("LIFO", "FIFO"))
    system["endpoint-delay"] = rnd.choice((10, 10, 25, 100))
    system["local-mem-bw"] = rnd.choice((50, 50, 1600, 12.5))
    if rnd.random() < 0.3:
        system["collective-optimization"] = "baseline"
        kinds.add("baseline")
    if rnd.random() < 0.1:
        system["boost-mode"] = 1
        kinds.add("boost-mode")
    if rnd.random() < 0.15:
        system["intra-dimension-scheduling"] = "SCF"
        kinds.add("intra-SCF")
    if dims > 1 and rnd.random() < 0.15:
        system["inter-dimension-scheduling"] = rnd.choice(("themis", "offlineGreedy"))
        kinds.add(f"inter-{system['inter-dimension-scheduling']}")
    if rnd.random() < 0.15:
        system["local-reduction-delay"] = rnd.choice((2, 5))
        kinds.add("local-reduction-delay")
    if rnd.random() < 0.1:
        system.update({"model-shared-bus": 1, "L": 100, "o": 20, "g": 10, "G": 0.02})
        kinds.add("shared-bus")
    return system


def _random_options(rnd: random.Random, kinds: set) -> dict:
    options: dict[str, Any] = {}
    queues = rnd.choice((1, 1, 2, 3))
    if queues > 1:
        options["num-queues-per-dim"] = queues
        kinds.add(f"queues{queues}")
    if rnd.random() < 0.25:
        options["rendezvous-protocol"] = True
        kinds.add("rendezvous")
    if rnd.random() < 0.1:
        options["injection-scale"] = rnd.choice((0.5, 2))
        kinds.add("injection-scale")
    return options


def _random_groups(rnd: random.Random, n: int) -> list[list[int]]:
    """A partition of the ranks into 2-4 groups of at least 2 members, in a random member order."""
    perm = list(range(n))
    rnd.shuffle(perm)
    count = rnd.randint(2, max(2, min(4, n // 2)))
    cuts = sorted(rnd.sample(range(2, n - 1), count - 1)) if n >= 4 and count > 1 else []
    cuts = [c for i, c in enumerate(cuts) if c - (cuts[i - 1] if i else 0) >= 2 and n - c >= 2]
    bounds = [0, *cuts, n]
    return [perm[a:b] for a, b in zip(bounds, bounds[1:])]


def _random_memory(rnd: random.Random, n: int, kinds: set) -> dict:
    kind = rnd.choice(("PER_NPU_MEMORY_EXPANSION", "PER_NODE_MEMORY_EXPANSION", "MEMORY_POOL"))
    short = {"PER_NPU_MEMORY_EXPANSION": "mem-per-npu", "PER_NODE_MEMORY_EXPANSION": "mem-per-node"}
    kinds.add(short.get(kind, "mem-pool"))
    mem: dict[str, Any] = {
        "memory-type": kind,
        "remote-mem-latency": rnd.choice((0, 20, 100)),
        "remote-mem-bw": rnd.choice((16, 64, 256)),
    }
    if kind == "PER_NODE_MEMORY_EXPANSION":
        per_node = rnd.choice([d for d in range(1, n + 1) if n % d == 0])
        mem.update({"num-nodes": n // per_node, "num-npus-per-node": per_node})
    return mem


def _random_nodes(rnd: random.Random, n: int, dims: int, layouts: list, backend: str, kinds: set) -> list[dict]:
    nodes: list[dict] = []
    ids: list[int] = []
    last_coll: Optional[int] = None
    nid = 0
    ops = {"comp": 4, "coll": 4, "p2p": 2, "mem": 2}
    for _ in range(rnd.randint(3, 9)):
        op = _weighted(rnd, ops)
        nid += 1
        deps = sorted(rnd.sample(ids, min(len(ids), rnd.choice((0, 1, 1, 2)))))
        entry: dict[str, Any]
        if op == "comp":
            ranks = list(range(n)) if rnd.random() < 0.7 else sorted(rnd.sample(range(n), rnd.randint(1, n)))
            us: Any = rnd.randint(0, 20) if rnd.random() < 0.4 else [rnd.randint(0, 20) for _ in range(n)]
            entry = {"id": nid, "op": "comp", "us": us}
            if len(ranks) < n:
                entry["ranks"] = ranks
        elif op == "mem":
            entry = {"id": nid, "op": rnd.choice(("load", "store")), "size": rnd.choice(_SIZES)}
            if rnd.random() < 0.3:
                entry["ranks"] = sorted(rnd.sample(range(n), rnd.randint(1, n)))
            kinds.add("mem-node")
        elif op == "coll":
            ctype = rnd.choice(TYPES)
            size = rnd.choice(_SIZES) if rnd.random() < 0.95 else rnd.choice((64, 1000))
            entry = {"id": nid, "op": "coll", "coll": ctype, "size": size}
            kinds.add(f"coll-{ABBR[ctype]}")
            where = rnd.random()
            if layouts and where < 0.35:
                layout = rnd.choice(layouts)
                pg = [""] * n
                for g, members in layout:
                    for r in members:
                        pg[r] = g
                entry["pg"] = pg
                kinds.add("comm-groups")
            elif layouts and where < 0.5:
                g, members = rnd.choice(rnd.choice(layouts))
                entry["pg"] = g
                entry["ranks"] = sorted(members)
                kinds.add("comm-groups")
            elif dims > 1 and rnd.random() < 0.4:
                mask = [rnd.random() < 0.6 for _ in range(dims)]
                entry["involved_dim"] = mask
                kinds.add("involved_dim")
                if not mask[0] and any(mask):
                    kinds.add("involved_dim-skip-first")
            if last_coll is not None:
                entry["ctrl"] = [last_coll]  # every rank issues its collectives in id order
            last_coll = nid
        else:
            perm = list(range(n))
            rnd.shuffle(perm)
            if backend == "aware" and rnd.random() < 0.15:
                pairs = [[r, r] for r in perm[: rnd.randint(1, 2)]]
                kinds.add("self-send")
            else:
                k = rnd.randint(2, n)
                cyc = perm[:k]
                pairs = [[cyc[i], cyc[(i + 1) % k]] for i in range(k)]
                if rnd.random() < 0.5:
                    pairs = pairs[: rnd.randint(1, k)]
            size = rnd.choice(_SIZES)
            tag = 100 + nid
            nodes.append({"id": nid, "op": "send", "pairs": pairs, "size": size, "tag": tag, "deps": deps})
            ids.append(nid)
            nid += 1
            rdeps = sorted(rnd.sample(ids[:-1], min(len(ids) - 1, rnd.choice((0, 0, 1)))))
            entry = {"id": nid, "op": "recv", "pairs": pairs, "size": size, "tag": tag, "deps": rdeps}
            kinds.add("p2p")
            nodes.append(entry)
            ids.append(nid)
            continue
        if deps:
            entry["deps"] = deps
        nodes.append(entry)
        ids.append(nid)
    for e in nodes:
        if not e.get("deps"):
            e.pop("deps", None)
    return nodes


def _random_setting(kind: str, i: int) -> tuple:
    """Case `i` of a seeded random class: its generator, backend (alternating), drawn features,
    network, NPU count, dimensions, system config and command-line options."""
    rnd = random.Random(f"{SEED_PREFIX[kind]}-{i}")
    backend = BACKENDS[i % 2]
    kinds: set = set()
    network = _random_network(rnd, backend)
    n = num_npus({"network": network})
    dims = len(network["npus_count"])
    kinds.add(f"{dims}-D")
    system = _random_system(rnd, network, kinds)
    options = _random_options(rnd, kinds)
    return rnd, backend, kinds, network, n, dims, system, options


def random_mix() -> Iterator[dict]:
    """Seeded random DAGs of compute, memory, collectives and p2p under random networks (1-3
    dims), system configs, command-line options and comm groups, alternating the two backends.
    `kinds` lists the features a case draws, for the parity report."""
    for i in range(COUNTS["random"]):
        rnd, backend, kinds, network, n, dims, system, options = _random_setting("random", i)
        layouts: list = []
        group_json: dict[str, list[int]] = {}
        if n >= 4 and rnd.random() < 0.5:
            for _ in range(rnd.choice((1, 1, 2))):
                layout = []
                for members in _random_groups(rnd, n):
                    gid = str(len(group_json) + 1)
                    group_json[gid] = members
                    layout.append((gid, members))
                layouts.append(layout)
        nodes = _random_nodes(rnd, n, dims, layouts, backend, kinds)
        used = {str(g) for e in nodes for g in (e["pg"] if isinstance(e.get("pg"), list) else [e.get("pg")]) if g}
        memory = _random_memory(rnd, n, kinds) if "mem-node" in kinds else None
        kinds.discard("mem-node")
        shape = "x".join(f"{SHORT[t]}{k}" for t, k in zip(network["topology"], network["npus_count"]))
        spec = case(
            f"s{i:03d}-{shape}",
            "random",
            backend,
            network,
            nodes,
            system=system,
            options=options,
            memory=memory,
            groups=group_json if used else None,
        )
        if not used:
            kinds.discard("comm-groups")
        spec["kinds"] = sorted(kinds)
        yield spec


EDGE_CASES = 120
#: Cases per random class (`--count` changes both, for `--said` checks on fresh seeds).
COUNTS = {"random": RANDOM_CASES, "random_edge": EDGE_CASES}
#: Sizes at the edges: nothing, one byte, a few bytes, under a chunk, a little over.
_TINY = (0, 1, 7, 64, 1000, 4096)
_MEMORY_TYPES = ("PER_NPU_MEMORY_EXPANSION", "PER_NODE_MEMORY_EXPANSION", "MEMORY_POOL")


def random_edge() -> Iterator[dict]:
    """Seeded random mixes at the edges of what ASTRA-sim takes: a random mix (as `random_mix`
    draws it) plus memory loads and stores under each remote-memory type in turn (latency 0
    included), zero-length and tiny compute, memory and point-to-point nodes, and tiny collectives
    of every type, each hung after a random earlier node."""
    for i in range(COUNTS["random_edge"]):
        rnd, backend, kinds, network, n, dims, system, options = _random_setting("random_edge", i)
        nodes = _random_nodes(rnd, n, dims, [], backend, kinds)
        nid = max(int(e["id"]) for e in nodes)
        ids = [int(e["id"]) for e in nodes]
        last_coll = max((int(e["id"]) for e in nodes if e["op"] == "coll"), default=None)
        for _ in range(rnd.randint(2, 5)):
            nid += 1
            edge = rnd.choice(("mem", "mem", "coll", "coll", "comp", "p2p"))
            deps = [rnd.choice(ids)] if rnd.random() < 0.7 else []
            if edge == "mem":
                entry: dict[str, Any] = {"id": nid, "op": rnd.choice(("load", "store")), "size": rnd.choice(_TINY)}
                kinds.add("mem-tiny" if entry["size"] < 4096 else "mem-node")
            elif edge == "coll":
                ctype = rnd.choice(TYPES)
                entry = {"id": nid, "op": "coll", "coll": ctype, "size": rnd.choice(_TINY[:5])}
                kinds.add(f"tiny-{ABBR[ctype]}")
                if last_coll is not None:
                    entry["ctrl"] = [last_coll]
                last_coll = nid
            elif edge == "comp":
                entry = {"id": nid, "op": "comp", "us": 0}
                kinds.add("zero-us")
            else:
                a, b = rnd.sample(range(n), 2)
                size = rnd.choice(_TINY[:4])
                nodes.append({"id": nid, "op": "send", "pairs": [[a, b]], "size": size, "tag": 900 + nid,
                              **({"deps": deps} if deps else {})})  # fmt: skip
                ids.append(nid)
                nid += 1
                entry = {"id": nid, "op": "recv", "pairs": [[a, b]], "size": size, "tag": 900 + nid - 1}
                kinds.add("p2p-tiny")
                deps = []
            if deps:
                entry["deps"] = deps
            nodes.append(entry)
            ids.append(nid)
        memory = None
        if any(e["op"] in ("load", "store") for e in nodes):
            kind = _MEMORY_TYPES[i % 3]
            kinds.add({"PER_NPU_MEMORY_EXPANSION": "mem-per-npu", "PER_NODE_MEMORY_EXPANSION": "mem-per-node"}.get(
                kind, "mem-pool"))  # fmt: skip
            memory = {"memory-type": kind, "remote-mem-latency": rnd.choice((0, 0, 20, 100)),
                      "remote-mem-bw": rnd.choice((16, 64, 256))}  # fmt: skip
            if kind == "PER_NODE_MEMORY_EXPANSION":
                per_node = rnd.choice([d for d in range(1, n + 1) if n % d == 0])
                memory.update({"num-nodes": n // per_node, "num-npus-per-node": per_node})
        kinds.discard("mem-node")
        shape = "x".join(f"{SHORT[t]}{k}" for t, k in zip(network["topology"], network["npus_count"]))
        spec = case(f"e{i:03d}-{shape}", "random_edge", backend, network, nodes, system=system, options=options,
                    memory=memory)  # fmt: skip
        spec["kinds"] = sorted(kinds)
        yield spec


def fail() -> Iterator[dict]:
    """ASTRA-sim's failure modes: abort, rank never finishing, hang."""
    for b in BACKENDS:
        network = net("Ring", 4)
        yield case("metadata-node", "fail", b, network, [{"id": 0, "op": "meta"}, coll("ALL_REDUCE", MIB, 1, deps=[0])])
        for t in UNIMPLEMENTED:
            if t == "BROADCAST":
                continue
            yield case(f"unimplemented-{t}", "fail", b, network, [coll(t, MIB, us=5)])
            yield case(f"unimplemented-{t}-Switch8", "fail", b, net("Switch", 8), [coll(t, MIB, us=5)])
        yield case("one-npu", "fail", b, net("Ring", 1), [{"id": 1, "op": "comp", "us": 3}])
        yield case("ring-of-2", "fail", b, net("Ring", 2), [coll("ALL_REDUCE", MIB)])
        yield case("fc-of-2", "fail", b, net("FullyConnected", 2), [coll("ALL_REDUCE", MIB)])
        yield case(
            "missing-dep", "fail", b, network, [{"id": 1, "op": "comp", "us": 3, "deps": [99], "keep_missing": True}]
        )
        yield case(
            "send-recv-size-mismatch",
            "fail",
            b,
            network,
            [
                {"id": 1, "op": "send", "pairs": [[0, 1]], "size": 1000, "tag": 1},
                {"id": 2, "op": "recv", "pairs": [[0, 1]], "size": 2000, "tag": 1},
            ],
        )
        yield case(
            "send-recv-tag-mismatch",
            "fail",
            b,
            network,
            [
                {"id": 1, "op": "send", "pairs": [[0, 1]], "size": 1000, "tag": 1},
                {"id": 2, "op": "recv", "pairs": [[0, 1]], "size": 1000, "tag": 2},
            ],
        )
        yield case(
            "recv-without-send",
            "fail",
            b,
            network,
            [{"id": 2, "op": "recv", "pairs": [[0, 1]], "size": 1000, "tag": 1}],
        )
        yield case("coll-missing-on-one-rank", "fail", b, network, [coll("ALL_REDUCE", MIB, 1, ranks=[0, 1, 2])])
        yield case("coll-size-mismatch", "fail", b, network, [coll("ALL_REDUCE", [MIB, MIB, MIB, 2 * MIB])])
        yield case(
            "coll-type-mismatch",
            "fail",
            b,
            network,
            [
                {"id": 1, "op": "coll", "coll": "ALL_REDUCE", "size": MIB, "ranks": [0, 1]},
                {"id": 1, "op": "coll", "coll": "ALL_GATHER", "size": MIB, "ranks": [2, 3]},
            ],
        )
        yield case("ag-size-zero", "fail", b, network, [coll("ALL_GATHER", 0)])
        yield case("ag-1B-4splits-hang", "fail", b, network, [coll("ALL_GATHER", 1)])
        yield case("ar-size-zero", "fail", b, network, [coll("ALL_REDUCE", 0)])
        yield case(
            "a2a-halvingDoubling", "fail", b, network, [coll("ALL_TO_ALL", MIB)], system=impls("halvingDoubling")
        )
        yield case(
            "halvingDoubling-6npus",
            "fail",
            b,
            net("Ring", 6),
            [coll("ALL_REDUCE", MIB)],
            system=impls("halvingDoubling"),
        )
        yield case("mem-without-expansion", "fail", b, network, [{"id": 1, "op": "load", "size": 4096}])
        yield case("unknown-group", "fail", b, network, [coll("ALL_REDUCE", MIB, pg="5")], groups={"1": [0, 1]})
        yield case(
            "empty-rank-trace", "fail", b, network, [{"id": 1, "op": "comp", "us": 3, "ranks": [0, 1, 2]}], fill=False
        )
    yield case(
        "multidim-on-aware",
        "fail",
        "aware",
        multi_net(("Ring", "Ring"), (2, 4)),
        [coll("ALL_REDUCE", MIB)],
        system=impls("ring", 2),
    )


CUSTOM_ALGS = {
    "ALL_REDUCE": ("ring", "direct", "halving-doubling", "binary-tree", "double-binary-tree", "hierarchical-2d"),
    "ALL_GATHER": ("ring", "direct", "halving-doubling"),
    "REDUCE_SCATTER": ("ring", "direct", "halving-doubling"),
    "ALL_TO_ALL": ("ring", "direct"),
}
CUSTOM_SIZES = (65536, MIB, 4 * MIB, 100_000)
#: ASTRA-sim runs a custom collective only with preferred-dataset-splits 1 (see fail cases).
CUSTOM_SYSTEM = {"preferred-dataset-splits": 1}


def _custom(ctype: str, algorithm: str, n: int, size: int, **kw: Any) -> dict:
    coll_name = ctype.lower().replace("_", "-")
    return {coll_name: {"algorithm": algorithm, "ranks": n, "size": size, **kw}}


def custom() -> Iterator[dict]:
    """Custom collective algorithms (`*-implementation-custom`, files written by
    chakra.dsl.collectives): every textbook algorithm x collective on 1-D topologies of 4 and 8
    NPUs, both backends, sizes and reduction times varied; mixed with native collectives, compute
    skew, process subgroups, a 2-D network, a YAML-described algorithm and ASTRA-sim's own example."""
    k = 0
    for b in BACKENDS:
        for topo, n in (("Ring", 4), ("Ring", 8), ("FullyConnected", 4), ("FullyConnected", 8), ("Switch", 8)):
            network = net(topo, n)
            for t, algs in CUSTOM_ALGS.items():
                for a in algs:
                    size = CUSTOM_SIZES[k % len(CUSTOM_SIZES)]
                    red = (0, 0, 3)[k % 3] if t in ("ALL_REDUCE", "REDUCE_SCATTER") else 0
                    k += 1
                    yield case(
                        f"{ABBR[t]}-{a}-{SHORT[topo]}{n}-{size}-r{red}",
                        "custom",
                        b,
                        network,
                        [coll(t, size)],
                        system=CUSTOM_SYSTEM,
                        custom=_custom(t, a, n, size, reduce_us=red),
                    )
        network = net("Ring", 8)
        # custom all-reduce between compute with skew, then a native all-gather, then a custom all-reduce again
        nodes = [
            {"id": 1, "op": "comp", "us": [3, 9, 1, 14, 2, 7, 5, 11]},
            coll("ALL_REDUCE", MIB, 2, deps=[1]),
            {"id": 3, "op": "comp", "us": 4, "deps": [2]},
            coll("ALL_GATHER", MIB, 4, deps=[3]),
            coll("ALL_REDUCE", MIB, 5, deps=[4]),
        ]
        for a in ("ring", "double-binary-tree"):
            yield case(
                f"mix-skew-{a}-R8",
                "custom",
                b,
                network,
                nodes,
                system=CUSTOM_SYSTEM,
                custom=_custom("ALL_REDUCE", a, 8, MIB, reduce_us=1),
            )
        # two custom collectives of different types in one run, overlapping (no dependency)
        yield case(
            "AR-and-A2A-concurrent-R8",
            "custom",
            b,
            network,
            [coll("ALL_REDUCE", MIB, 1), coll("ALL_TO_ALL", MIB, 2)],
            system=CUSTOM_SYSTEM,
            custom={**_custom("ALL_REDUCE", "ring", 8, MIB), **_custom("ALL_TO_ALL", "direct", 8, MIB)},
        )
        # process subgroups: the algorithm's ranks are positions in the group's listed order
        for lname, gmap in (
            ("halves", {"1": [0, 1, 2, 3], "2": [4, 5, 6, 7]}),
            ("unordered", {"1": [3, 0, 2, 1], "2": [7, 5, 6, 4]}),
        ):
            pgs = ["1" if r in gmap["1"] else "2" for r in range(8)]
            yield case(
                f"AR-groups-{lname}-R8",
                "custom",
                b,
                network,
                [coll("ALL_REDUCE", MIB, pg=pgs)],
                system=CUSTOM_SYSTEM,
                groups=gmap,
                custom=_custom("ALL_REDUCE", "ring", 4, MIB),
            )
        # an algorithm from a YAML description: a 4-rank all-reduce by pairs then swaps
        describe = {
            "collective": "all-reduce",
            "ranks": 4,
            "chunks": 2,
            "size": MIB,
            "steps": [
                [{"from": 0, "to": 1, "chunks": [1]}, {"from": 1, "to": 0, "chunks": [0]},
                 {"from": 2, "to": 3, "chunks": [1]}, {"from": 3, "to": 2, "chunks": [0]}],
                [{"from": 0, "to": 2, "chunks": [0]}, {"from": 2, "to": 0, "chunks": [0]},
                 {"from": 1, "to": 3, "chunks": [1]}, {"from": 3, "to": 1, "chunks": [1]}],
                [{"from": 0, "to": 1, "chunks": [0]}, {"from": 1, "to": 0, "chunks": [1]},
                 {"from": 2, "to": 3, "chunks": [0]}, {"from": 3, "to": 2, "chunks": [1]}],
            ],
        }  # fmt: skip
        yield case(
            "AR-described-pairs-R4",
            "custom",
            b,
            net("Ring", 4),
            [coll("ALL_REDUCE", MIB)],
            system=CUSTOM_SYSTEM,
            custom={"all-reduce": {"describe": describe}},
        )
        # ASTRA-sim's own example (MSCCLang ring, 7 us reductions); and the same with the
        # default 4 dataset splits, which ASTRA-sim never finishes
        for splits in (1, 4):
            yield case(
                f"AR-astrasim-example-R8-splits{splits}",
                "custom",
                b,
                network,
                [coll("ALL_REDUCE", MIB)],
                system={"preferred-dataset-splits": splits},
                custom={"all-reduce": {"sample": "astrasim/custom_ring_allreduce_8npus_1MB/custom_allreduce"}},
            )
    # the network's dimensions do not matter to a custom algorithm (unaware: multi-dimensional)
    for shape in ((("Ring", "FullyConnected"), (2, 4)), (("Switch", "Ring"), (4, 2))):
        network = multi_net(*shape)
        for a in ("ring", "hierarchical-2d"):
            yield case(
                f"AR-{a}-2D-{'x'.join(SHORT[t] for t in shape[0])}",
                "custom",
                "unaware",
                network,
                [coll("ALL_REDUCE", MIB)],
                system={**impls("ring", 2), **CUSTOM_SYSTEM},
                custom=_custom("ALL_REDUCE", a, 8, MIB, dims=[2, 4] if a == "hierarchical-2d" else None),
            )


CLASSES = {
    "coll_1d": coll_1d,
    "coll_sizes": coll_sizes,
    "coll_multidim": coll_multidim,
    "involved_dim": involved_dim,
    "skew": skew,
    "system_opts": system_opts,
    "p2p": p2p,
    "groups": groups,
    "memory": memory,
    "compute": compute,
    "mix": mix,
    "fail": fail,
    "random": random_mix,
    "random_edge": random_edge,
    "custom": custom,
}


def all_cases(only: Optional[list[str]] = None) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for cls, gen in CLASSES.items():
        if only and cls not in only:
            continue
        specs = [s for s in gen() if s is not None]
        names = [s["name"] for s in specs]
        dup = [k for k, v in Counter(names).items() if v > 1]
        if dup:
            raise SystemExit(f"error: duplicate case names in {cls}: {dup[:5]}")
        out[cls] = specs
    return out


# ---------------------------------------------------------------------------------------------
# Running


_CAUSE = re.compile(
    r"what\(\)|Assertion|[Ee]xiting because|not supported|not found|\[Error\]|unreleased nodes|Invalid|"
    r"[Uu]nsupported|only support|should be|[Cc]annot|Unable"
)


def _error_message(text: str) -> str:
    """ASTRA-sim's first cause-looking line (else its last critical/error line), spdlog prefix removed."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for line in lines:
        if _CAUSE.search(line):
            return _PREFIX.sub("", line)[:300]
    errs = [ln for ln in lines if "[critical]" in ln or "[error]" in ln]
    return _PREFIX.sub("", errs[-1])[:300] if errs else ""


def run_case(spec: dict, bindir: Path, timeout: float) -> dict[str, Any]:
    """Write, run and parse one case."""
    n = num_npus(spec)
    with tempfile.TemporaryDirectory(prefix="astrasim-truth-") as tmp:
        folder = Path(tmp)
        paths = write_case(spec, folder)
        cmd = [str(bindir / BINARY_NAMES[spec["backend"]]), *binary_args(spec, paths, folder / "log")]
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(cmd, cwd=folder, capture_output=True, text=True, timeout=timeout, errors="replace")
        except subprocess.TimeoutExpired:
            return {"status": "timeout", "finish": [None] * n, "message": f"no exit within {timeout:g} s"}
        wall = time.perf_counter() - t0
    finish, exposed = _finish(proc.stdout, n)
    res: dict[str, Any] = {"finish": finish}
    if proc.returncode == -11:
        # A segmentation fault: what it printed before dying varies from run to run, so only
        # the crash itself is recorded.
        return {"finish": [None] * n, "status": "abort", "rc": -11, "message": "SIGSEGV (segmentation fault)"}
    if proc.returncode != 0:
        # Which ranks printed their finish line before the abort varies from run to run (output
        # lost in buffers), so an aborted run records none.
        res["finish"] = [None] * n
        res["status"] = "abort"
        res["rc"] = proc.returncode
        res["message"] = _error_message(proc.stderr + "\n" + proc.stdout) or f"exit code {proc.returncode}"
    elif all(f is not None for f in finish):
        res["status"] = "finished"
        res["exposed"] = exposed
    else:
        res["status"] = "unfinished"
        msg = _error_message(proc.stderr + "\n" + proc.stdout)
        if msg:
            res["message"] = msg
    res["wall_s"] = round(wall, 3)
    return res


def _finish(stdout: str, n: int) -> tuple[list, list]:
    finish: list[Optional[int]] = [None] * n
    exposed: list[Optional[int]] = [None] * n
    for m in _FINISHED.finditer(stdout):
        r = int(m.group(1))
        if r < n:
            finish[r] = int(m.group(2))
            exposed[r] = int(m.group(3))
    return finish, exposed


def said_check(spec: dict, bindir: Path, timeout: float) -> dict[str, Any]:
    """Run one case on the real binary and through `chakra simulate --json` (the command, as a
    user runs it): ASTRA-sim's status, and whether chakra said anything on stderr and in --json."""
    res = run_case(spec, bindir, timeout)
    with tempfile.TemporaryDirectory(prefix="astrasim-said-") as tmp:
        paths = write_case(spec, Path(tmp))
        proc = subprocess.run(
            [sys.executable, "-m", "chakra.cli", *simulate_args(spec, paths), "--json", "-q"],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "COLUMNS": "200"},
        )
    warnings: list = []
    if proc.returncode == 0:
        warnings = json.loads(proc.stdout)["warnings"]
    flat = " ".join(proc.stderr.split())
    return {
        "name": spec["name"],
        "status": res["status"],
        "message": res.get("message"),
        "rc": proc.returncode,
        "stderr": bool(flat),
        "json": bool(warnings) or proc.returncode == 1,
        "both": proc.returncode == 1 or (bool(warnings) and all(" ".join(w.split()) in flat for w in warnings)),
        "traceback": "Traceback" in proc.stderr,
    }


def said_main(classes: list[str], bindir: Path, jobs: int, timeout: float) -> int:
    """`--said`: on the given classes (fresh seeds with --seed), every ASTRA-sim failure must be said
    by `chakra simulate` on stderr and in --json's warnings (or refused in one line)."""
    specs = [s for cls in all_cases(classes).values() for s in cls]
    with ThreadPoolExecutor(max_workers=max(1, min(jobs, 2))) as pool:
        rows = list(pool.map(lambda s: said_check(s, bindir, timeout), specs))
    failed = [r for r in rows if r["status"] != "finished"]
    unsaid = [r for r in failed if not (r["stderr"] and r["json"] and r["both"])]
    kinds = Counter((r["message"] or r["status"])[:70] for r in failed)
    print(f"{len(rows)} cases: ASTRA-sim failed on {len(failed)}, all finished on {len(rows) - len(failed)}")
    for kind, count in kinds.most_common():
        said = sum(1 for r in failed if (r["message"] or r["status"])[:70] == kind and r not in unsaid)
        print(f"  {count:4d} {kind}: said {said}")
    for r in unsaid:
        print(f"  UNSAID {r['name']}: {r['status']} {r['message']}")
    crashed = [r["name"] for r in rows if r["traceback"]]
    if crashed:
        print(f"  tracebacks from chakra simulate: {crashed[:10]}")
    print(f"unsaid: {len(unsaid)} of {len(failed)}")
    return 1 if unsaid or crashed else 0


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", help="folder with the two AstraSim_Analytical_* binaries")
    ap.add_argument("--out", default=str(ROOT / "tests/data/astrasim_truth"))
    ap.add_argument("--jobs", type=int, default=2, help="binaries run at once (default 2)")
    ap.add_argument("--only", nargs="*", help="feature classes to (re)record")
    ap.add_argument("--timeout", type=float, default=5.0, help="seconds before a run counts as a hang")
    ap.add_argument("--list", action="store_true", help="print the case counts and exit")
    ap.add_argument(
        "--said",
        action="store_true",
        help="record nothing: check that chakra simulate says every failure of ASTRA-sim (stderr and --json)",
    )
    ap.add_argument("--seed", help="draw the random classes' seeds under this name instead (fresh seeds)")
    ap.add_argument("--count", type=int, help="cases per random class")
    args = ap.parse_args(argv)
    if args.seed:
        SEED_PREFIX.update({"random": f"{args.seed}-mix", "random_edge": f"{args.seed}-edge"})
    if args.count:
        COUNTS.update({"random": args.count, "random_edge": args.count})
    matrix = all_cases(args.only)
    if args.list:
        for cls, specs in matrix.items():
            print(f"{cls:15s} {len(specs):5d}")
        print(f"{'total':15s} {sum(len(s) for s in matrix.values()):5d}")
        return 0
    bindir = find_binaries(args.bin)
    if bindir is None:
        print(
            "error: ASTRA-sim binaries not found (--bin, $ASTRA_SIM_BIN or ../shared/tools/astra-sim/bin)",
            file=sys.stderr,
        )
        return 1
    if args.said:
        return said_main(args.only or ["random", "random_edge"], bindir, args.jobs, args.timeout)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    summary: dict[str, Counter] = defaultdict(Counter)
    with ThreadPoolExecutor(max_workers=max(1, min(args.jobs, 2))) as pool:
        for cls, specs in matrix.items():
            results = list(pool.map(lambda s: run_case(s, bindir, args.timeout), specs))
            cases = []
            for spec, res in zip(specs, results):
                res.pop("wall_s", None)  # keeps the recorded table byte-stable across reruns
                cases.append({**spec, "result": res})
                summary[cls][res["status"]] += 1
            doc = {
                "about": "ASTRA-sim 2.x analytical (astra-sim 518bd513, network 599a0473) results; "
                "regenerate with tools/astrasim_truth.py; specs: tools/truthcases.py",
                "class": cls,
                "cases": cases,
            }
            tmp = out / f".{cls}.json.tmp"
            tmp.write_text(json.dumps(doc, separators=(",", ":")).replace(',{"name"', ',\n{"name"') + "\n")
            tmp.replace(out / f"{cls}.json")
            c = summary[cls]
            print(
                f"{cls:15s} {len(specs):5d} cases  " + "  ".join(f"{k} {v}" for k, v in sorted(c.items())), flush=True
            )
    total = Counter()
    for c in summary.values():
        total.update(c)
    print(f"{'total':15s} {sum(total.values()):5d} cases  " + "  ".join(f"{k} {v}" for k, v in sorted(total.items())))
    print(f"recorded in {out} ({time.time() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

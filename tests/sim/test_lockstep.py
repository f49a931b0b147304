"""The closed form of lockstep ring collectives (`chakra.sim.lockstep`) against the message-level run.

Seeded random cases: networks of 1-3 dimensions (Ring, Switch, FullyConnected, mixed latencies and
bandwidths), whole-world and subgroup collectives (members in random order and scattered over the
dimensions), every modelled collective type, sizes, chunk splits, active chunks, endpoint delays,
local memory bandwidths, both `compat` settings, algorithms the closed form declines, equal and
skewed arrival times and random issue orders. Every output of the run must be the same: the
finish offsets, the order in which members end (same-ns ties of later collectives follow it) and
the queue each member ends on. Then whole simulations of generated transformer steps, closed form
on and off, must give the same per-rank figures.
"""

from __future__ import annotations

import random

import pytest

from chakra.errors import ConfigError
from chakra.schema import CollectiveType
from chakra.sim import simulate
from chakra.sim.collective_run import CollectiveRunner
from chakra.sim.config import NetworkConfig, system_from_dict
from chakra.sim.lockstep import lockstep_ring
from chakra.sim.network import Network
from tests.sim.conftest import generate_transformer

TYPES = [
    int(CollectiveType.ALL_REDUCE),
    int(CollectiveType.ALL_GATHER),
    int(CollectiveType.REDUCE_SCATTER),
    int(CollectiveType.ALL_TO_ALL),
]
TOPOS = ["Ring", "Switch", "FullyConnected"]


def random_case(rng: random.Random) -> tuple:
    dims = rng.choice([1, 1, 2, 3])
    counts = [rng.choice([2, 3, 4, 5, 8]) for _ in range(dims)]
    if dims == 3:
        counts = [rng.choice([2, 3, 4]) for _ in range(dims)]
    same = rng.random() < 0.6  # equal latency/bandwidth on every dimension: more uniform rings
    lat = [500.0] * dims if same else [rng.choice([100.0, 500.0, 700.0]) for _ in range(dims)]
    bw = [50.0] * dims if same else [rng.choice([25.0, 50.0, 100.0]) for _ in range(dims)]
    net = NetworkConfig([rng.choice(TOPOS) for _ in range(dims)], counts, bw, lat)
    total = net.total_npus
    ctype = rng.choice(TYPES)
    algs = [rng.choice(["ring", "ring", "ring", "direct", "oneRing"]) for _ in range(rng.choice([1, dims]))]
    if algs[0] == "oneRing":
        algs = ["oneRing"]
    system = system_from_dict(
        {
            "scheduling-policy": "LIFO",
            "endpoint-delay": rng.choice([1, 10, 37]),
            "active-chunks-per-dimension": rng.choice([1, 1, 2, 3]),
            "preferred-dataset-splits": rng.choice([1, 2, 4, 5]),
            "all-reduce-implementation": algs,
            "all-gather-implementation": algs,
            "reduce-scatter-implementation": algs,
            "all-to-all-implementation": algs,
            "collective-optimization": rng.choice(["localBWAware", "baseline"]),
            "local-mem-bw": rng.choice([1, 50, 1600]),
            "boost-mode": 0,
        }
    )
    if rng.random() < 0.5:
        members = tuple(range(total))
        involved = None if rng.random() < 0.6 else tuple(rng.random() < 0.7 for _ in range(dims))
    else:
        members = tuple(rng.sample(range(total), rng.randint(2, total)))
        involved = None
    size = rng.choice([64, 4096, 1 << 20, 3 * (1 << 20) + 17])
    p = len(members)
    roll = rng.random()
    if roll < 0.5:
        offsets = tuple([0] * p)
    elif roll < 0.75:
        offsets = tuple(rng.choice([0, 0, 5, 900]) for _ in range(p))
    else:  # every member at its own time (pipeline stages reaching a shared collective)
        offsets = tuple(rng.sample(range(3000), p))
    order = list(range(p))
    rng.shuffle(order)
    return net, system, ctype, size, members, involved, offsets, tuple(order), rng.random() < 0.8


def run_both(net, system, ctype, size, members, involved, offsets, order, compat):
    out = []
    for closed in (True, False):
        runner = CollectiveRunner(Network(net, aware=False), system, compat=compat, closed_form=closed)
        try:
            out.append(runner._run(ctype, size, members, involved, offsets, order))
        except ConfigError as exc:  # a configuration both refuse, with the same words
            out.append(str(exc))
    return out


def test_closed_form_equals_message_level_on_random_cases():
    rng = random.Random(20)
    closed = skewed = 0
    for _ in range(260):
        case = random_case(rng)
        fast, slow = run_both(*case)
        assert fast == slow, case
        net, system, ctype, size, members, involved, offsets, order, compat = case
        runner = CollectiveRunner(Network(net, aware=False), system, compat=compat)
        if isinstance(fast, str):
            continue
        n, chunk = runner.chunks(ctype, size)
        got = lockstep_ring(runner, ctype, members, involved, offsets, order, n, chunk) is not None
        closed += got
        skewed += got and len(set(offsets)) > 1
    # the cases must exercise the closed form and the skewed recurrence, not only the fallback
    assert closed >= 80
    assert skewed >= 20


def test_closed_form_declines_what_it_does_not_cover():
    net = NetworkConfig(["Ring"], [4], [50.0], [500.0])
    system = system_from_dict(
        {
            "scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
            "preferred-dataset-splits": 4, "all-reduce-implementation": ["ring"],
            "all-gather-implementation": ["ring"], "reduce-scatter-implementation": ["ring"],
            "all-to-all-implementation": ["ring"], "collective-optimization": "localBWAware",
            "local-mem-bw": 50, "boost-mode": 0,
        }
    )  # fmt: skip
    ar = TYPES[0]
    for aware, offsets in ((False, (0, 0, 3, 0)), (True, (0, 0, 0, 0))):
        runner = CollectiveRunner(Network(net, aware=aware), system)
        assert lockstep_ring(runner, ar, (0, 1, 2, 3), None, offsets, None, 4, 1 << 18) is None
    runner = CollectiveRunner(Network(net, aware=False), system)
    got = lockstep_ring(runner, ar, (0, 1, 2, 3), None, (0, 0, 0, 0), None, 4, 1 << 18)
    assert got is not None and got[0] == runner._run(ar, 1 << 20, (0, 1, 2, 3), None, (0, 0, 0, 0))[0]


@pytest.mark.parametrize(
    ("args", "topology", "counts"),
    [
        (["--dp", "8", "--batch", "8", "--layers", "1", "--microbatches", "1"], ["Switch"], [8]),
        (["--dp", "2", "--tp", "2", "--pp", "2", "--batch", "4", "--layers", "2", "--microbatches", "2"],
         ["Ring", "Switch", "Switch"], [2, 2, 2]),
    ],
)  # fmt: skip
def test_whole_simulation_same_with_and_without_closed_form(tmp_path, args, topology, counts, monkeypatch):
    prefix = generate_transformer(tmp_path / "t", *args)
    net = NetworkConfig(topology, counts, [50.0] * len(counts), [500.0] * len(counts))
    results = []
    for closed in (True, False):
        monkeypatch.setattr(CollectiveRunner, "__init__", _with_closed_form(closed))
        results.append(simulate(str(prefix), net, congestion="unaware", record_nodes=True))
    fast, slow = results
    assert fast.ranks == slow.ranks
    assert fast.node_times == slow.node_times
    assert fast.finish_ns > 0


_INIT = CollectiveRunner.__init__


def _with_closed_form(closed: bool):
    def init(self, *a, **kw):
        kw["closed_form"] = closed
        _INIT(self, *a, **kw)

    return init


def test_skewed_rings_of_many_turns_and_many_members():
    """The skewed closed form is a longest path around the ring: an all-to-all of 40 members walks
    the ring 19 times (780 sends), and must still give the message-level run's answer; a ring of
    1,024 members arriving at their own times (a real trace's data-parallel all-reduce) must be
    answered in closed form, not message by message (2 million messages a stream)."""
    rng = random.Random(34)
    system = system_from_dict(
        {
            "scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
            "preferred-dataset-splits": 2, "all-reduce-implementation": ["ring"],
            "all-gather-implementation": ["ring"], "reduce-scatter-implementation": ["ring"],
            "all-to-all-implementation": ["ring"], "collective-optimization": "localBWAware",
            "local-mem-bw": 50, "boost-mode": 0,
        }
    )  # fmt: skip
    net = NetworkConfig(["Ring"], [40], [50.0], [500.0])
    a2a = int(CollectiveType.ALL_TO_ALL)
    offsets = tuple(rng.sample(range(200_000), 40))
    fast, slow = run_both(net, system, a2a, 1 << 16, tuple(range(40)), None, offsets, tuple(range(40)), True)
    assert fast == slow
    runner = CollectiveRunner(Network(net, aware=False), system)
    n, chunk = runner.chunks(a2a, 1 << 16)
    assert lockstep_ring(runner, a2a, tuple(range(40)), None, offsets, None, n, chunk) is not None

    net = NetworkConfig(["Ring"], [1024], [50.0], [500.0])
    runner = CollectiveRunner(Network(net, aware=False), system)
    members = tuple(range(1024))
    offsets = tuple(rng.sample(range(10_000_000), 1024))
    n, chunk = runner.chunks(TYPES[0], 25 << 20)
    got = lockstep_ring(runner, TYPES[0], members, None, offsets, None, n, chunk)
    assert got is not None
    ends = got[0]
    # every member ends after it issued, and no earlier than the latest member's issue plus its
    # own 2,046 sends' crossings
    assert all(e > o for e, o in zip(ends, offsets))
    assert min(ends) > max(offsets)

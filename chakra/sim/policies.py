"""Scheduling policies for the simulator's `policy=` argument (Daydream's `schedule` primitive).

The simulator asks a policy which ready node to issue next on a rank whose resource slot is free:
`policy(ready_node_ids, rank) -> node id` (ready ids ascending). Changing the policy models
optimizations that only reorder work, such as prioritised gradient communication (P3, TicTac).

Named policies (for `chakra simulate --policy NAME` and `get_policy`):

- `id`: smallest ready id first (ASTRA-sim's order; the simulator's built-in fast path);
- `earliest-ready` (alias `fifo`): the node that became ready first, ties by id (Daydream's default);
- `latest-ready` (alias `lifo`): the node that became ready last, ties by id.

`priority_policy(traces, key)` builds a policy from node attributes, e.g. the conventional
`comm_priority`; `custom(fn)` wraps any callable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Optional

from chakra.errors import ConfigError
from chakra.schema import pb
from chakra.schema.attrs import get_attr
from chakra.trace import Trace

Policy = Callable[[list[int], int], int]


def smallest_id(ready: list[int], rank: int) -> int:
    """ASTRA-sim's choice: the smallest ready id."""
    return min(ready)


class ReadyOrder:
    """Orders ready nodes by when the policy first saw them ready (calls come in simulated time).

    `latest=False` is FIFO (earliest-ready first), `latest=True` is LIFO. State is per rank, so
    one instance serves a whole simulation; make a new one per simulation.
    """

    def __init__(self, latest: bool = False) -> None:
        self.latest = latest
        self.seen: dict[int, dict[int, int]] = {}
        self.clock = 0

    def __call__(self, ready: list[int], rank: int) -> int:
        seen = self.seen.setdefault(rank, {})
        for i in ready:
            if i not in seen:
                seen[i] = self.clock
                self.clock += 1
        if self.latest:
            choice = max(ready, key=lambda i: (seen[i], -i))
        else:
            choice = min(ready, key=lambda i: (seen[i], i))
        del seen[choice]
        return choice


class PriorityPolicy:
    """Highest priority first (ties: smallest id). `priorities[rank][node_id]`; absent = `default`."""

    def __init__(self, priorities: dict[int, dict[int, float]], default: float = 0.0) -> None:
        self.priorities = priorities
        self.default = default

    def __call__(self, ready: list[int], rank: int) -> int:
        table = self.priorities.get(rank, {})
        d = self.default
        return min(ready, key=lambda i: (-table.get(i, d), i))


def priority_policy(
    traces: Sequence[Trace],
    key: Optional[Callable[[pb.Node], Optional[float]]] = None,
    *,
    attr: str = "comm_priority",
    default: float = 0.0,
) -> PriorityPolicy:
    """A priority policy from the traces' nodes: `key(node)` or the attribute `attr`."""
    table: dict[int, dict[int, float]] = {}
    for pos, t in enumerate(traces):
        rank = t.rank if t.rank is not None else pos
        per: dict[int, float] = {}
        for n in t.nodes:
            v = key(n) if key is not None else get_attr(n, attr, None)
            if v is not None:
                per[n.id] = float(v)
        table[rank] = per
    return PriorityPolicy(table, default)


def custom(fn: Callable[[list[int], int], Any]) -> Policy:
    """Wrap a user callable and check that it returns one of the ready ids."""

    def policy(ready: list[int], rank: int) -> int:
        choice = fn(ready, rank)
        if choice not in ready:
            raise ConfigError(f"custom scheduling policy returned {choice!r}, not one of the ready nodes {ready[:8]}")
        return int(choice)

    return policy


NAMES = ("id", "earliest-ready", "fifo", "latest-ready", "lifo")


def get_policy(name: str) -> Policy:
    """A fresh policy for a name in `NAMES` (stateful policies must not be shared between runs)."""
    key = name.lower()
    if key == "id":
        return smallest_id
    if key in ("earliest-ready", "fifo"):
        return ReadyOrder(latest=False)
    if key in ("latest-ready", "lifo"):
        return ReadyOrder(latest=True)
    raise ConfigError(f"unknown scheduling policy {name!r}; choose from {', '.join(NAMES)} (or pass a callable)")


def names() -> Iterable[str]:
    return NAMES

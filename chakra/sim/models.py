"""The three models the engine consults, as small interfaces; `simulate()` accepts replacements.

The built-in implementations are `chakra.sim.network.Network` (ASTRA-sim's analytical backends),
`chakra.sim.collective_run.CollectiveRunner` (its system layer's collective algorithms) and
`chakra.sim.memory.MemoryModel` (its remote memory and the ASTRA-sim 2.0 pool). A replacement
needs only the methods below; all times are integer ns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional, Protocol, runtime_checkable


@runtime_checkable
class NetworkModel(Protocol):
    """Point-to-point delivery. `aware` True means messages queue on links (`route`/`link_times`)."""

    aware: bool

    def p2p_time(self, src: int, dst: int, size: int) -> int:
        """Delivery time of `size` bytes src -> dst on idle links."""
        ...

    def route(self, src: int, dst: int) -> list[tuple]:
        """Links a message crosses (aware models only); each link's first item is its dimension."""
        ...

    def link_times(self, dim: int, size: int) -> tuple[int, int]:
        """(busy, delivery) ns of `size` bytes on one link of dimension `dim` (aware models only)."""
        ...


@runtime_checkable
class CollectiveModel(Protocol):
    """When each member of a collective finishes."""

    warnings: list[str]

    def finish(
        self,
        ctype: int,
        size: int,
        members: tuple[int, ...],
        involved: Optional[tuple[bool, ...]],
        starts: Sequence[int],
    ) -> list[int]:
        """Finish time per member (in `members` order) given each member's issue time."""
        ...


@runtime_checkable
class MemoryModel(Protocol):
    def access(self, rank: int, size: int, local: bool, now: int, where: str) -> int:
        """End time of a load/store of `size` bytes issued at `now` by `rank`."""
        ...

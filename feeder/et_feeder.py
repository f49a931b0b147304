"""`ETFeeder`: hands out one rank's nodes as their dependencies are met, for simulators in Python.

Protocol (the official feeder's, as ASTRA-sim drives it)::

    feeder = ETFeeder("trace.0.et")
    while feeder.has_nodes_to_issue():
        node = feeder.get_next_issuable_node()     # None: everything ready is already out
        if node is None:
            ... wait for a running node to finish, then feeder.free_children_nodes(done_id)
            continue
        if resource_busy(node):
            feeder.push_back_issuable_node(node.id)  # try again later
        else:
            start(node)                              # ... on completion: free_children_nodes(node.id)

or simply ``for node in ETFeeder(path): ...`` (each node is freed when the next is requested).

Both `data_deps` and `ctrl_deps` count (as ASTRA-sim's FeederV3). Ready order is ascending node
id by default (ASTRA-sim issues the dependency-free set in ascending id order); `order="fifo"`
gives the order in which nodes became ready (file order for the initial ones).

Memory: a `.et` file is indexed in one pass (`feeder.table`, ~40 bytes per node) and payloads are
decoded lazily from a memory map, with at most `cache_size` decoded nodes kept (LRU). A 10M-node
trace is fed in a few hundred MB. `.et.gz` is decompressed to a temporary file first (gzip cannot
seek). JSON-form files and in-memory `Trace`s are held as they are.
"""

from __future__ import annotations

import contextlib
import heapq
import mmap
import os
from array import array
from collections import OrderedDict, deque
from collections.abc import Iterator
from heapq import heappop, heappush
from pathlib import Path
from typing import Optional, Union

import numpy as np

from chakra.errors import ChakraError, InputError
from chakra.feeder.table import NodeTable, gunzip_to_temp, table_from_et, table_from_nodes
from chakra.io import is_gzip
from chakra.schema import pb
from chakra.trace import Trace

PENDING, READY, ISSUED, DONE = 0, 1, 2, 3


class FeederError(ChakraError):
    """Misuse of the feeder protocol, or a graph that can never drain (names the node ids)."""


class ETFeeder:
    """One rank's trace as a stream of dependency-free nodes.

    `source` is a path (`.et`, `.et.gz`, JSON form) or a `Trace`. `cache_size` bounds the decoded
    nodes kept for a file source. `missing_deps="error"` (default) rejects a dependency on an id
    absent from the trace, naming both ids; `"ignore"` drops such edges.
    """

    def __init__(
        self,
        source: Union[str, os.PathLike, Trace],
        *,
        cache_size: int = 4096,
        order: str = "id",
        missing_deps: str = "error",
        attrs: bool = False,
    ) -> None:
        if order not in ("id", "fifo"):
            raise InputError(f"unknown ready order {order!r}: use 'id' or 'fifo'")
        self.order = order
        self.cache_size = max(1, int(cache_size))
        self._nodes: Optional[list[pb.Node]] = None
        self._mm: Optional[mmap.mmap] = None
        self._file = None
        self._tmp: Optional[Path] = None
        self.path: Optional[Path] = None
        if isinstance(source, Trace):
            self.path = source.path
            self.metadata = source.metadata
            self._nodes = source.nodes
            self.table = table_from_nodes(source.nodes, path=source.path, attrs=attrs, missing_deps=missing_deps)
        else:
            path = Path(source)
            self.path = path
            if not path.is_file():
                raise InputError(f"{path}: no such file")
            from chakra.io import is_json_file

            if is_json_file(path):
                from chakra.io import read_trace

                trace = read_trace(path)
                self.metadata = trace.metadata
                self._nodes = trace.nodes
                self.table = table_from_nodes(trace.nodes, path=path, attrs=attrs, missing_deps=missing_deps)
            else:
                real = path
                if is_gzip(path):
                    self._tmp = real = gunzip_to_temp(path)
                try:
                    self.metadata, self.table = table_from_et(real, attrs=attrs, missing_deps=missing_deps, source=path)
                    if real.stat().st_size:
                        self._file = open(real, "rb")  # noqa: SIM115 - closed in close()
                        self._mm = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
                except BaseException:
                    self.close()
                    raise
        self._init_state()

    # -- state -------------------------------------------------------------------------------

    def _init_state(self) -> None:
        t = self.table
        n = len(t)
        self._ids = t.ids
        self._n = n
        self._id_base: Optional[int] = int(t.ids[0]) if n and int(t.ids[-1]) - int(t.ids[0]) == n - 1 else None
        self._ptr = array("q", t.child_ptr.tobytes())
        self._cidx = array("i", t.child_idx.tobytes())
        self._left = array("i", t.dep_count.tobytes())
        self._state = bytearray(n)
        self._cache: OrderedDict[int, pb.Node] = OrderedDict()
        self._remaining = n  # not yet issued
        self._outstanding = 0  # issued, not yet freed
        ready_rows = np.nonzero(t.dep_count == 0)[0].tolist()
        for i in ready_rows:
            self._state[i] = READY
        if self.order == "id":
            self._ready: Union[list[int], deque[int]] = ready_rows  # already ascending: a valid heap
        else:
            pos = t.file_pos
            self._ready = deque(sorted(ready_rows, key=lambda r: int(pos[r])) if pos is not None else ready_rows)
        if n and not ready_rows:
            raise FeederError(
                f"{self.path or '<trace>'}: no dependency-free node among {n} nodes (every node waits on another: "
                f"a cycle), e.g. node {int(self._ids[0])}"
            )

    def __len__(self) -> int:
        return len(self.table)

    # -- official API --------------------------------------------------------------------------

    def has_nodes_to_issue(self) -> bool:
        """True while some node has not been issued yet (ready or still waiting on parents)."""
        return self._remaining > 0

    def get_next_issuable_id(self) -> Optional[int]:
        """Like `get_next_issuable_node` but returns only the id (no decoding: the fast path)."""
        ready = self._ready
        if not ready or self.order != "id":
            row = self._pop_row()
            if row is None:
                return None
        else:  # inlined _pop_row: this is the hot path of a Python simulator
            row = heappop(ready)  # type: ignore[arg-type]
            self._state[row] = ISSUED
            self._remaining -= 1
            self._outstanding += 1
        base = self._id_base
        return row + base if base is not None else int(self._ids[row])

    def get_next_issuable_node(self) -> Optional[pb.Node]:
        """The next dependency-free node (smallest id by default), or None if none is ready now.

        Raises FeederError when nothing is ready, nothing is running and nodes remain (they can
        never become ready: a dependency cycle), naming the stuck nodes.
        """
        row = self._pop_row()
        return None if row is None else self._decode(row)

    def _pop_row(self) -> Optional[int]:
        ready = self._ready
        if not ready:
            if self._remaining and not self._outstanding:
                self._raise_stuck()
            return None
        row = heapq.heappop(ready) if self.order == "id" else ready.popleft()  # type: ignore[union-attr,arg-type]
        self._state[row] = ISSUED
        self._remaining -= 1
        self._outstanding += 1
        return row

    def push_back_issuable_node(self, node_id: int) -> None:
        """Return an issued (not yet freed) node to the ready set, e.g. because its resource is busy."""
        row = self._row(node_id)
        if self._state[row] != ISSUED:
            raise FeederError(f"push_back_issuable_node({node_id}): node is not issued")
        self._state[row] = READY
        self._remaining += 1
        self._outstanding -= 1
        if self.order == "id":
            heapq.heappush(self._ready, row)  # type: ignore[arg-type]
        else:
            self._ready.appendleft(row)  # type: ignore[union-attr]

    def free_children_nodes(self, node_id: int) -> int:
        """Mark an issued node finished; children whose last parent this was become ready.

        Returns the number of children that became ready.
        """
        base = self._id_base
        if base is not None and 0 <= node_id - base < self._n:
            return self._free_row(node_id - base)
        return self._free_row(self._row(node_id))

    def free_row(self, row: int) -> int:
        """`free_children_nodes` by row number (the table's ascending-id position)."""
        return self._free_row(row)

    def _free_row(self, row: int) -> int:
        state = self._state
        if state[row] != ISSUED:
            raise FeederError(
                f"free_children_nodes({int(self._ids[row])}): node was "
                f"{('never issued', 'never issued', '', 'already freed')[state[row]]}"
            )
        state[row] = DONE
        self._outstanding -= 1
        ptr = self._ptr
        a, b = ptr[row], ptr[row + 1]
        if a == b:
            return 0
        left = self._left
        freed = 0
        ready = self._ready
        by_id = self.order == "id"
        for c in self._cidx[a:b]:
            k = left[c] - 1
            left[c] = k
            if k == 0:
                state[c] = READY
                if by_id:
                    heappush(ready, c)  # type: ignore[arg-type]
                else:
                    ready.append(c)
                freed += 1
        return freed

    def lookup_node(self, node_id: int) -> pb.Node:
        """The node with this id (decoded on demand; any node, whatever its state)."""
        return self._decode(self._row(node_id))

    # camelCase aliases for code ported from the C++ feeder.
    hasNodesToIssue = has_nodes_to_issue  # noqa: N815
    getNextIssuableNode = get_next_issuable_node  # noqa: N815
    pushBackIssuableNode = push_back_issuable_node  # noqa: N815
    freeChildrenNodes = free_children_nodes  # noqa: N815
    lookupNode = lookup_node  # noqa: N815

    # -- Pythonic ------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[pb.Node]:
        """Every node once, in dependency order; each is freed when the next one is requested."""
        while self._remaining:
            row = self._pop_row()
            if row is None:  # only possible if the caller holds issued nodes; free them in order
                raise FeederError("iteration needs every issued node freed; nodes are still outstanding")
            yield self._decode(row)
            self._free_row(row)

    def ready_ids(self) -> list[int]:
        """Ids of the nodes ready now, in issue order (for policies and debugging)."""
        rows = sorted(self._ready) if self.order == "id" else list(self._ready)
        return [int(self._ids[r]) for r in rows]

    # -- helpers -------------------------------------------------------------------------------

    def _row(self, node_id: int) -> int:
        base = self._id_base
        if base is not None:  # ids are base, base+1, ...: the row is arithmetic
            row = node_id - base
            if 0 <= row < self._n:
                return row
            raise FeederError(f"{self.path or '<trace>'}: no node with id {node_id}")
        row = self.table.row_of(int(node_id))
        if row < 0:
            raise FeederError(f"{self.path or '<trace>'}: no node with id {node_id}")
        return row

    def _decode(self, row: int) -> pb.Node:
        cache = self._cache
        node = cache.get(row)
        if node is not None:
            cache.move_to_end(row)
            return node
        t = self.table
        if self._nodes is not None:  # held in memory anyway: no cache needed
            return self._nodes[int(t.file_pos[row]) if t.file_pos is not None else row]
        off = int(t.payload_off[row])
        if self._mm is None:
            node = pb.Node()
        else:
            framed = self._mm[off : off + int(t.payload_len[row])]
            k = 0
            while framed[k] >= 0x80:
                k += 1
            node = pb.Node.FromString(framed[k + 1 :])
        cache[row] = node
        if len(cache) > self.cache_size:
            cache.popitem(last=False)
        return node

    def _raise_stuck(self) -> None:
        state = self._state
        stuck = [i for i in range(len(state)) if state[i] == PENDING][:10]
        parts = []
        for row in stuck[:5]:
            parents = self._pending_parents(row)
            parts.append(f"node {int(self._ids[row])} waits on {parents}")
        raise FeederError(
            f"{self.path or '<trace>'}: {self._remaining} node(s) can never become ready (dependency cycle): "
            + "; ".join(parts)
        )

    def _pending_parents(self, row: int) -> list[int]:
        t = self.table
        ptr = t.child_ptr
        parents = np.nonzero(t.child_idx == row)[0]
        owners = np.searchsorted(ptr, parents, side="right") - 1
        return [int(self._ids[p]) for p in owners if self._state[int(p)] != DONE][:5]

    def close(self) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._tmp is not None:
            with contextlib.suppress(FileNotFoundError):
                self._tmp.unlink()
            self._tmp = None

    def __enter__(self) -> ETFeeder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


__all__ = ["ETFeeder", "FeederError", "NodeTable"]

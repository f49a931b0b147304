"""The generator DSL: write a multi-rank Chakra workload in a few lines of Python.

A `Workload` holds one node list per rank. Operations that span ranks are created once and land
on every rank involved, already consistent: a collective gets a matching node (same type, size
and `pg_name`, in the same order) on every member of its process group; `send` creates the send
node and its matching receive with the same tag. Dependencies are expressed by passing the
handle an operation returned (`after=`), so nobody ever types a node id.

    w = Workload(ranks=4)
    fwd = w.compute(w.all_ranks, "fwd", flops=2e12, bytes=4e9)
    ar = w.all_reduce(64 << 20, after=fwd)
    w.compute(w.all_ranks, "opt", flops=1e9, bytes=1e8, after=ar)
    w.save("out/demo")

Process groups are written to `PREFIX.comm_groups.json` (ASTRA-sim's `--comm-group-configuration`;
`chakra simulate`, `validate` and the visualizers find it beside the traces). Node ids start at 1:
id 0 is kept for the optional `process_group:init` METADATA node (`metadata_node=True`), which
registers the groups the rank belongs to the PyTorch way; nodes without any dependency then depend
on it. It is off by default because ASTRA-sim aborts on METADATA nodes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Optional, Union

import orjson

from chakra.commgroups import write_comm_groups
from chakra.dsl.device import Device
from chakra.errors import ChakraError
from chakra.schema import CollectiveType, NodeType, pb
from chakra.schema.attrs import RECV_BYTES, SEND_BYTES, set_attrs
from chakra.trace import Trace, make_metadata, make_node

METADATA_NODE_NAME = "process_group:init"
WORLD_PG = "0"


#: `tensor_loc` values of memory nodes (chakra.sim reads "local" or 0 as local memory, else remote).
TENSOR_LOCATIONS = ("local", "remote")


class DSLError(ChakraError):
    """A workload description that cannot become consistent traces (bad rank, cross-rank dep...)."""


def collective_type(kind: Union[str, int, CollectiveType]) -> CollectiveType:
    """`CollectiveType` from an enum, its number, or a name like "all_reduce", "AllReduce", "allreduce"."""
    if isinstance(kind, CollectiveType):
        return kind
    if isinstance(kind, int) and not isinstance(kind, bool):
        try:
            return CollectiveType(kind)
        except ValueError:
            raise DSLError(f"unknown collective type number {kind}") from None
    key = str(kind).replace("_", "").replace("-", "").upper()
    for ct in CollectiveType:
        if ct.name.replace("_", "") == key:
            return ct
    names = ", ".join(ct.name.lower() for ct in CollectiveType)
    raise DSLError(f"unknown collective type {kind!r} (one of: {names})")


class ProcessGroup:
    """A set of ranks that runs collectives together.

    `pg_name` is the numeric string simulators key on (ASTRA-sim `stoi`s it; "0" is the world);
    `desc` is the human name (e.g. "tp:pp0.dp1"), stored as `pg_desc` like PyTorch does.
    """

    __slots__ = ("pg_name", "desc", "ranks", "_members")

    def __init__(self, pg_name: str, desc: str, ranks: Sequence[int]) -> None:
        self.pg_name = pg_name
        self.desc = desc
        self.ranks = tuple(ranks)
        self._members = frozenset(self.ranks)

    def __contains__(self, rank: int) -> bool:
        return rank in self._members

    def __len__(self) -> int:
        return len(self.ranks)

    def __repr__(self) -> str:
        return f"ProcessGroup({self.pg_name!r}, {self.desc!r}, ranks={list(self.ranks)})"

    def to_json(self) -> dict[str, Any]:
        return {
            "pg_name": self.pg_name,
            "pg_desc": self.desc,
            "backend_config": "chakra:generated",
            "ranks": list(self.ranks),
            "group_size": len(self.ranks),
            "group_count": 1,
        }


class Ref:
    """Handle to one operation: the node id it got on each rank it lives on."""

    __slots__ = ("ids", "name")

    def __init__(self, ids: dict[int, int], name: str) -> None:
        self.ids = ids
        self.name = name

    @property
    def ranks(self) -> list[int]:
        return sorted(self.ids)

    def __getitem__(self, rank: int) -> int:
        return self.ids[rank]

    def on(self, rank: int) -> Ref:
        """The part of this operation that lives on `rank` (e.g. one member of a collective)."""
        if rank not in self.ids:
            raise DSLError(f"{self.name!r} has no node on rank {rank}")
        return Ref({rank: self.ids[rank]}, self.name)

    def __repr__(self) -> str:
        return f"Ref({self.name!r}, {self.ids})"


class P2P(Ref):
    """A send/receive pair: `.send` lives on the source rank, `.recv` on the destination."""

    __slots__ = ("send", "recv", "tag")

    def __init__(self, send: Ref, recv: Ref, tag: int) -> None:
        super().__init__({**send.ids, **recv.ids}, send.name)
        self.send = send
        self.recv = recv
        self.tag = tag


After = Union[None, Ref, Iterable[Ref]]
Ranks = Union[int, Iterable[int]]


class Workload:
    """Per-rank node lists plus the process groups they use; see the module docstring."""

    def __init__(self, ranks: int, *, device: Optional[Device] = None, name: str = "workload") -> None:
        if int(ranks) < 1:
            raise DSLError(f"a workload needs at least one rank, got {ranks}")
        self.num_ranks = int(ranks)
        self.name = name
        self.device = device
        self._nodes: list[list[pb.Node]] = [[] for _ in range(self.num_ranks)]
        self._groups: list[ProcessGroup] = []
        self._groups_by_desc: dict[str, ProcessGroup] = {}
        self._tags: dict[tuple[int, int], int] = {}
        self._flops = [0] * self.num_ranks  # num_ops per rank, kept as nodes are added
        self.world = self._register(ProcessGroup(WORLD_PG, "world", range(self.num_ranks)))

    # ------------------------------------------------------------------ ranks and groups

    @property
    def all_ranks(self) -> range:
        return range(self.num_ranks)

    @property
    def groups(self) -> list[ProcessGroup]:
        return list(self._groups)

    def _register(self, pg: ProcessGroup) -> ProcessGroup:
        self._groups.append(pg)
        self._groups_by_desc[pg.desc] = pg
        return pg

    def group(self, ranks: Iterable[int], name: Optional[str] = None) -> ProcessGroup:
        """Register a process group (or return the one already registered under `name`)."""
        members = [self._check_rank(r) for r in ranks]
        if len(set(members)) != len(members):
            raise DSLError(f"process group {name or members!r} lists a rank twice")
        if not members:
            raise DSLError(f"process group {name!r} has no ranks")
        desc = name or f"group{len(self._groups)}"
        old = self._groups_by_desc.get(desc)
        if old is not None:
            if list(old.ranks) != members:
                raise DSLError(f"process group {desc!r} already registered with ranks {list(old.ranks)}")
            return old
        return self._register(ProcessGroup(str(len(self._groups)), desc, members))

    def group_named(self, name: str) -> ProcessGroup:
        try:
            return self._groups_by_desc[name]
        except KeyError:
            raise DSLError(f"no process group named {name!r}") from None

    def _check_rank(self, rank: int) -> int:
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < self.num_ranks:
            raise DSLError(f"rank {rank!r} is outside 0..{self.num_ranks - 1}")
        return rank

    def _rank_list(self, ranks: Ranks) -> list[int]:
        if isinstance(ranks, int) and not isinstance(ranks, bool):
            return [self._check_rank(ranks)]
        out = [self._check_rank(r) for r in ranks]
        if not out:
            raise DSLError("an operation needs at least one rank")
        return out

    # ------------------------------------------------------------------ node plumbing

    def _deps(self, after: After, ranks: Sequence[int], what: str) -> dict[int, list[int]]:
        """rank -> node ids it must wait for; a dependency on another rank's node is an error."""
        if after is None:
            return {}
        refs = [after] if isinstance(after, Ref) else list(after)
        deps: dict[int, list[int]] = {}
        wanted = set(ranks)
        for ref in refs:
            if not isinstance(ref, Ref):
                raise DSLError(f"{what}: after= takes operations returned by the workload, got {ref!r}")
            hit = False
            for r, nid in ref.ids.items():
                if r in wanted:
                    deps.setdefault(r, []).append(nid)
                    hit = True
            if not hit:
                raise DSLError(
                    f"{what} on rank(s) {sorted(wanted)} cannot depend on {ref.name!r} (rank(s) {ref.ranks}): "
                    "ranks only synchronise through send/recv or collectives"
                )
        return deps

    def _append(self, rank: int, node: pb.Node) -> int:
        nodes = self._nodes[rank]
        node.id = len(nodes) + 1  # id 0 is the process-group METADATA node
        nodes.append(node)
        return node.id

    def _duration(self, duration_us: Optional[float], flops: float, nbytes: float) -> int:
        if duration_us is not None:
            if duration_us < 0:
                raise DSLError(f"negative duration {duration_us}")
            return int(round(duration_us))
        if self.device is not None:
            return self.device.duration_us(flops, nbytes)
        return 0

    def _simple(
        self,
        ranks: Ranks,
        name: str,
        node_type: int,
        attrs: dict[str, Any],
        duration: int,
        after: After,
    ) -> Ref:
        members = self._rank_list(ranks)
        deps = self._deps(after, members, name)
        ids = {}
        for r in members:
            node = make_node(0, name, node_type, data_deps=deps.get(r, ()), duration_micros=duration, attrs=attrs)
            ids[r] = self._append(r, node)
        return Ref(ids, name)

    # ------------------------------------------------------------------ operations

    def compute(
        self,
        rank: Ranks,
        name: str,
        *,
        duration_us: Optional[float] = None,
        flops: float = 0,
        bytes: float = 0,
        after: After = None,
        cpu: bool = False,
        attrs: Optional[Mapping[str, Any]] = None,
    ) -> Ref:
        """A COMP_NODE on `rank` (an int or several ranks) with `num_ops`=flops, `tensor_size`=bytes.

        Without `duration_us` the duration comes from the workload's device model (roofline).
        """
        if flops < 0 or bytes < 0:
            raise DSLError(f"compute {name!r}: flops and bytes must be >= 0")
        values = {"is_cpu_op": bool(cpu), "num_ops": int(flops), "tensor_size": int(bytes)}
        if attrs:
            values.update(attrs)
        for r in self._rank_list(rank):
            self._flops[r] += int(flops)
        return self._simple(rank, name, NodeType.COMP_NODE, values, self._duration(duration_us, flops, bytes), after)

    def load(
        self,
        rank: Ranks,
        name: str,
        bytes: float,
        *,
        after: After = None,
        duration_us: Optional[float] = None,
        location: str = "local",
    ) -> Ref:
        """A MEM_LOAD_NODE of `bytes` from `location`: "local" (the NPU's own memory) or "remote"
        (pooled memory: the simulator then needs a remote memory config)."""
        return self._mem(rank, name, NodeType.MEM_LOAD_NODE, bytes, after, duration_us, location)

    def store(
        self,
        rank: Ranks,
        name: str,
        bytes: float,
        *,
        after: After = None,
        duration_us: Optional[float] = None,
        location: str = "local",
    ) -> Ref:
        """A MEM_STORE_NODE of `bytes` to `location` ("local" or "remote", as `load`)."""
        return self._mem(rank, name, NodeType.MEM_STORE_NODE, bytes, after, duration_us, location)

    def _mem(
        self, rank: Ranks, name: str, node_type: int, nbytes: float, after: After, duration_us, location: str
    ) -> Ref:
        if nbytes < 0:
            raise DSLError(f"memory node {name!r}: negative size")
        if location not in TENSOR_LOCATIONS:
            raise DSLError(f"memory node {name!r}: location must be one of {', '.join(TENSOR_LOCATIONS)}")
        attrs = {"is_cpu_op": False, "tensor_size": int(nbytes), "tensor_loc": location}
        return self._simple(rank, name, node_type, attrs, self._duration(duration_us, 0, nbytes), after)

    def collective(
        self,
        kind: Union[str, int, CollectiveType],
        size: float,
        *,
        group: Union[None, ProcessGroup, str] = None,
        name: Optional[str] = None,
        after: After = None,
        duration_us: Optional[float] = None,
        root: Optional[int] = None,
        involved_dim: Optional[Sequence[bool]] = None,
        priority: Optional[int] = None,
        rank_attrs: Optional[Mapping[int, Mapping[str, Any]]] = None,
    ) -> Ref:
        """One collective on every member of `group` (default: all ranks); `rank_attrs`: attributes
        that differ per member (rank -> name -> value), set over the common ones.

        `size` is the `comm_size` in bytes as ASTRA-sim reads it: the buffer for all-reduce, the
        full input for reduce-scatter, the per-rank input for all-gather, the per-rank buffer for
        all-to-all.
        """
        ctype = collective_type(kind)
        pg = self._resolve_group(group)
        if size < 0:
            raise DSLError(f"collective {ctype.name}: negative size {size}")
        if root is not None and root not in pg:
            raise DSLError(f"collective {ctype.name}: root {root} is not in {pg.desc}")
        label = name or ctype.name.lower()
        deps = self._deps(after, pg.ranks, label)
        attrs: dict[str, Any] = {
            "is_cpu_op": False,
            "comm_type": int(ctype),
            "comm_size": int(size),
            "pg_name": pg.pg_name,
        }
        if involved_dim is not None:
            attrs["involved_dim"] = [bool(x) for x in involved_dim]
        if priority is not None:
            attrs["comm_priority"] = int(priority)
        if root is not None:
            attrs["root_rank"] = int(root)
        duration = int(round(duration_us)) if duration_us is not None else 0
        ids = {}
        for r in pg.ranks:
            node = make_node(0, label, NodeType.COMM_COLL_NODE, data_deps=deps.get(r, ()), duration_micros=duration)
            set_attrs(node, attrs)
            if rank_attrs and r in rank_attrs:
                set_attrs(node, rank_attrs[r])
            ids[r] = self._append(r, node)
        return Ref(ids, label)

    def _resolve_group(self, group: Union[None, ProcessGroup, str]) -> ProcessGroup:
        if group is None:
            return self.world
        if isinstance(group, str):
            return self.group_named(group)
        if isinstance(group, ProcessGroup):
            if self._groups_by_desc.get(group.desc) is not group:
                raise DSLError(f"process group {group.desc!r} belongs to another workload")
            return group
        members = tuple(group)  # a bare list of ranks: reuse the group with exactly these members
        for pg in self._groups:
            if pg.ranks == members:
                return pg
        return self.group(members)

    def all_reduce(self, size: float, **kw: Any) -> Ref:
        return self.collective(CollectiveType.ALL_REDUCE, size, **kw)

    def reduce(self, size: float, **kw: Any) -> Ref:
        return self.collective(CollectiveType.REDUCE, size, **kw)

    def all_gather(self, size: float, **kw: Any) -> Ref:
        return self.collective(CollectiveType.ALL_GATHER, size, **kw)

    def gather(self, size: float, **kw: Any) -> Ref:
        return self.collective(CollectiveType.GATHER, size, **kw)

    def scatter(self, size: float, **kw: Any) -> Ref:
        return self.collective(CollectiveType.SCATTER, size, **kw)

    def broadcast(self, size: float, **kw: Any) -> Ref:
        return self.collective(CollectiveType.BROADCAST, size, **kw)

    def all_to_all(self, size: float = 0, *, per_peer: Optional[Sequence[Sequence[int]]] = None, **kw: Any) -> Ref:
        """An all-to-all of `size` bytes per rank, split evenly; or, with `per_peer` (an n x n
        matrix over the group's members in order: [i][j] = bytes member i sends to member j),
        an all-to-all-v: each member's `comm_size` is its row's sum and its `comm_send_bytes` /
        `comm_recv_bytes` are its row / column (docs/moe.md)."""
        if per_peer is None:
            return self.collective(CollectiveType.ALL_TO_ALL, size, **kw)
        pg = self._resolve_group(kw.pop("group", None))
        n = len(pg.ranks)
        rows = [list(r) for r in per_peer]
        if len(rows) != n or any(len(r) != n for r in rows):
            raise DSLError(f"all_to_all per_peer must be {n} x {n} (the members of {pg.desc})")
        if any(not isinstance(v, int) or isinstance(v, bool) or v < 0 for r in rows for v in r):
            raise DSLError("all_to_all per_peer entries must be byte counts (ints >= 0)")
        per_rank = {
            rank: {"comm_size": sum(rows[i]), SEND_BYTES: rows[i], RECV_BYTES: [rows[j][i] for j in range(n)]}
            for i, rank in enumerate(pg.ranks)
        }
        return self.collective(CollectiveType.ALL_TO_ALL, 0, group=pg, rank_attrs=per_rank, **kw)

    def reduce_scatter(self, size: float, **kw: Any) -> Ref:
        return self.collective(CollectiveType.REDUCE_SCATTER, size, **kw)

    def reduce_scatter_block(self, size: float, **kw: Any) -> Ref:
        return self.collective(CollectiveType.REDUCE_SCATTER_BLOCK, size, **kw)

    def barrier(self, **kw: Any) -> Ref:
        return self.collective(CollectiveType.BARRIER, 0, **kw)

    def send(
        self,
        src: int,
        dst: int,
        size: float,
        *,
        tag: Optional[int] = None,
        name: Optional[str] = None,
        after: After = None,
        duration_us: Optional[float] = None,
    ) -> P2P:
        """A COMM_SEND_NODE on `src` and its matching COMM_RECV_NODE on `dst` (same tag and size).

        Without `tag`, tags count up per (src, dst) pair, so the k-th send meets the k-th receive.
        `after` may mix nodes of both ranks: each side waits for its own rank's nodes.
        """
        self._check_rank(src)
        self._check_rank(dst)
        if src == dst:
            raise DSLError(f"send from rank {src} to itself")
        if size < 0:
            raise DSLError(f"send {src}->{dst}: negative size {size}")
        if tag is None:
            tag = self._tags.get((src, dst), 0)
        self._tags[(src, dst)] = max(self._tags.get((src, dst), 0), int(tag) + 1)
        label = name or f"send_{src}_to_{dst}"
        deps = self._deps(after, (src, dst), label)
        duration = int(round(duration_us)) if duration_us is not None else 0
        common = {"is_cpu_op": False, "comm_src": src, "comm_dst": dst, "comm_tag": int(tag), "comm_size": int(size)}
        snode = make_node(0, label, NodeType.COMM_SEND_NODE, data_deps=deps.get(src, ()), duration_micros=duration)
        set_attrs(snode, common)
        rlabel = name.replace("send", "recv") if name else f"recv_{dst}_from_{src}"
        rnode = make_node(0, rlabel, NodeType.COMM_RECV_NODE, data_deps=deps.get(dst, ()), duration_micros=duration)
        set_attrs(rnode, common)
        send = Ref({src: self._append(src, snode)}, label)
        recv = Ref({dst: self._append(dst, rnode)}, rlabel)
        return P2P(send, recv, int(tag))

    # ------------------------------------------------------------------ stamping (fast path)

    def adopt(self, rank: int, nodes: list[pb.Node], flops: int = 0) -> None:
        """Install a prebuilt node list (ids 1..n, see `chakra.dsl.template`) on an empty rank."""
        self._check_rank(rank)
        if self._nodes[rank]:
            raise DSLError(f"rank {rank} already has nodes")
        self._nodes[rank] = nodes
        self._flops[rank] = int(flops)

    def total_flops(self) -> int:
        """Sum of `num_ops` over every compute node of every rank."""
        return sum(self._flops)

    # ------------------------------------------------------------------ output

    def node_count(self, rank: Optional[int] = None, metadata_node: bool = False) -> int:
        """Nodes written for one rank (or all), counting the METADATA node when it is written."""
        extra = 1 if metadata_node else 0
        if rank is None:
            return sum(len(n) + extra for n in self._nodes)
        return len(self._nodes[self._check_rank(rank)]) + extra

    def groups_of(self, rank: int) -> list[ProcessGroup]:
        return [g for g in self._groups if rank in g]

    def metadata_node(self, rank: int, groups: Optional[list[ProcessGroup]] = None) -> pb.Node:
        """The rank's `process_group:init` node: PyTorch's spelling, a list holding one JSON string.

        ASTRA-sim strips two characters from each end of `inputs.values` and JSON-decodes the rest,
        so the JSON must sit between `['` and `']` and must not contain a single quote.
        """
        pgs = self.groups_of(rank) if groups is None else groups
        text = orjson.dumps([g.to_json() for g in pgs]).decode()
        node = make_node(0, METADATA_NODE_NAME, NodeType.METADATA_NODE, attrs={"is_cpu_op": False})
        node.inputs.values = f"['{text}']"
        node.inputs.types = "['String']"
        node.inputs.shapes = "[[]]"
        return node

    def traces(self, metadata_node: bool = False) -> list[Trace]:
        """One Trace per rank. With `metadata_node`, node 0 is the rank's `process_group:init` node
        and the rank's roots wait for it; without (the default), groups live in `comm_groups()`."""
        membership: list[list[ProcessGroup]] = [[] for _ in range(self.num_ranks)]
        for g in self._groups:
            for r in g.ranks:
                membership[r].append(g)
        out = []
        for rank, nodes in enumerate(self._nodes):
            for n in nodes:
                if metadata_node:
                    if not n.data_deps and not n.ctrl_deps:
                        n.data_deps.append(0)
                elif n.data_deps and n.data_deps[0] == 0:  # left by an earlier metadata_node=True call
                    del n.data_deps[0]
            md = make_metadata(generator="chakra.dsl", workload=self.name, rank=rank, world_size=self.num_ranks)
            head = [self.metadata_node(rank, membership[rank])] if metadata_node else []
            out.append(Trace(metadata=md, nodes=[*head, *nodes], rank=rank))
        return out

    def comm_groups(self) -> dict[str, list[int]]:
        """ASTRA-sim's comm-group configuration: `{"<pg_name>": [ranks]}` for every group but the world.

        ASTRA-sim reserves id 0 for "all ranks", so the world group never appears in this file.
        """
        return {g.pg_name: list(g.ranks) for g in self._groups if g.pg_name != WORLD_PG}

    def save_comm_groups(self, path: Union[str, Path]) -> Path:
        from chakra.io import atomic_output

        with atomic_output(path) as f:
            f.write(orjson.dumps(self.comm_groups(), option=orjson.OPT_INDENT_2))
        return Path(path)

    def save(self, prefix: Union[str, Path], *, comm_groups: bool = True, metadata_node: bool = False) -> list[Path]:
        """Write PREFIX.<rank>.et for every rank, plus PREFIX.comm_groups.json (ASTRA-sim's
        `--comm-group-configuration`) unless `comm_groups=False`. `metadata_node` also writes the
        PyTorch-style `process_group:init` node (ASTRA-sim aborts on it; see docs/astra-sim-export.md)."""
        from chakra.io import output_set, write_rank_traces

        with output_set():
            paths = write_rank_traces(prefix, self.traces(metadata_node=metadata_node))
            if comm_groups:  # none when every collective is on the world group, as the converters do
                write_comm_groups(prefix, self.comm_groups())
        return paths

"""What the real ASTRA-sim 2.x (analytical backends) rejects or silently stops on, and the fixes.

`plan(traces, groups)` walks every node of every rank once and returns the findings (`Issue`:
rank, node id, name, code, reason, and what the export does about it) plus the per-node fixes.
`chakra validate --for astra-sim` prints the findings; `chakra export astra-sim` applies the fixes
(`apply`). One walk serves both, so the two commands cannot disagree.

Facts from ASTRA-sim 2.x (astra-sim/workload/Workload.cc, CommunicatorGroup.cc, and running its
binaries), each the reason for one rule below:

- a METADATA node ends the run at t=0 (the feeder rejects its type) -> dropped, groups go to the
  comm-group file;
- only ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER and ALL_TO_ALL go through the network; BROADCAST is
  replayed from `duration_micros`; any other collective throws, the event queue runs dry and the
  rank never prints `finished` -> rewritten to a runnable collective moving the same bytes
  (`REWRITE`), or to a compute node of the recorded duration;
- members of a collective that disagree on its size never finish (ring steps wait for messages of
  another size) -> every member gets the largest size; the same holds for send/recv pairs;
- a comm node with `is_cpu_op = true` throws -> cleared;
- `pg_name` is `stoi`ed and looked up among the comm groups ("" and "0" mean all ranks; group
  id 0 is rejected) -> non-numeric or undefined names get numeric ids in the comm-group file;
- a dependency on an absent node id aborts the feeder -> `missing_deps` error or drop;
- the attributes it reads (`comm_type`, `comm_size`, ...) are read from one protobuf arm only; any
  other arm reads as 0 -> rewritten in the expected arm;
- its end-of-run report throws on any compute node with `is_cpu_op = true` ("Only GPU and COMM types
  are supported for overlap extraction") -> cleared (the node becomes a GPU compute node);
- with the roofline enabled, a GPU compute node of `num_ops` 0 and `tensor_size` > 0 takes 0/0 ns
  (2^63 after the cast) -> `num_ops` 1, which costs tensor_size / local-mem-bw (the memory-bound
  time the node stands for);
- a rank with no node never starts ("No dependancy free nodes found") -> one idle compute node;
- `involved_dim` is read past its end when shorter than the network's dimensions -> padded with
  false (what `chakra simulate` reads there);
- a message to oneself aborts ("src and dest have the same address") -> compute nodes;
- an ALL_GATHER smaller than `preferred-dataset-splits` bytes gets 0-byte chunks (ChunkIdGenerator
  asserts chunk_size > 0) -> comm_size = the splits;
- a process subgroup's collective plan deletes, at exit, the collective implementation object it
  borrowed from the rank when the implementation list has one entry; two subgroups using one
  collective type on one rank free it twice (heap corruption, see docs/astra-sim.md) -> with the
  congestion-unaware backend the export writes a 2-D network and two-entry implementation lists,
  where each subgroup plan owns a fresh implementation.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import chain, compress
from operator import attrgetter
from typing import Any, Optional

from chakra.commgroups import WORLD_NAMES, metadata_groups, strip_metadata
from chakra.errors import InputError
from chakra.graph import cycle_breaking_edges
from chakra.schema import CollectiveType, NodeType, collective_name, node_type_name, pb, whole
from chakra.schema.attrs import read_attr_bytes, read_attrs, set_attr
from chakra.sim.alltoallv import node_splits
from chakra.sim.config import MemoryConfig, NetworkConfig, SystemConfig, default_network
from chakra.sim.nogc import without_gc
from chakra.trace import Trace, rank_set_problem

#: Collectives ASTRA-sim moves through its network model.
NETWORK_COLLECTIVES = frozenset(
    {CollectiveType.ALL_REDUCE, CollectiveType.ALL_GATHER, CollectiveType.REDUCE_SCATTER, CollectiveType.ALL_TO_ALL}
)

#: Unrunnable collective -> the runnable one whose ring moves the same total bytes for the same
#: `comm_size` S over n ranks, (n-1)*S: ASTRA-sim's reduce-scatter, all-gather and all-to-all each
#: move (n-1)/n*S per rank. REDUCE: every non-root forwards its S-byte buffer once; BROADCAST: the
#: root's S reaches n-1 ranks; GATHER/SCATTER: n-1 pieces of S go to/from the root;
#: REDUCE_SCATTER_BLOCK is a reduce-scatter; BARRIER is an all-reduce of its (tiny) buffer, which
#: is how NCCL implements it.
REWRITE = {
    CollectiveType.REDUCE: CollectiveType.REDUCE_SCATTER,
    CollectiveType.BROADCAST: CollectiveType.ALL_GATHER,
    CollectiveType.GATHER: CollectiveType.ALL_GATHER,
    CollectiveType.SCATTER: CollectiveType.ALL_TO_ALL,
    CollectiveType.REDUCE_SCATTER_BLOCK: CollectiveType.REDUCE_SCATTER,
    CollectiveType.BARRIER: CollectiveType.ALL_REDUCE,
}

KNOWN_TYPES = frozenset(int(t) for t in NodeType)
COMM = (NodeType.COMM_COLL_NODE, NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE)
# plain ints for the per-node tests (an IntEnum member costs a class lookup and a slower compare)
_COMP, _COLL, _METADATA = int(NodeType.COMP_NODE), int(NodeType.COMM_COLL_NODE), int(NodeType.METADATA_NODE)
_SEND, _RECV = int(NodeType.COMM_SEND_NODE), int(NodeType.COMM_RECV_NODE)
_ALL_REDUCE = int(CollectiveType.ALL_REDUCE)
_P2P_OR_COLL = frozenset({_COLL, _SEND, int(NodeType.COMM_RECV_NODE)})
_UNSET: Any = object()


@dataclass
class Issue:
    rank: Optional[int]
    node_id: Optional[int]
    name: str
    code: str
    reason: str
    fix: str  # what `chakra export astra-sim` does about it ("" when it cannot)
    # "error": ASTRA-sim aborts, throws, or leaves the rank (or a node) unfinished; "warning": it
    # runs, but not what the trace says (BROADCAST replayed by duration, an attribute read as 0)
    severity: str = "error"

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


#: Findings that are never summarised (`Tally`): `settle_memory_ends` rewrites them one by one.
UNSUMMARISED = frozenset({"memory-node-abort", "memory-node-report"})
_TALLY_NODES = 20  # the smallest node ids a summary keeps (what `grouped` shows)


@dataclass
class Tally:
    """Every finding of one kind, summarised (`plan(..., summarise=True)`, what `chakra simulate`
    asks for): how many, on which ranks, the smallest node ids, and whether each had a fix. A trace
    that was never exported can raise a finding on every kernel (2 M at 1,024 ranks): as objects
    they took gigabytes; `grouped` and `warning_lines` need only these figures. The kind's first
    finding stays in `Plan.issues` (its reason, fix and place among the kinds)."""

    count: int = 0
    ranks: set[int] = field(default_factory=set)
    nodes: set[int] = field(default_factory=set)  # a superset of the smallest _TALLY_NODES ids
    unfixed: bool = False

    def add(self, issue: Issue) -> None:
        self.count += 1
        if issue.rank is not None:
            self.ranks.add(issue.rank)
        if issue.node_id is not None:
            nodes = self.nodes
            nodes.add(issue.node_id)
            if len(nodes) > 64 * _TALLY_NODES:  # keep the smallest only: bounded memory, same answer
                self.nodes = set(sorted(nodes)[:_TALLY_NODES])
        if not issue.fix:
            self.unfixed = True


@dataclass
class Fix:
    """Changes to one node (METADATA nodes are dropped without one): `compute` turns it into a
    compute node of its recorded duration (the string says why), `attrs` are set, `drop_deps`
    are removed from its dependencies."""

    compute: str = ""
    attrs: dict[str, Any] = field(default_factory=dict)
    drop_deps: set[int] = field(default_factory=set)  # parents whose edge closes a cycle


@dataclass
class Plan:
    issues: list[Issue]
    fixes: dict[int, dict[int, Fix]]  # rank -> node id -> fix
    groups: dict[str, list[int]]  # the comm-group file to write (numeric ids > 0)
    missing: dict[int, int]  # rank -> dependencies on absent ids
    pad_rank: bool  # a one-rank job: ASTRA-sim needs >= 2 NPUs, so an idle rank 1 is added
    counts: dict[str, int]  # what the export changes, by kind (for its summary)
    idle: set[int] = field(default_factory=set)  # ranks without nodes: one idle node is added
    # the 2-D split (a, b) of the ranks the export's own network takes, so that no rank frees a
    # collective implementation twice (None: the 1-D default network)
    split: Optional[tuple[int, int]] = None
    roofline_peak: float = 0.0  # TFLOPS when the system runs GPU compute on the roofline, else 0
    tails: set[int] = field(default_factory=set)  # ranks that get a final 0 us compute node
    # rank -> its sends/receives no node of the rank waits for (one may end it), for tails' ranks
    p2p_ends: dict[int, set[int]] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)  # system JSON keys the export sets
    # summarise=True: code -> its findings summarised (`issues` then holds each kind's first only)
    tallies: dict[str, Tally] = field(default_factory=dict)

    @property
    def errors(self) -> list[Issue]:
        """Findings on which ASTRA-sim aborts, throws or leaves work unfinished."""
        return [i for i in self.issues if i.severity == "error"]

    @property
    def blocking(self) -> list[Issue]:
        """Findings the export cannot fix (ASTRA-sim will still hang on them)."""
        return [i for i in self.issues if not i.fix]


_IMPL_KEY = {
    CollectiveType.ALL_REDUCE: "all_reduce",
    CollectiveType.ALL_GATHER: "all_gather",
    CollectiveType.REDUCE_SCATTER: "reduce_scatter",
    CollectiveType.ALL_TO_ALL: "all_to_all",
}


def roofline_attrs(duration_us: float, peak_tflops: float) -> dict[str, int]:
    """num_ops and tensor_size that ASTRA-sim's roofline turns back into `duration_us`: one byte
    makes the node compute-bound, so it takes num_ops / peak-perf. 0 us: 1.5 ns of ops, which
    ASTRA-sim truncates to 1 ns as it replays a 0 us node (a 0 ns event at t=0 trips its event
    queue's assertion); never tensor_size 0 (ASTRA-sim skips such a node without issuing its
    dependents) nor num_ops 0 (0/0)."""
    if duration_us <= 0:
        return {"num_ops": max(1, round(1.5e-9 * peak_tflops * 1e12)), "tensor_size": 1}
    return {"num_ops": max(1, round(duration_us * 1e-6 * peak_tflops * 1e12)), "tensor_size": 1}


def fit_system(sysc: SystemConfig, dims: int) -> SystemConfig:
    """`sysc` with every one-entry implementation list repeated to `dims` entries."""
    import dataclasses

    if dims < 2:
        return sysc
    lists = {f"{k}_implementation": sysc.implementation(k) for k in _IMPL_KEY.values()}
    return dataclasses.replace(sysc, **{k: v * dims if len(v) == 1 else v for k, v in lists.items()})


def _split(n: int) -> Optional[tuple[int, int]]:
    """n = a x b with a the smallest factor >= 2 and b >= 2, or None (n prime or < 4)."""
    for a in range(2, int(n**0.5) + 1):
        if n % a == 0:
            return a, n // a
    return None


_by_id = attrgetter("id")


def _rank(trace: Trace, pos: int) -> int:
    return trace.rank if trace.rank is not None else pos


class _Planner:
    def __init__(
        self,
        traces: list[Trace],
        file_groups: dict[str, list[int]],
        unsupported: str,
        broadcast: str,
        net: Optional[NetworkConfig],
        sysc: SystemConfig,
        backend: Optional[str],
        shared_nodes: bool = False,
        memory: Optional[MemoryConfig] = None,
        summarise: bool = False,
        raw: Optional[dict[int, bytes]] = None,
        rows: Optional[tuple[list[pb.Node], dict[int, Any]]] = None,
    ):
        self.traces = traces
        self.n = len(traces)
        self.unsupported = unsupported
        self.broadcast = broadcast
        self.net = net  # the user's network; None: the export picks one
        self.dims = net.dims if net is not None else 1
        self.sysc = sysc
        self.backend = backend  # None: either (validate), else the one exported for
        # rank -> collective type -> process subgroups (fewer members than ranks) it runs on
        self.subgroups: dict[int, dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
        self.idle: set[int] = set()
        self.memory_ranks: dict[int, pb.Node] = {}  # rank -> its first memory node
        self.memory = memory  # the remote-memory config it will run with (None: the export's own)
        self.tails: set[int] = set()  # ranks that get a final compute node (memory_ends)
        self.p2p_ends: dict[int, set[int]] = {}
        self.coll_order: dict[int, list[tuple[pb.Node, bool]]] = defaultdict(list)
        self.issues: list[Issue] = []
        # summarise: findings are tallied per kind (`Tally`), and compute nodes' fixes are not kept
        # (only the export applies them; the walk reads back the fixes of communication nodes only)
        self.summarise = summarise
        self.tallies: dict[str, Tally] = {}
        self.found = 0  # findings so far (`issues` holds fewer when summarised)
        self.fixes: dict[int, dict[int, Fix]] = defaultdict(dict)
        self.counts: dict[str, int] = defaultdict(int)
        self.config_fixes: dict[str, Any] = {}  # system JSON keys the export sets
        # with shared nodes each distinct node object is read once (by id: the traces hold every
        # node for the whole walk)
        self.columns, self._row_of, self._distinct = _all_rank_columns(traces, shared_nodes, rows)
        defined: dict[str, list[int]] = {}
        for cols in self.columns:
            defined.update(metadata_groups(cols.metadata))
        defined.update(file_groups)  # the comm-group file wins, as in ASTRA-sim
        self.defined = defined
        # Traces read with shared nodes (chakra.io.read_trace's `shared`): identical nodes are one
        # object across ranks, so what is read from a node is kept per object (by id: the traces
        # hold every node for the whole walk), and compute nodes are told apart by identity.
        self.shared_nodes = shared_nodes
        self._read_by_id: dict[int, tuple[dict[str, Any], list]] = {}
        self._deps_by_id: dict[int, tuple[int, ...]] = {}
        # compute nodes that raised nothing: their serialized bytes, or their ids when shared
        self.clean_compute: set[Any] = set()
        self.clean_rows = _no_rows(len(self._row_of))  # the same, by distinct node's row (shared)
        # with shared nodes: id(node) -> its framed bytes, as read (`simulate_plan`); a compute node
        # not met before is then judged by its attributes' bytes (`_unjudged`): the ranks of a real
        # job differ in their durations, not in their kernels' attributes
        self.raw = raw
        self.clean_attrs: set[tuple[bytes, ...]] = set()
        self._node: Optional[pb.Node] = None  # the node `get` read last, and what it read
        self._values: dict[str, Any] = {}
        self._misplaced: list[tuple[str, str, str]] = []
        # with shared nodes: id(node) -> what `_plain_comm` needs of a communication node, or None
        self._plain: dict[int, Optional[tuple]] = {}
        # with shared nodes and summarised findings: what a compute node's checks did (each finding's
        # kind and whether it had a fix, and the counts it raised), by its attributes' bytes and by
        # distinct node row: a compute node's checks read only its attributes and the configs, so
        # another with the same attributes does the same (`_replay`: files that were never exported
        # raise `cpu-compute` on every kernel of every rank)
        self._verdicts: list[tuple[list[tuple[str, bool]], dict[str, int]]] = []
        self._verdict_by_attrs: dict[tuple[bytes, ...], int] = {}
        # one verdict per distinct outcome: kernels that differ in their durations only raise the same
        # findings, and `_replay` then tallies a rank's nodes in one selection per outcome, not one
        # per distinct attributes (a real rank's hundreds)
        self._verdict_ids: dict[tuple, int] = {}
        replays = summarise and shared_nodes and raw is not None  # only fixes are per node: not kept there
        self._verdict_of_row = _no_rows(len(self._row_of) if replays else 0).astype("int32") - 1
        self._trail: Optional[list[tuple[str, bool]]] = None
        self._member_sets: dict[str, frozenset[int]] = {}

    def _read(self, n: pb.Node) -> None:
        """Read a node's attributes once for all the checks of the node."""
        if self._node is not n:
            self._node = n
            if not self.shared_nodes:
                self._values, self._misplaced = read_attrs(n)
                return
            got = self._read_by_id.get(id(n))
            if got is None:
                got = self._read_by_id[id(n)] = read_attrs(n)
            self._values, self._misplaced = got

    def deps(self, n: pb.Node) -> tuple[int, ...]:
        """A node's data then control dependencies (kept per object when nodes are shared)."""
        if not self.shared_nodes:
            return (*n.data_deps[:], *n.ctrl_deps[:])
        got = self._deps_by_id.get(id(n))
        if got is None:
            got = self._deps_by_id[id(n)] = (*n.data_deps[:], *n.ctrl_deps[:])
        return got

    def get(self, n: pb.Node, name: str, default: Any = None) -> Any:
        """`get_attr` of a node, from `_read`."""
        self._read(n)
        value = self._values.get(name)
        return default if value is None else value

    def misplaced(self, n: pb.Node) -> list[tuple[str, str, str]]:
        """`misplaced_attrs` of a node, from `_read`."""
        self._read(n)
        return self._misplaced

    def fix(self, rank: int, node: pb.Node) -> Fix:
        if self.summarise and node.type == _COMP:
            return Fix()  # not kept: see `summarise`
        return self.fixes[rank].setdefault(node.id, Fix())

    def add(
        self, rank: Optional[int], node: Optional[pb.Node], code: str, reason: str, fix: str, severity: str = "error"
    ) -> None:
        nid, name = (node.id, node.name) if node is not None else (None, "")
        issue = Issue(rank, nid, name, code, reason, fix, severity)
        self.found += 1
        if self._trail is not None:
            self._trail.append((code, bool(fix)))
        if self.summarise and code not in UNSUMMARISED:
            tally = self.tallies.get(code)
            if tally is None:
                tally = self.tallies[code] = Tally()
                self.issues.append(issue)  # the kind's first finding: its reason, fix and place
            tally.add(issue)
            return
        self.issues.append(issue)

    def to_compute(self, rank: int, node: pb.Node, code: str, reason: str, severity: str = "error") -> None:
        f = self.fix(rank, node)
        if f.compute:
            return
        f.compute = code
        self.counts[f"compute ({code})"] += 1
        self.add(rank, node, code, reason, f"compute node of its recorded {node.duration_micros} us", severity)

    # -------------------------------------------------------------------------------------- groups

    def resolve_groups(self) -> tuple[dict[str, str], dict[str, tuple[int, ...]]]:
        """pg_name -> name written, and name written -> members, for every pg_name in use."""
        import numpy as np

        used: dict[str, set[int]] = defaultdict(set)
        pg_of: dict[int, str] = {}  # with shared nodes: distinct row -> its pg_name, read once
        for pos, t in enumerate(self.traces):
            r = _rank(t, pos)
            cols = self.columns[pos]
            at = np.flatnonzero(cols.types == _COLL)
            if self._distinct is not None and cols.rows is not None:
                nodes = self._distinct[0]
                for row in set(cols.rows[at].tolist()):
                    pg = pg_of.get(row)
                    if pg is None:
                        pg = pg_of[row] = str(self.get(nodes[row], "pg_name", "") or "")
                    used[pg].add(r)
                continue
            for n in [cols.order[i] for i in at.tolist()]:
                used[str(self.get(n, "pg_name", "") or "")].add(r)
        world = tuple(range(self.n))
        numeric = [int(k) for k in {*self.defined, *used} if k.isdigit()]
        next_id = max(numeric, default=0) + 1
        rename: dict[str, str] = {}
        members: dict[str, tuple[int, ...]] = {}
        for name in sorted(used, key=lambda s: (not s.isdigit(), int(s) if s.isdigit() else 0, s)):
            ranks = self.defined.get(name)
            if ranks is not None and not ranks:  # PyTorch's default group: "ranks": []
                ranks = list(world)
            if ranks is None:
                ranks = list(world) if name in WORLD_NAMES else sorted(used[name])
            key = tuple(r for r in ranks if 0 <= r < self.n)
            if len(key) != len(ranks):
                self.add(
                    None,
                    None,
                    "absent-members",
                    f"process group {name!r} lists ranks {list(ranks)}, but only ranks 0..{self.n - 1} have traces "
                    "(its collectives would wait for them forever)",
                    f"the group is reduced to {list(key)}",
                )
                self.counts["groups reduced to the ranks present"] += 1
            if name in WORLD_NAMES and set(key) == set(world):
                rename[name], members[name] = name, world
                continue
            if name.isdigit() and int(name) > 0:
                new = str(int(name))
            else:
                new = str(next_id)
                next_id += 1
                why = "means every rank to ASTRA-sim" if name in WORLD_NAMES else "is not a number (stoi fails)"
                self.add(
                    None,
                    None,
                    "pg-name",
                    f"process group {name!r} {why}; its members are {list(key)}",
                    f"pg_name {new}",
                )
                self.counts["pg_name renamed"] += 1
            if name not in self.defined and name not in WORLD_NAMES:
                self.add(
                    None,
                    None,
                    "undefined-group",
                    f"process group {name!r} is in no comm-group file or METADATA node (ASTRA-sim exits)",
                    f"defined as the ranks that use it: {list(key)}",
                )
            rename[name], members[new] = new, key
        return rename, members

    # ----------------------------------------------------------------------------------- walking

    def _read_ahead(self) -> None:
        """With shared nodes and their bytes: `_read` of every distinct node but the compute nodes
        (whose checks `_to_walk` settles by their attributes' bytes), from one upb call over their
        attributes' bytes, each distinct attribute decoded once (`read_attr_bytes`): a rank's process
        groups, peers and sizes make its communication nodes its own, but their attributes repeat."""
        if not self.shared_nodes or self.raw is None or self._distinct is None:
            return
        import numpy as np

        nodes, types = self._distinct
        raw = self.raw
        todo = [n for n in map(nodes.__getitem__, np.flatnonzero(types != _COMP).tolist()) if id(n) in raw]
        if not todo:
            return
        views = _attr_views().FromString(b"\x0a" + b"\x0a".join([raw[id(n)] for n in todo])).nodes
        memo: dict = {}
        got = self._read_by_id
        for n, view in zip(todo, views):
            got[id(n)] = read_attr_bytes(view.attr[:], memo)

    def run(self) -> Plan:
        self._read_ahead()
        rename, members = self.resolve_groups()
        missing: dict[int, int] = {}
        colls: dict[str, dict[int, list[tuple[pb.Node, int]]]] = defaultdict(lambda: defaultdict(list))
        sends: dict[tuple, list[tuple[int, pb.Node, int]]] = defaultdict(list)  # (rank, node, size)
        recvs: dict[tuple, list[tuple[int, pb.Node, int]]] = defaultdict(list)
        deps = self.deps
        shared, clean = self.shared_nodes, self.clean_compute
        plain_rows = self._plain_rows(rename, members)
        fixes, subgroups, coll_order = self.fixes, self.subgroups, self.coll_order
        for pos, t in enumerate(self.traces):
            r = _rank(t, pos)
            cols = self.columns[pos]
            order, suspects, later = cols.order, cols.suspects, cols.later
            ids = set(map(_by_id, order)) if suspects else set()  # for the suspects only
            if bool((cols.types == _METADATA).all()):
                self.idle.add(r)
                self.counts["idle node added to empty ranks"] += 1
                self.add(
                    r,
                    None,
                    "empty-rank",
                    "no node to run: ASTRA-sim stops with 'No dependancy free nodes found'",
                    "an idle node (one 0 us compute node)",
                )
            bad = 0
            pending: dict[int, tuple[bytes, ...]] = {}
            replayed: list[int] = []
            walk = self._to_walk(cols, pending, replayed)
            again = set(replayed).intersection(suspects) if replayed and suspects else set()
            # `_plain_comm` inline, from each distinct row's reading (`_plain_rows`): most of the walk
            row_of = cols.rows.tolist() if plain_rows is not None and cols.rows is not None else None
            ids_of = cols.ids.tolist() if row_of is not None else None
            mine = None  # fixes[r], made as `_plain_comm` makes it
            for i in walk:
                n = order[i]
                if row_of is not None and i not in suspects:
                    got = plain_rows[row_of[i]]  # type: ignore[index]
                    if got is not None:
                        if got[0]:  # a collective
                            _, group, world, sub, pg, size = got
                            if r in group:
                                if mine is None:
                                    mine = fixes[r]
                                if mine.get(ids_of[i]) is None:  # type: ignore[index]
                                    if sub is not None:
                                        subgroups[r][sub].add(pg)
                                    colls[pg][r].append((n, size))
                                    coll_order[r].append((n, world))
                                    continue
                        else:
                            _, me, key, size, send = got
                            if me == r:
                                (sends if send else recvs)[key].append((r, n, size))
                                continue
                if i in suspects:
                    nid, ds = n.id, deps(n)
                    self._dep_findings(r, n, ds, ids, bad)
                    bad += sum(1 for d in ds if d != nid and d not in ids)
                    if i in again:
                        continue  # its checks are replayed below
                if shared and n.type == _COMP and id(n) in clean:
                    continue  # see `node`: a compute node that raised nothing raises nothing again
                key = pending.get(i)
                if key is not None and self._verdict_of_row.size:
                    self._record(r, n, key, int(cols.rows[i]), rename, members, colls, sends, recvs)
                else:
                    self.node(r, n, rename, members, colls, sends, recvs)
                if key is not None and id(n) in clean:
                    self.clean_attrs.add(key)
            if replayed:
                self._replay(r, cols, replayed)
            by_id = None
            # every dependency on an earlier id (or the node itself, reported above): a DAG
            for child, parent in cycle_breaking_edges(t.nodes) if later else ():
                by_id = by_id or t.by_id()
                node = by_id[child]
                self.fix(r, node).drop_deps.add(parent)
                self.counts["cycle edges removed"] += 1
                self.add(
                    r,
                    node,
                    "cycle",
                    f"dependency cycle through node {parent} (ASTRA-sim reports the rank finished without running it)",
                    f"the edge to node {parent} is removed",
                )
            if bad:
                missing[r] = bad
            if bad > 20:
                self.add(
                    r,
                    None,
                    "missing-dep",
                    f"{bad - 20} more dependencies on absent node ids ({bad} in all on this rank)",
                    "with --missing-deps drop: the edges are removed",
                )
        self.match_collectives(colls)
        self.match_p2p(sends, recvs)
        self.memory_ends()
        self.zero_delay(colls)
        self.world_after_subgroups()
        groups = {name: list(m) for name, m in members.items() if name.isdigit() and int(name) > 0}
        pad = self.n == 1
        if pad:
            self.add(
                0, None, "one-rank", "ASTRA-sim rejects a network of one NPU", "an idle rank 1 (one 0 us compute node)"
            )
        split = self.double_free()
        peak = self.sysc.peak_perf if self.sysc.roofline_enabled else 0.0
        return Plan(self.issues, dict(self.fixes), groups, missing, pad, dict(self.counts), self.idle, split, peak,
                    tails=self.tails, p2p_ends=self.p2p_ends, config=self.config_fixes,
                    tallies=self.tallies)  # fmt: skip

    def _to_walk(self, cols: _RankColumns, pending: dict[int, tuple[bytes, ...]], replayed: list[int]) -> list[int]:
        """Rows of `order` the walk must look at: those with a dependency to look at (`suspects`),
        and every node but the compute nodes already known to raise nothing. With shared nodes and
        their bytes (`raw`), a compute node met for the first time is known clean when another
        compute node with the same attributes (byte for byte) was: its checks read nothing else.
        `pending` gets the attribute bytes of the compute nodes still to judge (row -> bytes),
        `replayed` the compute nodes whose findings are known (`_replay`), left out of the walk."""
        import numpy as np

        order, types, suspects = cols.order, cols.types, cols.suspects
        if not self.shared_nodes:
            return list(range(len(order)))
        judged_clean = self.clean_rows[cols.rows]
        comp_rows = types == _COMP
        if self._verdict_of_row.size:
            known = comp_rows & ~judged_clean & (self._verdict_of_row[cols.rows] >= 0)
            replayed.extend(np.flatnonzero(known).tolist())
            judged_clean = judged_clean | known
        walk = np.flatnonzero(~comp_rows | ~judged_clean).tolist()
        comp = np.flatnonzero(comp_rows & ~judged_clean).tolist()
        if comp and self.raw is not None:
            raw = self.raw
            comp = [i for i in comp if id(order[i]) in raw]  # a JSON trace's nodes have no bytes
        if comp and self.raw is not None:
            views = _attr_views().FromString(b"\x0a" + b"\x0a".join([raw[id(order[i])] for i in comp])).nodes
            known = self.clean_attrs
            verdicts = self._verdict_by_attrs
            keys = list(map(tuple, map(whole, map(attrgetter("attr"), views))))
            clean = list(map(known.__contains__, keys))
            now_clean = list(compress(comp, clean))  # most compute nodes of a real job's ranks
            if now_clean:
                self._clean(map(id, map(order.__getitem__, now_clean)), cols.rows[now_clean])
            judged = set(now_clean)
            for i, key, ok in zip(comp, keys, clean):
                if ok:
                    continue
                if key in verdicts:
                    self._verdict_of_row[cols.rows[i]] = verdicts[key]
                    replayed.append(i)
                    judged.add(i)
                else:
                    pending[i] = key
            if judged:
                walk = [i for i in walk if i not in judged]
        if suspects:
            walk = sorted({*walk, *suspects})
        return walk

    def _record(
        self,
        r: int,
        n: pb.Node,
        key: tuple[bytes, ...],
        row: int,
        rename: dict,
        members: dict,
        colls: dict,
        sends: dict,
        recvs: dict,
    ) -> None:
        """`node` of a compute node met for the first time, keeping what its checks did for the
        compute nodes with the same attributes (`_replay`)."""
        counts = dict(self.counts)
        self._trail = []
        try:
            self.node(r, n, rename, members, colls, sends, recvs)
            trail = self._trail
        finally:
            self._trail = None
        if not trail or any(code in UNSUMMARISED for code, _ in trail):
            return
        raised = {k: v - counts.get(k, 0) for k, v in self.counts.items() if v != counts.get(k, 0)}
        outcome = (tuple(trail), tuple(raised.items()))
        vid = self._verdict_ids.get(outcome)
        if vid is None:
            vid = self._verdict_ids[outcome] = len(self._verdicts)
            self._verdicts.append((trail, raised))
        self._verdict_by_attrs[key] = vid
        self._verdict_of_row[row] = vid

    def _replay(self, r: int, cols: _RankColumns, replayed: list[int]) -> None:
        """What the checks of these compute nodes of rank `r` do, from the compute node with the same
        attributes met before (`_record`), tallied in bulk: the same counts, ranks, node ids and
        fixes as finding them one by one (`Tally.add`)."""
        import numpy as np

        at = np.asarray(replayed, dtype=np.int64)
        vids = self._verdict_of_row[cols.rows[at]]
        for vid in np.unique(vids).tolist():
            sel = at[vids == vid]
            k = len(sel)
            trail, raised = self._verdicts[vid]
            node_ids = cols.ids[sel].tolist()
            for code, fixed in trail:
                tally = self.tallies[code]
                tally.count += k
                tally.ranks.add(r)
                tally.nodes.update(node_ids)
                if len(tally.nodes) > 64 * _TALLY_NODES:
                    tally.nodes = set(sorted(tally.nodes)[:_TALLY_NODES])
                if not fixed:
                    tally.unfixed = True
            self.found += k * len(trail)
            for name, count in raised.items():
                self.counts[name] += k * count

    def _clean(self, keys: Iterable[Any], rows: Any = None) -> None:
        """Compute nodes (their bytes, or ids with shared nodes) raised nothing: they raise nothing
        again. `rows`: their distinct nodes' rows (shared nodes), where the caller has them."""
        keys = list(keys)
        self.clean_compute.update(keys)
        if self.shared_nodes:
            self.clean_rows[rows if rows is not None else [self._row_of[k] for k in keys]] = True

    def _dep_findings(self, r: int, n: pb.Node, ds: tuple[int, ...], ids: set[int], bad: int) -> None:
        """A node's self-dependencies and dependencies on absent ids (the first 20 of the rank's,
        `bad` counted before this node)."""
        nid = n.id
        for d in ds:
            if d == nid:
                self.counts["self-dependencies removed"] += 1
                self.add(r, n, "self-dep", "depends on itself (never becomes ready)", "the edge is removed")
            elif d not in ids:
                bad += 1
                if bad <= 20:
                    self.add(
                        r,
                        n,
                        "missing-dep",
                        f"depends on node {d}, which is not in the trace (ASTRA-sim aborts)",
                        "with --missing-deps drop: the edge is removed",
                    )

    def memory_ends(self) -> None:
        """Ranks with memory nodes. ASTRA-sim's end-of-run statistics of such a rank throw ('Only GPU
        and COMM types are supported for overlap extraction', Statistics.cc), after the rank's
        `finished` line. When the rank's last node is a compute or memory node its completion runs
        inside Sys::call_events, which catches the throw and goes on (exit 0, every finish printed);
        when it is a send or receive, the completion comes straight from the network's event queue and
        the throw ends the binary (std::terminate: SIGABRT, exit 134), so ranks finishing later print
        nothing. Measured: on the 396 truth-table cases with memory nodes, "a rank with a memory node
        and a send/recv among its last nodes" predicts every one of the 70 aborts and nothing else."""
        if not self.memory_ranks:
            return
        p2p = (NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE)
        ending: dict[int, pb.Node] = {}
        for pos, t in enumerate(self.traces):
            r = _rank(t, pos)
            if r not in self.memory_ranks:
                continue
            parents = {d for n in t.nodes for d in self.deps(n)}
            fixes = self.fixes.get(r, {})
            ends = [
                n
                for n in t.nodes
                if n.id not in parents and n.type in p2p and not (n.id in fixes and fixes[n.id].compute)
            ]
            if ends:
                ending[r] = ends[0]
                self.p2p_ends[r] = {n.id for n in ends}
        for r, first in self.memory_ranks.items():
            if r in ending:
                continue
            self.add(
                r,
                first,
                "memory-node-report",
                "memory node: ASTRA-sim prints the rank's finish, then its statistics report throws "
                "('Only GPU and COMM types are supported for overlap extraction'), which it logs and goes on "
                "(exit status 0, every finish printed)",
                "kept: the finish times are complete",
                "warning",
            )
        for r, node in ending.items():
            self.tails.add(r)
            self.counts["final compute node after a memory rank's last send/recv"] += 1
            self.add(
                r,
                node,
                "memory-node-abort",
                f"memory node {self.memory_ranks[r].id} on a rank that can end on this send/recv: when it does, "
                "ASTRA-sim's statistics report throws outside its event loop ('Only GPU and COMM types are supported "
                "for overlap extraction') and the binary aborts (exit 134): ranks finishing after it print no finish",
                "a 0 us compute node after the rank's last nodes (the rank ends on it, 1 ns later, where ASTRA-sim "
                "catches the report's error)",
            )
        if self.memory is not None and self.memory.memory_type == "PER_NODE_MEMORY_EXPANSION":
            self.add(
                None,
                None,
                "per-node-memory",
                f"PER_NODE_MEMORY_EXPANSION with memory nodes on {len(self.memory_ranks)} rank(s): ASTRA-sim's "
                "memory model reads each finished request after the workload freed it (AnalyticalRemoteMemory::call "
                "after Workload::call deletes it), so runs crash (SIGSEGV) or serve another node's queue",
                "",
            )

    def zero_ns_memory(self, r: int, n: pb.Node) -> None:
        """A load/store without dependencies that the remote memory serves in 0 ns (latency +
        floor(size / bw), both 0): issued at t=0 by Workload::fire, outside the event loop, it is
        scheduled at the current time and, when it is the run's first event (the lowest id issued
        then), the event queue asserts the next event is later (EventQueue::proceed, both
        backends). One issued when a message ends runs (measured)."""
        m = self.memory
        if m is None or m.remote_mem_latency >= 1 or m.remote_mem_bw <= 0 or self.deps(n):
            return
        size = self.get(n, "tensor_size", 0)
        if not isinstance(size, int) or size >= m.remote_mem_bw:
            return
        least = int(-(-m.remote_mem_bw // 1))
        self.fix(r, n).attrs["tensor_size"] = least
        self.counts["memory nodes raised to 1 ns"] += 1
        self.add(
            r,
            n,
            "zero-ns-memory",
            f"{size} B at remote-mem-bw {m.remote_mem_bw:g} with remote-mem-latency 0 takes 0 ns: issued at the start "
            "(no dependencies), outside ASTRA-sim's event loop, it can be the run's first event, scheduled at the "
            "current time, and then the binary aborts (EventQueue::proceed: Assertion "
            "`current_event_list.get_event_time() > current_time')",
            f"tensor_size {least} (1 ns)",
        )

    def world_after_subgroups(self) -> None:
        """A collective over every rank that ranks reach after different numbers of process-subgroup
        collectives: ASTRA-sim leaves it unfinished on every rank ('Hardware Resource ... has unreleased
        nodes', exit 0, no rank finishes). Measured on the truth table's random mixes and group cases:
        every such case (26) ends so, and no case without it does."""
        seen: dict[int, dict[int, tuple[int, pb.Node]]] = defaultdict(dict)  # k-th world coll -> rank -> before
        for r, order in self.coll_order.items():
            sub = k = 0
            for node, world in order:
                if world:
                    seen[k][r] = (sub, node)
                    k += 1
                else:
                    sub += 1
        for k in sorted(seen):
            counts = {r: c for r, (c, _) in seen[k].items()}
            if len(set(counts.values())) < 2:
                continue
            by_count: dict[int, list[int]] = defaultdict(list)
            for r, c in sorted(counts.items()):
                by_count[c].append(r)
            told = "; ".join(f"ranks {rank_span(rs)} after {c}" for c, rs in sorted(by_count.items()))
            r0 = min(counts)
            self.add(
                r0,
                seen[k][r0][1],
                "world-after-subgroups",
                f"collective #{k} over all ranks comes after different numbers of process-subgroup collectives "
                f"({told}): ASTRA-sim never finishes it ('has unreleased nodes'; no rank prints a finish)",
                "",
            )
            return  # the first one already stops every rank

    def zero_delay(self, colls: dict) -> None:
        """endpoint-delay (times --injection-scale) under 1 ns: a collective's step schedules an event
        at the current time from the network's callback, and the event queue asserts it is later
        (EventQueue::proceed, both backends; every such case of the truth table)."""
        delay = int(self.sysc.endpoint_delay * self.sysc.injection_scale)
        if delay >= 1 or not any(per_rank for per_rank in colls.values()):
            return
        self.config_fixes["endpoint-delay"] = 1
        self.counts["endpoint-delay raised to 1 ns"] = 1
        self.add(
            None,
            None,
            "zero-endpoint-delay",
            f"endpoint-delay {self.sysc.endpoint_delay} (x injection-scale {self.sysc.injection_scale:g}) is under "
            "1 ns: ASTRA-sim schedules a collective's step at the current time and aborts "
            "(EventQueue::proceed: Assertion `current_event_list.get_event_time() > current_time')",
            "endpoint-delay 1 in the system JSON",
        )

    def double_free(self) -> Optional[tuple[int, int]]:
        """Ranks that run one collective type on two process subgroups, with a one-entry
        implementation list: ASTRA-sim frees that implementation once per subgroup at exit."""
        hit: list[tuple[int, int, list[str]]] = []
        for r, per_type in sorted(self.subgroups.items()):
            for ctype, pgs in sorted(per_type.items()):
                impl = self.sysc.implementation(_IMPL_KEY[ctype])
                if len(pgs) > 1 and len(impl) == 1:
                    hit.append((r, ctype, sorted(pgs, key=lambda x: (len(x), x))))
        if not hit:
            return None
        split = _split(self.n)
        impls = [self.sysc.implementation(k) for k in _IMPL_KEY.values()]
        rings = all(len(algs) != 1 or algs[0] == "ring" for algs in impls)
        fixable = self.net is None and split is not None and rings
        if fixable and self.backend in (None, "unaware"):
            a, b = split  # type: ignore[misc]
            fix = f"a {a} x {b} network and two-entry implementation lists (each subgroup gets its own)"
            if self.backend is None:
                fix = f"with --backend unaware: {fix}"
        else:
            fix = ""
        why = (
            "the congestion-aware binary takes one dimension only: use --backend unaware"
            if self.backend == "aware"
            else "your --network is given; a multi-dimensional one with one implementation per dimension avoids it"
            if self.net is not None
            else "no two-factor split of the ranks or a non-ring implementation"
        )
        if fixable and self.backend in (None, "unaware"):
            self.counts["network split in two dimensions (subgroup double free)"] = 1
        for r, ctype, pgs in hit[:20]:
            self.add(
                r,
                None,
                "subgroup-double-free",
                f"{collective_name(ctype)} on process subgroups {', '.join(pgs)} of one rank: ASTRA-sim frees its "
                "collective implementation once per subgroup at exit (heap corruption: abort or segfault, "
                "its output may be lost)" + ("" if fix else f"; {why}"),
                fix,
            )
        return split if fix and self.backend == "unaware" else None

    def node(self, r: int, n: pb.Node, rename: dict, members: dict, colls: dict, sends: dict, recvs: dict) -> None:
        t = n.type
        if self.shared_nodes and t in _P2P_OR_COLL and self._plain_comm(r, n, t, rename, members, colls, sends, recvs):
            return
        # A compute node's checks depend on its content and the configs only: one that raised
        # nothing on one rank raises nothing on the next (SPMD ranks repeat them byte for byte).
        clean_key = None
        if t == _COMP:
            clean_key = id(n) if self.shared_nodes else n.SerializeToString()
            if clean_key in self.clean_compute:
                return
            found = self.found
        if t == _METADATA:
            self.counts["METADATA nodes dropped"] += 1
            self.add(
                r, n, "metadata-node", "METADATA node: ASTRA-sim aborts at t=0", "dropped (groups to comm_groups.json)"
            )
            return
        if t not in KNOWN_TYPES:
            self.to_compute(r, n, "unknown-type", f"node type {node_type_name(t)} (ASTRA-sim exits)")
            return
        for name, found, expected in self.misplaced(n):
            if found != "none":
                self.fix(r, n).attrs[name] = self.get(n, name)
                self.counts["attribute arm corrected"] += 1
                self.add(
                    r,
                    n,
                    "attr-arm",
                    f"{name} is in {found}; ASTRA-sim reads {expected} only (reads 0)",
                    f"{name} in {expected}",
                    "warning",
                )
        if t == _COMP:
            self.compute(r, n)
            if self.found == found:
                self._clean((clean_key,))
        elif t in (NodeType.MEM_LOAD_NODE, NodeType.MEM_STORE_NODE):
            if r not in self.memory_ranks:
                self.memory_ranks[r] = n  # judged once the rank's last nodes are known (memory_ends)
            self.zero_ns_memory(r, n)
        if t not in COMM:
            return
        if self.get(n, "is_cpu_op") is True:
            self.fix(r, n).attrs["is_cpu_op"] = False
            self.counts["is_cpu_op cleared on comm nodes"] += 1
            self.add(r, n, "comm-on-cpu", "comm node with is_cpu_op=true (ASTRA-sim throws)", "is_cpu_op=false")
        if t == NodeType.COMM_COLL_NODE:
            self.collective(r, n, rename, members, colls)
            return
        src, dst, size = self.get(n, "comm_src"), self.get(n, "comm_dst"), self.get(n, "comm_size")
        if not all(isinstance(v, int) for v in (src, dst, size)):
            self.to_compute(r, n, "p2p-attrs", "send/recv without integer comm_src, comm_dst and comm_size")
            return
        if src == dst:
            self.to_compute(r, n, "self-send", f"message from rank {src} to itself (ASTRA-sim aborts: same address)")
            return
        me = src if t == NodeType.COMM_SEND_NODE else dst
        if me != r:
            side = "send from" if t == NodeType.COMM_SEND_NODE else "receive on"
            self.to_compute(r, n, "p2p-wrong-rank", f"{side} rank {me} recorded on rank {r} (ASTRA-sim throws)")
            return
        if size <= 0:
            # a zero-byte message still orders sender and receiver, so it stays a message
            self.fix(r, n).attrs["comm_size"] = 1
            self.counts["zero-byte send/recv set to 1 byte"] += 1
            self.add(r, n, "p2p-zero-size", "0-byte send/recv (ASTRA-sim asserts chunk_size > 0)", "comm_size 1")
            size = 1
        key = (src, dst, int(self.get(n, "comm_tag", 0) or 0))
        (sends if t == NodeType.COMM_SEND_NODE else recvs)[key].append((r, n, size))

    def _plain_rows(self, rename: dict, members: dict) -> Optional[list[Optional[tuple]]]:
        """With the nodes' rows among the distinct ones (`simulate_plan`): each distinct row's
        `_plain_reading` as the walk takes it inline, (True, *a collective's) or (False, *a send's or
        receive's, whether a send), None for a row `node` walks (a compute node, or a communication
        node whose checks could raise or fix something). None without such rows."""
        if not self.shared_nodes or self.raw is None or self._distinct is None:
            return None
        if any(cols.rows is None for cols in self.columns):
            return None
        import numpy as np

        nodes, types = self._distinct
        out: list[Optional[tuple]] = [None] * len(nodes)
        comm = np.flatnonzero((types == _COLL) | (types == _SEND) | (types == _RECV)).tolist()
        # `_plain_reading` of each row, its tests in the same order with what they read hoisted
        read = self._read_by_id
        splits = max(1, self.sysc.preferred_dataset_splits)
        least = splits * 2 * self.n if "halvingDoubling" in self.sysc.implementation("all_reduce") else 0
        network, all_gather, all_reduce = NETWORK_COLLECTIVES, int(CollectiveType.ALL_GATHER), int(_ALL_REDUCE)
        groups: dict[str, Optional[tuple]] = {}  # pg_name -> (members, over every rank?) or None
        for row, t in zip(comm, types[comm].tolist()):
            node = nodes[row]
            got = read.get(id(node))
            if got is None:
                got = read[id(node)] = read_attrs(node)
            v, misplaced = got
            if v.get("is_cpu_op") is True or (misplaced and any(found != "none" for _, found, _ in misplaced)):
                continue
            if t == _COLL:
                ctype, size = v.get("comm_type"), v.get("comm_size")
                if not isinstance(ctype, int) or not isinstance(size, int) or ctype not in network:
                    continue
                pg = str(v.get("pg_name") or "")
                group = groups.get(pg, _UNSET)
                if group is _UNSET:
                    group = groups[pg] = self._plain_group(pg, rename, members)
                if group is None:
                    continue
                if size >= 0 and (size < splits if ctype == all_gather else ctype == all_reduce and size < least):
                    continue
                members_set, world = group
                sub = ctype if not world and ctype in _IMPL_KEY else None
                out[row] = (True, members_set, world, sub, pg, size)
                continue
            src, dst, size = v.get("comm_src"), v.get("comm_dst"), v.get("comm_size")
            if not all(isinstance(x, int) for x in (src, dst, size)) or src == dst or size <= 0:
                continue
            send = t == _SEND
            out[row] = (False, src if send else dst, (src, dst, int(v.get("comm_tag") or 0)), size, send)
        return out

    def _plain_group(self, pg: str, rename: dict, members: dict) -> Optional[tuple[frozenset[int], bool]]:
        """For `_plain_rows`: a process group's members and whether it spans every rank, or None
        where its collectives' checks could raise or fix something (renamed, every rank's, or one
        rank)."""
        group = members.get(rename.get(pg, pg), ())
        if rename.get(pg, pg) != pg or pg in ("", "0") or len(group) < 2:
            return None
        members_set = self._member_sets.get(pg)
        if members_set is None:
            members_set = self._member_sets[pg] = frozenset(group)
        return members_set, len(group) == self.n

    def _plain_comm(
        self, r: int, n: pb.Node, t: int, rename: dict, members: dict, colls: dict, sends: dict, recvs: dict
    ) -> bool:
        """`node` of a communication node whose checks raise nothing and fix nothing on this rank,
        from what they read of it (kept per shared object: a rank's process groups and peers make
        most of its communication nodes its own, but their verdicts repeat). False: not such a
        node, `node` walks it."""
        got = self._plain.get(id(n), _UNSET)
        if got is _UNSET:
            got = self._plain[id(n)] = self._plain_reading(n, t, rename, members)
        if got is None:
            return False
        if t == _COLL:
            group, world, sub, pg, size = got
            if r not in group or self.fixes[r].get(n.id) is not None:
                return False
            if sub is not None:
                self.subgroups[r][sub].add(pg)
            colls[pg][r].append((n, size))
            self.coll_order[r].append((n, world))
            return True
        me, key, size = got
        if me != r:
            return False
        (sends if t == _SEND else recvs)[key].append((r, n, size))
        return True

    def _plain_reading(self, n: pb.Node, t: int, rename: dict, members: dict) -> Optional[tuple]:
        """For `_plain_comm`: a collective's (members, over every rank?, its type where it runs on a
        subgroup, process group, size), a send's or receive's (own rank, (src, dst, tag), size), or
        None where `node`'s checks could raise or fix something on some rank."""
        self._read(n)
        v = self._values
        if v.get("is_cpu_op") is True or any(found != "none" for _, found, _ in self._misplaced):
            return None
        if t == _COLL:
            ctype, size = v.get("comm_type"), v.get("comm_size")
            if not isinstance(ctype, int) or not isinstance(size, int) or ctype not in NETWORK_COLLECTIVES:
                return None
            pg = str(v.get("pg_name") or "")
            group = members.get(rename.get(pg, pg), ())
            if rename.get(pg, pg) != pg or pg in ("", "0") or len(group) < 2:
                return None
            splits = max(1, self.sysc.preferred_dataset_splits)
            if ctype == CollectiveType.ALL_GATHER and 0 <= size < splits:
                return None
            halving = "halvingDoubling" in self.sysc.implementation("all_reduce")
            if ctype == CollectiveType.ALL_REDUCE and halving and 0 <= size < splits * 2 * self.n:
                return None
            sub = ctype if len(group) < self.n and ctype in _IMPL_KEY else None
            members_set = self._member_sets.get(pg)
            if members_set is None:
                members_set = self._member_sets[pg] = frozenset(group)
            return members_set, len(group) == self.n, sub, pg, size
        src, dst, size = v.get("comm_src"), v.get("comm_dst"), v.get("comm_size")
        if not all(isinstance(x, int) for x in (src, dst, size)) or src == dst or size <= 0:
            return None
        return (src if t == _SEND else dst), (src, dst, int(v.get("comm_tag") or 0)), size

    def compute(self, r: int, n: pb.Node) -> None:
        if self.get(n, "is_cpu_op") is True:
            self.fix(r, n).attrs["is_cpu_op"] = False
            self.counts["is_cpu_op cleared on compute nodes"] += 1
            self.add(
                r,
                n,
                "cpu-compute",
                "CPU compute node: ASTRA-sim prints the rank's finish, then aborts writing its report "
                "('Only GPU and COMM types are supported for overlap extraction')",
                "is_cpu_op=false (a GPU compute node of the same duration)",
            )
        if not self.sysc.roofline_enabled:
            return
        ops, size = self.get(n, "num_ops"), self.get(n, "tensor_size")
        if not isinstance(ops, int) or not isinstance(size, int) or size <= 0:
            self.fix(r, n).attrs.update(roofline_attrs(n.duration_micros, self.sysc.peak_perf))
            self.counts["num_ops/tensor_size set from the duration (roofline)"] += 1
            why = (
                "tensor_size 0: ASTRA-sim skips it without issuing its dependents (the rank stops there)"
                if isinstance(ops, int) and isinstance(size, int)
                else "no num_ops or tensor_size: ASTRA-sim throws"
            )
            self.add(
                r,
                n,
                "roofline-attrs",
                f"GPU compute node on the roofline with {why}",
                f"num_ops for its {n.duration_micros} us at peak-perf, tensor_size 1",
            )
            return
        if not ops:
            # one op: memory-bound, size / local-mem-bw (GB/s = B/ns); under 1 ns, the 0 us form
            fix = {"num_ops": 1} if size >= self.sysc.local_mem_bw else roofline_attrs(0, self.sysc.peak_perf)
            self.fix(r, n).attrs.update(fix)
            self.counts["num_ops 0 set to 1 (roofline)"] += 1
            self.add(
                r,
                n,
                "zero-num-ops",
                "num_ops 0 with the roofline on: ASTRA-sim computes 0/0 ns (2^63) and no rank finishes",
                f"num_ops 1 (memory-bound: {size} B at local-mem-bw)",
            )

    def collective(self, r: int, n: pb.Node, rename: dict, members: dict, colls: dict) -> None:
        ctype, size = self.get(n, "comm_type"), self.get(n, "comm_size")
        if not isinstance(ctype, int) or not isinstance(size, int):
            self.to_compute(r, n, "coll-attrs", "collective without integer comm_type and comm_size")
            return
        pg = str(self.get(n, "pg_name", "") or "")
        new_pg = rename.get(pg, pg)
        group = members.get(new_pg, ())
        if r not in group:
            self.to_compute(r, n, "not-in-group", f"rank {r} is not a member of process group {pg!r} {list(group)}")
            return
        if len(group) == 1:
            self.to_compute(
                r, n, "one-rank-group", f"collective over one rank ({collective_name(ctype)}) moves no data"
            )
            return
        if new_pg != pg:
            self.fix(r, n).attrs["pg_name"] = new_pg
        replay = ctype == CollectiveType.BROADCAST and self.broadcast == "replay"  # ASTRA-sim runs it
        if ctype not in NETWORK_COLLECTIVES and not replay:
            what = collective_name(ctype)
            reason = (
                "BROADCAST: ASTRA-sim replays its recorded duration instead of moving its bytes"
                if ctype == CollectiveType.BROADCAST
                else f"{what}: ASTRA-sim does not implement it (the rank never finishes)"
            )
            severity = "warning" if ctype == CollectiveType.BROADCAST else "error"
            target = REWRITE.get(ctype)
            if target is None or self.unsupported == "compute":
                self.to_compute(r, n, f"unsupported-{what.lower()}", reason, severity)
                return
            self.fix(r, n).attrs["comm_type"] = int(target)
            self.counts[f"{what} -> {target.name}"] += 1
            self.add(
                r,
                n,
                f"unsupported-{what.lower()}",
                reason,
                f"{target.name} of the same {size} bytes (same bytes on the wire)",
                severity,
            )
        fixed = self.fixes[r].get(n.id)
        final = int(fixed.attrs.get("comm_type", ctype)) if fixed is not None else ctype
        if len(group) < self.n and final in _IMPL_KEY:  # a replayed BROADCAST makes no plan
            self.subgroups[r][final].add(new_pg)
        elif new_pg in ("", "0"):
            inv = self.get(n, "involved_dim")
            if isinstance(inv, list) and len(inv) < self.dims:
                self.fix(r, n).attrs["involved_dim"] = [bool(x) for x in inv] + [False] * (self.dims - len(inv))
                self.counts["involved_dim padded to the network's dimensions"] += 1
                self.add(
                    r,
                    n,
                    "short-involved-dim",
                    f"involved_dim has {len(inv)} entries for a {self.dims}-D network: ASTRA-sim reads past its "
                    "end (hangs or finishes some ranks only)",
                    f"padded with false to {self.dims} entries",
                )
        splits = max(1, self.sysc.preferred_dataset_splits)
        if final == CollectiveType.ALL_GATHER and 0 <= size < splits:
            self.fix(r, n).attrs["comm_size"] = splits
            self.counts["collectives raised to the chunk count"] += 1
            self.add(
                r,
                n,
                "below-chunk-size",
                f"ALL_GATHER of {size} B split into {splits} chunks: 0-byte chunks (ASTRA-sim asserts chunk_size > 0)",
                f"comm_size {splits}",
            )
            size = splits
        # halvingDoubling's all-reduce halves each chunk once per step of its reduce-scatter half, on
        # chunks of at least the rank count (determine_chunk_size): a chunk under 2 x ranks reaches a
        # 0-byte message (ChunkIdGenerator asserts chunk_size > 0; measured at 8 and 16 ranks)
        least = splits * 2 * self.n
        halving = "halvingDoubling" in self.sysc.implementation("all_reduce")
        if final == CollectiveType.ALL_REDUCE and halving and 0 <= size < least:
            self.fix(r, n).attrs["comm_size"] = least
            self.counts["collectives raised to the chunk count"] += 1
            self.add(
                r,
                n,
                "below-chunk-size",
                f"ALL_REDUCE of {size} B on halvingDoubling over {self.n} ranks in {splits} chunks: a step sends "
                "0 bytes (ASTRA-sim asserts chunk_size > 0)",
                f"comm_size {least}",
            )
            size = least
        colls[new_pg][r].append((n, size))
        # rank -> (node, its collective spans every rank?) in id order (the order the ranks issue them)
        self.coll_order[r].append((n, len(group) == self.n))

    def match_collectives(self, colls: dict) -> None:
        """Members must agree on every collective's size: the k-th of a group gets the largest."""
        for pg, per_rank in colls.items():
            lengths = {r: len(v) for r, v in per_rank.items()}
            if len(set(lengths.values())) > 1:
                self.add(
                    None,
                    None,
                    "collective-count-mismatch",
                    f"process group {pg or 'all'!r}: ranks issue different numbers of collectives {lengths} (hangs)",
                    "",
                )
            for k in range(min(lengths.values(), default=0)):
                row = [(r, per_rank[r][k]) for r in per_rank]
                sizes = {s for _, (_, s) in row}
                if len(sizes) < 2:
                    continue
                if pg in WORLD_NAMES and all(node_splits(node) is not None for _, (node, _) in row):
                    continue  # an all-to-all-v: exported as a custom algorithm, which ignores comm_size
                top = max(sizes)
                for r, (node, s) in row:
                    if s != top:
                        self.fix(r, node).attrs["comm_size"] = top
                        self.counts["collective sizes equalised"] += 1
                        self.add(
                            r,
                            node,
                            "coll-size-mismatch",
                            f"{s} bytes here, {top} on another member (hangs)",
                            f"comm_size {top}",
                        )

    def tiny_first_message(self, ss: list, rr: list) -> None:
        """On the congestion-aware binary, a message of about a nanosecond of link time whose send
        has no dependency (issued at t=0 by Workload::fire, outside the event loop) trips
        EventQueue::proceed's assertion `current_event_list.get_event_time() > current_time`.
        Measured on 4-NPU Switch, Ring and FullyConnected networks of 12.5, 25 and 200 GB/s: up to
        bw + 1 bytes abort, from about 1.2 x bw they run (25 GB/s: 26 B aborts, 30 B runs); a send
        issued later runs at any size; the unaware binary runs them all. Said up to 2 x bw bytes,
        which the export sends such a message at."""
        if self.backend == "unaware" or not ss:
            return
        bw = min(self.net.bandwidth) if self.net is not None else default_network(self.n).bandwidth[0]
        least = int(2 * bw) + 1
        tiny = [(r, node, size) for r, node, size in ss if size < least and not self.deps(node)]
        if not tiny:
            return
        r, node, size = tiny[0]
        for side in (ss, rr):
            for i, (rank, n, s) in enumerate(side):
                if s < least:
                    self.fix(rank, n).attrs["comm_size"] = least
                    side[i] = (rank, n, least)
        self.counts["first tiny messages raised (aware)"] += 1
        self.add(
            r,
            node,
            "tiny-first-message",
            f"a {size}-byte send issued at the start (no dependencies), about a nanosecond on a {bw:g} GB/s link: "
            "the congestion-aware binary aborts (EventQueue::proceed: Assertion "
            "`current_event_list.get_event_time() > current_time')"
            + ("" if self.backend == "aware" else "; the congestion-unaware binary runs it"),
            f"comm_size {least} (send and receive)",
        )

    def match_p2p(self, sends: dict, recvs: dict) -> None:
        """The k-th send of (src, dst, tag) meets the k-th receive; sizes must agree."""
        for key in {*sends, *recvs}:
            ss, rr = sends.get(key, []), recvs.get(key, [])
            self.tiny_first_message(ss, rr)
            for (sr, _, a), (rr_, rnode, b) in zip(ss, rr):
                if a != b:
                    self.fix(rr_, rnode).attrs["comm_size"] = a
                    self.counts["receive sizes set to their send's"] += 1
                    self.add(
                        rr_,
                        rnode,
                        "p2p-size-mismatch",
                        f"receives {b} bytes, its send (rank {sr}) sends {a} (hangs)",
                        f"comm_size {a}",
                    )
            for r, node, _ in ss[len(rr) :]:
                if key[1] < self.n:
                    self.to_compute(
                        r, node, "unmatched-send", f"send {key[0]}->{key[1]} tag {key[2]} has no receive (hangs)"
                    )
            for r, node, _ in rr[len(ss) :]:
                self.to_compute(
                    r, node, "unmatched-recv", f"receive {key[0]}->{key[1]} tag {key[2]} has no send (hangs)"
                )


_GET_COLUMNS = attrgetter("id", "type", "data_deps", "ctrl_deps")


@dataclass
class _RankColumns:
    """What the walk needs of one rank's nodes as arrays (each field of a protobuf node read from
    Python is a call: at 2 M nodes every pass over them costs about a second)."""

    order: list[pb.Node]  # the nodes in ascending id order (equal ids in file order)
    types: Any  # numpy int64: their types, in that order
    suspects: set[int]  # rows with a dependency on themselves, on a later id or on an absent id
    later: bool  # a dependency on a later id (only then can there be a cycle)
    metadata: list[pb.Node]  # METADATA nodes, in file order
    rows: Any = None  # with shared nodes: each node's row among the distinct ones, in `order`'s order
    ids: Any = None  # numpy: the nodes' ids, in `order`'s order


class _Columns:
    """Node columns (id, type, dependencies) as numpy arrays, one row per distinct node object:
    traces read with shared nodes repeat objects across ranks (at 1,024 synthesized ranks, 87 k
    objects hold 2.16 M nodes), so each object's fields are read from protobuf once and every rank
    gathers its rows with numpy."""

    def __init__(self, nodes: list[pb.Node]) -> None:
        import numpy as np

        k = len(nodes)
        ids, types, data, ctrl = zip(*map(_GET_COLUMNS, nodes)) if k else ((), (), (), ())
        self.ids = np.fromiter(ids, dtype=np.uint64, count=k)
        self.types = np.fromiter(types, dtype=np.int64, count=k)
        self.deps = [self._csr(lists) for lists in (data, ctrl)]  # (lengths, starts, values)

    @staticmethod
    def _csr(lists: tuple) -> tuple[Any, Any, Any]:
        import numpy as np

        lens = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
        starts = np.cumsum(lens) - lens
        values = np.fromiter(chain.from_iterable(map(whole, lists)), dtype=np.uint64, count=int(lens.sum()))
        return lens, starts, values


def _dep_runs(all_lens: Any, all_starts: Any, values: Any, rows: Any) -> tuple[Any, Any]:
    """(run lengths, dependencies) of rows `rows` of one dependency column (`_Columns._csr`):
    each row's run gathered in row order, start of its run + 0, 1, ... within it."""
    import numpy as np

    lens = all_lens[rows]
    total = int(lens.sum())
    return lens, values[np.repeat(all_starts[rows] - (np.cumsum(lens) - lens), lens) + np.arange(total)]


def _rank_columns(nodes: list[pb.Node], cols: _Columns, rows: Any) -> _RankColumns:
    """`_RankColumns` of one rank whose nodes are rows `rows` of `cols`: the dependency checks in
    bulk (numpy); the walk then looks at the suspects' dependencies only."""
    import numpy as np

    k = len(nodes)
    types = cols.types[rows]
    metadata = [nodes[i] for i in np.flatnonzero(types == _METADATA).tolist()]
    ids = cols.ids[rows]
    order = nodes
    if k > 1 and not bool((ids[1:] >= ids[:-1]).all()):
        perm = np.argsort(ids, kind="stable")
        rows, ids, types = rows[perm], ids[perm], types[perm]
        order = [nodes[i] for i in perm.tolist()]
    suspects: set[int] = set()
    later = False
    for all_lens, all_starts, values in cols.deps:
        lens, deps = _dep_runs(all_lens, all_starts, values, rows)
        if not len(deps):
            continue
        child = np.repeat(ids, lens)
        at = np.minimum(np.searchsorted(ids, deps), k - 1)
        odd = (deps >= child) | (ids[at] != deps)
        if odd.any():
            suspects.update(np.repeat(np.arange(k), lens)[odd].tolist())
            later = later or bool((deps > child).any())
    return _RankColumns(list(order), types, suspects, later, metadata, rows, ids)


_ID_BITS = 40  # `_all_ranks_columns` keys a node by (rank position, id) in one int64 below these ids
_AT_ONCE = 1 << 16  # nodes indexed in one pass: a dozen arrays of this length at a time, not of the job's


def _all_ranks_columns(nodes_of: list[list[pb.Node]], cols: _Columns, rows_of: list[Any]) -> list[_RankColumns]:
    """`_rank_columns` of every rank, ranks of up to `_AT_ONCE` nodes in all at once
    (`_ranks_columns_at_once`: a thousand ranks of a hundred nodes each cost a dozen numpy calls
    per rank; the passes' length bounds the memory they take)."""
    out: list[_RankColumns] = []
    start, total = 0, 0
    for i, rows in enumerate(rows_of):
        if total and total + len(rows) > _AT_ONCE:
            out.extend(_ranks_columns_at_once(nodes_of[start:i], cols, rows_of[start:i]))
            start, total = i, 0
        total += len(rows)
    out.extend(_ranks_columns_at_once(nodes_of[start:], cols, rows_of[start:]))
    return out


def _ranks_columns_at_once(nodes_of: list[list[pb.Node]], cols: _Columns, rows_of: list[Any]) -> list[_RankColumns]:
    """`_rank_columns` of these ranks at once: their rows one after another, each node keyed by
    (rank position, id) so that one search finds every rank's dependencies among its own ids.
    Ranks whose ids are not in order, or ids of 2^40 and more: rank by rank."""
    import numpy as np

    k = len(rows_of)
    sizes = np.fromiter(map(len, rows_of), dtype=np.int64, count=k)
    total = int(sizes.sum())
    if not k or not total or k >= 1 << (63 - _ID_BITS):
        return [_rank_columns(n, cols, r) for n, r in zip(nodes_of, rows_of)]
    rows = np.concatenate(rows_of)
    ids = cols.ids[rows]
    rank = np.repeat(np.arange(k, dtype=np.int64), sizes)
    if int(ids.max()) >> _ID_BITS or not bool((ids[1:] >= ids[:-1])[rank[1:] == rank[:-1]].all()):
        return [_rank_columns(n, cols, r) for n, r in zip(nodes_of, rows_of)]
    key = (rank << _ID_BITS) | ids.astype(np.int64)  # ascending: ranks in turn, each its ids in order
    types = cols.types[rows]
    starts = np.cumsum(sizes) - sizes
    odd_at: list[Any] = []
    later_at: list[Any] = []
    for all_lens, all_starts, values in cols.deps:
        lens, deps = _dep_runs(all_lens, all_starts, values, rows)
        if not len(deps):
            continue
        child = np.repeat(ids, lens)
        dep_rank = np.repeat(rank, lens)
        big = (deps >> np.uint64(_ID_BITS)) != 0  # an id no node has: absent
        want = (dep_rank << _ID_BITS) | np.where(big, 0, deps).astype(np.int64)
        at = np.minimum(np.searchsorted(key, want), total - 1)
        odd = (deps >= child) | (key[at] != want) | big
        odd_at.append(np.repeat(np.arange(total), lens)[odd])
        later_at.append(dep_rank[deps > child])
    # sorted, not made unique (a node twice is one suspect; np.unique would import numpy.ma: 17 ms)
    odd_pos = np.sort(np.concatenate(odd_at)) if odd_at else np.zeros(0, dtype=np.int64)
    later = np.zeros(k, dtype=bool)
    for at in later_at:
        later[at] = True
    odd_rank = rank[odd_pos]
    odd_cut = np.searchsorted(odd_rank, np.arange(k + 1)).tolist()
    odd_local = (odd_pos - starts[odd_rank]).tolist()
    meta_pos = np.flatnonzero(types == _METADATA)
    meta_rank = rank[meta_pos]
    meta_cut = np.searchsorted(meta_rank, np.arange(k + 1)).tolist()
    meta_local = (meta_pos - starts[meta_rank]).tolist()
    ends = (starts + sizes).tolist()
    out = []
    for i, (nodes, a, b) in enumerate(zip(nodes_of, starts.tolist(), ends)):
        suspects = set(odd_local[odd_cut[i] : odd_cut[i + 1]])
        metadata = [nodes[j] for j in meta_local[meta_cut[i] : meta_cut[i + 1]]]
        out.append(_RankColumns(list(nodes), types[a:b], suspects, bool(later[i]), metadata, rows_of[i], ids[a:b]))
    return out


def _no_rows(n: int) -> Any:
    import numpy as np

    return np.zeros(n, dtype=bool)


def _all_rank_columns(
    traces: list[Trace], shared_nodes: bool, rows: Optional[tuple[list[pb.Node], dict[int, Any]]] = None
) -> tuple[list[_RankColumns], dict[int, int], Optional[tuple[list[pb.Node], Any]]]:
    """`_RankColumns` of every rank, and with shared nodes id(node) -> its row among the distinct
    node objects, each of which is read once, and those objects with their types. `rows`: the
    distinct nodes and id(trace) -> its nodes' rows among them, as read
    (`chakra.sim.loading.NodeStore`); a trace it lacks: found by identity."""
    import numpy as np

    if not shared_nodes:
        out = []
        for t in traces:
            cols = _Columns(t.nodes)
            out.append(_rank_columns(t.nodes, cols, np.arange(len(t.nodes))))
        return out, {}, None
    if rows is not None and all(id(t) in rows[1] for t in traces):
        distinct = rows[0]
        index = dict(zip(map(id, distinct), range(len(distinct))))
        rows_of = [rows[1][id(t)] for t in traces]
        cols = _Columns(distinct)
        return _all_ranks_columns([t.nodes for t in traces], cols, rows_of), index, (distinct, cols.types)
    index = {}
    found: dict[int, pb.Node] = {}
    rows_of = []
    for t in traces:
        keys = list(map(id, t.nodes))
        fresh = set(keys).difference(index)
        if fresh:
            brought = list(map(fresh.__contains__, keys))
            new = dict(zip(compress(keys, brought), compress(t.nodes, brought)))
            index.update(zip(new, range(len(found), len(found) + len(new))))
            found.update(new)
        rows_of.append(np.fromiter(map(index.__getitem__, keys), dtype=np.int64, count=len(keys)))
    distinct = list(found.values())
    cols = _Columns(distinct)
    return _all_ranks_columns([t.nodes for t in traces], cols, rows_of), index, (distinct, cols.types)


@functools.cache
def _attr_views() -> Any:
    """A message type whose field 1 holds nodes seen as their attributes' bytes only
    (`AttrViews { repeated AttrView nodes = 1; } AttrView { repeated bytes attr = 10; }`): one upb
    call turns a batch of framed Node messages (`chakra.io.NodeBatch`'s wire form) into each node's
    attributes exactly as serialized, the other fields skipped. Built once, at run time."""
    from chakra.io import BYTES, MESSAGE, REPEATED, runtime_message

    return runtime_message(
        "AttrViews",
        [
            ("AttrView", (("attr", 10, REPEATED, BYTES, ""),)),
            ("AttrViews", (("nodes", 1, REPEATED, MESSAGE, ".chakra_internal.AttrView"),)),
        ],
    )


def plan(
    traces: list[Trace],
    file_groups: Optional[dict[str, list[int]]] = None,
    *,
    unsupported: str = "rewrite",
    broadcast: str = "network",
    network: Optional[NetworkConfig] = None,
    system: Optional[SystemConfig] = None,
    backend: Optional[str] = None,
    shared_nodes: bool = False,
    memory: Optional[MemoryConfig] = None,
    summarise: bool = False,
    raw: Optional[dict[int, bytes]] = None,
    rows: Optional[tuple[list[pb.Node], dict[int, Any]]] = None,
) -> Plan:
    """Findings and fixes for running `traces` (one per rank, ranks 0..N-1) on ASTRA-sim.

    `unsupported`: "rewrite" (a runnable collective moving the same bytes, see `REWRITE`) or
    "compute" (a compute node of the recorded duration). `broadcast`: "network" (rewritten like
    the others) or "replay" (kept: ASTRA-sim replays its recorded duration). `network`: the
    network it will run on (None: the export's own choice); `system`: the system config (None:
    the bundled one); `backend`: "aware", "unaware" or None (either: fixes that need one say so).
    `shared_nodes`: the traces were read with `chakra.io.read_trace`'s `shared` (identical nodes
    are one object): per-node work is then done once per distinct node. `memory`: the remote-memory
    config it will run with (None: the export's own, PER_NPU_MEMORY_EXPANSION). `summarise`: for
    the warnings only (`warning_lines`): findings of one kind are tallied (`Plan.tallies`) instead of
    kept one object each, and compute nodes' fixes are not kept (the plan cannot be `apply`d).
    `raw`: with `shared_nodes`, id(node) -> the framed message it was read from (`simulate_plan`);
    `rows`: with `shared_nodes`, the distinct nodes and id(trace) -> its nodes as their rows."""
    if unsupported not in ("rewrite", "compute"):
        raise InputError(f"--unsupported must be rewrite or compute, not {unsupported!r}")
    if broadcast not in ("network", "replay"):
        raise InputError(f"--broadcast must be network or replay, not {broadcast!r}")
    if system is None:
        from chakra.sim.config import bundled_config_dir, load_system

        # the bundled system as the export writes it: one implementation per network dimension
        system = fit_system(load_system(bundled_config_dir() / "system.json"), network.dims if network else 1)
    return _Planner(
        ordered(traces),
        dict(file_groups or {}),
        unsupported,
        broadcast,
        network,
        system,
        backend,
        shared_nodes,
        memory,
        summarise,
        raw,
        rows,
    ).run()


def ordered(traces: list[Trace]) -> list[Trace]:
    """The traces sorted by rank; ranks must be 0..N-1 (the file names ASTRA-sim opens)."""
    pairs = sorted(((_rank(t, i), i) for i, t in enumerate(traces)))
    ranks = [r for r, _ in pairs]
    problem = rank_set_problem(ranks)
    if problem:
        raise InputError(problem)
    return [traces[i] for _, i in pairs]


# ------------------------------------------------------------------------------------------ apply


def _as_compute(node: pb.Node, why: str, peak: float = 0.0) -> pb.Node:
    """A GPU compute node with the node's id, name, dependencies and recorded times."""
    out = pb.Node(
        id=node.id,
        name=node.name,
        type=NodeType.COMP_NODE,
        start_time_micros=node.start_time_micros,
        duration_micros=node.duration_micros,
    )
    out.data_deps.extend(node.data_deps)
    out.ctrl_deps.extend(node.ctrl_deps)
    set_attr(out, "is_cpu_op", False)
    set_attr(out, "export_replaced", why)  # ASTRA-sim ignores attributes it does not read
    if peak:
        for name, value in roofline_attrs(node.duration_micros, peak).items():
            set_attr(out, name, value)
    return out


def apply(traces: list[Trace], p: Plan, missing_deps: str = "error") -> list[Trace]:
    """The fixed traces (new node objects where changed; the input is not modified)."""
    if missing_deps not in ("error", "drop"):
        raise InputError(f"--missing-deps must be error or drop, not {missing_deps!r}")
    if p.missing and missing_deps == "error":
        first = next(i for i in p.issues if i.code == "missing-dep")
        total = sum(p.missing.values())
        raise InputError(
            f"rank {first.rank} node {first.node_id}: {first.reason}; {total} such dependencies in all "
            "(--missing-deps drop removes them)"
        )
    out = []
    for pos, t in enumerate(traces):
        r = _rank(t, pos)
        fixes = p.fixes.get(r, {})
        # METADATA nodes first: their dependents inherit their dependencies
        source, _, _ = strip_metadata(t.nodes)
        ids = {n.id for n in source}
        nodes = []
        for n in source:
            f = fixes.get(n.id)
            nid = n.id
            cut = f.drop_deps if f is not None else ()
            deps_ok = not cut and all(d in ids and d != nid for d in (*n.data_deps, *n.ctrl_deps))
            if f is None and deps_ok:
                nodes.append(n)
                continue
            if f is not None and f.compute:
                new = _as_compute(n, f.compute, p.roofline_peak)
            else:
                new = pb.Node()
                new.CopyFrom(n)
                for name, value in (f.attrs if f is not None else {}).items():
                    set_attr(new, name, value)
            if not deps_ok:  # absent ids (--missing-deps drop), self-dependencies, cycle edges
                for fld in (new.data_deps, new.ctrl_deps):
                    kept = [d for d in dict.fromkeys(fld) if d in ids and d != nid and d not in cut]
                    del fld[:]
                    fld.extend(kept)
            nodes.append(new)
        out.append(Trace(metadata=t.metadata, nodes=nodes, rank=r, path=t.path))
        if r in p.tails:  # the rank ends on a compute node, not a send/recv (see memory_ends)
            parents = {d for n in nodes for d in (*n.data_deps, *n.ctrl_deps)}
            sinks = [n.id for n in nodes if n.id not in parents]
            roof = roofline_attrs(0, p.roofline_peak) if p.roofline_peak else {}
            tail = out[-1].add("end (after the rank's last nodes)", NodeType.COMP_NODE, duration_micros=0,
                               attrs={"is_cpu_op": False, **roof})  # fmt: skip
            tail.data_deps.extend(sinks)
        if r in p.idle:
            roof = roofline_attrs(0, p.roofline_peak) if p.roofline_peak else {}
            idle: dict[str, Any] = {"is_cpu_op": False, **roof}
            out[-1].add("idle (a rank without nodes)", NodeType.COMP_NODE, duration_micros=0, attrs=idle)
    if p.pad_rank:
        pad = Trace(metadata=traces[0].metadata, rank=1)
        attrs: dict[str, Any] = {"is_cpu_op": False, **(roofline_attrs(0, p.roofline_peak) if p.roofline_peak else {})}
        pad.add("idle (second NPU: ASTRA-sim needs two)", NodeType.COMP_NODE, duration_micros=0, attrs=attrs)
        out.append(pad)
    return out


# ----------------------------------------------------------------------------------------- driver


@dataclass
class ExportResult:
    plan: Plan
    files: list[Any]  # the rank traces written
    run: Any  # configs.RunFiles

    def summary(self) -> dict[str, Any]:
        return {
            "ranks": len(self.files),
            "padded_rank": self.plan.pad_rank,
            "changes": dict(sorted(self.plan.counts.items())),
            "findings": len(self.plan.issues),
            "not_fixed": grouped(self.plan.blocking),
            "files": [str(p) for p in self.files],
            "comm_groups": str(self.run.comm_groups) if self.run.comm_groups is not None else None,
            "network": str(self.run.network),
            "system": str(self.run.system),
            "memory": str(self.run.memory),
            "command": self.run.command_line(),
            "simulate_command": self.run.simulate_command_line(),
        }


def export_astrasim(
    traces: list[Trace],
    out: Any,
    *,
    file_groups: Optional[dict[str, list[int]]] = None,
    unsupported: str = "rewrite",
    broadcast: str = "network",
    missing_deps: str = "error",
    backend: str = "aware",
    network: Any = None,
    system: Any = None,
    memory: Any = None,
) -> ExportResult:
    """Write OUT.<rank>.et, OUT.comm_groups.json and OUT.{network.yml,system.json,memory.json}."""
    from pathlib import Path

    from chakra.commgroups import comm_groups_path, write_comm_groups
    from chakra.export import alltoallv
    from chakra.export.configs import write_configs
    from chakra.io import atomic_output, output_set, write_rank_traces
    from chakra.sim.config import bundled_config_dir, load_memory, load_network, load_system

    traces = ordered(traces)
    net = load_network(network) if network is not None else None
    sysc = load_system(system) if system is not None else None
    mem = load_memory(memory) if memory is not None else None
    p = plan(
        traces,
        file_groups,
        unsupported=unsupported,
        broadcast=broadcast,
        network=net,
        system=sysc,
        backend=backend,
        memory=mem,
    )
    fixed = apply(traces, p, missing_deps)
    # uneven all-to-alls: ASTRA-sim runs each as a custom algorithm of exactly its sends
    uneven, notes = alltoallv.find(fixed)
    fixed = alltoallv.renumber(fixed, uneven)
    for note in notes:
        p.issues.append(Issue(None, None, "", "alltoallv-even", note, "", "warning"))
    extra: dict[str, Any] = dict(p.config)
    if uneven:
        p.counts["all-to-alls with per-peer sizes as custom algorithms"] = len(uneven)
        extra["per-node-custom-implementation"] = f"{out}.a2av.yaml"
        splits = (sysc or load_system(bundled_config_dir() / "system.json")).preferred_dataset_splits
        if splits != 1:
            # Sys::generate_collective makes a data set of ceil(size / chunk) streams but gives a
            # custom algorithm one stream: with more than one split the collective never ends
            extra["preferred-dataset-splits"] = 1
            p.counts["preferred-dataset-splits set to 1 (custom algorithms)"] = 1
            p.issues.append(
                Issue(
                    None,
                    None,
                    "",
                    "custom-splits",
                    f"preferred-dataset-splits {splits}: ASTRA-sim runs a custom algorithm as one stream of a "
                    f"{splits}-stream data set and never finishes it",
                    "preferred-dataset-splits 1 (every collective then runs as one chunk)",
                )
            )
    npus = len(fixed)
    groups_path = comm_groups_path(out) if p.groups else None
    # One set: configs, traces and comm groups all appear, or none does (a full disk included).
    with output_set():
        # configs first: they are checked (rank count, backend limits) before any trace is written
        run = write_configs(
            Path(out),
            npus,
            backend=backend,
            network=network,
            system=system,
            memory=memory,
            comm_groups=groups_path,
            split=p.split,
            system_extra=extra,
        )
        if p.missing and missing_deps == "drop":
            p.counts["dependencies on absent ids dropped"] = sum(p.missing.values())
        files = write_rank_traces(out, fixed)
        for coll in uneven:
            algo = [alltoallv.algorithm(coll, i) for i in range(len(coll.members))]
            write_rank_traces(f"{out}.a2av.{coll.index}", algo)
        if uneven:
            with atomic_output(Path(f"{out}.a2av.yaml"), "w") as fh:
                fh.write(alltoallv.yaml_text(uneven, str(out)))
        written = write_comm_groups(out, p.groups)
    run.comm_groups = written
    return ExportResult(p, files, run)


# ------------------------------------------------------------------------------------ warnings


def rank_span(ranks: list[int]) -> str:
    """Ranks as runs: [0, 1, 2, 5, 7, 8] -> "0-2, 5, 7-8"."""
    out: list[str] = []
    for r in sorted(set(ranks)):
        if out and out[-1][1] == r - 1:
            out[-1][1] = r
        else:
            out.append([r, r])  # type: ignore[arg-type]
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in out)  # type: ignore[misc]


def grouped(issues: list[Issue], tallies: Optional[dict[str, Tally]] = None) -> list[dict[str, Any]]:
    """One entry per kind of finding (its code), with every rank and node it touches: a finding
    that holds on every rank of an SPMD job is one line, not one per rank. `tallies`: the kinds a
    summarised plan kept as `Tally`s (their first finding is in `issues`)."""
    by_code: dict[str, list[Issue]] = defaultdict(list)
    for issue in issues:
        by_code[issue.code].append(issue)
    out = []
    for code, found in by_code.items():
        first = found[0]
        tally = tallies.get(code) if tallies else None
        if tally is not None:
            count, ranks, nodes = tally.count, sorted(tally.ranks), sorted(tally.nodes)
        else:
            count = len(found)
            ranks = sorted({i.rank for i in found if i.rank is not None})
            nodes = sorted({i.node_id for i in found if i.node_id is not None})
        out.append(
            {
                "code": code,
                "severity": first.severity,
                "count": count,
                "ranks": ranks,
                "nodes": nodes[:20],
                "reason": first.reason,
                "fix": first.fix,
            }
        )
    return out


def finding_line(f: dict[str, Any]) -> str:
    """One line for a `grouped` finding: its code, the ranks (and first node) it touches, why."""
    where = f"ranks {rank_span(f['ranks'])}" if len(f["ranks"]) > 1 else f"rank {f['ranks'][0]}" if f["ranks"] else ""
    if f["nodes"]:
        where += (
            (", " if where else "")
            + ("node " if len(f["nodes"]) == 1 else "nodes ")
            + ", ".join(map(str, f["nodes"][:5]))
            + (", ..." if len(f["nodes"]) > 5 else "")
        )
    return f"{f['code']}{' (' + where + ')' if where else ''}: {f['reason']}"


#: Warnings (ASTRA-sim runs to the end) that `chakra simulate` says all the same: the real binary
#: logs an error on them that a user comparing its output with ours would meet.
SAID_WARNINGS = frozenset({"memory-node-report"})


def warning_lines(p: Plan, skip: frozenset[str] = frozenset()) -> list[str]:
    """One line per kind of finding on which ASTRA-sim aborts, hangs or corrupts memory (and the
    few warnings in SAID_WARNINGS): what it would do, the ranks and first node it touches, how
    often, and whether `chakra export astra-sim` fixes it."""
    picked = [i for i in p.issues if (i.severity == "error" or i.code in SAID_WARNINGS) and i.code not in skip]
    out = []
    for f in grouped(picked, p.tallies):
        found = [i for i in picked if i.code == f["code"]]
        tally = p.tallies.get(f["code"])
        ranks = f["ranks"]
        where = f"ranks {rank_span(ranks)}" if len(ranks) > 1 else f"rank {ranks[0]}" if ranks else ""
        if f["nodes"]:
            where += (" " if where else "") + f"node {f['nodes'][0]}"
        head = f"{f['code']}{': ' + where if where else ''}{', ' + str(f['count']) + ' such' if f['count'] > 1 else ''}"
        if f["severity"] != "error":
            out.append(f"ASTRA-sim logs an error here ({head}): {f['reason']}")
            continue
        fixed = not tally.unfixed if tally is not None else all(i.fix for i in found)
        fix = "`chakra export astra-sim` fixes it" if fixed else "the export cannot fix it here"
        out.append(f"ASTRA-sim would fail here ({head}): {f['reason']}; {fix}")
    return out


def settle_memory_ends(p: Plan, finishes: dict[int, int], node_times: Optional[dict]) -> None:
    """Turn the plan's `memory-node-abort` findings (a memory rank that *can* end on a send/recv)
    into what happens, from a simulated run's finish times and node times: the first rank, in
    finish order, that does end on one aborts the binary there (exit 134; ranks finishing earlier
    have printed their finish, the others print none); if none does, every finish is printed and
    the throws are only logged (`memory-node-report`)."""
    if not p.p2p_ends or node_times is None:
        return
    hit = None
    for r in sorted(finishes, key=lambda x: (finishes[x], x)):
        times = node_times.get(r)
        if r not in p.p2p_ends or not times:
            continue
        last = max(e for _, e in times.values())
        enders = sorted(nid for nid, (_, e) in times.items() if e == last and nid in p.p2p_ends[r])
        if enders:
            hit = (r, enders[0], finishes[r])
            break
    kept = []
    for issue in p.issues:
        if issue.code != "memory-node-abort":
            kept.append(issue)
        elif hit is not None and issue.rank == hit[0]:
            r, nid, t = hit
            before = sum(1 for x in finishes.values() if x < t)
            issue.node_id = nid
            issue.reason = (
                f"rank {r} ran memory nodes and ends on its send/recv node {nid} at {t:,} ns: ASTRA-sim's statistics "
                "report throws there outside its event loop ('Only GPU and COMM types are supported for overlap "
                f"extraction') and the binary aborts (exit 134); {before} of {len(finishes)} rank(s) finish earlier "
                "(their finish lines are printed, though an abort can lose them in stdout's buffer), the others none"
            )
            kept.append(issue)
        elif hit is None:
            kept.append(
                Issue(
                    issue.rank,
                    issue.node_id,
                    issue.name,
                    "memory-node-report",
                    "memory node: ASTRA-sim prints the rank's finish, then its statistics report throws ('Only GPU "
                    "and COMM types are supported for overlap extraction'), which it logs and goes on (exit status 0)",
                    "kept: the finish times are complete",
                    "warning",
                )
            )
    p.issues[:] = kept


def _read_framed(
    args: list, framed: Any, raw: dict[int, bytes], rows: dict[int, Any]
) -> tuple[list[Trace], list[pb.Node]]:
    """The traces of a `chakra simulate` run read with shared nodes (`chakra.io.read_traces`'s
    `shared`), each plain `.et` file through `framed` (`chakra.sim.loading.FramedFiles`), which the
    simulation that follows takes the same nodes' rows from instead of reading the file again.
    `raw` gets id(node) -> the framed message each distinct node was read from, `rows` id(trace) ->
    its nodes' rows among the distinct nodes returned with the traces."""
    from google.protobuf.message import DecodeError

    from chakra.io import _prefix_size, expand_trace_args, rank_from_path, read_trace

    out = []
    shared: dict[bytes, pb.Node] = {}  # files read by read_trace (gzip, JSON, large)
    any_framed = False
    for pos, (rank, path) in enumerate(expand_trace_args(args)):
        rank = rank if rank is not None else rank_from_path(path)
        trace = None
        try:
            got = framed.read(path)
            if got is not None:
                head, nodes, node_rows = got
                metadata = pb.GlobalMetadata.FromString(head[_prefix_size(head) :])
                trace = Trace(metadata=metadata, nodes=nodes, rank=rank, path=path)
                rows[id(trace)] = node_rows
                any_framed = True
        except DecodeError:
            trace = None  # read_trace says where
        if trace is None:
            trace = read_trace(path, rank=rank, shared=shared)
        if trace.rank is None:
            trace.rank = pos
        out.append(trace)
    raw.update({id(node): message for message, node in shared.items()})
    store = framed.store
    if not any_framed or store is None:
        return out, []
    raw.update(zip(map(id, store.nodes), store.messages))
    return out, store.nodes


@without_gc
def simulate_plan(
    trace_args: Any,
    comm_groups: Any,
    network: Any,
    system: Any,
    backend: str,
    memory: Any = None,
    framed: Any = None,
) -> Optional[Plan]:
    """The export plan for the inputs of a `chakra simulate` run (paths or loaded configs).
    `framed`: a `chakra.sim.loading.FramedFiles` the rank files are read into, for the simulation
    that follows to take (`SimOptions.framed`); None: a fresh one, dropped afterwards."""
    from chakra.commgroups import groups_beside, read_comm_groups
    from chakra.sim.config import load_memory, load_network, load_system
    from chakra.sim.loading import FramedFiles

    args = [trace_args] if isinstance(trace_args, (str, bytes)) or not isinstance(trace_args, list) else trace_args
    given = [t for t in args if isinstance(t, Trace)]
    raw: dict[int, bytes] = {}  # what each distinct node was read from
    rows: dict[int, Any] = {}
    if framed is None:
        framed = FramedFiles()
    traces, distinct = (given, []) if given else _read_framed(args, framed, raw, rows)  # SPMD ranks share nodes
    groups = read_comm_groups(comm_groups) if comm_groups is not None else groups_beside(args)
    net = network if network is None or isinstance(network, NetworkConfig) else load_network(network)
    sysc = system if system is None or isinstance(system, SystemConfig) else load_system(system)
    mem = memory if memory is None or isinstance(memory, MemoryConfig) else load_memory(memory)
    try:
        return plan(
            traces,
            groups,
            network=net,
            system=sysc,
            backend=backend,
            shared_nodes=not given,
            memory=mem,
            summarise=True,
            raw=raw,
            rows=(distinct, rows),
        )
    except InputError:  # ranks not numbered 0..N-1: ASTRA-sim cannot even open them; simulate said so
        return None

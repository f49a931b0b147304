"""The trace compiler: one rank's feeder index turned into flat arrays the engine runs.

`RankEngine` holds, per node row, its kind (the one node classification of the simulator: GPU
compute, CPU compute, collective, send, recv, memory, zero-time, replayed comm), its resource slot
(CPU, GPU compute, communication, or exempt: ASTRA-sim's HardwareResource), its fixed delay (replay
`duration_micros x 1000`, 0 becomes 1 ns; or the roofline), CSR children and dependency counts;
collective/send/recv/memory attributes live in a sparse dict. There are no per-node Python objects.
Byte-identical rank files share one compiled copy (`for_rank`).
"""

from __future__ import annotations

from array import array
from typing import Any, Optional

import numpy as np

from chakra.errors import ConfigError
from chakra.schema import CollectiveType, NodeType, collective_name
from chakra.schema.attrs import RECV_BYTES, SEND_BYTES
from chakra.schema.kinds import COLL, CPU, GPU, KINDS, MEM, RECV, SEND, kind_codes
from chakra.sim.alltoallv import clean_splits
from chakra.sim.collective_run import A2A, MODELLED
from chakra.sim.groups import GroupTable

# Collective types ASTRA-sim's workload layer rejects ("Unsupported collective comm type"): the
# rank then never finishes there. BROADCAST is replayed by ASTRA-sim itself.
UNSUPPORTED = frozenset(
    int(c)
    for c in (
        CollectiveType.REDUCE,
        CollectiveType.GATHER,
        CollectiveType.SCATTER,
        CollectiveType.BARRIER,
        CollectiveType.REDUCE_SCATTER_BLOCK,
    )
)
K_GPU, K_CPU, K_COLL, K_SEND, K_RECV, K_MEM, K_ZERO, K_REPLAY = range(8)
_KIND_TO_CODE = np.array(
    [{CPU: K_CPU, GPU: K_GPU, COLL: K_COLL, SEND: K_SEND, RECV: K_RECV, MEM: K_MEM}.get(k, K_ZERO) for k in KINDS],
    dtype=np.int8,
)
S_CPU, S_GPU, S_COMM, S_FREE = range(4)
KIND_NAMES = ("gpu_comp", "cpu_comp", "collective", "send", "recv", "memory", "zero", "replay_comm")


class RankEngine:
    """One rank's compiled trace plus its run-time state (flat arrays; see module doc)."""

    __slots__ = (
        "rank",
        "ids",
        "names",
        "kind",
        "slot",
        "delay",
        "ptr",
        "cidx",
        "left",
        "ready",
        "busy",
        "start",
        "end",
        "info",
        "coll_seq",
        "remaining",
        "n",
        "gpu_sum",
        "path",
        "replayed",
        "shareable",
        "static",
        "warnings",
        "peers",
    )

    def __init__(
        self,
        rank: int,
        table: Any,
        *,
        system: Any,
        comm_mode: str,
        compat: bool,
        names: bool,
        slots: tuple[int, int, int] = (1, 1, 1),
    ) -> None:
        self.rank = rank
        self.path = str(table.path) if table.path is not None else f"<rank {rank}>"
        n = len(table)
        self.n = n
        self.ids = table.ids
        self.names = table.names if names else None
        types = table.types.astype(np.int16)
        kind, delay, replay_ns = self._timing(table, system, types)
        # Situations where ASTRA-sim stops or aborts (we still answer; the caller prints one line each).
        self.warnings: list[str] = []
        # row -> (send, receive) byte lists of an all-to-all with per-peer sizes
        self.peers: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {}
        if int((types == NodeType.METADATA_NODE).sum()):
            self.warnings.append(
                "METADATA node(s): ASTRA-sim 2.x aborts at t=0 on them ('Invalid node_type'); here they take 0 ns"
            )
        info, replayed = self._comm_info(table, kind, delay, replay_ns, system, comm_mode)
        self._layout(table, kind, delay, types, info, replayed, compat, slots)

    def _timing(self, table: Any, system: Any, types: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(engine kind code, delay ns, recorded duration ns) per row: compute nodes take their
        recorded duration, or the roofline time when the system config enables it."""
        n = self.n
        is_cpu = table.is_cpu if table.is_cpu is not None else np.zeros(n, np.int8)
        dur = table.dur_us
        replay_ns = np.where(dur > 0, dur * 1000, 1).astype(np.int64)
        # the core's one classification (chakra.schema.kinds), mapped onto the engine's codes;
        # metadata and invalid nodes take no resource and no time (K_ZERO)
        kind = _KIND_TO_CODE[kind_codes(types, is_cpu)]
        comp = types == NodeType.COMP_NODE
        delay = np.zeros(n, dtype=np.int64)
        delay[comp] = replay_ns[comp]
        if system.roofline_enabled:
            gpu = comp & (is_cpu == 0)
            ops = table.num_ops.astype(np.float64)
            tsz = table.tensor_size.astype(np.float64)
            with np.errstate(divide="ignore", invalid="ignore"):
                oi = np.where(tsz > 0, ops / np.where(tsz > 0, tsz, 1), 0.0)
                perf = np.minimum(system.local_mem_bw * 1e9 * oi, system.peak_perf * 1e12)
                roof = np.where((tsz > 0) & (perf > 0), np.floor(ops / np.where(perf > 0, perf, 1) * 1e9), 0)
            delay[gpu] = roof[gpu].astype(np.int64)
        return kind, delay, replay_ns

    def _comm_info(
        self, table: Any, kind: np.ndarray, delay: np.ndarray, replay_ns: np.ndarray, system: Any, comm_mode: str
    ) -> tuple[dict[int, tuple], int]:
        """(row -> what its communication or memory access needs, collectives replayed): reads the
        sparse attributes; rows the simulator cannot model become replays of their duration."""
        # Communication attributes (sparse: only comm/mem nodes carry them).
        info: dict[int, tuple] = {}
        replay_all = system.replay_only or comm_mode == "replay"
        replayed = 0
        for row, attrs in table.sparse.items():
            k = int(kind[row])
            if k == K_COLL:
                got = self._coll_info(attrs, replay_all)
                if got is None:
                    # BROADCAST (as ASTRA-sim), other types ASTRA-sim cannot simulate, and
                    # collectives without comm_type/comm_size are replayed from duration_micros.
                    kind[row] = K_REPLAY
                    delay[row] = replay_ns[row]
                    replayed += 0 if replay_all else 1
                    continue
                info[row] = got
                if got[0] == A2A and SEND_BYTES in attrs:
                    sends, recvs = clean_splits(attrs.get(SEND_BYTES)), clean_splits(attrs.get(RECV_BYTES))
                    if sends is not None and recvs is not None and len(sends) == len(recvs):
                        self.peers[row] = (sends, recvs)
            elif k in (K_SEND, K_RECV):
                if replay_all:
                    kind[row] = K_REPLAY
                    delay[row] = replay_ns[row]
                    continue
                info[row] = self._p2p_info(k, attrs, row)
            elif k == K_MEM:
                loc = attrs.get("tensor_loc")
                local = loc in (0, "local", "LOCAL", "Local") or (isinstance(loc, str) and loc.lower() == "local")
                info[row] = (max(0, _int(attrs.get("tensor_size"), 0)), local)
        # Comm/mem nodes without any attribute are malformed; say so with the node id.
        for k, what in ((K_COLL, "COMM_COLL_NODE"), (K_SEND, "COMM_SEND_NODE"), (K_RECV, "COMM_RECV_NODE")):
            for row in np.nonzero(kind == k)[0].tolist():
                if row not in info:
                    if replay_all or k == K_COLL:
                        kind[row] = K_REPLAY
                        delay[row] = replay_ns[row]
                        replayed += 0 if replay_all else 1
                        continue
                    raise ConfigError(
                        f"{self.path} node {int(table.ids[row])}: {what} without comm_src/comm_dst/comm_tag attributes"
                    )
        mem_rows = np.nonzero(kind == K_MEM)[0]
        for row in mem_rows:
            if int(row) not in info:
                info[int(row)] = (int(table.tensor_size[row]) if table.tensor_size is not None else 0, False)
            if system.replay_only:
                kind[row] = K_REPLAY
                delay[row] = replay_ns[row]
        return info, replayed

    def _coll_info(self, attrs: dict, replay_all: bool) -> Optional[tuple]:
        """(type, size, pg name, members, involved dims) of a modelled collective, None to replay it."""
        ctype = _int(attrs.get("comm_type"), None)
        if ctype in UNSUPPORTED and not replay_all:
            self.warnings.append(
                f"{collective_name(ctype)} collective(s): ASTRA-sim does not implement them and never "
                "finishes the rank; here they are replayed from duration_micros"
            )
        if replay_all or ctype not in MODELLED or "comm_size" not in attrs:
            return None
        pg = attrs.get("pg_name")
        pg = "" if pg is None or isinstance(pg, (list, bytes)) else str(pg)
        inv = attrs.get("involved_dim")
        inv_t = tuple(bool(x) for x in inv) if isinstance(inv, list) and inv else None
        # members are filled in by resolve_groups once every rank's METADATA is known
        return (ctype, max(0, _int(attrs.get("comm_size"), 0)), pg, (), inv_t)

    def _p2p_info(self, k: int, attrs: dict, row: int) -> tuple:
        """(peer, tag, size) of the send or receive at `row`, which must name this rank as its own end."""
        rank = self.rank
        if k == K_SEND:
            node, verb, peer_key, own_key = "COMM_SEND_NODE", "send", "comm_dst", "comm_src"
        else:
            node, verb, peer_key, own_key = "COMM_RECV_NODE", "recv", "comm_src", "comm_dst"
        peer = _int(attrs.get(peer_key), None)
        own = _int(attrs.get(own_key), rank)
        if peer is None or own != rank:
            where = f"{self.path} node {int(self.ids[row])}"
            if peer is None:
                raise ConfigError(f"{where}: {node} without {peer_key}")
            raise ConfigError(f"{where}: {verb} with {own_key}={own} in rank {rank}'s trace")
        return (peer, _int(attrs.get("comm_tag"), 0), max(0, _int(attrs.get("comm_size"), 0)))

    def _layout(
        self,
        table: Any,
        kind: np.ndarray,
        delay: np.ndarray,
        types: np.ndarray,
        info: dict[int, tuple],
        replayed: int,
        compat: bool,
        slots: tuple[int, int, int],
    ) -> None:
        """The compiled arrays the engine runs on: kinds, resource slots, delays, children."""
        n = self.n
        self.replayed = replayed
        slot = np.full(n, S_COMM, dtype=np.int8)
        slot[kind == K_CPU] = S_CPU
        slot[kind == K_GPU] = S_GPU
        slot[kind == K_RECV] = S_FREE
        slot[(kind == K_REPLAY) & (types == NodeType.COMM_RECV_NODE)] = S_FREE
        if not compat:
            slot[kind == K_ZERO] = S_FREE
        self.kind = kind.tobytes()
        self.slot = slot.tobytes()
        self.delay = array("q", delay.tobytes())
        self.gpu_sum = int(delay[kind == K_GPU].sum())
        self.ptr = array("q", table.child_ptr.tobytes())
        self.cidx = array("i", table.child_idx.tobytes())
        self.info = info
        self.shareable = not any(kind == K_SEND) and not any(kind == K_RECV)
        self.static = (table.dep_count.tobytes(), np.nonzero(table.dep_count == 0)[0].tolist(), slots)
        self._reset()

    def _reset(self) -> None:
        """Fresh run-time state (dependency counts, ready heaps, free slots, times)."""
        dep_bytes, ready_rows, slots = self.static
        n = self.n
        self.left = array("i", dep_bytes)
        self.coll_seq: dict[str, int] = {}
        self.remaining = n
        self.start = array("q", bytes(8 * n))
        self.end = array("q", bytes(8 * n))
        ready: list[list[int]] = [[], [], [], []]
        sl = self.slot
        for row in ready_rows:
            ready[sl[row]].append(row)  # ascending rows: each list is already a heap
        self.ready = ready
        # Free slots per class (CPU, GPU compute, comm); "busy" is the historical name of the list.
        self.busy = [_cap(c) for c in slots]

    def for_rank(self, rank: int, path: Optional[str] = None) -> RankEngine:
        """Another rank running the same nodes (`path`: its own file, named in its messages):
        shares every read-only array, fresh state.

        Only for traces without send/recv (their peers are rank-specific); collective group
        membership is checked for the new rank.
        """
        other = object.__new__(RankEngine)
        for name in ("ids", "names", "kind", "slot", "delay", "ptr", "cidx", "info", "n", "gpu_sum", "path", "peers"):
            setattr(other, name, getattr(self, name))
        other.replayed = self.replayed
        other.warnings = self.warnings
        other.shareable = True
        other.static = self.static
        other.rank = rank
        if path is not None:
            other.path = path
        other._reset()
        return other

    def twin(
        self, rank: int, path: str, changed: dict[int, dict[str, Any]], seen: Optional[dict[int, tuple]] = None
    ) -> Optional[RankEngine]:
        """Another rank whose trace is this one's except for the communication attributes of a few
        rows (`changed`: row -> its new sparse attributes): peers, tags, sizes, process groups, as
        the ranks of one pipeline stage differ. Shares every structural array, with its own `info`;
        None when a change is not of that kind (the caller then compiles the rank's own file).
        `seen`: collective attribute dicts already read (by id; the members of a group share them)."""
        other = self.for_rank(rank, path)
        other.shareable = self.shareable
        info = dict(self.info)
        other.info = info
        seen = {} if seen is None else seen
        for row, attrs in changed.items():
            k = self.kind[row]
            item = info.get(row)
            if item is None or row in self.peers:
                return None
            if k == K_COLL:
                known = seen.get(id(attrs))
                if known is None or known[0] is not attrs:
                    known = seen[id(attrs)] = (attrs, other._coll_info(attrs, False))
                got = known[1]
                if got is None or got[0] != item[0] or got[4] != item[4]:
                    return None
                info[row] = got
            elif k in (K_SEND, K_RECV):
                info[row] = other._p2p_info(k, attrs, row)
            else:
                return None
        return other

    def resolve_groups(self, groups: GroupTable, done: dict[int, dict]) -> None:
        """Fill in the member tuple of every collective and check this rank belongs to it.

        Engines sharing one `info` dict (identical traces) resolve it once (`done` by id).
        """
        first_row: dict[str, int] = done.get(id(self.info))  # type: ignore[assignment]
        if first_row is None:
            first_row = {}
            for row, item in self.info.items():
                if len(item) == 5:
                    pg = item[2]
                    if pg not in first_row:
                        first_row[pg] = row
            members = {
                pg: groups.members(pg, f"{self.path} node {int(self.ids[row])}") for pg, row in first_row.items()
            }
            for row, item in self.info.items():
                if len(item) == 5:
                    # A named process group runs on every dimension: ASTRA-sim ignores involved_dim there.
                    inv = item[4] if item[2] in ("", "0") else None
                    self.info[row] = (item[0], item[1], item[2], members[item[2]], inv)
            done[id(self.info)] = first_row
        for row, (sends, _) in list(self.peers.items()):
            if len(sends) != len(self.info[row][3]):
                del self.peers[row]
                msg = (
                    f"all-to-all with {len(sends)} per-peer sizes in a group of {len(self.info[row][3])}: "
                    "runs as an even split of comm_size"
                )
                if msg not in self.warnings:
                    self.warnings.append(msg)
        for pg, row in first_row.items():
            item = self.info[row]
            if self.rank not in item[3]:
                raise ConfigError(
                    f"{self.path} node {int(self.ids[row])}: rank {self.rank} is not a member of process group "
                    f"{pg!r} {list(item[3])}"
                )


def needs_live(engines: list[RankEngine]) -> bool:
    """Whether any traffic could share a link with a collective: a send, or two process groups."""
    groups = set()
    for e in engines:
        if not e.shareable:  # has sends/receives
            return True
        for item in e.info.values():
            if len(item) == 5:
                groups.add(item[2] if item[2] not in ("", "0") else "")
    return len(groups) > 1


def runs_in_lines(engines: list[RankEngine]) -> bool:
    """Whether a collective leaves a dimension out (`involved_dim` with a false): its members then
    form independent lines, each of which ends without waiting for the others."""
    for e in engines:
        for item in e.info.values():
            if len(item) == 5 and item[4] is not None and not all(item[4]):
                return True
    return False


def _cap(count: int) -> int:
    """Slot capacity: 0 or less means unlimited."""
    return count if count > 0 else 1 << 60


def _int(value: Any, default: Any) -> Any:
    if value.__class__ is int:  # what attributes almost always hold
        return value
    if value is None or isinstance(value, (list, str, bytes)):
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                return default
        return default
    return int(value)

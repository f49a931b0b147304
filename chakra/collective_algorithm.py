"""Custom collective algorithms: ASTRA-sim's `*-implementation-custom` format, read, written, checked.

ASTRA-sim runs a custom collective from one Chakra ET per member, `PREFIX.<position>.et`, whose
COMM_SEND / COMM_RECV / COMP nodes *are* the algorithm: every member issues its nodes as their
data and control dependencies are met; sends and receives carry `comm_dst` / `comm_src` (ranks of
the algorithm, 0..p-1: positions in the communicator group), `comm_size` bytes and `comm_tag`; a
COMP node is a reduction lasting `duration_micros` (1 ns when 0). The collective's own size is
ignored: the bytes are the ones written in the nodes.

Our writer adds two attributes the official readers ignore, so an algorithm can be checked for
what it moves, not only for how many bytes: `chunks` (int64 list) on sends and receives names the
pieces of the buffer the message carries, and `step` the round it belongs to (for drawing). The
metadata names the collective (`collective`) and the chunk count (`chunk_count`).

`check` proves two things of an algorithm: it cannot deadlock (every receive has its send, same
size, FIFO per (source, destination, tag); no cycle through dependencies and messages) and, where
chunks are named, it moves the data its collective must (chunk provenance: which ranks' inputs a
rank holds of each chunk, evaluated along each node's ancestors only; a receive that a COMP node
depends on is reduced into the buffer, any other overwrites).
"""

from __future__ import annotations

import os
from collections import defaultdict, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Union

from chakra.errors import ConfigError
from chakra.graph import kahn
from chakra.io import rank_path, read_trace, write_rank_traces
from chakra.schema import NodeType
from chakra.schema.attrs import get_attr, get_int
from chakra.trace import Trace, make_metadata, make_node

PathLike = Union[str, os.PathLike]
SEND, RECV, COMP = "send", "recv", "comp"
COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")
_TYPES = {int(NodeType.COMM_SEND_NODE): SEND, int(NodeType.COMM_RECV_NODE): RECV, int(NodeType.COMP_NODE): COMP}
_NODE_TYPES = {v: k for k, v in _TYPES.items()}
MAX_RANKS = 4096


@dataclass
class Op:
    """One node of one member's algorithm."""

    id: int
    kind: str  # send | recv | comp
    peer: int = -1  # algorithm rank: destination of a send, source of a receive
    size: int = 0  # bytes
    tag: int = 0
    us: int = 0  # a reduction's duration (microseconds; ASTRA-sim takes 0 as 1 ns)
    deps: tuple[int, ...] = ()
    chunks: tuple[int, ...] = ()  # provenance: buffer pieces carried (our attribute)
    step: int = -1  # the round, for drawing (our attribute)

    @property
    def runtime_ns(self) -> int:
        return self.us * 1000 if self.us else 1


@dataclass
class Algorithm:
    collective: str  # one of COLLECTIVES, or "" when the files do not say
    ranks: list[list[Op]]
    chunk_count: int = 0  # pieces the buffer is cut into (0: not named)
    name: str = ""
    path: Optional[Path] = None

    @property
    def size(self) -> int:
        return len(self.ranks)

    def messages(self) -> int:
        return sum(1 for ops in self.ranks for op in ops if op.kind == SEND)

    def bytes_sent(self) -> list[int]:
        return [sum(op.size for op in ops if op.kind == SEND) for ops in self.ranks]

    def to_traces(self) -> list[Trace]:
        out = []
        for rank, ops in enumerate(self.ranks):
            nodes = []
            for op in ops:
                attrs: dict = {"is_cpu_op": False}
                if op.kind != COMP:
                    attrs.update(
                        comm_src=rank if op.kind == SEND else op.peer,
                        comm_dst=op.peer if op.kind == SEND else rank,
                        comm_size=op.size,
                        comm_tag=op.tag,
                    )
                    if op.chunks:
                        attrs["chunks"] = [int(c) for c in op.chunks]
                if op.step >= 0:
                    attrs["step"] = op.step
                name = f"{op.kind}_{op.peer}" if op.kind != COMP else "reduce"
                nodes.append(
                    make_node(op.id, name, _NODE_TYPES[op.kind], data_deps=op.deps, duration_micros=op.us, attrs=attrs)
                )
            md = make_metadata(collective=self.collective or None, chunk_count=self.chunk_count or None)
            out.append(Trace(metadata=md, nodes=nodes, rank=rank))
        return out

    def save(self, prefix: PathLike) -> list[Path]:
        """Write PREFIX.<rank>.et for every member (all or nothing)."""
        Path(prefix).parent.mkdir(parents=True, exist_ok=True)
        return write_rank_traces(prefix, self.to_traces())


def files_of(prefix: PathLike) -> list[Path]:
    out = []
    while len(out) <= MAX_RANKS:
        p = rank_path(prefix, len(out))
        if not p.is_file():
            break
        out.append(p)
    return out


def load(prefix: PathLike, ranks: Optional[int] = None) -> Algorithm:
    """Read PREFIX.0.et ... (`ranks` files, or as many as exist) as ASTRA-sim's CustomAlgorithm does."""
    if ranks is None:
        paths = files_of(prefix)
        if not paths:
            raise ConfigError(f"{rank_path(prefix, 0)}: no custom collective algorithm file (PREFIX.0.et)")
    else:
        paths = [rank_path(prefix, r) for r in range(ranks)]
        for p in paths:
            if not p.is_file():
                raise ConfigError(f"{p}: custom collective algorithm file not found (ASTRA-sim exits)")
    members: list[list[Op]] = []
    collective, chunk_count = "", 0
    for rank, path in enumerate(paths):
        trace = read_trace(path, rank=rank)
        if rank == 0 and trace.metadata is not None:
            collective = str(get_attr(trace.metadata, "collective", "") or "")
            chunk_count = int(get_attr(trace.metadata, "chunk_count", 0) or 0)
        members.append([_op(path, rank, node) for node in trace.nodes])
    return Algorithm(collective, members, chunk_count, name=Path(prefix).name, path=Path(prefix))


def _op(path: Path, rank: int, node) -> Op:  # type: ignore[no-untyped-def]
    kind = _TYPES.get(int(node.type))
    if kind is None:
        raise ConfigError(
            f"{path}: node {node.id} is {NodeType.Name(node.type)}: a custom algorithm holds only COMM_SEND, "
            "COMM_RECV and COMP nodes (ASTRA-sim never completes any other)"
        )
    deps = tuple(dict.fromkeys([*node.data_deps, *node.ctrl_deps]))
    if kind == COMP:
        return Op(int(node.id), kind, us=int(node.duration_micros), deps=deps, step=get_int(node, "step", -1))
    missing = [
        a for a in ("comm_size", "comm_tag", "comm_dst" if kind == SEND else "comm_src") if get_attr(node, a) is None
    ]
    if missing:
        raise ConfigError(f"{path}: {kind} node {node.id} lacks {', '.join(missing)} (ASTRA-sim's feeder throws)")
    peer = get_int(node, "comm_dst" if kind == SEND else "comm_src")
    chunks = get_attr(node, "chunks")
    return Op(
        int(node.id),
        kind,
        peer=peer,
        size=get_int(node, "comm_size"),
        tag=get_int(node, "comm_tag"),
        deps=deps,
        chunks=tuple(int(c) for c in chunks) if chunks else (),
        step=get_int(node, "step", -1),
    )


# ---- checks -------------------------------------------------------------------------------------


@dataclass
class Report:
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def match_messages(alg: Algorithm, report: Report) -> dict[tuple[int, int], tuple[int, int]]:
    """{(src rank, send index): (dst rank, recv index)}: the k-th send and k-th receive of one
    (source, destination, tag) meet, as ASTRA-sim's front end pairs them."""
    p = alg.size
    sends: dict[tuple, deque] = defaultdict(deque)
    recvs: dict[tuple, deque] = defaultdict(deque)
    for r, ops in enumerate(alg.ranks):
        for i, op in enumerate(ops):
            if op.kind == COMP:
                continue
            if not 0 <= op.peer < p or op.peer == r:
                report.problems.append(f"rank {r} node {op.id}: {op.kind} peer {op.peer} is not another of {p} ranks")
                continue
            key = (r, op.peer, op.tag) if op.kind == SEND else (op.peer, r, op.tag)
            (sends if op.kind == SEND else recvs)[key].append(i)
    pairs = {}
    for key in sorted(set(sends) | set(recvs)):
        s, d, tag = key
        ss, rr = sends.get(key, deque()), recvs.get(key, deque())
        for a, b in zip(ss, rr):
            if alg.ranks[s][a].size != alg.ranks[d][b].size:
                report.problems.append(
                    f"send node {alg.ranks[s][a].id} ({s}->{d}, tag {tag}) carries {alg.ranks[s][a].size} B but its "
                    f"receive node {alg.ranks[d][b].id} expects {alg.ranks[d][b].size} B (ASTRA-sim never matches them)"
                )
            pairs[(s, a)] = (d, b)
        for b in list(rr)[len(ss) :]:
            report.problems.append(
                f"rank {d} recv node {alg.ranks[d][b].id} ({s}->{d}, tag {tag}) has no send: it waits forever"
            )
        for a in list(ss)[len(rr) :]:
            report.problems.append(f"rank {s} send node {alg.ranks[s][a].id} ({s}->{d}, tag {tag}) has no receive")
    return pairs


def global_order(alg: Algorithm, report: Report, pairs: dict) -> Optional[list[tuple[int, int]]]:
    """A global order of every (rank, index) consistent with dependencies and send -> receive, or
    None (and a problem) when dependencies and messages wait on each other in a cycle."""
    index: dict[tuple[int, int], int] = {}
    nodes: list[tuple[int, int]] = []
    for r, ops in enumerate(alg.ranks):
        ids = {}
        for i, op in enumerate(ops):
            if op.id in ids:
                report.problems.append(f"rank {r}: node id {op.id} appears twice")
            ids[op.id] = i
            index[(r, i)] = len(nodes)
            nodes.append((r, i))
        for op in ops:
            for d in op.deps:
                if d not in ids:
                    report.problems.append(f"rank {r} node {op.id}: depends on absent node {d} (ASTRA-sim aborts)")
    parents: list[list[int]] = [[] for _ in nodes]
    for r, ops in enumerate(alg.ranks):
        ids = {op.id: i for i, op in enumerate(ops)}
        for i, op in enumerate(ops):
            parents[index[(r, i)]].extend(index[(r, ids[d])] for d in op.deps if d in ids)
    for (s, a), (d, b) in pairs.items():
        parents[index[(d, b)]].append(index[(s, a)])
    order, stuck = kahn(parents)
    if stuck:
        r, i = nodes[stuck[0]]
        report.problems.append(
            f"deadlock: {len(stuck)} node(s) wait on each other through dependencies and messages "
            f"(e.g. rank {r} node {alg.ranks[r][i].id})"
        )
        return None
    return [nodes[k] for k in order]


def _initial(collective: str, p: int, c: int) -> list[dict[int, frozenset]]:
    """What each rank holds before the collective: chunk -> contributing ranks."""
    if collective == "all-gather":
        k = c // p
        return [{x: frozenset([r]) for x in range(r * k, (r + 1) * k)} for r in range(p)]
    if collective == "all-to-all":  # chunk s*p + d: rank s's piece for rank d
        return [{r * p + d: frozenset([r]) for d in range(p)} for r in range(p)]
    return [{x: frozenset([r]) for x in range(c)} for r in range(p)]


def _wanted(collective: str, p: int, c: int) -> list[dict[int, frozenset]]:
    everyone = frozenset(range(p))
    if collective == "all-reduce":
        return [{x: everyone for x in range(c)} for _ in range(p)]
    if collective == "reduce-scatter":
        k = c // p
        return [{x: everyone for x in range(r * k, (r + 1) * k)} for r in range(p)]
    if collective == "all-gather":
        k = c // p
        return [{x: frozenset([x // k]) for x in range(c)} for _ in range(p)]
    return [{s * p + r: frozenset([s]) for s in range(p)} for r in range(p)]


def reduced_receives(alg: Algorithm) -> set[tuple[int, int]]:
    """(rank, recv id) of the receives a COMP node depending on them reduces into the buffer (the
    other receives copy)."""
    out = set()
    for r, ops in enumerate(alg.ranks):
        recv_ids = {op.id for op in ops if op.kind == RECV}
        for op in ops:
            if op.kind == COMP:
                out.update((r, d) for d in op.deps if d in recv_ids)
    return out


def check(alg: Algorithm, collective: Optional[str] = None) -> Report:
    """Deadlock freedom always; the data moved when the chunks are named (see module doc)."""
    report = Report()
    coll = collective or alg.collective
    p = alg.size
    pairs = match_messages(alg, report)
    order = global_order(alg, report, pairs)
    if order is None or report.problems:
        return report
    named = all(op.chunks for ops in alg.ranks for op in ops if op.kind != COMP)
    if not coll or not named or not alg.chunk_count:
        report.notes.append("no chunk names (attribute `chunks`): only matching and deadlock freedom were checked")
        return report
    if coll not in COLLECTIVES:
        report.problems.append(f"unknown collective {coll!r} (use {', '.join(COLLECTIVES)})")
        return report
    c = alg.chunk_count if coll != "all-to-all" else p * p
    reducing = coll in ("all-reduce", "reduce-scatter")
    reduced = reduced_receives(alg)
    # state after each node = the rank's input, then every ancestor's effect on it (a node sees only
    # what its dependencies guarantee has happened, whatever the timing)
    after: dict[tuple[int, int], dict[int, frozenset]] = {}
    carried: dict[tuple[int, int], dict[int, frozenset]] = {}
    init = _initial(coll, p, c)
    inverse = {v: k for k, v in pairs.items()}
    ids = [{op.id: i for i, op in enumerate(ops)} for ops in alg.ranks]
    for r, i in order:
        op = alg.ranks[r][i]
        state: dict[int, frozenset] = dict(init[r])
        for d in op.deps:
            for x, who in after[(r, ids[r][d])].items():
                state[x] = state.get(x, frozenset()) | who
        if op.kind == SEND:
            missing = [x for x in op.chunks if x not in state]
            if missing:
                report.problems.append(
                    f"rank {r} send node {op.id} sends chunk {missing[0]} it does not hold (no dependency brings it)"
                )
                return report
            carried[(r, i)] = {x: state[x] for x in op.chunks}
        elif op.kind == RECV:
            s, a = inverse[(r, i)]
            got = carried[(s, a)]
            if set(got) != set(op.chunks):
                report.problems.append(
                    f"rank {r} recv node {op.id} names chunks {sorted(op.chunks)} but its send carries {sorted(got)}"
                )
                return report
            reduce = (r, op.id) in reduced
            for x, who in got.items():
                mine = state.get(x, frozenset())
                if reduce:
                    if mine & who:
                        report.problems.append(
                            f"rank {r} recv node {op.id}: reducing chunk {x} counts rank(s) "
                            f"{sorted(mine & who)} twice (holds {sorted(mine)}, receives {sorted(who)})"
                        )
                        return report
                    state[x] = mine | who
                else:
                    state[x] = who  # a copy overwrites what the rank held
        after[(r, i)] = state
    final: list[dict[int, frozenset]] = []
    for r, ops in enumerate(alg.ranks):
        state = dict(init[r])
        for i in range(len(ops)):
            for x, who in after[(r, i)].items():
                state[x] = state.get(x, frozenset()) | who
        final.append(state)
    for r, want in enumerate(_wanted(coll, p, c)):
        for x, who in want.items():
            have = final[r].get(x, frozenset())
            if have != who:
                lack = sorted(who - have)
                report.problems.append(
                    f"rank {r} ends without chunk {x} "
                    + (
                        f"reduced from every rank (lacks ranks {lack[:8]})"
                        if reducing
                        else f"(from rank {sorted(who)[0]})"
                    )
                )
                if len(report.problems) >= 20:
                    return report
    return report

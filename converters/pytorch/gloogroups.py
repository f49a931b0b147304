"""Which process group each gloo collective ran on, found across the ranks of a job.

gloo records no process group on its calls: `c10d::allreduce_` has the group as an opaque
`<Object>` argument and there is no `record_param_comms`. What a trace does tell:

* every ProcessGroupGloo runs its collectives on worker threads of its own (`gloo:<op>` ops in
  Kineto, on `pt_gloo_runloop` threads), created when the group is: so a rank's gloo threads,
  sorted by thread id, belong to its groups in creation order (the order `process_group:init`
  lists them), each thread to one group (`monotone` below). A group's threads are not always
  consecutive ids (other threads get created between them), and a group unused in the traced
  step has none, so counting threads alone cannot say which is which;
* some calls name their group: a functional collective (`_c10d_functional::all_reduce(x, "sum",
  "3")`, what DTensor and DeviceMesh code issue) gives its `group_name`, NCCL's
  `record_param_comms` / Kineto's `Process Group Name` theirs. Their threads are pinned;
* every member of a group issues the same collectives on it, in the same order (the k-th on one
  rank meets the k-th on every other), and a collective that needs every member's data (all-reduce,
  all-gather, reduce-scatter, all-to-all, barrier) cannot end on one member before it started on
  all of them (one clock: the ranks of a gloo job recorded on one machine).

`solve` takes each rank's `Survey` (its groups, its gloo threads with their collectives in issue
order) and returns thread -> group for every rank: among the maps that are monotone, keep the
pins, and give every group the same sequence of (type, size) on all its members, the one whose
collectives overlap in time best (least time by which some member ended before another
started), then the one putting no more than a ProcessGroupGloo's two worker threads on a group,
then the one where fewest groups ran several collectives all on one thread (gloo hands each to
whichever of the two is free: k on one thread is a (1/2)^(k-1) chance, so one group's two
threads are not split over two groups), then the one using the most groups (a collective of the
world group also fits in each subgroup, so fewer groups is never evidence), then the
later-created groups (a group unused in the traced step created before the used ones).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Optional

from chakra.schema import CollectiveType

#: collectives whose end on any member needs every member to have started (time evidence)
_ALL_NEED_ALL = frozenset(
    {
        CollectiveType.ALL_REDUCE,
        CollectiveType.ALL_GATHER,
        CollectiveType.REDUCE_SCATTER,
        CollectiveType.REDUCE_SCATTER_BLOCK,
        CollectiveType.ALL_TO_ALL,
        CollectiveType.BARRIER,
    }
)
#: worker threads of a ProcessGroupGloo (its Options' default): a group shows at most this many
THREADS_PER_GROUP = 2
#: at most this many whole-job assignments are scored; past it the best found so far is kept
MAX_ASSIGNMENTS = 20000
#: per rank, at most this many thread -> group maps are considered
MAX_CANDIDATES = 50000


@dataclass
class Coll:
    """One gloo collective as the solver needs it."""

    order: int  # issue order on the rank (the call's ET id)
    coll: int  # CollectiveType
    size: int  # bytes; -1 where members may differ (all-to-all)
    start: Optional[int]  # ns, the executor's span
    end: Optional[int]
    pinned: str = ""  # the group the trace names for it, if any


@dataclass
class Survey:
    """One rank's groups (creation order) and gloo threads (tid -> its collectives)."""

    rank: int
    groups: list[tuple[str, tuple[int, ...]]]
    threads: dict[int, list[Coll]] = field(default_factory=dict)
    #: point-to-point calls without a named group: (op id, "send"/"recv", peer's group rank, tag, bytes)
    p2p: list[tuple[int, str, int, int, int]] = field(default_factory=list)

    def as_tuple(self) -> tuple:
        """Plain data, to cross a process boundary cheaply."""
        return (
            self.rank,
            [(n, list(r)) for n, r in self.groups],
            {
                t: [(c.order, int(c.coll), c.size, c.start, c.end, c.pinned) for c in cs]
                for t, cs in self.threads.items()
            },
            self.p2p,
        )

    @classmethod
    def from_tuple(cls, data: tuple) -> Survey:
        rank, groups, threads, p2p = data
        return cls(
            rank,
            [(str(n), tuple(r)) for n, r in groups],
            {int(t): [Coll(*c) for c in cs] for t, cs in threads.items()},
            [tuple(x) for x in p2p],
        )


def needs_solving(survey: Survey) -> bool:
    """True when the rank's gloo threads cannot all be placed from its own trace: some thread has
    no pinned collective and the rank has more than one group."""
    if len(survey.groups) < 2:
        return False
    if any(len(set(p2p_candidates(survey, peer).values())) > 1 for _, _, peer, _, _ in survey.p2p):
        return True
    return any(not any(c.pinned for c in cs) for cs in survey.threads.values())


def p2p_candidates(survey: Survey, peer: int) -> dict[str, int]:
    """pg_name -> the global rank a point-to-point peer's group rank stands for, in each of the
    rank's groups that has that many members."""
    return {name: ranks[peer] for name, ranks in survey.groups if 0 <= peer < len(ranks) and ranks[peer] != survey.rank}


def solve_p2p(surveys: Sequence[Survey]) -> dict[int, dict[int, str]]:
    """rank -> (op id -> pg_name) for point-to-point calls whose group the trace does not name.

    gloo runs send/recv on the calling thread, so only the peer tells: a send to group rank q on
    group g goes to global rank g[q], which must post a receive from r's rank in g with the same
    tag and size. Each call takes the group whose reading has such a counterpart (the first in
    creation order where several do and they name the same peer)."""
    by_rank = {s.rank: s for s in surveys}
    offers: dict[tuple, int] = Counter()
    for s in surveys:
        for _, kind, peer, tag, size in s.p2p:
            for name, other in p2p_candidates(s, peer).items():
                offers[(s.rank, other, name, kind, tag, size)] += 1
    out: dict[int, dict[int, str]] = {}
    for s in surveys:
        placed = out.setdefault(s.rank, {})
        for op_id, kind, peer, tag, size in s.p2p:
            cands = p2p_candidates(s, peer)
            want = "recv" if kind == "send" else "send"
            fits = [
                n for n, other in cands.items() if other in by_rank and offers.get((other, s.rank, n, want, tag, size))
            ]
            if fits:
                placed[op_id] = fits[0]
    return out


def _pins(survey: Survey, names: Sequence[str]) -> dict[int, int]:
    """thread -> index of the group its pinned collectives name (threads naming two groups, or a
    group the rank does not list, are left free: the trace contradicts itself there)."""
    out: dict[int, int] = {}
    for tid, colls in survey.threads.items():
        named = {c.pinned for c in colls if c.pinned}
        if len(named) == 1:
            (name,) = named
            if name in names:
                out[tid] = names.index(name)
    return out


def candidates(survey: Survey) -> list[tuple[int, ...]]:
    """Every monotone thread -> group map (group indices, threads in tid order) keeping the pins."""
    names = [n for n, _ in survey.groups]
    tids = sorted(survey.threads)
    pins = _pins(survey, names)
    out: list[tuple[int, ...]] = []

    def walk(i: int, low: int, acc: list[int]) -> None:
        if len(out) >= MAX_CANDIDATES:
            return
        if i == len(tids):
            out.append(tuple(acc))
            return
        pinned = pins.get(tids[i])
        choices = [pinned] if pinned is not None else range(low, len(names))
        for g in choices:
            if g < low:
                continue
            acc.append(g)
            walk(i + 1, g, acc)
            acc.pop()

    walk(0, 0, [])
    return out


def _sequences(survey: Survey, cand: tuple[int, ...]) -> dict[str, tuple[Coll, ...]]:
    """group -> the collectives the map puts on it, in issue order (every group of the rank, [] if none)."""
    tids = sorted(survey.threads)
    by_group: dict[str, list[Coll]] = {n: [] for n, _ in survey.groups}
    for tid, g in zip(tids, cand):
        by_group[survey.groups[g][0]].extend(survey.threads[tid])
    return {n: tuple(sorted(cs, key=lambda c: c.order)) for n, cs in by_group.items()}


def _signature(colls: tuple[Coll, ...]) -> tuple:
    return tuple((c.coll, c.size) for c in colls)


def solve(surveys: Sequence[Survey]) -> tuple[dict[int, dict[int, str]], list[str]]:
    """rank -> (thread -> pg_name) for every surveyed rank, and warnings (ambiguity, no fit)."""
    warnings: list[str] = []
    by_rank = {s.rank: s for s in surveys}
    members: dict[str, set[int]] = {}
    for s in surveys:
        for name, _ in s.groups:
            members.setdefault(name, set()).add(s.rank)
    # per rank: candidate -> (group -> sequence)
    cands: dict[int, list[tuple[tuple[int, ...], dict[str, tuple[Coll, ...]], dict[str, tuple]]]] = {}
    for s in surveys:
        found = candidates(s)
        if len(found) >= MAX_CANDIDATES:
            warnings.append(
                f"rank {s.rank}: {len(s.threads)} gloo threads on {len(s.groups)} groups: too many ways to place "
                f"them; only the first {MAX_CANDIDATES} tried"
            )
        rows = []
        for c in found:
            seqs = _sequences(s, c)
            rows.append((c, seqs, {n: _signature(q) for n, q in seqs.items()}))
        cands[s.rank] = rows
    _prune(cands, members)
    empty = [r for r, rows in cands.items() if not rows]
    if empty:
        warnings.append(
            "no placement of gloo collectives on process groups gives every group the same collectives on all "
            f"its members (ranks {empty[:8]}); each rank placed on its own"
        )
        return {s.rank: _alone(s) for s in surveys}, warnings
    best, ties, truncated = _search(cands, members, by_rank)
    if truncated:
        warnings.append(f"more than {MAX_ASSIGNMENTS} placements of gloo collectives fit; the best of the first kept")
    if ties > 1:
        warnings.append(f"{ties} placements of gloo collectives on process groups fit the trace equally well; one kept")
    out: dict[int, dict[int, str]] = {}
    for rank, idx in best.items():
        s = by_rank[rank]
        cand = cands[rank][idx][0]
        out[rank] = {tid: s.groups[g][0] for tid, g in zip(sorted(s.threads), cand)}
    return out, warnings


def _alone(survey: Survey) -> dict[int, str]:
    """Without the other ranks: the pins, and a thread between two pins of one group joins it."""
    names = [n for n, _ in survey.groups]
    pins = _pins(survey, names)
    return {tid: names[g] for tid, g in pins.items()}


def _prune(cands: dict, members: dict[str, set[int]]) -> None:
    """Drop every candidate of a rank that puts on some group a sequence no candidate of another
    member puts there, until nothing changes (arc consistency)."""
    changed = True
    while changed:
        changed = False
        offered: dict[tuple[int, str], set] = {}
        for rank, rows in cands.items():
            for _, _, sigs in rows:
                for name, sig in sigs.items():
                    offered.setdefault((rank, name), set()).add(sig)
        for rank, rows in cands.items():
            keep = []
            for row in rows:
                sigs = row[2]
                ok = all(
                    sig in offered.get((m, name), {sig})
                    for name, sig in sigs.items()
                    for m in members.get(name, ())
                    if m != rank and m in cands
                )
                if ok:
                    keep.append(row)
            if len(keep) != len(rows):
                cands[rank] = keep
                changed = True


def _search(cands: dict, members: dict[str, set[int]], by_rank: dict[int, Survey]) -> tuple[dict[int, int], int, bool]:
    """The best whole-job assignment (rank -> candidate index), how many tie with it, whether the
    enumeration stopped early."""
    ranks = sorted(cands, key=lambda r: (len(cands[r]), r))
    best_key: Optional[tuple] = None
    best: dict[int, int] = {}
    ties = 0
    seen = 0
    fixed: dict[str, tuple] = {}
    chosen: dict[int, int] = {}

    def score() -> tuple:
        overlap = 0
        groups_used = 0
        lateness = 0
        spans: dict[str, list[tuple[Coll, ...]]] = {}
        overfull = lonely = 0
        for rank, idx in chosen.items():
            cand, seqs, _ = cands[rank][idx]
            s = by_rank[rank]
            counts = Counter(cand)
            groups_used += len(counts)
            for g, n in counts.items():
                overfull += max(0, n - THREADS_PER_GROUP)
                if n == 1:  # all of a group's collectives on one of its threads: (1/2)^(k-1) by chance
                    lonely += len(seqs[s.groups[g][0]]) - 1
            lateness -= sum(cand)
            for name, seq in seqs.items():
                if seq:
                    spans.setdefault(name, []).append(seq)
        for seqs in spans.values():
            if len(seqs) < 2:
                continue
            for k in range(len(seqs[0])):
                colls = [q[k] for q in seqs]
                if colls[0].coll not in _ALL_NEED_ALL or any(c.start is None or c.end is None for c in colls):
                    continue
                gap = max(c.start for c in colls) - min(c.end for c in colls)  # type: ignore[type-var]
                if gap > 0:
                    overlap += gap
        return (overlap, overfull, lonely, -groups_used, lateness)

    def walk(i: int) -> bool:
        nonlocal best_key, best, ties, seen
        if i == len(ranks):
            seen += 1
            key = score()
            if best_key is None or key < best_key:
                best_key, best, ties = key, dict(chosen), 1
            elif key == best_key:
                ties += 1
            return seen < MAX_ASSIGNMENTS
        rank = ranks[i]
        for idx, (_, _, sigs) in enumerate(cands[rank]):
            clash = False
            added = []
            for name, sig in sigs.items():
                have = fixed.get(name)
                if have is None:
                    if len(members.get(name, ())) > 1:
                        fixed[name] = sig
                        added.append(name)
                elif have != sig:
                    clash = True
                    break
            if not clash:
                chosen[rank] = idx
                if not walk(i + 1):
                    for name in added:
                        del fixed[name]
                    return False
                del chosen[rank]
            for name in added:
                del fixed[name]
        return True

    complete = walk(0)
    return best, ties, not complete


__all__ = ["Coll", "Survey", "candidates", "needs_solving", "p2p_candidates", "solve", "solve_p2p"]

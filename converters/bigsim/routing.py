"""Where BigSim messages go: destination procs of a BgMsgEntry, and the sender/receiver matching.

A message entry names a destination *node* and core (`tID`); procs are `node*numWth + core`
(docs/input-formats.md §D.6, §D.8). Broadcasts are one entry that several procs receive:

* `dstNode == -1`: every proc (with `tID >= 0`: that core of every node);
* `dstNode <= -100`: every proc except node `N = -100 - dstNode` (`tID == -1`) or except only
  core `tID` of node N — the rule text2log uses and the sample logs confirm.
* unicast with `tID == -1` (any worker of the node): whichever core logged the receiving SEB.

A receiving SEB names its message by `(sender proc, msgID)`; `match_messages` pairs every
(entry, destination) with the SEBs it triggered on that destination.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Optional

from chakra.converters.bigsim.model import SLOTS, MsgEntry, Seb

BROADCAST_ALL = -1
BROADCAST_EXCEPT_BASE = -100


def expected_destinations(
    m: MsgEntry, num_wth: int, total_procs: int, node_receivers: Optional[Iterable[int]] = None
) -> list[int]:
    """Destination procs of entry `m` on a machine of `total_procs` procs, `num_wth` per node.

    `node_receivers` are the procs that logged an SEB for this message; they settle a unicast to
    "any core" (`tID == -1`) of a node. Procs outside the machine are returned as is, for the
    caller to report.
    """
    d, tid, w = m.dst_node, m.tid, num_wth
    if d >= 0:
        if tid >= 0:
            return [d * w + tid]
        cores = sorted(q for q in (node_receivers or ()) if q // w == d)
        return cores[:1] if cores else [d * w]
    if d == BROADCAST_ALL:
        if tid >= 0:
            return [n * w + tid for n in range(total_procs // w)]
        return list(range(total_procs))
    if d <= BROADCAST_EXCEPT_BASE:
        skip_node = BROADCAST_EXCEPT_BASE - d
        if tid >= 0:
            skip = skip_node * w + tid
            return [q for q in range(total_procs) if q != skip]
        return [q for q in range(total_procs) if q // w != skip_node]
    raise ValueError(f"dstNode {d} is neither a node (>= 0), -1 nor <= -100")


@dataclass(**SLOTS)
class Delivery:
    """One message copy: entry `entry` of SEB `seb` on proc `src`, delivered to proc `dst`."""

    src: int
    seb: int
    entry: int
    dst: int
    msg: MsgEntry
    targets: list[int] = field(default_factory=list)  # SEB indices on dst it triggered


@dataclass
class Matching:
    deliveries: list[Delivery]
    #: (proc, seb index) of SEBs naming a message no entry delivers to their proc.
    unmatched_receivers: list[tuple[int, int]]
    #: deliveries whose destination logged no SEB for the message.
    undelivered: int
    #: deliveries to procs beyond the machine.
    out_of_range: list[Delivery]


def receivers_index(timelines: dict[int, list[Seb]]) -> dict[tuple[int, int], list[tuple[int, int]]]:
    """(sender proc, msgID) -> [(receiving proc, SEB index)] in proc, then timeline order."""
    index: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for proc, sebs in timelines.items():
        for i, s in enumerate(sebs):
            if s.src_pe >= 0:
                index.setdefault((s.src_pe, s.src_msg_id), []).append((proc, i))
    return index


def iter_entries(timelines: dict[int, list[Seb]]) -> Iterator[tuple[int, int, int, MsgEntry]]:
    for proc, sebs in timelines.items():
        for i, s in enumerate(sebs):
            for j, m in enumerate(s.msgs):
                yield proc, i, j, m


def match_messages(timelines: dict[int, list[Seb]], num_wth: int, total_procs: int) -> Matching:
    index = receivers_index(timelines)
    deliveries: list[Delivery] = []
    out_of_range: list[Delivery] = []
    claimed: set[tuple[int, int]] = set()
    undelivered = 0
    for proc, i, j, m in iter_entries(timelines):
        recv = index.get((proc, m.msg_id), ())
        by_proc: dict[int, list[int]] = {}
        for q, k in recv:
            by_proc.setdefault(q, []).append(k)
        for dst in expected_destinations(m, num_wth, total_procs, by_proc):
            dv = Delivery(proc, i, j, dst, m)
            if not 0 <= dst < total_procs:
                out_of_range.append(dv)
                continue
            targets = by_proc.get(dst)
            if targets:
                dv.targets = targets
                claimed.update((dst, k) for k in targets)
            else:
                undelivered += 1
            deliveries.append(dv)
    unmatched = sorted(rk for recv in index.values() for rk in recv if rk not in claimed)
    return Matching(deliveries, unmatched, undelivered, out_of_range)


def infer_num_wth(timelines: dict[int, list[Seb]], total_procs: int) -> Optional[int]:
    """Workers per node that best explains who received each message (detail dumps lack it).

    Tries every divisor W of the proc count and keeps those under which every receiver of every
    entry is one of the entry's destinations; among those, the one that also leaves the fewest
    destinations without a receiver (ties: smallest W). None if no message tells them apart.
    """
    index = receivers_index(timelines)
    # A multicast is several entries sharing one msgID: compare receivers with their union.
    groups: dict[tuple[int, int], list[MsgEntry]] = {}
    for p, _, _, m in iter_entries(timelines):
        groups.setdefault((p, m.msg_id), []).append(m)
    if not groups or total_procs <= 0:
        return None
    scores: dict[int, int] = {}
    divisors = [w for w in range(1, total_procs + 1) if total_procs % w == 0]
    for w in divisors:
        missing = 0
        ok = True
        for key, msgs in groups.items():
            got = {q for q, _ in index.get(key, ())}
            dests: set[int] = set()
            for m in msgs:
                dests.update(expected_destinations(m, w, total_procs, got))
            if not got <= dests:
                ok = False
                break
            missing += len(dests - got)
        if ok:
            scores[w] = missing
    if not scores:
        return None
    best = min(scores.values())
    candidates = [w for w, s in scores.items() if s == best]
    if len(scores) == len(divisors) and len(set(scores.values())) == 1:
        return None  # nothing distinguishes the candidates
    return min(candidates)

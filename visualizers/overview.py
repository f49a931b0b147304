"""The overview of a big trace: steps, phases and repeated blocks, with threads and streams as lanes.

A training step recorded with PyTorch holds tens of thousands of nodes; drawn one box per operator
it is still thousands of boxes. What a person looks for first is the shape of the step: which
profiler steps there are, where forward, backward and the optimizer run, which layers repeat, on
which host thread and GPU stream the time goes, and where the ranks talk to each other. This module
gives every node a key at five levels of detail:

- `step`: one box per profiler step and lane (for traces of many steps);
- `phase`: one box per run of one phase (forward, backward, optimizer, ...) in each lane;
- `block`: phases cut into their repeated blocks (the layers of a model, found as the longest
  repetition of the same operator sequence) and the operators before and after them;
- `op`: one box per top-level operator (with all it calls and launches);
- `node`: one box per node.

Lanes are the host threads (`tid`), the GPU streams (`stream`) and a communication lane. A GPU
kernel or a collective takes the key of the host operator that launched it (`launcher`, else its
call-tree parent), so the GPU lane shows the same phases and blocks as the host lane above it.
Steps come from `ProfilerStep#N` regions: by call tree on their own thread, by time on the others.

The finest level that fits the box budget is drawn (operators only when they take at most half
of it; phases open into blocks as far as the budget goes); `--expand REGEX` opens the boxes whose
title matches one level further (repeatable), so any box can be looked into without losing the rest.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from chakra.schema import NodeType
from chakra.schema.attrs import attr_value
from chakra.trace import Trace
from chakra.visualizers.graph_formats import fmt_us
from chakra.visualizers.grouping import IDLE_NAMES, CallTree, Plan, is_annotation, is_wrapper

LEVELS = ("step", "phase", "block", "op", "node")
STEP, PHASE, BLOCK, OP, NODE = range(5)

_STEP_RE = re.compile(r"^ProfilerStep#\d+$")
_BACKWARD_OP_RE = re.compile(r"^autograd::engine::evaluate_function|Backward\d*$|^torch::autograd::")
_AUTOGRAD_PREFIX = "autograd::engine::evaluate_function: "
_FACTS = frozenset({"is_cpu_op", "tid", "stream", "launcher", "gap_of", "queue_of", "inclusive_dur"})
_COMM_TYPES = frozenset({int(NodeType.COMM_COLL_NODE), int(NodeType.COMM_SEND_NODE), int(NodeType.COMM_RECV_NODE)})
#: Shortest repeated operator sequence taken for a block (shorter repeats are loops, not layers).
MIN_BLOCK_OPS = 3
#: Phases other than forward and backward open into their blocks only when they have this many at most.
MAX_OTHER_BLOCKS = 8
#: Longest block looked for (a transformer layer is a few dozen top-level operators).
MAX_BLOCK_OPS = 400

# Phase names, in the order a step runs them.
FORWARD, BACKWARD, OPTIMIZER, ZERO_GRAD, AFTER = "forward", "backward", "optimizer", "zero_grad", "other"


def _phase_of_annotation(name: str) -> Optional[str]:
    """The phase a region's name declares: `Optimizer.step#AdamW.step`, `## backward ##`, `DDP.forward`."""
    low = name.lower()
    if "zero_grad" in low:
        return ZERO_GRAD
    if "optimizer" in low or low.startswith("## optim"):
        return OPTIMIZER
    if "backward" in low:
        return BACKWARD
    if "forward" in low:
        return FORWARD
    return None


def short_op(name: str, width: int = 28) -> str:
    """`aten::layer_norm` -> `layer_norm`, `autograd::engine::evaluate_function: MmBackward0` ->
    `MmBackward0`, `torch.distributed.ddp.reducer::copy_bucket_to_grad` -> `copy_bucket_to_grad`."""
    if name.startswith(_AUTOGRAD_PREFIX):
        name = name[len(_AUTOGRAD_PREFIX) :]
    head, sep, tail = name.rpartition("::")
    if sep and tail and "(" not in head:
        name = tail
    return name if len(name) <= width else name[: width - 1] + "…"


def find_repeat(seq: Sequence[Any], min_len: int = MIN_BLOCK_OPS) -> Optional[tuple[int, int, int]]:
    """(start, period, count) of the repetition of one subsequence that covers the most items.

    Consecutive copies only (a layer stack), count >= 2, period >= `min_len`; ties go to more copies.
    O(n * MAX_BLOCK_OPS) over the top-level operators of one phase (hundreds), not over nodes.
    """
    n = len(seq)
    best: Optional[tuple[int, int, int]] = None
    best_score = (0, 0)
    for p in range(min_len, min(n // 2, MAX_BLOCK_OPS) + 1):
        run = 0
        # run = how many j in a row satisfy seq[j] == seq[j + p]; a run of r >= p gives r // p + 1 copies.
        for j in range(n - p):
            if seq[j] == seq[j + p]:
                run += 1
                continue
            if run >= p:
                count = run // p + 1
                score = (count * p, count)
                if score > best_score:
                    best_score, best = score, (j - run, p, count)
            run = 0
        if run >= p:
            count = run // p + 1
            score = (count * p, count)
            if score > best_score:
                best_score, best = score, (n - p - run, p, count)
    return best


#: A thread or stream with fewer than this share of a rank's nodes shares one lane with the others like it.
MINOR_LANE_SHARE = 0.02


def _merge_minor_lanes(lanes: list[tuple[str, int]]) -> tuple[list[tuple[str, int]], dict[tuple[str, int], list[int]]]:
    """Put the small threads and streams of a rank (gloo workers, side streams) in one lane per kind.

    Each would be a column of one or two boxes; together they say "some work ran elsewhere" in one.
    Returns the new lanes and, for each merged lane, the thread ids or streams it holds.
    """
    counts = Counter(lanes)
    limit = MINOR_LANE_SHARE * len(lanes)
    minor = {lane for lane, c in counts.items() if lane[0] in ("thread", "stream") and c < limit}
    merged: dict[tuple[str, int], list[int]] = {}
    for kind in ("thread", "stream"):
        members = sorted(v for k, v in minor if k == kind)
        if len(members) > 1:
            merged[(kind, -1)] = members
    if not merged:
        return lanes, {}
    return [(lane[0], -1) if lane in minor and (lane[0], -1) in merged else lane for lane in lanes], merged


def lane_label(kind: str, value: int, autograd: bool = False) -> str:
    if kind == "thread":
        return f"CPU thread {value}" + (" (autograd)" if autograd else "")
    if kind == "stream":
        return f"GPU stream {value}"
    if kind == "gpu":
        return "GPU"
    return "communication"


@dataclass
class Overview:
    """Per node index of one trace: its lane, step, and key and title at each level."""

    lanes: list[tuple[str, int]]
    lane_names: dict[tuple[str, int], str]
    steps: list[Optional[int]]  # step annotation id, or None
    step_names: dict[int, str]
    keys: list[tuple[Any, ...]]  # (step, phase, block, op, node) keys
    titles: dict[Any, str]
    details: dict[Any, str] = field(default_factory=dict)
    owners: list[int] = field(default_factory=list)  # index of the node a gap or queue belongs to
    blocks: dict[Any, int] = field(default_factory=dict)  # phase key -> how many pieces its blocks cut it in


def _facts(trace: Trace) -> list[dict[str, Any]]:
    out = []
    wanted = _FACTS
    for n in trace.nodes:
        out.append({a.name: attr_value(a) for a in n.attr if a.name in wanted})
    return out


def analyse(
    trace: Trace, tree: CallTree, chains: dict[int, tuple[int, ...]], top: dict[int, Optional[int]]
) -> Overview:
    """Lanes, steps, phases and blocks of every node of one trace (see the module docstring)."""
    nodes = trace.nodes
    facts = _facts(trace)
    index = {n.id: i for i, n in enumerate(nodes)}
    names = tree.names

    # Owners: a `gap` belongs to its operator, a `queue` to the GPU op it waits for.
    def find_owner(i: int) -> int:
        for attr in ("gap_of", "queue_of"):
            o = facts[i].get(attr)
            if isinstance(o, int) and o in index and index[o] != i:
                return index[o]
        return i

    owners = [find_owner(i) for i in range(len(nodes))]
    owner = owners.__getitem__

    # Lanes.
    lanes: list[tuple[str, int]] = []
    for i in range(len(nodes)):
        o = owner(i)
        f, m = facts[o], nodes[o]
        if m.type in _COMM_TYPES:
            lanes.append(("comm", 0))
        elif f.get("is_cpu_op") is False or (f.get("is_cpu_op") is None and "launcher" in f):
            stream = f.get("stream")
            lanes.append(("stream", stream) if isinstance(stream, int) else ("gpu", 0))
        else:
            tid = f.get("tid")
            if not isinstance(tid, int):
                # the converter's `idle` node has no thread: it follows the node before it
                before = [index[d] for d in (*m.ctrl_deps, *m.data_deps) if index.get(d, len(lanes)) < len(lanes)]
                lanes.append(lanes[before[0]] if before else ("thread", 0))
                continue
            lanes.append(("thread", tid))
    lanes, merged = _merge_minor_lanes(lanes)

    # The host operator each node counts under: its top-level operator; kernels and collectives
    # that of their launcher (or call-tree parent), gaps and queues that of their owner.
    def host_top(i: int) -> Optional[int]:
        o = owner(i)
        f = facts[o]
        launcher = f.get("launcher")
        if isinstance(launcher, int) and launcher in index:
            return top.get(launcher)
        nid = nodes[o].id
        t = top.get(nid)
        if t is not None:
            return t
        if nodes[o].type in _COMM_TYPES:  # our converter: the collective depends on the op issuing it
            for d in nodes[o].data_deps:
                j = index.get(d)
                if j is not None and lanes[j][0] == "thread":
                    return top.get(nodes[owner(j)].id)
        return None

    anchors = [host_top(i) for i in range(len(nodes))]

    # Steps: ProfilerStep regions by call tree, else by the time of the node's anchor.
    step_ids = [n.id for n in nodes if _STEP_RE.match(n.name)]
    step_names = {s: names[s] for s in step_ids}
    spans = []
    for s in step_ids:
        i = index[s]
        incl = facts[i].get("inclusive_dur")
        length = incl if isinstance(incl, int) and incl > 0 else nodes[i].duration_micros
        if nodes[i].start_time_micros:
            spans.append((nodes[i].start_time_micros, nodes[i].start_time_micros + length, s))
    spans.sort()
    for start, end, s in spans:  # the step's wall time is what one reads first
        step_names[s] = f"{names[s]} · {fmt_us(end - start)}"
    starts = [s[0] for s in spans]
    step_set = set(step_ids)

    def step_of(i: int) -> Optional[int]:
        a = anchors[i]
        nid = a if a is not None else nodes[owner(i)].id
        for c in chains.get(nid, ()):
            if c in step_set:
                return c
        t = nodes[index[nid]].start_time_micros if nid in index else 0
        if spans and t:
            k = bisect.bisect_right(starts, t) - 1
            if k >= 0 and t < spans[k][1]:
                return spans[k][2]
        return None

    steps = [step_of(i) for i in range(len(nodes))]

    # Phases of top-level host operators, then runs of one phase per (lane, step), then blocks.
    tops: dict[int, int] = {}  # top op id -> index
    for i in range(len(nodes)):
        a = anchors[i]
        if a is not None and a not in tops and a in index:
            tops[a] = index[a]
    last_backward: dict[Optional[int], int] = {}
    declared: dict[int, Optional[str]] = {}
    for t, i in tops.items():
        ph = None
        for c in reversed(chains.get(t, ())):
            ph = _phase_of_annotation(names[c])
            if ph is not None:
                break
        if ph is None and _BACKWARD_OP_RE.search(names[t]):
            ph = BACKWARD
        declared[t] = ph
        if ph == BACKWARD:
            st = steps[i]
            last_backward[st] = max(last_backward.get(st, 0), nodes[i].start_time_micros)
    phase_of_top: dict[int, str] = {}
    for t, i in tops.items():
        ph = declared[t]
        if ph is None:
            lb = last_backward.get(steps[i])
            ph = AFTER if lb is not None and nodes[i].start_time_micros > lb else FORWARD
        phase_of_top[t] = ph
    per_lane = Counter(lanes[i] for i in tops.values())
    backward_per_lane = Counter(lanes[i] for t, i in tops.items() if phase_of_top[t] == BACKWARD)
    autograd_lanes = {lane for lane, c in backward_per_lane.items() if c >= 0.9 * per_lane[lane]}
    by_lane: dict[tuple[Any, ...], list[int]] = defaultdict(list)
    for t, i in tops.items():
        by_lane[(lanes[i],)].append(t)
    key_of_top: dict[int, tuple[Any, Any, Any]] = {}
    titles: dict[Any, str] = {}
    details: dict[Any, str] = {}
    blocks: dict[Any, int] = {}
    run_no = 0
    for ts in by_lane.values():
        ts.sort(key=lambda t: (nodes[tops[t]].start_time_micros, tops[t]))
        runs: list[list[int]] = []
        prev = None
        for t in ts:
            mark = (steps[tops[t]], phase_of_top[t])
            if mark != prev:
                runs.append([])
                prev = mark
            runs[-1].append(t)
        for run in runs:
            run_no += 1
            phase = phase_of_top[run[0]]
            phase_key = ("p", run_no)
            titles[phase_key] = phase
            details[phase_key] = _op_mix([names[t] for t in run])
            seq = [short_op(names[t]) for t in run]
            rep = find_repeat(seq) if len(run) >= 2 * MIN_BLOCK_OPS else None
            pieces: list[tuple[int, int, str]] = []
            if rep is None:
                pieces.append((0, len(run), phase))
            else:
                s0, p, count = rep
                if s0 > 0:
                    pieces.append((0, s0, f"{phase}: {seq[0]} … {seq[s0 - 1]}" if s0 > 1 else f"{phase}: {seq[0]}"))
                for k in range(count):
                    pieces.append((s0 + k * p, s0 + (k + 1) * p, f"{phase} block {k + 1}/{count}"))
                end = s0 + count * p
                if end < len(run):
                    tail = seq[end:]
                    pieces.append(
                        (end, len(run), f"{phase}: {tail[0]} … {tail[-1]}" if len(tail) > 1 else f"{phase}: {tail[0]}")
                    )
            blocks[phase_key] = len(pieces)
            for b, (lo, hi, title) in enumerate(pieces):
                block_key = ("b", run_no, b)
                titles[block_key] = title
                details[block_key] = _op_mix([names[t] for t in run[lo:hi]])
                for t in run[lo:hi]:
                    op_key = ("o", t)
                    titles[op_key] = names[t]
                    key_of_top[t] = (phase_key, block_key, op_key)

    # Every node's keys; nodes with no host operator (regions, roots) take their lane neighbour's.
    keys: list[Any] = [None] * len(nodes)
    for i, n in enumerate(nodes):
        a = anchors[i]
        k = key_of_top.get(a) if a is not None else None
        if k is not None:
            keys[i] = (*k, ("n", n.id))
            titles.setdefault(("n", n.id), n.name)
    # A region's head (ProfilerStep#2) joins the box after it, a trailing gap the box before it:
    # the neighbour in the same lane and step, the earlier one first.
    order = sorted(range(len(nodes)), key=lambda i: (nodes[i].start_time_micros, i))
    before: dict[int, Any] = {}
    after: dict[int, Any] = {}
    for seq, found in ((order, before), (order[::-1], after)):
        last: dict[tuple[Any, ...], Any] = {}
        for i in seq:
            where = (lanes[i], steps[i])
            if keys[i] is not None:
                last[where] = keys[i]
            elif where in last:
                found[i] = last[where]
    pending: dict[tuple[str, int], list[int]] = defaultdict(list)
    for i in order:
        if keys[i] is None:
            near = before.get(i, after.get(i))
            if near is not None:
                keys[i] = (*near[:3], ("n", nodes[i].id))
            else:
                pending[lanes[i]].append(i)
    for lane, left in pending.items():  # a lane with no operator at all: one box per lane
        for j in left:
            name = nodes[j].name
            keys[j] = (("l", lane), ("l", lane), ("l", lane), ("n", nodes[j].id))
            titles[("l", lane)] = "regions" if (is_annotation(name) or is_wrapper(name)) else name
    for n in nodes:
        titles.setdefault(("n", n.id), n.name)
    # The coarsest level: one box per step and lane (for a trace of many steps).
    for i in range(len(nodes)):
        keys[i] = (("s", steps[i]), *keys[i])
    for s in set(steps):
        titles[("s", s)] = step_names[s] if s is not None else "outside steps"
    lane_names = {lane: lane_label(lane[0], lane[1], lane in autograd_lanes) for lane in set(lanes)}
    for lane, members in merged.items():
        what = "CPU threads" if lane[0] == "thread" else "GPU streams"
        lane_names[lane] = f"{what} {', '.join(map(str, members[:6]))}{', …' if len(members) > 6 else ''}"
    return Overview(lanes, lane_names, steps, step_names, keys, titles, details, owners, blocks)


def _op_mix(names: list[str], most: int = 3) -> str:
    """`linear ×6, layer_norm ×2, add ×2 …` for a box of operators (idle nodes left out)."""
    counts = Counter(short_op(n) for n in names if n not in IDLE_NAMES)
    parts = [f"{n} ×{c}" if c > 1 else n for n, c in counts.most_common(most)]
    if len(counts) > most:
        parts.append("…")
    return ", ".join(parts)


def analysis(trace: Trace, tree: CallTree, memo: dict) -> Overview:
    """The overview analysis of a trace, made once per drawing (`memo` from `grouping.plan_groups`)."""
    if "overview" not in memo:
        if "chains" not in memo:
            memo["chains"] = tree.annotation_chains() if tree.parent else {}
        if "top" not in memo:
            memo["top"] = tree.top_ops() if tree.parent else {}
        memo["overview"] = analyse(trace, tree, memo["chains"], memo["top"])
    return memo["overview"]


def step_matches(pattern: str) -> re.Pattern[str]:
    """`--step 2` means ProfilerStep#2 exactly; anything else is a regex on the step's name."""
    if pattern.strip().isdigit():
        return re.compile(rf"^ProfilerStep#{int(pattern)}$")
    return re.compile(pattern)


def in_steps(trace: Trace, tree: CallTree, memo: dict, kept: list[int], pattern: re.Pattern[str]) -> list[int]:
    """The kept nodes that belong to a profiler step whose name matches (as the overview assigns them)."""
    ov = analysis(trace, tree, memo)
    names = {s: n.split(" · ")[0] for s, n in ov.step_names.items()}
    return [i for i in kept if ov.steps[i] is not None and pattern.search(names[ov.steps[i]])]


def plan_overview(
    trace: Trace,
    kept: list[int],
    target: int,
    expand: Sequence[re.Pattern[str]],
    tree: CallTree,
    memo: dict,
) -> Plan:
    """The plan of the overview: the finest level within `target` boxes, then `expand` opens boxes."""
    ov = analysis(trace, tree, memo)
    nodes = trace.nodes

    def box_key(i: int, level: int) -> tuple[Any, ...]:
        k = ov.keys[i][level]
        if level < NODE and nodes[i].type in _COMM_TYPES and ov.lanes[i][0] == "comm":
            # Collectives and messages keep their own boxes while they are few: they are what links ranks.
            return (ov.lanes[i], ov.steps[i], k, "comm")
        return (ov.lanes[i], ov.steps[i], k)

    counts: dict[int, int] = {}

    def count(lv: int) -> int:
        if lv not in counts:
            counts[lv] = len({box_key(i, lv) for i in kept})
        return counts[lv]

    # Operators only when they are few: past half the budget, phases and their blocks read better.
    limits = {NODE: target, OP: target // 2, PHASE: target}
    level = next((lv for lv in (NODE, OP, PHASE) if count(lv) <= limits[lv]), STEP)
    opened = _open_phases(ov, kept, box_key, target) if level == PHASE else set()
    comm_boxes = len({box_key(i, level) for i in kept if nodes[i].type in _COMM_TYPES})
    keys, labels, paths = [], [], []
    cluster_ids: dict[Any, int] = {}
    cluster_names: dict[int, str] = {}

    def cluster(what: Any, name: str) -> int:
        c = cluster_ids.get(what)
        if c is None:
            c = cluster_ids[what] = -(len(cluster_ids) + 1)
            cluster_names[c] = name
        return c

    details: dict[Any, str] = {}
    lane_ids: dict[int, str] = {}
    for i in kept:
        lv = BLOCK if level == PHASE and ov.keys[i][PHASE] in opened else level
        while lv < NODE and expand and any(p.search(ov.titles[ov.keys[i][lv]]) for p in expand):
            lv += 1
        k = ov.keys[i][lv]
        lane, step = ov.lanes[i], ov.steps[i]
        o = ov.owners[i]
        comm_own = nodes[o].type in _COMM_TYPES and lane[0] == "comm" and comm_boxes <= target
        if comm_own:
            k = ("n", nodes[o].id)
        keys.append(("ov", lane, step, k))
        title = ov.titles[k]
        if lv < OP and lane[0] != "thread" and not comm_own:
            title = f"{title} ({'comm' if lane[0] == 'comm' else 'kernels'})"
        elif lv == OP and lane[0] != "thread":
            title = f"from {title}"
        labels.append(title)
        if lv < OP and k in ov.details and lane[0] == "thread":
            details[("ov", lane, step, k)] = ov.details[k]
        elif comm_own and o != i:  # the wait before the message or collective started (a queue node)
            details[("ov", lane, step, k)] = "with its wait for the link (queue)"
        path: tuple[int, ...] = ()
        if step is not None:
            path = (cluster(step, ov.step_names[step]),)
        path = (*path, cluster((step, lane), ov.lane_names[lane]))
        lane_ids[path[-1]] = f"{lane[0]} {lane[1]}"
        paths.append(path)
    lanes = {p[-1]: lane_ids[p[-1]] for p in paths}
    shown = LEVELS[BLOCK if opened else level]
    return Plan(keys, labels, paths, cluster_names, level=shown, details=details, lanes=lanes)


def _open_phases(ov: Overview, kept: list[int], box_key: Any, target: int) -> set[Any]:
    """Phase runs to show as their blocks: the cheapest first (fewest extra boxes), while all fit.

    A run opens in every lane at once (the host operators and the kernels they launched), so the
    GPU lane keeps the host lane's blocks. A per-parameter optimizer loop (dozens of "blocks")
    stays one box (`--expand optimizer` opens it).
    """
    phase_boxes: dict[Any, set] = defaultdict(set)
    block_boxes: dict[Any, set] = defaultdict(set)
    for i in kept:
        pk = ov.keys[i][PHASE]
        phase_boxes[pk].add(box_key(i, PHASE))
        block_boxes[pk].add(box_key(i, BLOCK))
    total = sum(len(b) for b in phase_boxes.values())
    # Runs that look alike (the forward of every step, cut into the same number of blocks) open
    # together, so that two steps of one loop are drawn alike.
    alike: dict[tuple[str, int], list[Any]] = defaultdict(list)
    for pk in phase_boxes:
        alike[(ov.titles[pk], ov.blocks.get(pk, 1))].append(pk)
    costs = []
    for n, members in enumerate(alike.values()):
        cost = sum(len(block_boxes[pk]) - len(phase_boxes[pk]) for pk in members)
        costs.append((cost, n, members))
    # The model's own structure (forward and backward layers) first, then the cheapest.
    costs.sort(key=lambda c: (ov.titles[c[2][0]] not in (FORWARD, BACKWARD), c[0], c[1]))
    opened: set[Any] = set()
    for cost, _, members in costs:
        if cost <= 0:
            continue
        if ov.titles[members[0]] not in (FORWARD, BACKWARD) and ov.blocks.get(members[0], 1) > MAX_OTHER_BLOCKS:
            continue  # a loop over parameters (the optimizer) says little block by block
        if total + cost > target:
            break
        opened.update(members)
        total += cost
    return opened

"""Grouping nodes for the collapsed view, and annotation clusters.

PyTorch-derived traces carry the host call tree: in `ctrl_deps` (one parent per node, official
converter) or in time containment of CPU ranges on one thread (our converter, whose ctrl_deps are
a serial chain). Profiler steps and `record_function` ranges (annotations) contain top-level
operators, which contain their callees and kernels. The drawing uses that tree twice:

- **keys**: consecutive nodes with the same key become one box. Keys are the top-level operator
  (`op`), the innermost annotation (`annotation`), a name prefix (`prefix`) or the name without
  its trailing counter (`name`).
- **clusters**: every box sits inside nested boxes named after its annotations, so the call tree
  shows as containment instead of hundreds of parent->child arrows.

`adaptive` is what `--collapse auto` uses on call trees: top-level operators, except that the
annotation regions that produce the most boxes (e.g. an optimizer step looping over parameters)
are folded into one box each until the drawing fits the target size.
"""

from __future__ import annotations

import heapq
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from chakra.schema import pb
from chakra.trace import Trace

# Thread/process roots of PyTorch execution traces, and names that mark a region rather than an
# operator: ProfilerStep#3, "## forward ##", Optimizer.step#Adam.step, DistributedDataParallel.forward.
_WRAPPER_PREFIX = "[pytorch|profiler|execution_"
_ANNOTATION_RE = re.compile(r"^(##.*##|ProfilerStep#\d+|[A-Za-z_]\w*(\.\w+)+(#[\w.]+)?|[^:]*#[^:]*)$")
#: Nodes our PyTorch converter adds for CPU time between ops; they join the box before them.
IDLE_NAMES = frozenset({"gap", "idle"})
_PREFIX_RE = re.compile(r"^[^:.#/(<\s]+")
_COUNTER_RE = re.compile(r"([#_ ]?\(?\d+\)?)+$")


def is_wrapper(name: str) -> bool:
    return name.startswith(_WRAPPER_PREFIX)


def is_annotation(name: str) -> bool:
    """True for names that mark a region rather than an operator."""
    return not is_wrapper(name) and "::" not in name and bool(_ANNOTATION_RE.match(name))


def _ctrl_tree(nodes: Sequence[pb.Node]) -> dict[int, int]:
    """Parents from ctrl_deps when they read as a call tree (official PyTorch converter): at most one
    per node and some parent with several children; else {}."""
    ids = {n.id for n in nodes}
    parent: dict[int, int] = {}
    fanout: Counter = Counter()
    for n in nodes:
        if len(n.ctrl_deps) > 1:
            return {}
        if n.ctrl_deps:
            p = n.ctrl_deps[0]
            if p != n.id and p in ids:
                parent[n.id] = p
                fanout[p] += 1
    return parent if any(c > 1 for c in fanout.values()) else {}


_TREE_ATTRS = frozenset({"is_cpu_op", "tid", "inclusive_dur", "launcher", "gap_of"})


def _containment_tree(nodes: Sequence[pb.Node]) -> dict[int, int]:
    """Parents from time containment on each CPU thread, as profilers nest ranges.

    For traces whose ctrl_deps are a serial chain (our PyTorch converter): a CPU node's parent is
    the innermost node of the same `tid` whose [start, start + inclusive_dur) holds it; a `gap`
    node belongs to its `gap_of` node and a kernel to its `launcher`.
    """
    from chakra.schema.attrs import attr_value

    ids = {n.id for n in nodes}
    parent: dict[int, int] = {}
    threads: dict[Any, list[tuple[int, int, int]]] = defaultdict(list)
    for n in nodes:
        facts = {a.name: attr_value(a) for a in n.attr if a.name in _TREE_ATTRS}
        owner = facts.get("gap_of", facts.get("launcher"))
        if isinstance(owner, int) and owner in ids and owner != n.id:
            parent[n.id] = owner
            continue
        if facts.get("is_cpu_op") is False or not n.start_time_micros:
            continue
        length = facts.get("inclusive_dur")
        if not isinstance(length, int) or length < n.duration_micros:
            length = n.duration_micros
        threads[facts.get("tid")].append((n.start_time_micros, -(n.start_time_micros + length), n.id))
    for items in threads.values():
        items.sort()
        stack: list[tuple[int, int]] = []  # (end, id) of open ranges
        for start, neg_end, nid in items:
            end = -neg_end
            while stack and stack[-1][0] <= start:
                stack.pop()
            if stack and end <= stack[-1][0]:
                parent[nid] = stack[-1][1]
            stack.append((end, nid))
    return parent


def call_parents(trace: Trace) -> tuple[dict[int, int], bool]:
    """(id -> caller id, whether it came from ctrl_deps): a ctrl_deps call tree, else time containment.

    Traces that record inclusive times per thread (our PyTorch converter) nest by time: their
    ctrl_deps are a serial chain that forks now and then (a launch, a collective's queue) and would
    read as a tree of a few branches.
    """
    if any(a.name == "inclusive_dur" for n in trace.nodes for a in n.attr):
        return _containment_tree(trace.nodes), False
    tree = _ctrl_tree(trace.nodes)
    if tree:
        return tree, True
    return _containment_tree(trace.nodes), False


def has_call_tree(trace: Trace, cache: Optional[dict] = None) -> bool:
    """Whether the trace has a host call tree (`cache` as in `plan_groups`, so it is built once)."""
    return bool(tree_of(trace, {} if cache is None else cache)[0].parent)


def tree_of(trace: Trace, cache: dict) -> tuple[CallTree, bool, dict]:
    """The call tree of a trace, whether it came from ctrl_deps, and a memo for its plans (cached)."""
    key = (id(trace), len(trace.nodes))
    if key not in cache:
        parents, from_ctrl = call_parents(trace)
        cache[key] = (CallTree(trace.nodes, parents), from_ctrl, {})
    return cache[key]


class CallTree:
    """Caller links with memoised walks (iterative: deep stacks are fine)."""

    def __init__(self, nodes: Sequence[pb.Node], parent: dict[int, int]) -> None:
        self.names = {n.id: n.name for n in nodes}
        self.parent = parent
        self._ids = [n.id for n in nodes]

    def resolve(self, rule: Callable[[Any, int, str], Any], root: Any) -> dict[int, Any]:
        """value(node) = rule(value(parent) or `root`, node id, name), for every node."""
        memo: dict[int, Any] = {}
        parent, names = self.parent, self.names
        for nid in self._ids:
            if nid in memo:
                continue
            chain = []
            cur: Optional[int] = nid
            seen = set()
            while cur is not None and cur not in memo and cur not in seen:
                seen.add(cur)
                chain.append(cur)
                cur = parent.get(cur)
            above = memo[cur] if cur is not None and cur in memo else root
            for c in reversed(chain):
                above = rule(above, c, names[c])
                memo[c] = above
        return memo

    def annotation_chains(self) -> dict[int, tuple[int, ...]]:
        """Annotation ancestors of each node (itself included when it is one), outermost first."""
        return self.resolve(lambda above, nid, name: above + (nid,) if is_annotation(name) else above, ())

    def top_ops(self) -> dict[int, Optional[int]]:
        """The outermost ancestor (or self) of each node that is an operator, not a wrapper or annotation."""

        def rule(above: Optional[int], nid: int, name: str) -> Optional[int]:
            if above is not None:
                return above
            return None if (is_wrapper(name) or is_annotation(name) or name in IDLE_NAMES) else nid

        return self.resolve(rule, None)


@dataclass
class Plan:
    """For each kept node (same order): its group key, box title and cluster path."""

    keys: list[Any]
    labels: list[str]
    paths: list[tuple[int, ...]]
    cluster_names: dict[int, str] = field(default_factory=dict)
    collapsed_regions: set[int] = field(default_factory=set)
    #: True when ctrl_deps are the call tree itself: their edges into a cluster repeat the containment.
    ctrl_is_tree: bool = False
    #: The overview's level of detail ("phase", "block", "op", "node"), else "".
    level: str = ""
    #: Box key -> a line saying what the box holds (the overview's operator mix).
    details: dict[Any, str] = field(default_factory=dict)
    #: Clusters that are lanes -> which lane (host thread, GPU stream, communication): drawn even
    #: around one box, and the boxes of one lane (over all steps) are chained in time order.
    lanes: dict[int, str] = field(default_factory=dict)


#: Keys naming one subtree of the call tree (an operator, a region, a node): all their nodes form one
#: box even when other threads' nodes come between them in file order. Prefix/name keys only merge
#: consecutive nodes.
IDENTITY_KEYS = frozenset({"op", "ann", "node", "ov"})


def _groups(keys: list[Any]) -> list[list[int]]:
    """Positions of each box, in order of first appearance."""
    groups: list[list[int]] = []
    by_key: dict[Any, list[int]] = {}
    prev: Any = object()
    for i, k in enumerate(keys):
        if k[0] in IDENTITY_KEYS:
            g = by_key.get(k)
            if g is None:
                g = by_key[k] = []
                groups.append(g)
            g.append(i)
        elif groups and k == prev:
            groups[-1].append(i)
        else:
            groups.append([i])
        prev = k
    return groups


def plan_groups(
    trace: Trace,
    kept: list[int],
    mode: str,
    target: int = 0,
    cache: Optional[dict] = None,
    expand: Sequence[re.Pattern[str]] = (),
) -> Plan:
    """Group keys for the kept nodes; `cache` (any dict) shares the call-tree work between modes.

    `expand` (overview only): boxes whose title matches are opened one level further.
    """
    tree, from_ctrl, memo = tree_of(trace, {} if cache is None else cache)
    if mode == "overview":
        from chakra.visualizers.overview import plan_overview

        # counting boxes and then drawing them asks for the same plan: make it once
        plan_key = ("overview plan", id(kept), len(kept), target, tuple(p.pattern for p in expand))
        if plan_key not in memo:
            memo[plan_key] = plan_overview(trace, kept, target, expand, tree, memo)
        plan = memo[plan_key]
    else:
        plan = _plan(trace, kept, mode, target, tree, memo)
    plan.ctrl_is_tree = from_ctrl
    return plan


def _plan(trace: Trace, kept: list[int], mode: str, target: int, tree: CallTree, memo: dict) -> Plan:
    """Group keys for the kept nodes of one trace under a collapse mode.

    Modes: none, op, annotation, prefix, name, adaptive (op, then fold the busiest annotation
    regions until at most `target` boxes remain, when that is possible).
    """
    nodes = trace.nodes
    if "chains" not in memo:
        memo["chains"] = tree.annotation_chains() if tree.parent else {}
    chains = memo["chains"]
    ids = [nodes[i].id for i in kept]
    paths = [chains.get(nid, ()) for nid in ids]
    names = tree.names
    cluster_names = {a: names[a] for p in paths for a in p}
    if mode == "none":
        return Plan([("node", nid) for nid in ids], [names[nid] for nid in ids], paths, cluster_names)
    if mode == "prefix":
        keys, labels = [], []
        for nid in ids:
            m = _PREFIX_RE.match(names[nid])
            p = m.group(0) if m else names[nid]
            keys.append(("prefix", p))
            labels.append(p + ("…" if p != names[nid] else ""))
        return Plan(keys, labels, paths, cluster_names)
    if mode == "name":
        keys, labels = [], []
        for nid in ids:
            base = _COUNTER_RE.sub("", names[nid]) or names[nid]
            keys.append(("name", base))
            labels.append(base)
        return Plan(keys, labels, paths, cluster_names)
    if mode == "annotation":
        keys, labels, out_paths = [], [], []
        for nid, path in zip(ids, paths):
            if path:
                keys.append(("ann", path[-1]))
                labels.append(names[path[-1]])
                out_paths.append(path[:-1])
            else:
                keys.append(("node", nid))
                labels.append(names[nid])
                out_paths.append(path)
        return Plan(keys, labels, out_paths, cluster_names)
    if mode not in ("op", "adaptive"):
        raise ValueError(f"unknown collapse mode {mode!r}")
    if "top" not in memo:
        memo["top"] = tree.top_ops() if tree.parent else {}
    top = memo["top"]
    op_keys, op_labels = [], []
    for nid in ids:
        t = top.get(nid)
        if t is None:
            op_keys.append(("node", nid))
            op_labels.append(names[nid])
        else:
            op_keys.append(("op", t))
            op_labels.append(names[t])
    # Idle-time nodes ("gap", from our PyTorch converter) directly under an annotation join the box before them.
    gaps = {n.id for n in nodes if n.name in IDLE_NAMES}
    if gaps:
        for i in range(1, len(ids)):
            if ids[i] in gaps and op_keys[i][0] == "node":
                op_keys[i], op_labels[i], paths[i] = op_keys[i - 1], op_labels[i - 1], paths[i - 1]
    if mode == "op":
        return Plan(op_keys, op_labels, paths, cluster_names)
    collapsed = _choose_regions(op_keys, paths, target)
    keys, labels, out_paths = [], [], []
    for k, label, path in zip(op_keys, op_labels, paths):
        cut = next((j for j, a in enumerate(path) if a in collapsed), None)
        if cut is None:
            keys.append(k)
            labels.append(label)
            out_paths.append(path)
        else:
            region = path[cut]
            keys.append(("ann", region))
            labels.append(names[region])
            out_paths.append(path[:cut])
    return Plan(keys, labels, out_paths, cluster_names, collapsed)


def _choose_regions(keys: list[Any], paths: list[tuple[int, ...]], target: int) -> set[int]:
    """Greedy: fold the innermost annotation region with the most boxes until the total fits `target`.

    A region is folded only after its nested regions are settled, so a big optimizer loop inside a
    profiler step is folded before the step itself.
    """
    starts = [g[0] for g in _groups(keys)]
    total = len(starts)
    if total <= target:
        return set()
    own: Counter = Counter()
    for s in starts:
        if paths[s]:
            own[paths[s][-1]] += 1
    parent_region: dict[int, Optional[int]] = {}
    pending: Counter = Counter()
    for path in paths:
        for j, a in enumerate(path):
            if a not in parent_region:
                p = path[j - 1] if j else None
                parent_region[a] = p
                if p is not None:
                    pending[p] += 1
    heap = [(-own[r], -r) for r in parent_region if pending[r] == 0]  # ties: fold later regions first
    heapq.heapify(heap)
    collapsed: set[int] = set()
    settled: set[int] = set()
    while heap and total > target:
        neg, neg_region = heapq.heappop(heap)
        region = -neg_region
        if region in settled:
            continue
        if -neg != own[region]:  # stale entry: its count grew since it was pushed
            heapq.heappush(heap, (-own[region], -region))
            continue
        settled.add(region)
        if own[region] > 1:
            collapsed.add(region)
            total -= own[region] - 1
        p = parent_region[region]
        if p is not None:
            own[p] += 1 if region in collapsed else own[region]
            pending[p] -= 1
            if pending[p] == 0:
                heapq.heappush(heap, (-own[p], -p))
    return collapsed


def group_runs(plan: Plan) -> list[list[int]]:
    """Positions (into the kept list) of the nodes of each box."""
    return _groups(plan.keys)

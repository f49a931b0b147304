"""FlexFlow task graphs read from DOT: the two label variants, as one list of tasks.

Upstream `--taskgraph` export (docs/input-formats.md §E.1; written by `Simulator::simulate_runtime`):
    node12 [label="{ conv1 | Forward | { 0.35 | 1.12 } }",shape=record];
    node12 -> node13;
The name is left out for unnamed (update/barrier) tasks; the type is one of Forward, Backward,
Comm, Update, Barrier; start and end are simulated times in ms. Node lines come in simulated
order. No device is recorded, so devices come from a placement (placement.py).

Legacy variant read by the deprecated Chakra converter (docs/input-formats.md §E.2):
    { npu=0 | conv1 | ... | COMP_NODE | wall_clock_time=0.00012 }
    { npu=0 | x01 | ... | COMM_SEND_RECV_NODE | comm_src=0 | comm_dst=1 | comm_size=4096 }
with times in seconds and the devices in the label.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

from chakra.converters.flexflow.dot import DotGraph
from chakra.converters.flexflow.record import RecordError, flatten, parse_record
from chakra.errors import TraceFormatError, excerpt

UPSTREAM_TYPES = ("Forward", "Backward", "Comm", "Update", "Barrier")
_NPU_KEY = re.compile(r"^\s*npu(?:_id)?\s*=\s*(-?\d+)\s*$")
_UPSTREAM_LABEL = re.compile(
    r"^\{ (?:([^{}|<>\\]*?) \| )?(Forward|Backward|Comm|Update|Barrier) \| \{ ([^{}|\s]+) \| ([^{}|\s]+) \} \}$"
)
_NPU_LABEL = re.compile(r"^[\s{]*npu(?:_id)?\s*=")


@dataclass
class Task:
    """One task of the graph. Times are µs (floats until rounded by the lowering)."""

    index: int
    key: str  # DOT node name, e.g. "node12"
    name: str
    kind: str  # "Forward", "Backward", "Update", "Barrier", "Comm" (upstream); "COMP", "COMM" (legacy)
    line: int
    start_us: Optional[float] = None
    dur_us: float = 0.0
    device: Optional[int] = None  # compute tasks
    src: Optional[int] = None  # transfers
    dst: Optional[int] = None
    size: Optional[int] = None
    preds: list[int] = field(default_factory=list)
    succs: list[int] = field(default_factory=list)

    @property
    def is_comm(self) -> bool:
        return self.kind in ("Comm", "COMM")


@dataclass
class TaskGraph:
    variant: str  # "upstream" or "legacy"
    tasks: list[Task]
    graph: DotGraph

    def where(self, task: Task) -> str:
        return f"{task.key} (line {task.line})"


def _label(graph: DotGraph, name: str) -> Optional[str]:
    node = graph.nodes[name]
    return node.attrs.get("label")


def detect_variant(graph: DotGraph) -> str:
    """'legacy' when labels start with npu=, else 'upstream' (mixing them is an error)."""
    kinds = set()
    for name in graph.declared:
        label = _label(graph, name)
        if label is not None:
            kinds.add("legacy" if _NPU_LABEL.match(label) else "upstream")
    if len(kinds) > 1:
        raise TraceFormatError(graph.path, "mixes upstream task labels with legacy 'npu=' labels")
    return kinds.pop() if kinds else "upstream"


def _fields(graph: DotGraph, name: str) -> tuple[list, int]:
    node = graph.nodes[name]
    line = graph.line_of(node.offset)
    label = node.attrs.get("label")
    if label is None:
        raise TraceFormatError(graph.path, f"node {name} has no label; every FlexFlow task has one", line=line)
    try:
        return parse_record(label), line
    except RecordError as exc:
        raise TraceFormatError(
            graph.path, f"node {name}: bad record label {excerpt(label)}: {exc}", line=line
        ) from None


def _float(graph: DotGraph, line: int, name: str, what: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise TraceFormatError(graph.path, f"node {name}: {what} {excerpt(text)} is not a number", line=line) from None
    if value != value or value in (float("inf"), float("-inf")):
        raise TraceFormatError(graph.path, f"node {name}: {what} {excerpt(text)} is not a finite number", line=line)
    if not 0 <= value <= _MAX_TIME:
        raise TraceFormatError(graph.path, f"node {name}: {what} {text} is outside 0 .. {_MAX_TIME:g}", line=line)
    return value


#: largest time accepted (ms upstream, s legacy): its µs must fit the trace's int64 fields
_MAX_TIME = 1e12
#: largest integer field (comm_size, ...): the trace's uint64/int64 fields
_MAX_INT = (1 << 63) - 1


def _upstream_task(graph: DotGraph, index: int, name: str, time_scale: float) -> Task:
    label = graph.nodes[name].attrs.get("label")
    m = _UPSTREAM_LABEL.match(label) if label is not None else None
    if m is not None:  # the writer's exact spacing: no record parsing needed
        line = graph.line_of(graph.nodes[name].offset)
        start = _float(graph, line, name, "start time", m.group(3))
        end = _float(graph, line, name, "end time", m.group(4))
        if end >= start:
            return Task(
                index,
                name,
                (m.group(1) or "").strip(),
                m.group(2),
                line,
                start * time_scale,
                (end - start) * time_scale,
            )
    fields, line = _fields(graph, name)
    if len(fields) not in (2, 3) or not isinstance(fields[-1], list) or len(fields[-1]) != 2:
        raise TraceFormatError(
            graph.path,
            f"node {name}: label is not a FlexFlow task record '{{ name | type | {{ start | end }} }}'",
            line=line,
        )
    kind = fields[-2]
    if not isinstance(kind, str) or kind not in UPSTREAM_TYPES:
        raise TraceFormatError(
            graph.path, f"node {name}: unknown task type {kind!r} (expected {', '.join(UPSTREAM_TYPES)})", line=line
        )
    task_name = fields[0] if len(fields) == 3 else ""
    if not isinstance(task_name, str):
        raise TraceFormatError(graph.path, f"node {name}: the task name field is a nested record", line=line)
    start_s, end_s = fields[-1]
    if not isinstance(start_s, str) or not isinstance(end_s, str):
        raise TraceFormatError(graph.path, f"node {name}: start/end must be plain numbers", line=line)
    start = _float(graph, line, name, "start time", start_s)
    end = _float(graph, line, name, "end time", end_s)
    if end < start:
        raise TraceFormatError(graph.path, f"node {name}: ends ({end_s}) before it starts ({start_s})", line=line)
    return Task(index, name, task_name, kind, line, start * time_scale, (end - start) * time_scale)


def _kv(fields: list[str], key: str) -> Optional[str]:
    for f in fields:
        k, sep, v = f.partition("=")
        if sep and k.strip() == key:
            return v.strip()
    return None


def _legacy_task(graph: DotGraph, index: int, name: str, time_scale: float) -> Task:
    tree, line = _fields(graph, name)
    fields = flatten(tree)
    m = _NPU_KEY.match(fields[0]) if fields else None
    if m is None or len(fields) < 4:
        raise TraceFormatError(
            graph.path,
            f"node {name}: legacy label needs 'npu=N | name | ... | COMP_NODE|COMM_SEND_RECV_NODE'",
            line=line,
        )
    npu = int(m.group(1))
    kind = fields[3]

    def need_int(key: str) -> int:
        value = _kv(fields, key)
        if value is None:
            raise TraceFormatError(graph.path, f"node {name}: {kind} label has no {key}=", line=line)
        try:
            number = int(value)
        except ValueError:
            raise TraceFormatError(
                graph.path, f"node {name}: {key}={excerpt(value)} is not an integer", line=line
            ) from None
        if not 0 <= number <= _MAX_INT:
            raise TraceFormatError(graph.path, f"node {name}: {key}={number} is outside 0 .. 2**63-1", line=line)
        return number

    if kind == "COMP_NODE":
        value = _kv(fields, "wall_clock_time")
        if value is None:
            raise TraceFormatError(graph.path, f"node {name}: COMP_NODE label has no wall_clock_time=", line=line)
        seconds = _float(graph, line, name, "wall_clock_time", value)
        if seconds < 0:
            raise TraceFormatError(graph.path, f"node {name}: wall_clock_time={value} is negative", line=line)
        if npu < 0:
            raise TraceFormatError(graph.path, f"node {name}: npu={npu} is negative", line=line)
        return Task(index, name, fields[1], "COMP", line, None, seconds * time_scale, device=npu)
    if kind == "COMM_SEND_RECV_NODE":
        return Task(
            index,
            name,
            fields[1],
            "COMM",
            line,
            src=need_int("comm_src"),
            dst=need_int("comm_dst"),
            size=need_int("comm_size"),
        )
    raise TraceFormatError(
        graph.path, f"node {name}: unknown node kind {kind!r} (expected COMP_NODE or COMM_SEND_RECV_NODE)", line=line
    )


def read_taskgraph(graph: DotGraph, variant: Optional[str] = None) -> TaskGraph:
    """Tasks in node-statement order (the upstream writer's simulated order) with their edges."""
    if not graph.directed:
        raise TraceFormatError(graph.path, "a FlexFlow task graph is a digraph, found an undirected graph")
    variant = variant or detect_variant(graph)
    tasks: list[Task] = []
    index: dict[str, int] = {}
    for name in graph.declared:
        if name in index:
            continue
        node = graph.nodes[name]
        if "label" not in node.attrs:
            continue  # a bare mention (e.g. inside a cluster) of a node labelled elsewhere, or never
        if variant == "upstream":
            task = _upstream_task(graph, len(tasks), name, 1000.0)  # ms -> µs
        else:
            task = _legacy_task(graph, len(tasks), name, 1e6)  # s -> µs
        index[name] = task.index
        tasks.append(task)
    if not tasks:
        raise TraceFormatError(graph.path, "no labelled task nodes: not a FlexFlow task graph")
    seen: set[tuple[int, int]] = set()
    for edge in graph.edges:
        a = index.get(edge.src)
        b = index.get(edge.dst)
        for end, i in ((edge.src, a), (edge.dst, b)):
            if i is None:
                raise TraceFormatError(
                    graph.path,
                    f"edge {edge.src} -> {edge.dst}: node {end} has no task label",
                    line=graph.line_of(edge.offset),
                )
        assert a is not None and b is not None
        if a == b:
            raise TraceFormatError(
                graph.path, f"edge {edge.src} -> {edge.dst} is a self-loop", line=graph.line_of(edge.offset)
            )
        if (a, b) in seen:
            continue
        seen.add((a, b))
        tasks[b].preds.append(a)
        tasks[a].succs.append(b)
    return TaskGraph(variant, tasks, graph)

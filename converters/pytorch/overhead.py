"""Remove the profiler's cost from a converted PyTorch trace, so that it describes the untraced run.

Under `torch.profiler` with the Execution Trace observer every host operator pays for the
callbacks that record it (Kineto's, and the observer serialising its arguments), and every CUDA
runtime call pays for CUPTI: a launch-bound step can take 5x its untraced time. GPU kernels do
not: CUPTI times them on the device. So only host-side time is corrected:

* host nodes (an operator's own segment, the `gap`s between its children, `idle`, CPU `queue`
  hand-offs) and the GPU `queue` nodes (a kernel waiting for its launch, which under CUPTI holds
  the inflated launch path) keep a fraction `keep` of their recorded time, but lose at most
  `cap_us` each: an operator that does real work on the CPU (a CPU matmul of a millisecond)
  loses the profiler's per-call cost, not 80% of its work;
* GPU kernels, memory copies and communication keep their recorded times.

`keep` comes from a measured untraced step time when there is one (a `chakra.record` manifest
beside the traces, `--step-time`): it is fitted so that the simulated step (chakra.sim.steps)
equals the measured one. Without one it is estimated: `DEFAULT_KEEP`, the host-time share that
reproduces the untraced step on the project's own H200 recordings (docs/whatif-validation.md),
and `cap_us` from the trace itself, as `CAP_GAPS` times the median gap between two operators
recorded back to back inside a C++ operator (those gaps hold nothing but the profiler's exit
and entry callbacks).

Every changed node keeps its recorded duration in the `profiled_dur_us` attribute, and the
trace's metadata says what was done (`profiler_overhead`: mode, keep, cap, the recorded and the
predicted step), so the profiled run stays available (`chakra convert pytorch --profiled` keeps
it as the durations instead).
"""

from __future__ import annotations

import bisect
import itertools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

from chakra.converters.pytorch.columns import RankColumns
from chakra.converters.pytorch.emit import CPU_FALSE_ENTRY, CPU_TRUE_ENTRY, GAP_OF_PREFIX
from chakra.schema import NodeType, pb
from chakra.schema.attrs import attr_value, get_attr, set_attr
from chakra.sim.steps import OVERHEAD_ATTR, STEP_RE, overhead_record, recorded_steps_ns, step_time
from chakra.trace import Trace

if TYPE_CHECKING:
    import numpy as np

#: When the trace has too few back-to-back operators to read the gap cost from: µs.
DEFAULT_GAP_US = 5.0
#: A host node loses at most this many times its profiler cost (an operator doing real work on
#: the CPU keeps its work).
CAP_COSTS = 4.0
#: Untraced time of a host node when no step time is known, in back-to-back operator gaps (the
#: profiler's own cost, which scales with the host CPU's speed as the untraced work does):
#: chosen on the H200 recordings of tests/data/gpu (docs/whatif-validation.md).
BASE_PER_GAP = 0.085
#: A measured step within this share of the estimate's keeps the estimate (see remove_overhead).
AGREE = 0.02
#: A Python-level gap loses this many back-to-back operator gaps (the callbacks around it).
PYTHON_GAPS = 0.6
PROFILED_ATTR = "profiled_dur_us"
META_ATTR = OVERHEAD_ATTR

_COMP = int(NodeType.COMP_NODE)
_INT64_MAX = (1 << 63) - 1
_COLL = int(NodeType.COMM_COLL_NODE)
#: Relaxation rounds of the cross-rank waits (CollectiveWaits.settle); each is one replay.
WAIT_ROUNDS = 8
_BACKWARD = re.compile(r"Backward\d*$")
_HOST_SPECIAL = frozenset(("gap", "idle", "queue"))


@dataclass
class OverheadReport:
    """What was removed, for the summary and the JSON form."""

    mode: str  # "measured" (fitted to a step time), "estimated" (trace alone), "kept" (--profiled)
    base_us: float  # a host node's untraced time, unless its recorded time less CAP_COSTS x its cost is more
    gap_cost_us: float
    op_cost_us: float
    profiled_step_ns: float = 0.0  # the recorded steps (Kineto ProfilerStep# spans), median
    # the simulated steps (chakra.sim.steps) with the recorded durations and after the removal:
    # simulated when fitting (or when asked: `replay=True`), None otherwise (conversion stays a pass)
    replay_profiled_ns: Optional[float] = None
    predicted_step_ns: Optional[float] = None
    host_recorded_us: int = 0  # host time as recorded, all ranks, all steps
    python_gap_cost_us: Optional[float] = None  # what a Python-level gap lost (None: the estimate)
    idle_share: Optional[float] = None  # share of a time-shared device's idle waits kept (None: not shared)
    work_share: Optional[float] = None  # share of the host work kept when the traced host ran slower (fitted)
    measured_step_ns: Optional[float] = None
    measured_source: Optional[str] = None
    removed_us: int = 0  # host time removed, all ranks, all steps
    host_nodes: int = 0
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        if d["work_share"] is None:  # only where fitted: converted traces carry this record
            del d["work_share"]
        d["units"] = "ns (step times), µs (removed_us, *_cost_us)"
        return d


class _Facts:
    """What the helpers below read of every node of one trace, in one pass over its attributes
    (asking each node for one attribute at a time walked its attribute list again and again):
    per node in trace order, the `is_cpu_op` value (None when absent), `gap_of` (0 when absent),
    the recorded duration (`_recorded`) and whether it is already kept in `profiled_dur_us`."""

    def __init__(
        self, trace: Optional[Trace], messages: Optional[Sequence[bytes]] = None, columns: Optional[RankColumns] = None
    ) -> None:
        """`messages`: the nodes serialized, as the converter wrote them: the attributes it writes
        in its own way are read from the bytes (C-level searches), the rest from the nodes.
        `columns`: the converter's own record of a rank's nodes (then `trace` holds none, the
        passes change `columns.durations` and mark `columns.profiled`: see columns.py)."""
        self.columns = columns
        if columns is not None:
            self.nodes: Any = None
            self.cpu, self.gap_of, self.profiled = columns.cpu, columns.gap_of, columns.profiled
            self.ids, self.name_list, self.types = columns.ids, columns.names, columns.types
            # as recorded (the passes change the columns' durations, keeping the recorded one where marked)
            profiled = columns.profiled
            if profiled.count(None) == len(profiled):  # none marked yet (the usual case): one C-level copy
                self.recorded = list(columns.durations)
            else:
                self.recorded = [d if p is None else p for d, p in zip(columns.durations, profiled)]
        else:
            assert trace is not None
            self._read(trace, messages)
        self.names = dict(zip(self.ids, self.name_list))
        self._steps: Optional[list[tuple[int, int, int]]] = None
        self._hosts: Optional[_Hosts] = None
        #: (the facts it was read from, `estimate_costs` of them), set by `remove_overhead`
        self.costs: Optional[tuple[tuple[_Facts, ...], Costs]] = None

    def _read(self, trace: Trace, messages: Optional[Sequence[bytes]]) -> None:
        nodes = trace.nodes
        n = len(nodes)
        self.nodes = nodes
        self.cpu: list[Any] = [None] * n
        self.gap_of: list[Any] = [0] * n
        self.profiled: list[Any] = [None] * n
        if messages is None or len(messages) != n:
            for i in range(n):
                self._scan(i)
        else:
            for i, m in enumerate(messages):
                if not self._from_bytes(i, m):
                    self._scan(i)
        # plain lists, read in one C-level pass: every pass reads them many times, and a protobuf
        # field read costs more than a list's
        if n:
            ids, names, types, durations = zip(*map(_COLUMNS, nodes))
        else:
            ids, names, types, durations = (), (), (), ()
        self.ids, self.name_list, self.types = list(ids), list(names), list(types)
        self.recorded = [int(d) if d is not None else x for d, x in zip(self.profiled, durations)]

    def write(self, rows: Sequence[int], nodes: Optional[Sequence[Any]], durations: Sequence[int]) -> None:
        """Set the durations of the nodes at `rows` (`nodes`: those nodes; None with columns)."""
        if self.columns is not None:
            current = self.columns.durations
            if len(rows) == len(current):  # every node (rows ascend): one C-level copy
                current[:] = durations
            else:
                for i, d in zip(rows, durations):
                    current[i] = d
        else:
            assert nodes is not None
            for n, d in zip(nodes, durations):
                n.duration_micros = d

    def deps_data(self, i: int) -> Any:
        """Node i's data dependencies."""
        return self.columns.data[i] if self.columns is not None else self.nodes[i].data_deps

    def _scan(self, i: int) -> None:
        """Node i's attributes, read from the node (the first of a name counts, as get_attr)."""
        wanted = _SCANNED
        seen = 0
        for a in self.nodes[i].attr:
            name = a.name
            if name in wanted:
                bit = wanted[name]
                if seen & bit:
                    continue
                seen |= bit
                value = attr_value(a)
                if bit == 1:
                    self.cpu[i] = value
                elif bit == 2:
                    self.gap_of[i] = 0 if value is None else value
                else:
                    self.profiled[i] = value

    def _from_bytes(self, i: int, m: bytes) -> bool:
        """Node i's attributes from its serialized bytes where they settle them: no profiled_dur_us,
        at most one is_cpu_op and one gap_of, each in the converter's arm (chakra.converters.pytorch
        .emit); False otherwise (then `_scan`). The entries cannot hide in a string: a bool entry's
        bytes are not UTF-8, and a gap_of entry must be framed as one."""
        if PROFILED_BYTES in m:
            return False
        c = m.count(b"is_cpu_op")
        if c:
            if c > 1:
                return False
            if CPU_TRUE_ENTRY in m:
                self.cpu[i] = True
            elif CPU_FALSE_ENTRY in m:
                self.cpu[i] = False
            else:
                return False
        c = m.count(b"gap_of")
        if c:
            j = m.find(GAP_OF_PREFIX)
            if c > 1 or j < 2:
                return False
            size = m[j - 1]
            if m[j - 2] != 0x52 or not len(GAP_OF_PREFIX) < size < 128 or j + size > len(m):
                return False
            value, shift = 0, 0
            for byte in m[j + len(GAP_OF_PREFIX) : j + size]:
                value |= (byte & 0x7F) << shift
                shift += 7
            self.gap_of[i] = value - (1 << 64) if value >= 1 << 63 else value
        return True

    def host_rows(self) -> list[int]:
        """Positions of the nodes whose recorded time holds profiler cost (module docstring)."""
        cpu = self.cpu
        names = self.name_list
        types = self.types
        if False not in cpu:  # no device node (a CPU-only trace): the COMP nodes, found in C where all are
            return list(range(len(types))) if types.count(_COMP) == len(types) else [
                i for i, t in enumerate(types) if t == _COMP
            ]  # fmt: skip
        return [i for i, t in enumerate(types) if t == _COMP and not (cpu[i] is False and names[i] != "queue")]

    def steps(self) -> list[tuple[int, int, int]]:
        """(k, id, position) of the `ProfilerStep#k` nodes, in step order (as `step_node_ids`)."""
        if self._steps is None:
            match, ids, names = STEP_RE.match, self.ids, self.name_list
            if self.columns is not None:  # the encoder noted them
                rows: Any = self.columns.step_rows
            else:
                rows = [i for i, n in enumerate(names) if match(n)]
            marks = [(int(names[i].rsplit("#", 1)[1]), ids[i], i) for i in rows]
            self._steps = sorted(marks, key=lambda m: (m[0], m[1]))
        return self._steps

    def recorded_steps_ns(self) -> list[float]:
        """`chakra.sim.steps.recorded_steps_ns` of the trace, from the step marks found once."""
        by_id = {node_id: i for _, node_id, i in self._steps_in_file_order()}
        out = []
        for _, node_id, _ in self.steps():
            if self.columns is not None:
                dur = self.columns.inclusive.get(by_id[node_id])
            else:
                dur = get_attr(self.nodes[by_id[node_id]], "inclusive_dur", None)
            if dur:
                out.append(float(dur) * 1000.0)
        return out

    def _steps_in_file_order(self) -> list[tuple[int, int, int]]:
        return sorted(self.steps(), key=lambda m: m[2])

    def host(self) -> _Hosts:
        """The host nodes and what does not change between passes over them (kept: `_Hosts`)."""
        if self._hosts is None:
            self._hosts = _Hosts(self)
        return self._hosts


class _Hosts:
    """A trace's host nodes (`_Facts.host_rows`) with their profiled events, whether they hold
    Python time, and whether their cost is a gap's (gap, idle and queue nodes; an op's otherwise):
    none of it depends on durations."""

    def __init__(self, facts: _Facts) -> None:
        self.rows = facts.host_rows()
        self.nodes = [facts.nodes[i] for i in self.rows] if facts.nodes is not None else None
        self.events = _events(facts, self.rows)
        self.python = _python_level(facts, self.rows)
        names = facts.name_list
        self.special = list(map(_HOST_SPECIAL.__contains__, _at(names, self.rows)))  # C-level passes


_SCANNED = {"is_cpu_op": 1, "gap_of": 2, PROFILED_ATTR: 4}
_COLUMNS = attrgetter("id", "name", "type", "duration_micros")
PROFILED_BYTES = PROFILED_ATTR.encode()


def node_facts(traces: Sequence[Trace], messages: Optional[Sequence[Sequence[bytes]]] = None) -> list[_Facts]:
    """Each trace's `_Facts`, for passes of `remove_overhead` over the same nodes (`facts=`).
    `messages`: each trace's nodes as the converter serialized them (`_Facts`)."""
    return [_Facts(t, ms) for t, ms in zip(traces, messages or [None] * len(traces))]


def column_facts(columns: RankColumns) -> _Facts:
    """`node_facts` of one rank the converter recorded in columns (its Trace holds no nodes)."""
    return _Facts(None, columns=columns)


def _at(values: list, rows: list[int]) -> list:
    """`values` at the positions `rows` (ascending), as a new list: a C-level copy where the rows
    are every position (a CPU trace's host nodes are all its nodes)."""
    return list(values) if len(rows) == len(values) else [values[i] for i in rows]


def _host_nodes(trace: Trace) -> list[Any]:
    """The nodes whose recorded time holds profiler cost (module docstring), in trace order."""
    out = []
    for n in trace.nodes:
        if n.type != _COMP:
            continue
        cpu = get_attr(n, "is_cpu_op", None)
        if cpu is False and n.name != "queue":
            continue
        out.append(n)
    return out


#: Leaf operators whose real work is a few hundred ns (metadata only): under the profiler their
#: recorded time is the profiler's cost inside an operator's span.
TRIVIAL_OPS = frozenset(
    {"aten::as_strided", "aten::view", "aten::empty", "aten::empty_strided", "aten::detach_", "aten::alias",
     "aten::_reshape_alias", "aten::unsqueeze", "aten::squeeze", "aten::expand", "aten::permute", "aten::slice",
     "aten::select", "aten::_unsafe_view", "aten::resolve_conj", "aten::resolve_neg", "aten::lift_fresh"}
)  # fmt: skip


@dataclass
class Costs:
    """The profiler's cost per host node, µs, read from the trace (module docstring)."""

    gap_us: float  # between two operators: the first one's exit, the next one's entry
    op_us: float  # inside an operator's span, before its first child or its end


def _events(facts: _Facts, rows: list[int]) -> list[int]:
    """Profiled events per host node: itself, plus one per device task it launched (each launch
    is a CUDA runtime call that CUPTI records)."""
    cpu = facts.cpu
    if False not in cpu:  # no device task (a CPU-only trace): one event per node
        return [1] * len(rows)
    launches: dict[int, int] = {}
    names = facts.name_list
    for i, t in enumerate(facts.types):
        if t == _COMP and cpu[i] is False and names[i] != "queue":
            for d in facts.deps_data(i):
                launches[d] = launches.get(d, 0) + 1
    # A GPU queue node (a kernel waiting for its launch) has no untraced time of its own: the
    # kernel already waits for the host node that launched it.
    ids = facts.ids
    return [0 if cpu[i] is False and names[i] == "queue" else 1 + launches.get(ids[i], 0) for i in rows]


def _python_level(facts: _Facts, rows: list[int]) -> list[bool]:
    """Which host nodes hold Python time: `idle` (the main thread outside any operator) and the
    gaps of regions that Python code records (`ProfilerStep#k`, `Optimizer.step#...`, user
    `record_function`s), told apart from C++ ones (`aten::`, `autograd::`, `c10d::`, `...Backward0`)."""
    names, name_list, gap_of = facts.names, facts.name_list, facts.gap_of
    by_owner: dict[str, bool] = {}  # per region name: a trace has a few hundred
    out = []
    for i in rows:
        name = name_list[i]
        if name == "idle":
            out.append(True)
        elif name == "gap":
            owner = names.get(gap_of[i], "")
            python = by_owner.get(owner)
            if python is None:
                python = by_owner[owner] = bool(owner) and "::" not in owner and not _BACKWARD.search(owner)
            out.append(python)
        else:
            out.append(False)
    return out


def _recorded(node: Any) -> int:
    """A node's recorded (profiled) duration, also after an earlier removal changed it."""
    d = get_attr(node, PROFILED_ATTR, None)
    return int(d) if d is not None else node.duration_micros


def _longest(durations: list[list[int]]) -> int:
    """The longest duration of every rank's lists (1 when there is none)."""
    return max((max(d) for d in durations if d), default=1)


def _median(values: list[float]) -> float:
    """`statistics.median`, without importing `statistics` (its imports cost a conversion ~5 ms)."""
    xs = sorted(values)
    k = len(xs) // 2
    return xs[k] if len(xs) % 2 else (xs[k - 1] + xs[k]) / 2


def _middle_mean(values: list[int]) -> float:
    """Mean of the middle half (durations are whole µs: a median would be an integer)."""
    xs = sorted(values)
    q = len(xs) // 4
    mid = xs[q : len(xs) - q] or xs
    return sum(mid) / len(mid)


def estimate_costs(traces: Sequence[Trace], facts: Optional[Sequence[_Facts]] = None) -> Costs:
    """Median gap between two children of a C++ (`aten::`) operator (nothing but the profiler
    runs there) and median recorded time of the trivial leaf operators (`TRIVIAL_OPS`)."""
    gaps: list[int] = []
    leaves: list[int] = []
    for f in facts if facts is not None else [_Facts(t) for t in traces]:
        names, name_list, ids, types = f.names, f.name_list, f.ids, f.types
        rec = f.recorded
        gap_of = f.gap_of
        parents = {gap_of[i] for i, name in enumerate(name_list) if name == "gap"}
        for i, name in enumerate(name_list):
            if types[i] != _COMP:
                continue
            if name == "gap":
                if names.get(gap_of[i], "").startswith("aten::"):
                    gaps.append(rec[i])
            elif name in TRIVIAL_OPS and ids[i] not in parents:
                leaves.append(rec[i])
    gap = _middle_mean(gaps) if len(gaps) >= 10 else DEFAULT_GAP_US
    op = _middle_mean(leaves) if len(leaves) >= 10 else gap
    return Costs(float(gap), float(op))


def _kernel_spans(trace: Trace) -> list[tuple[int, int]]:
    """Recorded (start, end) µs of a trace's device tasks (kernels, copies), by start."""
    return sorted(
        (n.start_time_micros, n.start_time_micros + _recorded(n))
        for n in trace.nodes
        if n.type == _COMP and get_attr(n, "is_cpu_op", None) is False and n.name != "queue"
    )


def _busy_within(spans: list[tuple[int, int]], ends_max: list[int], lo: int, hi: int) -> int:
    """µs of `spans` (by start; `ends_max` their running max end) inside [lo, hi]."""
    i = bisect.bisect_left(ends_max, lo)
    busy = 0
    while i < len(spans) and spans[i][0] < hi:
        s, e = spans[i]
        busy += max(0, min(e, hi) - max(s, lo))
        i += 1
    return busy


def shared_device_busy(traces: Sequence[Trace], nodes: list[list[Any]]) -> dict[tuple[int, int], int]:
    """For ranks that time-share one GPU (two processes on one device: their kernels never run at
    the same time, on one host clock), each GPU `queue` node's (rank position, id) -> the µs the *other* ranks'
    device tasks ran inside its recorded span. A kernel waiting on such a device waited for the
    peers' kernels for that long; the rest of the wait the device ran nothing (context switching
    of the time-sliced device, which under the profiler follows the peers' inflated host work) and
    is the part `idle_share` scales. {} when no two ranks share a device."""
    if len(traces) < 2:
        return {}
    spans = [_kernel_spans(t) for t in traces]
    devices = [{get_attr(n, "device", None) for n in t.nodes if get_attr(n, "is_cpu_op", None) is False} - {None}
               for t in traces]  # fmt: skip
    out: dict[tuple[int, int], int] = {}
    for r in range(len(traces)):
        peers = [q for q in range(len(traces)) if q != r and devices[q] & devices[r] and spans[q] and spans[r]]
        shared = []
        for q in peers:
            ends = list(itertools.accumulate((e for _s, e in spans[q]), max))
            own = sum(e - s for s, e in spans[r])
            overlap = sum(_busy_within(spans[q], ends, s, e) for s, e in spans[r])
            if own and overlap < 0.01 * own:  # never at once: one time-shared device
                shared.append((spans[q], ends))
        if not shared:
            continue
        for n in nodes[r]:
            if n.name == "queue" and get_attr(n, "is_cpu_op", None) is False:
                lo = n.start_time_micros
                hi = lo + _recorded(n)
                out[(r, n.id)] = sum(_busy_within(sp, ends, lo, hi) for sp, ends in shared)
    return out


def _illinois(
    lo: float,
    f_lo: float,
    hi: float,
    f_hi: float,
    f: Callable[[float], float],
    tol: float,
    rounds: int = 40,
    say: Optional[Callable[[float, float], None]] = None,
) -> float:
    """A root of the rising `f` in [lo, hi] (f_lo < 0 < f_hi, both known) within `tol`, by regula
    falsi with the Illinois weighting: a replayed step is nearly linear in the value fitted where
    that value sets it, so this takes a few replays where bisection took a dozen. Returns the last
    value tried (`f` has set it up)."""
    side = 0
    mid = hi
    for _ in range(rounds):
        mid = lo - f_lo * (hi - lo) / (f_hi - f_lo)
        if not lo < mid < hi:
            mid = (lo + hi) / 2
        got = f(mid)
        if say is not None:
            say(mid, got)
        if abs(got) <= tol:
            break
        if got < 0:
            lo, f_lo = mid, got
            if side < 0:  # the same end moved twice: halve the other's weight
                f_hi /= 2
            side = -1
        else:
            hi, f_hi = mid, got
            if side > 0:
                f_lo /= 2
            side = 1
    return mid


def _solve(
    lo: float, hi: float, target: float, step_at: Callable[[float], float], *, rising: bool, rounds: int = 40
) -> float:
    """The value in [lo, hi] at which `step_at` (a replayed step, rising with the value when
    `rising`, else falling) comes within 0.3% of `target` (the nearer end when it never does);
    `step_at` has set up the value returned."""
    sign = 1.0 if rising else -1.0
    tol = 0.003 * target
    f_lo = sign * (step_at(lo) - target)
    if f_lo >= -tol:
        return lo  # already there (or past it) at the low end: the state is lo's
    f_hi = sign * (step_at(hi) - target)
    if f_hi <= tol:
        return hi
    return _illinois(lo, f_lo, hi, f_hi, lambda v: sign * (step_at(v) - target), tol, rounds)


def _fit_base(
    trial: Callable[[float], float],
    target: float,
    floor: float,
    estimate: float,
    at_estimate: float,
    longest: float,
    say: Callable[[str], None],
) -> float:
    """The untraced time per host event at which the replayed step (`trial`, rising with it) is
    within 0.3% of `target`, from the bracket the estimate gives (`floor`: the step at 0;
    `longest`: the value past which nothing changes). The last value tried is the one returned
    or, when an end of the bracket is already within 0.3%, that end (the caller applies it)."""
    tol = 0.003 * target
    lo, f_lo = 0.0, floor - target
    hi, f_hi = estimate, at_estimate - target
    while f_hi < 0 and hi < longest:  # the estimate is short of the target: widen
        lo, f_lo = hi, f_hi
        hi = min(longest, 4 * hi if hi > 0 else 1.0)
        f_hi = trial(hi) - target
    if f_hi <= tol or f_lo >= -tol:
        return hi if f_hi <= tol else lo

    def report(v: float, got: float) -> None:
        say(f"fit: {v:.3f} µs per host node -> {(got + target) / 1e6:.3f} ms (measured {target / 1e6:.3f})")

    return _illinois(lo, f_lo, hi, f_hi, lambda v: trial(v) - target, tol, say=report)


class _Plan:
    """The host nodes of every rank with their recorded durations and profiler costs."""

    def __init__(self, traces: Sequence[Trace], costs: Costs, facts: Optional[Sequence[_Facts]] = None) -> None:
        self.traces = traces
        facts = facts if facts is not None else [_Facts(t) for t in traces]
        hosts = [f.host() for f in facts]
        self.facts = facts
        self.rows = [h.rows for h in hosts]
        self.nodes = [h.nodes for h in hosts]
        self.recorded = [_at(f.recorded, h.rows) for f, h in zip(facts, hosts)]
        # whether each host node already keeps its recorded time in PROFILED_ATTR (mark)
        self.kept = [
            [False] * len(h.rows)
            if f.profiled.count(None) == len(f.profiled)
            else [f.profiled[i] is not None for i in h.rows]
            for f, h in zip(facts, hosts)
        ]
        self.events = [h.events for h in hosts]
        # a node loses at most CAP_COSTS x its cost (a gap's where `special`, else an op's) x its
        # events (at least 1): `apply` computes these caps its own way (`vectors`, `_durations`)
        self.special = [h.special for h in hosts]
        self.gap_cap, self.op_cap = CAP_COSTS * costs.gap_us, CAP_COSTS * costs.op_us
        # Python time (a gap of a Python-level region, idle time on the main thread) is real work
        # the profiler does not slow down: such a node loses only the callbacks around it.
        self.python = [h.python for h in hosts]
        self.python_cost = PYTHON_GAPS * costs.gap_us
        # GPU queue nodes on a device time-shared with another rank (shared_device_busy): the part
        # of each wait during which the device ran nobody's kernel keeps `idle_share` of itself
        self.peer_busy = shared_device_busy(traces, self.nodes)
        self.idle_share = 1.0
        # share of the host work left after the profiler's costs that the untraced run kept
        # (1: all of it; below 1 only when a step time cannot be reached otherwise: remove_overhead)
        self.work = 1.0
        self.unwritten: list[Any] = [None] * len(traces)
        self._row_arrays: Optional[list[np.ndarray]] = None
        self._last: Optional[tuple[tuple, list[list[int]], int]] = None  # apply's last (inputs, durations, removed)
        # a queue node's peer-busy time (NaN: none), per rank
        nan = float("nan")
        self._busy = (
            [
                [self.peer_busy.get((r, n.id), nan) if n.name == "queue" else nan for n in nodes]
                for r, nodes in enumerate(self.nodes)
            ]
            if self.peer_busy
            else None
        )
        # the per-node inputs as arrays, made on the first `apply` that takes them (`vectors`)
        self._arrays: Optional[list[tuple]] = None

    def vectors(self) -> None:
        """Let `apply` work on numpy arrays: worth their import (~0.1 s of CPU, which the replays'
        `chakra.sim.pathreplay` pays anyway) where replays follow, a fit calling it again and
        again; without them it runs once, node by node."""
        if self._arrays is not None:
            return
        import numpy as np

        self._arrays = []
        for r, (rec, ev, special, py) in enumerate(zip(self.recorded, self.events, self.special, self.python)):
            e = np.asarray(ev, dtype=np.float64)
            cap = np.where(np.asarray(special, dtype=bool), self.gap_cap, self.op_cap) * np.maximum(e, 1.0)
            busy = None if self._busy is None else np.asarray(self._busy[r], dtype=np.float64)
            self._arrays.append((np.asarray(rec, dtype=np.float64), e, cap, np.asarray(py, dtype=bool), busy))

    def apply(self, base_us: Optional[float], write: bool = True) -> int:
        """Each host node keeps max(min(recorded, base_us x its events), recorded - cap), a Python
        node its recorded time less the callbacks (None: every node as recorded); returns the µs
        removed. Rounding error is carried from node to node, so sums along a thread stay exact."""
        removed = 0
        if base_us is None:
            for f, rows, nodes, rec in zip(self.facts, self.rows, self.nodes, self.recorded):
                f.write(rows, nodes, rec)
            return 0
        py_cost = self.python_cost
        # the fit often asks twice in a row for the same durations (the estimate, then its first
        # trial; its last trial, then the final write): the rounding loop runs once for both
        key = (base_us, py_cost, self.work, self.idle_share)
        if self._last is not None and self._last[0] == key:
            for r, (nodes, new_all) in enumerate(zip(self.nodes, self._last[1])):
                if write:
                    self.facts[r].write(self.rows[r], nodes, new_all)
                else:
                    self.unwritten[r] = new_all
            return self._last[2]
        computed = []
        for r, (nodes, rec) in enumerate(zip(self.nodes, self.recorded)):
            if self._arrays is not None:
                new_all = self._vector_durations(r, base_us, py_cost)
            else:
                new_all = self._durations(r, base_us, py_cost)
            if write:
                self.facts[r].write(self.rows[r], nodes, new_all)
            else:
                self.unwritten[r] = new_all
            computed.append(new_all)
            removed += sum(rec) - sum(new_all)
        self._last = (key, computed, removed)
        return removed

    def _vector_durations(self, r: int, base_us: float, py_cost: float) -> list[int]:
        """Rank r's host durations at `base_us` (`apply`), over numpy arrays (`vectors`)."""
        import numpy as np

        d, e, c, py, busy = self._arrays[r]  # type: ignore[index]
        exacts = np.where(py, np.maximum(0.0, d - py_cost), np.maximum(np.minimum(d, base_us * e), d - c))
        if self.work != 1.0:
            exacts *= self.work
        if busy is not None:
            # a wait longer than the peer's kernels in it keeps `idle_share` of the rest
            exacts = np.where(exacts > busy, busy + self.idle_share * (exacts - busy), exacts)
        return _carried_rounding(exacts)

    def _durations(self, r: int, base_us: float, py_cost: float) -> list[int]:
        """`_vector_durations` node by node: the same float operations in the same order."""
        work, share, gap_cap, op_cap = self.work, self.idle_share, self.gap_cap, self.op_cap
        exacts = [
            max(0.0, float(d) - py_cost)
            if p
            else max(min(float(d), base_us * e), float(d) - (gap_cap if s else op_cap) * (e if e > 1 else 1.0))
            for d, e, s, p in zip(self.recorded[r], self.events[r], self.special[r], self.python[r])
        ]
        if work != 1.0:
            exacts = [x * work for x in exacts]
        if self._busy is not None:
            exacts = [b + share * (x - b) if x > b else x for x, b in zip(exacts, self._busy[r])]
        return _round_carried(exacts)

    def overrides(self) -> dict[int, tuple[Any, Any]]:
        """rank -> (host node positions, their durations) of the last `apply(..., write=False)`."""
        import numpy as np

        if self._row_arrays is None:  # the replay indexes its durations with them, once per trial
            self._row_arrays = [np.asarray(rows, dtype=np.int64) for rows in self.rows]
        out = {}
        for pos, (t, rows, new) in enumerate(zip(self.traces, self._row_arrays, self.unwritten)):
            out[t.rank if t.rank is not None else pos] = (rows, new)
        return out

    def mark(self, also: Optional[list[Any]] = None) -> None:
        """Changed host nodes keep their recorded duration in PROFILED_ATTR (and the facts know);
        `also`: per rank, other durations of the host nodes (an `apply(..., write=False)`) whose
        changes count too."""
        for r, (nodes, rec, kept, f, rows) in enumerate(
            zip(self.nodes, self.recorded, self.kept, self.facts, self.rows)
        ):
            now = f.columns.durations if f.columns is not None else None
            current = _at(now, rows) if now is not None else [n.duration_micros for n in nodes]
            other = also[r] if also is not None else current
            for j, (d, k, c, o) in enumerate(zip(rec, kept, current, other)):
                if k or (c == d and o == d):
                    continue
                i = rows[j]
                if now is None:
                    n = nodes[j]
                    if d <= _INT64_MAX:  # set_attr's arm for it, without looking for one first
                        n.attr.add(name=PROFILED_ATTR, int64_val=d)
                    else:
                        set_attr(n, PROFILED_ATTR, int(d))
                f.profiled[i] = int(d)  # with columns, they write the attribute (columns.py)


def _round_carried(exacts: list[float]) -> list[int]:
    """Each value rounded with the previous ones' rounding error carried into it (so sums along
    a thread stay exact)."""
    carry = 0.0
    out = []
    add = out.append
    for exact in exacts:
        exact += carry
        new = round(exact)
        carry = exact - new
        add(new)
    return out


def _carried_rounding(exacts: np.ndarray) -> list[int]:
    """`_round_carried` of an array. A value of 0 leaves the carry as it is and rounds to 0 (the
    carry is at most 0.5, and round() takes halves to even), so where most values are 0 (the fit
    at its floor) the loop runs over the others only, with the same results."""
    import numpy as np

    nonzero = np.flatnonzero(exacts)  # NaN counts as nonzero: it goes through the loop as before
    sparse = len(nonzero) * 2 < len(exacts)
    out = _round_carried((exacts[nonzero] if sparse else exacts).tolist())
    if not sparse:
        return out
    full = np.zeros(len(exacts), dtype=np.int64)
    full[nonzero] = out
    return full.tolist()


class CollectiveWaits:
    """A collective's recorded span on a rank is its transfer plus the wait for the last member to
    arrive. Under the profiler that wait holds the *peers'* inflated host time (a rank whose own
    host work is done early waits in the collective for the slowest one), which no per-node rule
    of this rank can remove, and `--comm replay` replays each rank's span as a fixed delay. So the
    spans are rebuilt from the peers' schedule instead:

    * a collective's transfer is the shortest of its members' recorded spans: the last member to
      arrive waits for nobody, and all members leave together (clock-free: no cross-host clock
      comparison is needed);
    * on each rank it lasts transfer + (the latest member's arrival - this rank's arrival), the
      arrivals taken from the replay of the converted traces; replaying again moves the arrivals,
      so this is repeated until they settle (the waits only push later nodes later: a few rounds).

    Members are matched per process group by their position on it (every rank issues a group's
    collectives in one order; chakra.sim.rendezvous), with the same type and size; a group whose
    members do not line up is left as recorded."""

    def __init__(self, traces: Sequence[Trace], replay: Optional[Callable[[], tuple[Any, float]]] = None) -> None:
        self.traces = traces
        self.replay = replay or _Replayer(traces)
        by_key: dict[tuple[str, int], list[tuple[int, Any]]] = {}
        for pos, t in enumerate(traces):
            count: dict[str, int] = {}
            for n in t.nodes:
                if n.type != _COLL:
                    continue
                pg = str(get_attr(n, "pg_name", ""))
                k = count.get(pg, 0)
                count[pg] = k + 1
                by_key.setdefault((pg, k), []).append((pos, n))
        self.groups: list[tuple[int, list[tuple[int, Any]]]] = []
        for members in by_key.values():
            if len(members) != len(traces) or len({pos for pos, _ in members}) != len(traces):
                continue
            shapes = {(get_attr(n, "comm_type", None), get_attr(n, "comm_size", None)) for _, n in members}
            if len(shapes) != 1:
                continue
            self.groups.append((min(_recorded(n) for _, n in members), members))
        self.recorded = [(n, _recorded(n)) for _, members in self.groups for _, n in members]

    def __bool__(self) -> bool:
        return bool(self.groups)

    def restore(self) -> None:
        """Every collective as recorded."""
        for n, d in self.recorded:
            n.duration_micros = d

    def settle(self) -> tuple[Any, float]:
        """Rebuild the spans (class docstring); returns the last replay's (result, step ns)."""
        for _, members in self.groups:
            for _, n in members:
                n.duration_micros = 0
        for _ in range(WAIT_ROUNDS):
            res, step = self.replay()
            last = (res, step)
            changed = 0
            for transfer, members in self.groups:
                starts = [res.node_times.get(self._rank(pos), {}).get(n.id) for pos, n in members]
                if any(s is None for s in starts):
                    continue
                latest = max(s[0] for s in starts)
                for (_, n), s in zip(members, starts):
                    d = int(round(transfer + (latest - s[0]) / 1000.0))
                    changed = max(changed, abs(d - n.duration_micros))
                    n.duration_micros = d
            if changed <= 1:
                return last
        return self.replay()  # not settled within WAIT_ROUNDS: the step of the last spans

    def _rank(self, pos: int) -> int:
        r = self.traces[pos].rank
        return r if r is not None else pos

    def mark(self) -> None:
        for n, d in self.recorded:
            if n.duration_micros != d and get_attr(n, PROFILED_ATTR, None) is None:
                set_attr(n, PROFILED_ATTR, int(d))


def _replay(traces: Sequence[Trace]) -> tuple[Any, float]:
    from chakra.sim import SimOptions, simulate

    res = simulate(list(traces), options=SimOptions(comm_mode="replay", record_nodes=True))
    return res, step_time(traces, {r: v.finish_ns for r, v in res.ranks.items()}, res.node_times).step_ns


class _Replayer:
    """The replays of one set of traces whose host durations change between them (the fit):
    `chakra.sim.pathreplay` reads the traces once and answers each replay to the ns of the
    simulator; where it does not apply (memory nodes, ...) each replay is a simulation."""

    def __init__(self, traces: Sequence[Trace], facts: Optional[Sequence[_Facts]] = None) -> None:
        self.traces = traces
        self.facts = facts
        self.paths: Any = None
        self.tried = False

    def fast(self) -> bool:
        """Whether the path replay answers (built on first use)."""
        self._build()
        return self.paths is not None

    def __call__(self, overrides: Optional[dict[int, tuple[Any, Any]]] = None) -> tuple[Any, float]:
        """(result with `ranks` and `node_times`, step ns) of the traces as they are now, or with
        `overrides` (rank -> node positions, durations; the path replay only) in place of theirs."""
        self._build()
        if self.paths is None:
            self._nodes_from_columns()
            return _replay(self.traces)
        res = self.paths.run(overrides)
        return res, self.paths.step(res).step_ns

    def _nodes_from_columns(self) -> None:
        """Ranks held in columns (columns.py) as nodes for the simulator, with their durations now."""
        for t, f in zip(self.traces, self.facts or ()):
            if f.columns is not None:
                if not t.nodes:
                    t.nodes = [pb.Node.FromString(m) for m in f.columns.messages()]
                for n, d in zip(t.nodes, f.columns.durations):
                    n.duration_micros = d

    def _build(self) -> None:
        if not self.tried:
            from chakra.sim.pathreplay import PathReplay

            self.tried = True
            steps = None
            if self.facts is not None:
                ranks = [t.rank if t.rank is not None else pos for pos, t in enumerate(self.traces)]
                steps = {r: [node_id for _, node_id, _ in f.steps()] for r, f in zip(ranks, self.facts)}
            columns = [_replay_columns(f) for f in self.facts] if self.facts is not None else None
            self.paths = PathReplay.build(self.traces, step_ids=steps, columns=columns)


def _replay_columns(f: _Facts) -> tuple:
    """What `PathReplay.build` takes of one rank's facts (ids, types; with columns, also the
    dependencies and the durations the passes change)."""
    if f.columns is None:
        return (f.ids, f.types)
    return (f.ids, f.types, (f.columns.data, f.columns.ctrl), f.columns.durations)


def rebuild_waits(traces: Sequence[Trace]) -> bool:
    """The cross-rank waits of a job's collectives rebuilt from the converted schedule
    (`CollectiveWaits`); False when the job has no collectives matched across its ranks."""
    waits = CollectiveWaits(traces) if len(traces) > 1 else None
    if not waits:
        return False
    waits.settle()
    waits.mark()
    return True


def simulated_step_ns(traces: Sequence[Trace]) -> float:
    """The replayed step (chakra.sim.steps) of traces as they are: recorded comm durations."""
    return _replay(traces)[1]


def remove_overhead(
    traces: Sequence[Trace],
    measured_step_ns: Optional[float] = None,
    *,
    measured_source: Optional[str] = None,
    base_us: Optional[float] = None,
    costs: Optional[Costs] = None,
    progress: Optional[Callable[[str], None]] = None,
    replay: bool = False,
    notes: Sequence[str] = (),
    facts: Optional[Sequence[_Facts]] = None,
    estimate_marks: bool = False,
) -> OverheadReport:
    """Rewrite the traces' host durations in place (module docstring); returns what was done.

    `facts`: `node_facts(traces)` from an earlier pass over the same nodes (kept current by it),
    instead of reading every node's attributes again.

    With `measured_step_ns` the untraced time per host node is fitted (regula falsi: the replayed
    step grows with it) until the replayed step is within 0.3% of it; a step time that the
    recorded durations already reach, or that no host time can reach, is said in the notes and
    the nearest end is kept. Without it nothing is simulated unless `replay` (then the report
    also gives the profiled and the predicted step). `notes` go first into the report's notes.

    `estimate_marks`: the pass without a step time (the estimate) was not run first, as it is
    for every rank otherwise; the nodes it would have changed keep their recorded duration in
    `profiled_dur_us` all the same (that is all it leaves in the output once a fit follows).
    """
    say = progress or (lambda _m: None)
    facts = facts if facts is not None else node_facts(traces)
    if costs is None:
        # read from recorded durations, names and types, which no pass changes: once per facts
        cached = facts[0].costs if facts else None
        if cached is not None and len(cached[0]) == len(facts) and all(a is b for a, b in zip(cached[0], facts)):
            costs = cached[1]
        else:
            costs = estimate_costs(traces, facts)
            if facts:
                facts[0].costs = (tuple(facts), costs)
    plan = _Plan(traces, costs, facts)
    if measured_step_ns is not None or replay:
        plan.vectors()  # replays to come: `apply` runs for each
    replayer = _Replayer(traces, facts)
    waits = CollectiveWaits(traces, replayer) if len(traces) > 1 else None

    def replay_step() -> float:
        # with several ranks the collectives' waits follow the converted schedule (CollectiveWaits)
        return (waits.settle() if waits else replayer())[1]

    def trial(base: float) -> float:
        """The replayed step with every host node at `base_us` (plan.apply, then a replay). Where
        the path replay answers and no waits are rebuilt, the durations go to it as arrays and
        the nodes are left as they were (only the last apply, below, writes them)."""
        if waits is None and replayer.fast():
            plan.apply(base, write=False)
            return replayer(plan.overrides())[1]
        plan.apply(base)
        return replay_step()

    default_base = BASE_PER_GAP * costs.gap_us
    rep = OverheadReport("estimated", default_base, costs.gap_us, costs.op_us, host_nodes=sum(map(len, plan.rows)))
    rep.notes.extend(notes)  # the caller's: what the measured step's source says against itself
    profiled = facts[0].recorded_steps_ns() if facts else []
    rep.profiled_step_ns = _median(profiled) if profiled else 0.0
    rep.host_recorded_us = sum(map(sum, plan.recorded))
    estimated = None
    if estimate_marks:
        plan.apply(default_base, write=False)  # the estimate's durations (see `estimate_marks`)
        estimated = list(plan.unwritten)
    if measured_step_ns is not None or replay:
        plan.apply(None)  # every node as recorded
        if waits:
            waits.restore()
        rep.replay_profiled_ns = replayer()[1]
    kept_all = False
    if measured_step_ns is not None:
        rep.mode, rep.measured_step_ns, rep.measured_source = "measured", float(measured_step_ns), measured_source
        target = float(measured_step_ns)
        lo, hi = 0.0, max(1.0, _longest(plan.recorded))
        at_default = trial(default_base)
        fitted_idle = False
        if plan.peer_busy and at_default > (1 + AGREE) * target:
            # Ranks time-share one device: how much of the device's idle waits survive without the
            # profiler is the unknown here (shared_device_busy); fit it at the estimated host time.
            plan.idle_share = 0.0
            plan.apply(default_base)
            if replay_step() <= target:

                def at_idle_share(share: float) -> float:
                    plan.idle_share = share
                    plan.apply(default_base)
                    return replay_step()

                _solve(0.0, 1.0, target, at_idle_share, rising=True, rounds=30)
                fitted_idle = True
                rep.base_us = default_base
                rep.notes.append(
                    f"the ranks time-share one device: {100 * plan.idle_share:.0f}% of its idle waits kept "
                    "(fitted; the host time is the estimate)"
                )
        floor = trial(lo)
        if fitted_idle:
            pass
        elif abs(at_default - target) <= AGREE * target:
            # The measured step agrees with the estimate: where the device sets the step, host
            # time hardly moves it, and a fit would only wander along that flat stretch.
            rep.base_us = default_base
            rep.notes.append(
                f"the estimate ({at_default / 1e6:.3f} ms) is within {100 * AGREE:.0f}% of the measured step: "
                "kept (the step does not pin the host time down)"
            )
        elif target >= (rep.replay_profiled_ns or 0.0):
            rep.base_us = hi
            kept_all = True  # GPU launch waits and Python gaps too: the profiled replay is the nearest
            rep.notes.append(
                f"the measured step ({target / 1e6:.3f} ms) is not shorter than the profiled replay "
                f"({(rep.replay_profiled_ns or 0.0) / 1e6:.3f} ms): durations kept as recorded"
            )
        elif floor > target:
            # Even C++ nodes at zero leave the step too long: the Python-level gaps held more of
            # the profiler than one callback gap; fit their share instead (up to all of it).
            rep.base_us = 0.0
            lo_py, hi_py = (
                plan.python_cost,
                max(plan.python_cost, _longest(plan.recorded)),
            )
            plan.python_cost = hi_py
            lowest = trial(0.0)
            if lowest > target:
                # Even with every per-call cost and every Python gap gone, the recorded work is
                # longer than the measured step: the host itself ran slower while traced (on a
                # shared CPU: preemption, and neighbours taking its caches and memory bandwidth;
                # the profiler's own memory traffic evicting the operators' data). That slows all
                # host work alike, so each host node keeps a fitted share of what is left after
                # the profiler's costs (Python gaps at their estimate).
                plan.python_cost = PYTHON_GAPS * costs.gap_us
                plan.work = 0.0
                if trial(0.0) > target:
                    plan.work, plan.python_cost = 1.0, hi_py
                    rep.notes.append(
                        f"with no host time left the replay takes {lowest / 1e6:.3f} ms, more than the measured "
                        f"{target / 1e6:.3f} ms (device time or communication sets the step)"
                    )
                else:

                    def at_work(share: float) -> float:
                        plan.work = share
                        return trial(0.0)

                    _solve(0.0, 1.0, target, at_work, rising=True)
                    rep.work_share = plan.work
                    rep.notes.append(
                        f"the recorded host work is longer than the measured step even without the profiler's "
                        f"costs: the host ran slower while traced; every host node keeps {100 * plan.work:.0f}% "
                        "of its work (fitted)"
                    )
            else:

                def at_python_cost(cost: float) -> float:
                    plan.python_cost = cost
                    return trial(0.0)

                _solve(lo_py, hi_py, target, at_python_cost, rising=False)
                rep.notes.append(
                    f"host nodes at their floor; Python-level gaps lose {plan.python_cost:.1f} µs each "
                    f"(fitted; the estimate is {PYTHON_GAPS:g} x {costs.gap_us:.1f} µs)"
                )
            rep.python_gap_cost_us = plan.python_cost
        else:
            rep.base_us = _fit_base(trial, target, floor, default_base, at_default, hi, say)
    elif base_us is not None:
        rep.base_us = base_us
    if plan.peer_busy:
        rep.idle_share = plan.idle_share
    rep.removed_us = plan.apply(None if kept_all else rep.base_us)
    if measured_step_ns is not None or replay or waits:
        rep.predicted_step_ns = replay_step()
    plan.mark(estimated)
    if waits:
        waits.mark()
        rep.notes.append(
            f"{len(waits.groups)} collectives' waits for their peers rebuilt from the converted schedule "
            "(the recorded waits held the peers' profiler cost)"
        )
    # The trace keeps the manifest's file name, not where the inputs happened to lie: a recording
    # named by its folder or by its files converts to the same bytes (the summary has the path).
    recorded = rep.as_dict()
    if recorded.get("measured_source"):
        recorded["measured_source"] = ", ".join(Path(s).name for s in recorded["measured_source"].split(", "))
    for t in traces:
        set_attr(t.metadata, META_ATTR, json.dumps(recorded, sort_keys=True))
    return rep


def keep_recorded(traces: Sequence[Trace], replay: bool = False) -> OverheadReport:
    """`--profiled`: nothing removed; the report gives the profiled step (and its replay if asked)."""
    costs = estimate_costs(traces)
    nodes = [_host_nodes(t) for t in traces]
    rep = OverheadReport("kept", float("inf"), costs.gap_us, costs.op_us, host_nodes=sum(map(len, nodes)))
    rep.host_recorded_us = sum(n.duration_micros for ns in nodes for n in ns)
    profiled = [s for t in traces[:1] for s in recorded_steps_ns(t)]
    rep.profiled_step_ns = _median(profiled) if profiled else 0.0
    if replay:
        rep.replay_profiled_ns = rep.predicted_step_ns = simulated_step_ns(traces)
    for t in traces:
        set_attr(t.metadata, META_ATTR, json.dumps(rep.as_dict(), sort_keys=True))
    return rep


def overhead_of(trace: Trace) -> Optional[dict[str, Any]]:
    """The `profiler_overhead` record a converted trace carries, or None."""
    return overhead_record(trace.metadata)


def restore_profiled(traces: Sequence[Trace]) -> int:
    """Put the recorded (profiled) durations back; returns the number of nodes changed."""
    changed = 0
    for t in traces:
        for n in t.nodes:
            d = get_attr(n, PROFILED_ATTR, None)
            if d is not None and n.duration_micros != d:
                n.duration_micros = int(d)
                changed += 1
    return changed


__all__ = [
    "CollectiveWaits",
    "Costs",
    "OverheadReport",
    "estimate_costs",
    "keep_recorded",
    "node_facts",
    "overhead_of",
    "rebuild_waits",
    "remove_overhead",
    "restore_profiled",
    "simulated_step_ns",
]

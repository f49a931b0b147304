"""The training step of a simulated run: one definition for `simulate`, `whatif`, `analyze`,
the HTML report and the converter's fit to a measured step time.

A recorded PyTorch run marks its steps with `ProfilerStep#k` annotations. Step k of a rank lasts
from the simulated start of its `ProfilerStep#k` node to the start of the next one (the last
step to the rank's finish); the job's step k is the longest over the ranks. The **step time** is
the median of the steps: a trace whose first step is different (a CUDA graph capture, a
compilation) is not averaged with the steady state, and with two steps it is their mean. A
trace without annotations is one step lasting the whole run.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from chakra.trace import Trace

STEP_RE = re.compile(r"^ProfilerStep#\d+$")
#: Metadata attribute of a converted PyTorch trace: what was done about the profiler's cost.
OVERHEAD_ATTR = "profiler_overhead"
PathLike = Union[str, os.PathLike]


@dataclass
class StepTime:
    """`step_ns`: the median step; `steps_ns`: every step (job-wide, slowest rank per step)."""

    step_ns: float
    steps_ns: list[float] = field(default_factory=list)
    finish_ns: int = 0
    annotated: bool = False  # False: no ProfilerStep# marks, the whole run is one step

    @property
    def count(self) -> int:
        return max(1, len(self.steps_ns))

    def as_dict(self) -> dict[str, Any]:
        return {
            "step_ns": self.step_ns,
            "steps_ns": self.steps_ns,
            "steps": self.count,
            "definition": "median over ProfilerStep#k of its span (start of step k to start of k+1, "
            "the last to the finish), slowest rank per step"
            if self.annotated
            else "no ProfilerStep# marks: the whole run",
        }


def step_node_ids(trace: Union[Trace, Iterable[Any]]) -> list[int]:
    """Ids of the `ProfilerStep#k` nodes in step order (k); `trace` may be any iterable of nodes."""
    nodes = trace.nodes if isinstance(trace, Trace) else trace
    marks = [(int(n.name.rsplit("#", 1)[1]), n.id) for n in nodes if STEP_RE.match(n.name)]
    return [i for _, i in sorted(marks)]


def step_ids_of_files(paths: Sequence[tuple[int, PathLike]]) -> dict[int, list[int]]:
    """rank -> its `ProfilerStep#k` ids, streaming each (rank, file) (nothing else is kept)."""
    from chakra.io import TraceReader

    out = {}
    for rank, path in paths:
        with TraceReader(path) as r:
            out[rank] = step_node_ids(r)
    return out


def overhead_record(metadata: Any) -> Optional[dict[str, Any]]:
    """The `profiler_overhead` record a converted PyTorch trace carries in its metadata, or None."""
    from chakra.schema.attrs import get_attr

    raw = get_attr(metadata, OVERHEAD_ATTR, None)
    if not raw:
        return None
    try:
        rec = json.loads(raw)
    except ValueError:
        return None
    return rec if isinstance(rec, dict) else None


def overhead_of_file(path: PathLike) -> Optional[dict[str, Any]]:
    from chakra.io import TraceReader

    with TraceReader(path) as r:
        return overhead_record(r.metadata)


def times_label(rec: Optional[dict[str, Any]]) -> str:
    """Which run the durations describe, in a few words (simulate, whatif, analyze, report)."""
    if rec is None:
        return "the trace's durations"
    if rec.get("mode") == "kept":
        return "the profiled run (recorded durations, --profiled)"
    if rec.get("mode") == "measured":
        ms = rec["measured_step_ns"] / 1e6
        return f"the untraced run (profiler cost removed, fitted to the measured {ms:,.3f} ms step)"
    return (
        "the untraced run (profiler cost removed, estimated from the trace alone: uncertain where the host sets "
        "the step)"
    )


def timebase(rec: Optional[dict[str, Any]]) -> dict[str, Any]:
    """The JSON form of the same: `times` (untraced | profiled | recorded) and the profiled step."""
    if rec is None:
        return {"times": "recorded", "label": times_label(None)}
    out = {
        "times": "profiled" if rec.get("mode") == "kept" else "untraced",
        "label": times_label(rec),
        "overhead_mode": rec.get("mode"),
        "profiled_replay_step_ns": rec.get("replay_profiled_ns"),  # None unless the conversion replayed it
        "profiled_recorded_step_ns": rec.get("profiled_step_ns"),
    }
    if rec.get("measured_step_ns") is not None:
        out["measured_step_ns"] = rec["measured_step_ns"]
    return out


def count_steps(traces: Sequence[Trace]) -> int:
    """Training steps recorded in rank 0 (ProfilerStep#k annotations), at least 1."""
    return max(1, len(step_node_ids(traces[0]))) if traces else 1


def step_time(
    traces: Sequence[Trace],
    finish_by_rank: dict[int, int],
    node_times: Optional[dict[int, dict[int, tuple[int, int]]]],
) -> StepTime:
    """The step time of a simulation (`node_times` from `SimOptions(record_nodes=True)`)."""
    ids = {(t.rank if t.rank is not None else pos): step_node_ids(t) for pos, t in enumerate(traces)}
    return step_time_of_ids(ids, finish_by_rank, node_times)


def step_time_of_ids(
    step_ids: dict[int, list[int]],
    finish_by_rank: dict[int, int],
    node_times: Optional[dict[int, dict[int, tuple[int, int]]]],
) -> StepTime:
    """`step_time` from each rank's `ProfilerStep#k` ids (`step_ids_of_files`)."""
    finish = max(finish_by_rank.values(), default=0)
    per_step: list[float] = []
    if node_times:
        for rank, ids in step_ids.items():
            times = node_times.get(rank)
            if not times:
                continue
            starts = [times[i][0] for i in ids if i in times]
            if not starts:
                continue
            ends = starts[1:] + [finish_by_rank.get(rank, finish)]
            spans = [float(e - s) for s, e in zip(starts, ends)]
            if len(per_step) < len(spans):
                per_step += [0.0] * (len(spans) - len(per_step))
            for k, v in enumerate(spans):
                per_step[k] = max(per_step[k], v)
    if not per_step:
        return StepTime(float(finish), [float(finish)], finish, annotated=False)
    import statistics

    return StepTime(statistics.median(per_step), per_step, finish, annotated=True)


def recorded_steps_ns(trace: Trace) -> list[float]:
    """The profiled steps of a converted PyTorch trace: the recorded span of each `ProfilerStep#k`
    (its `inclusive_dur` attribute, µs, from the Kineto trace), in ns; [] when not recorded."""
    from chakra.schema.attrs import get_attr

    out = []
    by_id = {n.id: n for n in trace.nodes if STEP_RE.match(n.name)}
    for i in step_node_ids(trace):
        dur = get_attr(by_id[i], "inclusive_dur", None)
        if dur:
            out.append(float(dur) * 1000.0)
    return out


__all__ = [
    "OVERHEAD_ATTR",
    "STEP_RE",
    "StepTime",
    "count_steps",
    "overhead_of_file",
    "overhead_record",
    "recorded_steps_ns",
    "step_ids_of_files",
    "step_node_ids",
    "step_time",
    "step_time_of_ids",
    "timebase",
    "times_label",
]

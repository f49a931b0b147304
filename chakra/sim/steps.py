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

import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from chakra.trace import Trace

STEP_RE = re.compile(r"^ProfilerStep#\d+$")


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


def step_node_ids(trace: Trace) -> list[int]:
    """Ids of the `ProfilerStep#k` nodes in step order (k)."""
    marks = [(int(n.name.rsplit("#", 1)[1]), n.id) for n in trace.nodes if STEP_RE.match(n.name)]
    return [i for _, i in sorted(marks)]


def count_steps(traces: Sequence[Trace]) -> int:
    """Training steps recorded in rank 0 (ProfilerStep#k annotations), at least 1."""
    return max(1, len(step_node_ids(traces[0]))) if traces else 1


def step_time(
    traces: Sequence[Trace],
    finish_by_rank: dict[int, int],
    node_times: Optional[dict[int, dict[int, tuple[int, int]]]],
) -> StepTime:
    """The step time of a simulation (`node_times` from `SimOptions(record_nodes=True)`)."""
    finish = max(finish_by_rank.values(), default=0)
    per_step: list[float] = []
    if node_times:
        for pos, t in enumerate(traces):
            rank = t.rank if t.rank is not None else pos
            times = node_times.get(rank)
            if not times:
                continue
            starts = [times[i][0] for i in step_node_ids(t) if i in times]
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


__all__ = ["STEP_RE", "StepTime", "count_steps", "recorded_steps_ns", "step_node_ids", "step_time"]

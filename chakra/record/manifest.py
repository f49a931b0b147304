"""The untraced step time of a recording: read from the manifest beside its traces, or given by hand.

Read without torch (the converter uses it). Two producers are understood:

* `chakra.record.Recorder`: `manifest.json` (one rank) or `manifest.<rank>.json` (each rank of a
  distributed run), `"kind": "chakra.record"`, `untraced_step_s.median` (wall clock), or on a
  one-threaded CPU run `untraced_thread_cpu_s.median` (`truth_of`);
* `tools/pytorch_gpu.py` (the project's GPU recordings, tests/data/gpu): `timing.json`,
  `step_s.median`.

A distributed job's step is its slowest rank's, so several rank manifests give their maximum.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from chakra.errors import InputError

_UNITS = {"s": 1e9, "ms": 1e6, "us": 1e3, "µs": 1e3, "ns": 1.0}
_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(s|ms|us|µs|ns)?\s*$")


@dataclass
class StepTruth:
    step_ns: float
    source: str  # the file(s), or "--step-time"
    what: str = "wall"  # "wall" (device-synchronised wall clock) or "thread CPU" (truth_of)
    cautions: tuple[str, ...] = ()  # what makes this truth or the traced steps doubtful (cautions)


#: Beyond these the manifest's figures are doubtful (docs/whatif-validation.md, the CPU section).
PREEMPTED = 0.02  # the traced steps' wall clock over their thread CPU time, less 1
DRIFT = 0.10  # the untraced steps after the traced ones against those before, less 1


def cautions(doc: dict) -> tuple[str, ...]:
    """What a Recorder manifest says against its own figures: traced steps that were preempted
    (their operator times hold other processes' turns, which no removal of the profiler's cost can
    tell apart), and an untraced step that moved between before and after the traced steps."""
    out = []
    pre = doc.get("traced_preemption")
    if isinstance(pre, (int, float)) and pre > PREEMPTED:
        out.append(
            f"the traced steps were preempted (wall clock {100 * pre:.0f}% over the thread's CPU time): their "
            "recorded times hold other processes' turns; re-record at a higher priority"
        )
    drift = doc.get("untraced_drift")
    if isinstance(drift, (int, float)) and abs(drift) > DRIFT:
        if _before_only(doc):
            out.append(
                f"the untraced steps after the traced ones ran {100 * drift:+.0f}% against those before: on CUDA "
                "the profiler's device tracing outlives it, so the truth is the steps before"
            )
        else:
            out.append(
                f"the untraced step moved {100 * drift:+.0f}% between before and after the traced steps: "
                "the measured step is uncertain by that much"
            )
    return tuple(out)


def _before_only(doc: dict) -> bool:
    """Whether the truth is the untraced steps before the traced ones alone: on CUDA. There the
    steps after the profiler are no longer the user's program: CUPTI stays subscribed once
    torch.profiler has run, and every kernel launch after it is slower (H200, 2026-11-28: the steps
    after ran +22% to +38% on launch-bound models, a step change at the profiler's end, while CUDA
    graph replays, which launch nothing, moved under 1%). On a CPU both sets are the same program
    and together bracket a host whose speed drifts."""
    before = doc.get("untraced_before_step_s")
    return (doc.get("device") or {}).get("type") == "cuda" and isinstance(before, dict) and bool(before.get("n"))


def truth_of(doc: dict) -> StepTruth:
    """The untraced step of a Recorder manifest: what a user gets on an unloaded machine.

    On a GPU (or a multi-threaded CPU run) that is the synchronised wall clock. A one-threaded CPU
    run does all its work on the calling thread, so its wall clock on an unloaded core equals the
    thread's CPU time; on a shared host the wall clock also holds the time other processes ran
    on that core (preemption: up to 3x on a loaded 2-core host), which the CPU time does not. So a
    one-threaded CPU run's truth is the median of its thread CPU time, unless the wall clock is
    lower (a clock's rounding). On CUDA, steps timed after the traced ones are left out
    (`_before_only`)."""
    wall = float(doc["untraced_before_step_s" if _before_only(doc) else "untraced_step_s"]["median"])
    dev = doc.get("device") or {}
    cpu = (doc.get("untraced_thread_cpu_s") or {}).get("median")
    if dev.get("type") == "cpu" and dev.get("threads") == 1 and isinstance(cpu, (int, float)) and 0 < cpu < wall:
        return StepTruth(float(cpu) * 1e9, "", "thread CPU", cautions(doc))
    return StepTruth(wall * 1e9, "", "wall", cautions(doc))


def parse_step_time(text: str) -> float:
    """'27.8ms', '27.8 ms', '0.0278s', '27800us' -> ns; a bare number is ms (as logs print)."""
    m = _DURATION.match(text)
    if not m or float(m.group(1)) <= 0:
        raise InputError(f"--step-time: expected a positive duration like 27.8ms, 0.031s or 950us, got {text!r}")
    return float(m.group(1)) * _UNITS[m.group(2) or "ms"]


def _median_s(doc: dict, path: Path) -> Optional[float]:
    if doc.get("kind") == "chakra.record":
        block = doc.get("untraced_step_s")
        if isinstance(block, dict) and isinstance(block.get("median"), (int, float)) and block["median"] > 0:
            return truth_of(doc).step_ns / 1e9
    elif "step_s" in doc and "traced_step_s" in doc:  # tools/pytorch_gpu.py timing.json
        block = doc.get("step_s")
    else:
        return None
    value = block.get("median") if isinstance(block, dict) else None
    if not isinstance(value, (int, float)) or value <= 0:
        raise InputError(f"{path}: untraced step time: expected a positive number at .median, got {value!r}")
    return float(value)


def find_truth(inputs: Iterable[Path]) -> Optional[StepTruth]:
    """The untraced step beside the inputs (their folders), or None when there is no manifest."""
    folders: list[Path] = []
    for p in inputs:
        p = Path(str(p).split(":", 1)[0]) if ":" in str(p) and not Path(p).exists() else Path(p)
        folder = p if p.is_dir() else p.parent
        if folder not in folders:
            folders.append(folder)
    found: list[tuple[float, Path]] = []
    notes: list[str] = []
    for folder in folders:
        candidates = sorted(folder.glob("manifest.json")) + sorted(folder.glob("manifest.*.json"))
        candidates += sorted(folder.glob("timing.json"))
        for path in candidates:
            try:
                doc = json.loads(path.read_text())
            except (OSError, ValueError) as exc:
                raise InputError(f"{path}: not a readable JSON manifest ({exc})") from None
            if not isinstance(doc, dict):
                continue
            value = _median_s(doc, path)
            if value is not None:
                found.append((value, path))
                if doc.get("kind") == "chakra.record":
                    notes += [f"{path.name}: {c}" for c in cautions(doc)]
    if not found:
        return None
    value, _ = max(found)
    names = ", ".join(str(p) for _, p in found)
    return StepTruth(value * 1e9, names, cautions=tuple(notes))


__all__ = ["StepTruth", "cautions", "find_truth", "parse_step_time", "truth_of"]

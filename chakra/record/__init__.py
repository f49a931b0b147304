"""Record a training run together with its ground truth: untraced step times, then ET + Kineto.

The profiler slows every host operator down (its callbacks, the Execution Trace observer writing
each op's arguments, CUPTI on every launch), so a traced step can be several times longer than
the step a user gets. A recording that is to be replayed or used for a what-if therefore needs
the untraced step time beside it. `Recorder` measures both in one training loop::

    from chakra.record import Recorder

    rec = Recorder("out/run", warmup=5, timed=20, traced=3)
    while rec.running:
        with rec.step():
            loss = model(x).sum(); loss.backward(); opt.step(); opt.zero_grad()
    # out/run/et.<rank>.json.gz, kineto.<rank>.json.gz, manifest.json (per rank: manifest.<rank>.json)

Phases, in order: `warmup` steps (not timed), `timed` steps without the profiler (each ends with
a device synchronisation, so its wall time is the step's real time), then one profiler warm-up
step and `traced` steps under `torch.profiler.profile(..., execution_trace_observer=...)`, then
`timed_after` untraced steps again (default 0). Those bracket the traced steps in time: on a host
whose speed drifts (a shared CPU: what runs on the neighbouring cores changes its caches' and
memory's share) the truth is the median of both sets, and the manifest gives the drift between
them (`untraced_drift`: after / before - 1). On CUDA the truth is the steps before alone: the
profiler's device tracing outlives it and slows every later launch (chakra.record.manifest).
Every timed step also records the calling thread's CPU time: a one-threaded CPU run's truth
(chakra.record.manifest.truth_of), since on a loaded host its wall clock also holds the time
other processes ran on its core. Under
torch.distributed every rank records its own files (the rank and world size come from the
initialised process group); on CPU there is nothing to synchronise. `chakra convert pytorch
out/run/et.*.json.gz -k ...` reads the manifest beside the traces and removes the profiler's
cost so that the converted trace describes the untraced step.

torch is imported when a Recorder is made (the `[torch]` extra); `chakra.record.manifest`
reads the manifests without it.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

#: Name of the manifest a Recorder writes beside the traces (`manifest.<rank>.json` under DDP).
MANIFEST = "manifest.json"
MANIFEST_KIND = "chakra.record"


def _summary(values: list[float]) -> dict[str, float]:
    import statistics  # here and below: the converter imports this package for its manifests only

    qs = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return {"median": statistics.median(values), "p25": qs[0], "p75": qs[2], "min": min(values), "n": len(values)}


class Recorder:
    """Time `timed` untraced steps, then record `traced` steps with ET + Kineto; see the module doc.

    `device`: "cuda", "cpu" or None (CUDA when torch.cuda is initialised and available).
    `record_shapes`: Kineto shapes (the converter's FLOP/byte estimates need them).
    `extra`: anything JSON-serialisable the user wants in the manifest (model, batch, ...).
    """

    def __init__(
        self,
        out_dir: str | os.PathLike,
        *,
        warmup: int = 5,
        timed: int = 20,
        traced: int = 3,
        timed_after: int = 0,
        device: Optional[str] = None,
        record_shapes: bool = True,
        gzip_output: bool = True,
        extra: Optional[dict[str, Any]] = None,
    ) -> None:
        import torch

        if warmup < 0 or timed < 1 or traced < 1 or timed_after < 0:
            raise ValueError("Recorder needs warmup >= 0, timed >= 1, traced >= 1 and timed_after >= 0")
        self.torch = torch
        self.out = Path(out_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        self.warmup, self.timed, self.traced, self.timed_after = warmup, timed, traced, timed_after
        if device is None:
            device = "cuda" if torch.cuda.is_available() and torch.cuda.is_initialized() else "cpu"
        self.device = device
        self.record_shapes = record_shapes
        self.gzip_output = gzip_output
        self.extra = dict(extra or {})
        dist = torch.distributed
        self.distributed = dist.is_available() and dist.is_initialized()
        self.rank = dist.get_rank() if self.distributed else 0
        self.world_size = dist.get_world_size() if self.distributed else 1
        self.index = 0  # steps done
        self.untraced_s: list[float] = []
        self.untraced_cpu_s: list[float] = []  # CPU time of the calling thread (a loaded machine's check)
        self.traced_s: list[float] = []
        self.traced_cpu_s: list[float] = []
        self.after_s: list[float] = []  # untraced steps after the traced ones
        self.after_cpu_s: list[float] = []
        self._prof: Any = None
        self._et: Any = None
        self.manifest_path: Optional[Path] = None
        self.files: list[str] = []

    # ------------------------------------------------------------------ phases
    @property
    def _traced_end(self) -> int:
        return self.warmup + self.timed + 1 + self.traced

    @property
    def total(self) -> int:
        return self._traced_end + self.timed_after

    @property
    def running(self) -> bool:
        """True while steps remain (use as `while rec.running:`)."""
        return self.index < self.total

    def phase(self) -> str:
        i = self.index
        if i < self.warmup:
            return "warmup"
        if i < self.warmup + self.timed:
            return "timed"
        if i < self._traced_end:
            return "traced"
        if i < self.total:
            return "timed-after"
        return "done"

    def _sync(self) -> None:
        if self.device.startswith("cuda"):
            self.torch.cuda.synchronize()

    def _barrier(self) -> None:
        if self.distributed:
            self.torch.distributed.barrier()

    def _paths(self) -> tuple[Path, Path]:
        sfx = f".{self.rank}"
        return self.out / f"et{sfx}.json", self.out / f"kineto{sfx}.json"

    def _start_profiler(self) -> None:
        from torch.profiler import ExecutionTraceObserver, ProfilerActivity, profile, schedule

        et_path, kin_path = self._paths()
        self._et = ExecutionTraceObserver()
        self._et.register_callback(str(et_path))
        activities = [ProfilerActivity.CPU]
        if self.device.startswith("cuda"):
            activities.append(ProfilerActivity.CUDA)
        self._prof = profile(
            activities=activities,
            schedule=schedule(wait=0, warmup=1, active=self.traced, repeat=1),
            on_trace_ready=lambda p: p.export_chrome_trace(str(kin_path)),
            record_shapes=self.record_shapes,
            execution_trace_observer=self._et,
        )
        self._prof.__enter__()

    @contextlib.contextmanager
    def step(self) -> Iterator[str]:
        """One training step; yields its phase ("warmup", "timed", "traced", "timed-after")."""
        phase = self.phase()
        if phase == "done":
            raise RuntimeError("Recorder: every step is done (check rec.running)")
        if phase == "traced" and self._prof is None:
            self._barrier()
            self._start_profiler()
        self._sync()
        c0 = time.thread_time()
        t0 = time.perf_counter()
        yield phase
        self._sync()
        dt = time.perf_counter() - t0
        if phase == "timed":
            self.untraced_s.append(dt)
            self.untraced_cpu_s.append(time.thread_time() - c0)
        elif phase == "traced":
            self.traced_s.append(dt)
            self.traced_cpu_s.append(time.thread_time() - c0)
            self._prof.step()
        elif phase == "timed-after":
            self.after_s.append(dt)
            self.after_cpu_s.append(time.thread_time() - c0)
        self.index += 1
        if self.index == self._traced_end:
            self._stop_profiler()
        if self.index == self.total:
            self._finish()

    def _stop_profiler(self) -> None:
        self._prof.__exit__(None, None, None)
        self._et.unregister_callback()
        self._barrier()

    def _finish(self) -> None:
        import gzip
        import shutil

        files = []
        for p in self._paths():
            if not p.exists():
                continue
            if self.gzip_output:
                gz = p.with_name(p.name + ".gz")
                with open(p, "rb") as src, gzip.open(gz, "wb", compresslevel=6) as dst:
                    shutil.copyfileobj(src, dst)
                p.unlink()
                p = gz
            files.append(p.name)
        self.files = files
        self.manifest_path = self.out / (MANIFEST if self.world_size == 1 else f"manifest.{self.rank}.json")
        tmp = self.manifest_path.with_name(self.manifest_path.name + ".tmp")
        tmp.write_text(json.dumps(self.manifest(), indent=1) + "\n")
        os.replace(tmp, self.manifest_path)

    def _preemption(self, device: str) -> dict[str, float]:
        """A one-threaded CPU run's traced steps: how much longer by wall clock than on the thread's
        CPU (other processes' turns on its core, which the recorded operator durations hold too,
        and which no removal of the profiler's cost can tell from the trace: re-record such a run
        at a higher priority)."""
        import statistics

        pairs = [(w, c) for w, c in zip(self.traced_s[1:], self.traced_cpu_s[1:]) if c > 0]
        if device != "cpu" or self.torch.get_num_threads() != 1 or not pairs:
            return {}
        return {"traced_preemption": statistics.median(w / c - 1.0 for w, c in pairs)}

    def manifest(self) -> dict[str, Any]:
        import platform
        import statistics

        torch = self.torch
        dev: dict[str, Any] = {"type": "cuda" if self.device.startswith("cuda") else "cpu"}
        if dev["type"] == "cuda":
            dev["name"] = torch.cuda.get_device_name()
            dev["cuda"] = torch.version.cuda
        else:
            dev["name"] = platform.processor() or platform.machine()
            dev["threads"] = torch.get_num_threads()
        # The profiler's warm-up step is the first of the traced phase: not in the trace.
        traced = self.traced_s[1:]
        after: dict[str, Any] = {}
        if self.after_s:
            before = statistics.median(self.untraced_s)
            after = {
                "untraced_before_step_s": _summary(self.untraced_s),
                "untraced_after_step_s": _summary(self.after_s),
                "untraced_drift": statistics.median(self.after_s) / before - 1.0,
            }
        return {
            "kind": MANIFEST_KIND,
            "rank": self.rank,
            "world_size": self.world_size,
            "device": dev,
            "versions": {"torch": torch.__version__, "python": platform.python_version()},
            "warmup_steps": self.warmup,
            # every untraced step, before and after the traced ones (the truth: their median)
            "untraced_step_s": _summary(self.untraced_s + self.after_s),
            "untraced_per_step_s": self.untraced_s + self.after_s,
            "untraced_thread_cpu_s": _summary(self.untraced_cpu_s + self.after_cpu_s),
            "untraced_per_step_thread_cpu_s": self.untraced_cpu_s + self.after_cpu_s,
            **after,
            "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
            "traced_steps": self.traced,
            "traced_step_s": traced,
            "traced_thread_cpu_s": self.traced_cpu_s[1:],
            **self._preemption(dev["type"]),
            "files": self.files,
            "extra": self.extra,
        }


__all__ = ["MANIFEST", "MANIFEST_KIND", "Recorder"]

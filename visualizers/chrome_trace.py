"""Writing Chrome trace-event JSON (the format Perfetto and chrome://tracing open), streamed.

We emit a small subset, described by `trace_event_schema.json` next to this file: complete
events (`ph: X`, `ts`/`dur` in µs), metadata events naming processes and threads (`ph: M`) and
flow events (`ph: s`/`f`) for dependency arrows. Events are serialised in batches with orjson and
written as they come, so memory stays bounded however long the input is.

Tracks: one process per NPU/rank; threads 1, 2, 3 are the memory, compute and communication
resources. Perfetto hides complete events that overlap on one thread, so an op that starts while
another is still running on the same resource goes to an extra lane of that resource (tid
base + 3·lane, named "compute #2" and so on).
"""

from __future__ import annotations

import bisect
import json
import math
from importlib import resources
from typing import IO, Any, Optional

import orjson

from chakra.errors import ChakraError
from chakra.visualizers.kinds import RESOURCE_TID

_BATCH = 20000
SCHEMA_FILE = "trace_event_schema.json"


def load_schema() -> dict:
    """The JSON Schema of the trace-event subset we write (shipped with the package)."""
    try:
        text = resources.files("chakra.visualizers").joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    except (FileNotFoundError, ModuleNotFoundError):
        raise ChakraError(
            f"{SCHEMA_FILE} is missing from the installed chakra.visualizers package (package data not installed)"
        ) from None
    return json.loads(text)


def lane_tid(resource: str, lane: int) -> int:
    return RESOURCE_TID[resource] + 3 * lane


class ChromeTraceWriter:
    """Streams `{"traceEvents": [...], "displayTimeUnit": "ns", "otherData": {...}}` to a binary file."""

    def __init__(self, out: IO[bytes]) -> None:
        self._out = out
        #: Pending events; hot loops may append here directly and call `flush()` at `batch_limit`
        #: (then they add their count to `events` / `complete_events` themselves).
        self.batch: list[dict[str, Any]] = []
        self.batch_limit = _BATCH
        self._first = True
        self.events = 0
        self.complete_events = 0
        self.flow_events = 0
        self._processes: set[int] = set()
        out.write(b'{"traceEvents":[\n')

    def process(self, pid: int, name: str, sort_index: Optional[int] = None) -> None:
        """Name a process (once) and order it (by pid unless `sort_index` is given)."""
        if pid in self._processes:
            return
        self._processes.add(pid)
        order = pid if sort_index is None else sort_index
        self.add({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": name}})
        self.add({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0, "args": {"sort_index": order}})

    def named_thread(self, pid: int, tid: int, name: str, sort_index: int) -> None:
        """Name a track (a host thread, a GPU stream) and place it among the process's tracks."""
        self.add({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}})
        self.add({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": sort_index}})

    def thread(self, pid: int, resource: str, lane: int) -> None:
        tid = lane_tid(resource, lane)
        label = resource if lane == 0 else f"{resource} #{lane + 1}"
        self.add({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": label}})
        order = RESOURCE_TID[resource] * 1000 + lane
        self.add({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": order}})

    @property
    def processes(self) -> int:
        return len(self._processes)

    def complete(
        self, name: str, cat: str, pid: int, tid: int, ts_us: float, dur_us: float, args: dict[str, Any]
    ) -> None:
        self.complete_events += 1
        self.add(
            {"name": name, "cat": cat, "ph": "X", "pid": pid, "tid": tid, "ts": ts_us, "dur": dur_us, "args": args}
        )

    def flow(
        self,
        flow_id: int,
        src: tuple[int, int, float],
        dst: tuple[int, int, float],
        name: str = "dep",
        cat: str = "dependency",
    ) -> None:
        """An arrow from the slice at src (pid, tid, ts) to the slice enclosing dst's ts (`bp: e`).

        `name` and `cat` say what it means: a dependency, a kernel launch, a message, a collective.
        """
        self.flow_events += 2
        self.add({"name": name, "cat": cat, "ph": "s", "id": flow_id, "pid": src[0], "tid": src[1], "ts": src[2]})
        self.add(
            {
                "name": name,
                "cat": cat,
                "ph": "f",
                "bp": "e",
                "id": flow_id,
                "pid": dst[0],
                "tid": dst[1],
                "ts": dst[2],
            }
        )

    def add(self, event: dict[str, Any]) -> None:
        self.batch.append(event)
        self.events += 1
        if len(self.batch) >= _BATCH:
            self.flush()

    def flush(self) -> None:
        if not self.batch:
            return
        data = orjson.dumps(self.batch)
        # Strip the list brackets and join batches with a comma.
        body = data[1:-1].replace(b'},{"', b'},\n{"')
        if not self._first:
            self._out.write(b",\n")
        self._out.write(body)
        self._first = False
        self.batch.clear()

    def close(self, other_data: Optional[dict[str, Any]] = None) -> None:
        self.flush()
        self._out.write(b'\n],"displayTimeUnit":"ns","otherData":')
        self._out.write(orjson.dumps(other_data or {}))
        self._out.write(b"}\n")


def importer_problems(doc: dict[str, Any], limit: int = 10) -> list[str]:
    """What Perfetto's JSON importer would drop or misdraw in a trace we wrote (empty when none).

    The rules (Perfetto's json_trace_parser and its flow v1 handling): every process and track
    used is named by `process_name` / `thread_name` metadata; complete events on one track nest
    (a slice that starts inside another must end inside it, else it is dropped); every flow id has
    one `s` and one `f`, each at a timestamp inside a slice of its track (`s` binds to the
    enclosing slice, `f` with `bp: e` too).
    """
    problems: list[str] = []
    events = doc.get("traceEvents", [])
    procs = {e["pid"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    tracks = {(e["pid"], e["tid"]) for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    # Perfetto turns each µs timestamp and duration into whole ns on its own and nests by those, so
    # a slice that starts where its neighbour ends is not inside it, whatever the float sum says.
    slices: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for e in events:
        if e.get("ph") == "X":
            key = (e["pid"], e["tid"])
            if e["pid"] not in procs or key not in tracks:
                problems.append(f"slice {e['name']!r} on an unnamed process or track {key}")
            start = _ns(e["ts"])
            slices.setdefault(key, []).append((start, start + _ns(e["dur"])))
    for key, items in slices.items():
        items.sort(key=lambda s: (s[0], -s[1]))
        stack: list[int] = []
        for start, end in items:
            while stack and stack[-1] <= start:
                stack.pop()
            if stack and end > stack[-1]:
                problems.append(
                    f"track {key}: slice at {start / 1000} µs ends at {end / 1000}, after its parent's end "
                    f"{stack[-1] / 1000}"
                )
            stack.append(end)
    starts = {key: [s for s, _ in items] for key, items in slices.items()}
    # Longest slice so far, per track, for the "is ts inside some slice" test by bisection.
    reach: dict[tuple[int, int], list[int]] = {}
    for key, items in slices.items():
        best, out = -(2**63), []
        for _, end in items:
            best = max(best, end)
            out.append(best)
        reach[key] = out
    flows: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for e in events:
        if e.get("ph") in ("s", "f"):
            flows.setdefault((e["cat"], e["id"]), []).append(e)
    for (cat, fid), ends in flows.items():
        phases = sorted(e["ph"] for e in ends)
        if phases != ["f", "s"]:
            problems.append(f"flow {cat} #{fid}: events {phases}, expected one s and one f")
            continue
        for e in ends:
            key = (e["pid"], e["tid"])
            ts = _ns(e["ts"])
            i = bisect.bisect_right(starts.get(key, []), ts) - 1
            if i < 0 or reach[key][i] < ts:
                problems.append(f"flow {cat} #{fid}: its {e['ph']} at {e['ts']} µs on {key} is inside no slice")
        if len(problems) > limit:
            break
    return problems[:limit]


def _ns(us: float) -> int:
    """A trace-event time in µs as the whole ns Perfetto's JSON importer keeps (whole µs and their
    fraction apart: epoch timestamps times 1000 exceed what a float holds exactly)."""
    whole = math.floor(us)
    return whole * 1000 + round((us - whole) * 1000)

"""One rank's nodes as the converter wrote them, in columns, for the profiler-cost passes.

A single timed rank converted in this process (`chakra convert pytorch et.json -k kineto.json`)
goes through the profiler-cost passes (overhead.py) before it is written. Those passes read a few
facts of every node (id, name, type, duration, `is_cpu_op`, `gap_of`, dependencies, a step's
`inclusive_dur`) and change host durations (each changed node also gains a `profiled_dur_us`
attribute). The converter already knows all of that when it encodes a node, so `NodeEncoder`
records it here instead of streaming the node out: no file is written and read back, no protobuf
node is made, and the passes work on these lists and arrays. `write` then frames every node once:
its bytes up to the start time, the current duration, the rest, and the attribute when marked,
exactly the bytes the protobuf classes give for the same node (the encoder's bytes are
canonical; tests/converters/test_pytorch_overhead_facts.py compares the two ways).
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Optional

from chakra.converters.pytorch.wire import DUR_FIELDS, NODE_ATTR, NODE_DUR, AttrEncoder, length_delimited, varint
from chakra.files import temp_path
from chakra.schema import pb
from chakra.schema.attrs import set_attr

#: the attribute a changed node keeps its recorded duration in (overhead.PROFILED_ATTR)
PROFILED_ATTR = "profiled_dur_us"
_PROFILED = AttrEncoder(PROFILED_ATTR, "int64_val")
_INT64_MAX = (1 << 63) - 1
#: the framed duration field of 0 .. 16383 µs (none for 0)
_DUR_FIELD = [b"", *DUR_FIELDS[1:]]


class RankColumns:
    """Per node, in the order written: `ids`, `names`, `types`, `durations` (µs, current: the
    passes change them), `cpu` (`is_cpu_op`), `gap_of` (0 when absent), `data` and `ctrl` (the
    data and control dependencies as written), and `profiled` (the recorded duration of
    a node marked as changed, else None); `step_rows` are the rows of the `ProfilerStep#k` nodes,
    and `inclusive` maps them to their `inclusive_dur`. `metadata` is the rank's GlobalMetadata."""

    def __init__(self) -> None:
        self.metadata: Optional[pb.GlobalMetadata] = None
        self.step_rows: list[int] = []
        self.inclusive: dict[int, int] = {}
        self.ids: list[int] = []
        self.names: list[str] = []
        self.types: list[int] = []
        self.durations: list[int] = []
        self.cpu: list[Any] = []
        self.gap_of: list[int] = []
        self.data: list[Any] = []
        self.ctrl: list[Any] = []
        self.profiled: list[Any] = []
        self._pre: list[bytes] = []
        self._post: list[bytes] = []

    def add_step(self, name: str, inclusive: Optional[int]) -> None:
        """The node about to be added is an op called `name` with this `inclusive_dur` (or none)."""
        from chakra.sim.steps import STEP_RE  # only for a step mark: the simulator is not imported otherwise

        if STEP_RE.match(name):
            self.step_rows.append(len(self.ids))
            if inclusive:
                self.inclusive[len(self.ids)] = inclusive

    def appenders(self) -> tuple:
        """The `append` of every per-node column, in the order `NodeEncoder` fills them: ids,
        names, types, durations, cpu, gap_of, ctrl, data, the bytes before the duration and those
        after it (one append each per node: no row tuple to make and transpose afterwards)."""
        return (self.ids.append, self.names.append, self.types.append, self.durations.append,
                self.cpu.append, self.gap_of.append, self.ctrl.append, self.data.append, self._pre.append,
                self._post.append)  # fmt: skip

    def settle(self) -> None:
        """Every node is in: no node is marked yet."""
        self.profiled = [None] * len(self.ids)

    def __len__(self) -> int:
        return len(self.ids)

    def messages(self) -> list[bytes]:
        """Every node serialized as it is now (duration, `profiled_dur_us` when marked)."""
        durations = self.durations
        if durations and min(durations) >= 0 and max(durations) < 16384:  # by table, in C
            fields = list(map(_DUR_FIELD.__getitem__, durations))
        else:
            fields = [_DUR_FIELD[d] if 0 <= d < 16384 else NODE_DUR + varint(d) for d in durations]
        # every host node may be marked, with few distinct durations: each distinct one is framed
        # once, and the entries are looked up in one C-level pass
        profiled = self.profiled
        entry = {p: _profiled_entry(p) for p in set(profiled) if p is not None}
        entry[None] = b""
        marks = list(map(entry.__getitem__, profiled))
        return list(map(b"".join, zip(self._pre, fields, self._post, marks)))

    def write(self, path: str) -> None:
        """Write the rank over `path` (a temporary output file), through a fresh temporary file."""
        from chakra.io import TraceWriter

        assert self.metadata is not None
        fresh = temp_path(path)
        try:
            with TraceWriter(fresh) as w:
                w.write_metadata(self.metadata)
                w.write_serialized(self.messages())
            os.replace(fresh, path)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(fresh)


def _profiled_entry(d: int) -> bytes:
    """The framed `profiled_dur_us` entry, as `overhead._Plan.mark` adds it to a node."""
    if 0 <= d <= _INT64_MAX:
        return _PROFILED[d] if d < 16384 else _PROFILED.encode(d)
    node = pb.Node()
    set_attr(node, PROFILED_ATTR, int(d))
    body = node.attr[0].SerializeToString()
    return length_delimited(NODE_ATTR, body)


__all__ = ["PROFILED_ATTR", "RankColumns"]

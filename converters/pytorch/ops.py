"""The converter's working record for one operation, whatever its source (ET node, Kineto event).

One `Op` per host operator, GPU activity or collective executor. It is a slotted object (no
dict per instance) because a 100 MB trace holds ~100k of them; everything downstream (linking,
comm mapping, timeline, emission) reads and fills these fields instead of the raw JSON.
"""

from __future__ import annotations

from typing import Any, Optional

# Op.kind values
CPU = 0  # host operator / annotation
GPU = 1  # kernel, memcpy, memset
COMM = 2  # collective or p2p executor (gloo:<op>, nccl:<op> without kernels, NCCL kernel)
META = 3  # process_group:init

ROOT_NAMES = frozenset(
    {
        "[pytorch|profiler|execution_trace|process]",
        "[pytorch|profiler|execution_trace|thread]",
        "[pytorch|profiler|execution_graph|process]",
        "[pytorch|profiler|execution_graph|thread]",
    }
)
PG_INIT_MARK = "process_group:init"


class Op:
    """One operation. Times are integer ns (absolute, Kineto clock) or None when unknown."""

    __slots__ = (
        "id",
        "name",
        "parent",
        "kind",
        "rf_id",
        "seq_id",
        "scope",
        "tid",
        "fw_parent",
        "fw_tid",
        "op_schema",
        "inputs",
        "outputs",
        "extra",
        "ts",
        "end",
        "thread",
        "stream",
        "device",
        "kargs",
        "launcher",
        "comm",
        "flops",
        "bytes",
        "io",
    )

    def __init__(self, op_id: int, name: str, parent: int = 0, kind: int = CPU) -> None:
        self.id = op_id
        self.name = name
        self.parent = parent
        self.kind = kind
        self.rf_id = 0
        self.seq_id = -1
        self.scope = 0
        self.tid = 0
        self.fw_parent = 0
        self.fw_tid = 0
        self.op_schema = ""
        self.inputs: Optional[tuple[list, list, list]] = None  # (values, shapes, types)
        self.outputs: Optional[tuple[list, list, list]] = None
        self.extra: Optional[dict[str, Any]] = None  # other ET attrs (comm attrs, kernel_backend, ...)
        self.ts: Optional[int] = None
        self.end: Optional[int] = None
        self.thread: Any = None  # sequence key: OS tid, ("stream", dev, s), ("pg", name)
        self.stream = -1
        self.device = -1
        self.kargs: Optional[dict[str, Any]] = None  # args of the linked Kineto event
        self.launcher: Optional[Op] = None  # CPU op that launched this GPU/comm op
        self.comm: Any = None  # CommInfo for COMM ops
        self.flops = 0
        self.bytes = 0
        self.io: Optional[bytes] = None  # the node's serialised inputs + outputs fields (see emit.io_field)

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"Op({self.id}, {self.name!r}, kind={self.kind}, ts={self.ts}, end={self.end}, thread={self.thread})"

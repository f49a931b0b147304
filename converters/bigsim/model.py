"""In-memory BigSim log: the summary, and one timeline of SEBs per simulated processor.

Both readers (binary `bgTrace` logs and ASCII "detail" dumps) produce these objects, so the
conversion to Chakra and the cross-checks between the two forms see one shape. Field names follow
`bigsim_logs.h` (BgTimeLog, BgMsgEntry, bgEvents); times stay in seconds as the logs store them.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

#: `slots=True` where the running Python has it (3.10+): SEB objects are many.
SLOTS: dict = {"slots": True} if sys.version_info >= (3, 10) else {}

#: BgMPIOp codes of v6 logs.
MPI_NONE, MPI_BARRIER, MPI_ALLREDUCE, MPI_ALLTOALL = 0, 1, 2, 3
MPI_OP_NAMES = {MPI_BARRIER: "MPI_Barrier", MPI_ALLREDUCE: "MPI_Allreduce", MPI_ALLTOALL: "MPI_Alltoall"}

#: bgEvents types.
EVENT_PROJ, EVENT_PRINT, EVENT_MARK = 1, 2, 3

#: BgTimeLog flag bits.
FLAG_STARTEVENT, FLAG_QDEVENT = 0x1, 0x2

#: Log versions this package reads (the `bglog_version` of the summary).
SUPPORTED_VERSIONS = range(0, 7)


@dataclass
class MachineInfo:
    """`PUP::machineInfo`: how the writing machine laid out its ints and doubles."""

    version: int = 0
    int_bytes: tuple[int, ...] = (1, 2, 4, 8)  # sizeof(char, short, int, long[, int128])
    little_endian: bool = True  # intFormat == 1
    float_bytes: int = 4
    double_bytes: int = 8
    float_little_endian: bool = True  # floatFormat == 1
    bool_bytes: int = 1
    pointer_bytes: int = 8

    @property
    def short_bytes(self) -> int:
        return self.int_bytes[1]

    @property
    def int_size(self) -> int:
        return self.int_bytes[2]


@dataclass
class Summary:
    """The `bgTrace` file: machine shape, emulating PEs, log version."""

    total_procs: int
    x: int
    y: int
    z: int
    num_cth: int
    num_wth: int
    stacksize: int = 0
    timing_method: int = 0
    num_pes: int = 1
    version: int = 0
    thread_ep: int = -1
    machine: MachineInfo = field(default_factory=MachineInfo)

    @property
    def num_nodes(self) -> int:
        return self.total_procs // self.num_wth if self.num_wth else 0


@dataclass(**SLOTS)
class MsgEntry:
    """BgMsgEntry: one message sent from an SEB (dst_node -1 / <= -100 are broadcasts)."""

    msg_id: int
    dst_node: int
    send_time: float
    recv_time: float
    tid: int
    size: int
    group: int = 1


@dataclass(**SLOTS)
class SebEvent:
    """bgEvents: a Projections hook inside an SEB (kept only so nothing read is dropped)."""

    etype: int
    rtime: float
    index: int = -1
    text: str = ""


@dataclass(**SLOTS)
class Seb:
    """BgTimeLog: one sequential execution block of a simulated processor."""

    seqno: int
    name: str
    ep: int = -1
    src_pe: int = -1  # msgId.pe: global proc that sent the triggering message
    src_msg_id: int = -1  # msgId.msgID
    mpi_op: int = MPI_NONE
    mpi_size: int = 0
    charm_ep: int = -1
    recv_time: float = -1.0
    eff_recv_time: Optional[float] = None  # not in detail dumps
    start_time: float = 0.0
    exec_time: float = 0.0
    end_time: float = 0.0
    flag: int = 0
    obj_id: tuple[int, ...] = ()
    msgs: list[MsgEntry] = field(default_factory=list)
    events: list[SebEvent] = field(default_factory=list)
    back: list[int] = field(default_factory=list)
    fwd: list[int] = field(default_factory=list)
    thread_resume: bool = False  # detail dumps print "(thread resume)"; binary: ep == threadEP


@dataclass
class BigSimLog:
    """A whole log set: summary (None for detail dumps without one) and timelines by proc."""

    timelines: dict[int, list[Seb]]
    summary: Optional[Summary] = None
    num_wth: int = 1
    total_procs: int = 0
    source: str = "binary"  # "binary" or "detail"
    paths: list[Path] = field(default_factory=list)
    #: proc -> the file (and, for binary logs, byte offset) its timeline came from, for errors.
    origin: dict[int, tuple[Path, Optional[int]]] = field(default_factory=dict)
    #: Things the reader had to assume (shown to the user, kept in the conversion summary).
    notes: list[str] = field(default_factory=list)

    @property
    def version(self) -> Optional[int]:
        return self.summary.version if self.summary else None

    @property
    def num_nodes(self) -> int:
        return max(1, self.total_procs // max(1, self.num_wth))

    def num_sebs(self) -> int:
        return sum(len(t) for t in self.timelines.values())

    def num_msg_entries(self) -> int:
        return sum(len(s.msgs) for t in self.timelines.values() for s in t)

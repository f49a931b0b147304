"""Reader for BigSim's ASCII timeline dumps ("detail" files, `BgWriteThreadTimeLine`).

One file per simulated processor, named `<pgm>-<x>-<y>-<z>.<thread>.log`; each SEB is printed by
`BgTimeLog::write` (docs/input-formats.md §D.9):

    [1] 0x618150 name:msgep (srcpe:5 msgID:0) ep:0 charm_ep:0 [(thread resume)] [STARTEVENT][QDEVENT]
     recvtime:0.000038 startTime:0.000038 endTime:0.000040 execTime:0.000002
     ObjID: a b c d                                 (v>=2, only when not null)
    MPI collective: MPI_Allreduce mpiSize: 64       (v6, only for MPI SEBs)
    -msgID:0 sent:0.000035 recvtime:0.000038 dstNode:0 tid:0 size:3000 group:4
    -msgID:1 sent:... dstNode:BG_BROADCASTALL [except N] tid:-1 size:... group:1
    EVT: Projection 3 | EVT: time:%f string:... | EVT: time:%f marker:...
    backward: [0x618070 0]
    forward: [0x61a500 2]

Times are printed with `%f` (six decimals), so they carry whole microseconds only. The pointer
values mean nothing; only the seqno after them is kept.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Optional

from chakra.converters.bigsim.model import (
    EVENT_MARK,
    EVENT_PRINT,
    EVENT_PROJ,
    FLAG_QDEVENT,
    FLAG_STARTEVENT,
    MPI_ALLREDUCE,
    MPI_ALLTOALL,
    MPI_BARRIER,
    BigSimLog,
    MsgEntry,
    Seb,
    SebEvent,
    Summary,
)
from chakra.converters.bigsim.routing import infer_num_wth
from chakra.errors import InputError, TraceFormatError
from chakra.io import input_file_errors

FILE_RE = re.compile(r"^(?P<pgm>.*)-(?P<x>\d+)-(?P<y>\d+)-(?P<z>\d+)\.(?P<th>\d+)\.log$")
_NUM = r"-?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|inf|nan)"
HEAD_RE = re.compile(
    r"^\[(?P<idx>\d+)\]\s+(?P<ptr>\S+)\s+name:(?P<name>.*?) \(srcpe:(?P<pe>-?\d+) msgID:(?P<mid>-?\d+)\)"
    r" ep:(?P<ep>-?\d+)\s*(?P<rest>.*)$"
)
TIMES_RE = re.compile(
    rf"^\s*recvtime:(?P<recv>{_NUM}) startTime:(?P<start>{_NUM}) endTime:(?P<end>{_NUM}) execTime:(?P<exec>{_NUM})\s*$"
)
MSG_RE = re.compile(
    rf"^-msgID:(?P<mid>-?\d+) sent:(?P<sent>{_NUM}) recvtime:(?P<recv>{_NUM}) dstNode:(?P<dst>.*?)"
    r" tid:(?P<tid>-?\d+) size:(?P<size>-?\d+)(?: group:(?P<group>-?\d+))?\s*$"
)
OBJ_RE = re.compile(r"^\s*ObjID:((?:\s+-?\d+)+)\s*$")
MPI_RE = re.compile(r"^\s*MPI collective:\s*(?P<op>.*?)\s+mpiSize:\s*(?P<size>-?\d+)\s*$")
EVT_PROJ_RE = re.compile(r"^EVT: Projection (?P<index>-?\d+)\s*$")
EVT_TEXT_RE = re.compile(rf"^EVT: time:(?P<t>{_NUM}) (?P<kind>string|marker):(?P<text>.*)$")
DEPS_RE = re.compile(r"^(?P<kind>backward|forward):(?P<body>.*)$")
PAIR_RE = re.compile(r"\[\s*\S+\s+(-?\d+)\s*\]")
CHARM_EP_RE = re.compile(r"charm_ep:(-?\d+)")
BCAST_EXCEPT_RE = re.compile(r"^BG_BROADCASTALL except (-?\d+)$")


def detail_proc_key(path: Path) -> Optional[tuple[int, int, int, int]]:
    """(x, y, z, thread) from a dump's file name, or None if it is not named like one."""
    m = FILE_RE.match(Path(path).name)
    if not m:
        return None
    return int(m["x"]), int(m["y"]), int(m["z"]), int(m["th"])


def looks_like_detail(path: Path) -> bool:
    """Cheap sniff: the first non-blank line is an SEB header."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    text = head.decode("latin-1")
    for line in text.splitlines():
        if line.strip():
            return bool(HEAD_RE.match(line))
    return False


def _mpi_op(text: str) -> int:
    low = text.lower()
    if "barrier" in low:
        return MPI_BARRIER
    if "allreduce" in low:
        return MPI_ALLREDUCE
    if "alltoall" in low:
        return MPI_ALLTOALL
    return 0


def parse_dst(text: str, path: Path, lineno: int) -> int:
    """dstNode as stored in the binary: N, -1 (BG_BROADCASTALL) or -100-N (all except node N)."""
    text = text.strip()
    if text == "BG_BROADCASTALL":
        return -1
    m = BCAST_EXCEPT_RE.match(text)
    if m:
        return -100 - int(m.group(1))
    try:
        return int(text)
    except ValueError:
        raise TraceFormatError(path, f"unreadable dstNode {text!r}", line=lineno) from None


def read_detail_file(path: Path) -> list[Seb]:
    """Every SEB of one dump, in file order; raises TraceFormatError naming the line."""
    path = Path(path)
    sebs: list[Seb] = []
    cur: Optional[Seb] = None
    have_times = False
    head_line = 0

    def finish(lineno: int) -> None:
        if cur is not None and not have_times:
            raise TraceFormatError(path, f"SEB [{cur.seqno}] has no recvtime/startTime/endTime line", line=head_line)

    lineno = 0
    with input_file_errors(path, "BigSim detail dump"):
        f = open(path, encoding="latin-1")  # noqa: SIM115 - closed by the with below
    try:
        with f:
            for lineno, raw in enumerate(f, 1):
                line = raw.rstrip("\r\n")
                if not line.strip():
                    continue
                if line.startswith("["):
                    m = HEAD_RE.match(line)
                    if not m:
                        raise TraceFormatError(path, f"unreadable SEB header: {line[:80]!r}", line=lineno)
                    finish(lineno)
                    idx = int(m["idx"])
                    if idx != len(sebs):
                        raise TraceFormatError(path, f"SEB [{idx}] where [{len(sebs)}] was expected", line=lineno)
                    rest = m["rest"]
                    cm = CHARM_EP_RE.search(rest)
                    flag = (FLAG_STARTEVENT if "STARTEVENT" in rest else 0) | (FLAG_QDEVENT if "QDEVENT" in rest else 0)
                    cur = Seb(
                        seqno=idx,
                        name=m["name"],
                        ep=int(m["ep"]),
                        src_pe=int(m["pe"]),
                        src_msg_id=int(m["mid"]),
                        charm_ep=int(cm.group(1)) if cm else -1,
                        flag=flag,
                        thread_resume="(thread resume)" in rest,
                    )
                    sebs.append(cur)
                    have_times = False
                    head_line = lineno
                    continue
                if cur is None:
                    raise TraceFormatError(path, f"text before the first SEB header: {line[:80]!r}", line=lineno)
                if line.startswith("-msgID:"):
                    mm = MSG_RE.match(line)
                    if not mm:
                        raise TraceFormatError(path, f"unreadable message line: {line[:80]!r}", line=lineno)
                    cur.msgs.append(
                        MsgEntry(
                            msg_id=int(mm["mid"]),
                            dst_node=parse_dst(mm["dst"], path, lineno),
                            send_time=float(mm["sent"]),
                            recv_time=float(mm["recv"]),
                            tid=int(mm["tid"]),
                            size=int(mm["size"]),
                            group=int(mm["group"]) if mm["group"] is not None else 1,
                        )
                    )
                    continue
                tm = TIMES_RE.match(line)
                if tm:
                    cur.recv_time = float(tm["recv"])
                    cur.start_time = float(tm["start"])
                    cur.end_time = float(tm["end"])
                    cur.exec_time = float(tm["exec"])
                    have_times = True
                    continue
                dm = DEPS_RE.match(line)
                if dm:
                    values = [int(v) for v in PAIR_RE.findall(dm["body"])]
                    if dm["kind"] == "backward":
                        cur.back = values
                    else:
                        cur.fwd = values
                    continue
                om = OBJ_RE.match(line)
                if om:
                    cur.obj_id = tuple(int(v) for v in om.group(1).split())
                    continue
                mp = MPI_RE.match(line)
                if mp:
                    cur.mpi_op = _mpi_op(mp["op"])
                    cur.mpi_size = int(mp["size"])
                    if not cur.mpi_op:
                        raise TraceFormatError(path, f"unknown MPI collective {mp['op']!r}", line=lineno)
                    continue
                if line.startswith("EVT:"):
                    ep_ = EVT_PROJ_RE.match(line)
                    if ep_:
                        cur.events.append(SebEvent(EVENT_PROJ, 0.0, index=int(ep_["index"])))
                        continue
                    et = EVT_TEXT_RE.match(line)
                    if et:
                        kind = EVENT_PRINT if et["kind"] == "string" else EVENT_MARK
                        cur.events.append(SebEvent(kind, float(et["t"]), text=et["text"]))
                        continue
                raise TraceFormatError(path, f"unrecognised line in SEB [{cur.seqno}]: {line[:80]!r}", line=lineno)
    except ValueError as exc:  # a number too long or malformed for int()/float()
        raise TraceFormatError(path, f"unreadable number ({exc})", line=lineno) from None
    finish(0)
    for s in sebs:
        for d in s.back:
            if not 0 <= d < len(sebs):
                raise TraceFormatError(path, f"SEB [{s.seqno}]: backward dependency {d} outside the timeline")
    return sebs


def read_detail_logs(
    paths: list[Path], *, summary: Optional[Summary] = None, num_wth: Optional[int] = None
) -> BigSimLog:
    """Read a set of dumps, one per proc. The proc of `pgm-x-y-z.t.log` is node(x,y,z)*W + t.

    The node number follows BigSim's TXYZ order (x + y*X + z*X*Y) and needs the machine shape
    of a `bgTrace` summary when a coordinate is non-zero. With every coordinate 0 (how the
    text2log tools name them) the proc is the thread number itself.
    """
    if not paths:
        raise InputError("no BigSim detail dumps given")
    if summary is not None:
        num_wth = summary.num_wth
    timelines: dict[int, list[Seb]] = {}
    origin: dict[int, tuple[Path, Optional[int]]] = {}
    for path in sorted(paths, key=lambda p: (detail_proc_key(p) or (0, 0, 0, 0), str(p))):
        key = detail_proc_key(path)
        if key is None:
            raise InputError(f"{path}: not named like a BigSim dump (<name>-<x>-<y>-<z>.<thread>.log)")
        x, y, z, th = key
        if (x, y, z) == (0, 0, 0):
            proc = th
        else:
            if summary is None:
                raise InputError(
                    f"{path}: node coordinates ({x},{y},{z}) need the machine shape: put the bgTrace summary beside it"
                )
            node = x + y * summary.x + z * summary.x * summary.y
            proc = node * summary.num_wth + th
        if proc in timelines:
            raise InputError(f"{path}: proc {proc} given twice (also {origin[proc][0]})")
        timelines[proc] = read_detail_file(path)
        origin[proc] = (path, None)
    total = max(timelines) + 1
    if summary is not None:
        total = max(total, summary.total_procs)
    # Every proc gets a rank file, so the proc count (the summary's claim, or a thread number in a
    # file name) must be backed by a dump for each proc, as the binary logs' are by a timeline.
    if len(timelines) != total:
        missing = list(itertools.islice((p for p in range(total) if p not in timelines), 9))
        shown = ", ".join(map(str, missing[:8])) + (" ..." if len(missing) > 8 else "")
        claim = f"the summary announces {total} procs" if summary is not None and total == summary.total_procs \
            else f"the highest proc is {total - 1}"  # fmt: skip
        given = {Path(p).resolve() for p in paths}
        beside = sorted(
            p.name for p in paths[0].parent.glob("*.log") if detail_proc_key(p) and p.resolve() not in given
        )
        if beside:  # the user named some dumps of a folder that has the rest
            listed = ", ".join(beside[:4]) + (" ..." if len(beside) > 4 else "")
            raise InputError(
                f"{paths[0].parent}: {claim}, but only {len(timelines)} detail dump(s) were given; {listed} "
                f"{'is' if len(beside) == 1 else 'are'} beside it: give every dump, or the folder "
                f"(chakra convert bigsim {paths[0].parent})"
            )
        raise InputError(f"{paths[0].parent}: {claim}, but there is no detail dump for procs {shown}")
    notes: list[str] = []
    if num_wth is None:
        num_wth = infer_num_wth(timelines, total)
        if num_wth is None:
            num_wth = 1
            notes.append("no bgTrace summary and no message shows the workers per node: assumed 1")
        else:
            notes.append(f"no bgTrace summary: {num_wth} workers per node, inferred from who received each message")
    return BigSimLog(
        timelines=dict(sorted(timelines.items())),
        summary=summary,
        num_wth=num_wth,
        total_procs=total,
        source="detail",
        paths=sorted(paths),
        origin=origin,
        notes=notes,
    )

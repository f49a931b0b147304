"""Reader for binary BigSim logs: the `bgTrace` summary and the `bgTrace<k>` timeline files.

Layout (docs/input-formats.md §D.2-D.7): each file starts with a `PUP::machineInfo`; the summary holds the
machine shape and (from version 1 on, optional at EOF) the log version; file k holds an offset
table and the timelines of the procs emulated on PE k. Files are memory-mapped, and the fixed part
of each record is decoded with one precompiled struct, so reading costs a few struct calls per SEB
instead of one per field. Any inconsistency raises `TraceFormatError` with the file and byte offset.
"""

from __future__ import annotations

import itertools
import mmap
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

from chakra.converters.bigsim.layout import HEADER_SIZE, MAGIC, LayoutError, VersionLayout, parse_machine_info
from chakra.converters.bigsim.model import (
    EVENT_MARK,
    EVENT_PRINT,
    EVENT_PROJ,
    SUPPORTED_VERSIONS,
    BigSimLog,
    MachineInfo,
    MsgEntry,
    Seb,
    SebEvent,
    Summary,
)
from chakra.errors import InputError, TraceFormatError
from chakra.io import input_file_errors

SUMMARY_NAME = "bgTrace"


@contextmanager
def _mapped(path: Path) -> Iterator[memoryview | bytes]:
    """The file's bytes, memory-mapped when non-empty (logs can be many GB)."""
    with input_file_errors(path, "BigSim log"):
        f = open(path, "rb")  # noqa: SIM115 - closed by the with below
    with f:
        try:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # empty file
            yield b""
            return
        try:
            yield mm
        finally:
            mm.close()


def _header(path: Path, data) -> MachineInfo:
    try:
        return parse_machine_info(bytes(data[:HEADER_SIZE]))
    except ValueError as exc:
        raise TraceFormatError(path, str(exc), offset=0) from None


def read_summary(path: Path) -> Summary:
    """Parse `bgTrace`: totalWorkerProcs, BGMach (7 ints), numEmulatingPes, [version], [threadEP]."""
    path = Path(path)
    data = path.read_bytes()
    m = _header(path, data)
    try:
        lay = VersionLayout(0, m)
    except LayoutError as exc:
        raise TraceFormatError(path, str(exc), offset=0) from None
    isz = lay.int.size
    fixed = 1 + 7 + 1
    need = HEADER_SIZE + fixed * isz
    if len(data) < need:
        raise TraceFormatError(path, f"truncated summary: {len(data)} bytes, needs at least {need}", offset=len(data))
    values = lay.ints(fixed).unpack_from(data, HEADER_SIZE)
    total, x, y, z, num_cth, num_wth, stacksize, timing, num_pes = values
    off = need
    version = 0
    thread_ep = -1
    if len(data) >= off + isz:  # BgLoadTraceSummary: the version is read only if not at EOF
        version = lay.int.unpack_from(data, off)[0]
        if version not in SUPPORTED_VERSIONS:
            raise TraceFormatError(path, f"unsupported bglog version {version} (this reader knows 0-6)", offset=off)
        off += isz
        if len(data) >= off + isz:
            thread_ep = lay.int.unpack_from(data, off)[0]
            off += isz
    if off != len(data):
        raise TraceFormatError(path, f"{len(data) - off} unexpected trailing bytes after the summary", offset=off)
    if num_wth <= 0 or num_pes <= 0 or total < 0:
        raise TraceFormatError(
            path, f"implausible machine: {total} procs, {num_wth} workers per node, {num_pes} emulating PEs", offset=16
        )
    if total % num_wth:
        raise TraceFormatError(path, f"{total} procs is not a multiple of {num_wth} workers per node", offset=16)
    return Summary(total, x, y, z, num_cth, num_wth, stacksize, timing, num_pes, version, thread_ep, m)


def procs_of_file(file_num: int, n_local: int, num_wth: int, num_pes: int) -> list[int]:
    """Global proc of each local slot in `bgTrace<file_num>` (inverse of CyclicMapInfo::FileOffset).

    Nodes are dealt to emulating PEs round-robin (node % numPes), so file k holds nodes
    k, k+numPes, ... and each node's numWth workers in order.
    """
    return [(file_num + (s // num_wth) * num_pes) * num_wth + s % num_wth for s in range(n_local)]


class _TimelineParser:
    """Decodes the timelines of one `bgTrace<k>` file."""

    def __init__(self, path: Path, data, lay: VersionLayout, thread_ep: int) -> None:
        self.path = path
        self.data = data
        self.size = len(data)
        self.lay = lay
        self.thread_ep = thread_ep
        self._int_structs: dict[int, struct.Struct] = {}

    def _need(self, off: int, n: int, what: str, start: int) -> None:
        if off + n > self.size:
            raise TraceFormatError(
                self.path,
                f"truncated {what}: needs {n} bytes at offset {off}, file ends at {self.size}",
                offset=start,
            )

    def _count(self, off: int, what: str, start: int, item_size: int) -> int:
        self._need(off, self.lay.int.size, what, start)
        n = self.lay.int.unpack_from(self.data, off)[0]
        if n < 0 or n * item_size > self.size - off:
            raise TraceFormatError(
                self.path,
                f"{what} is {n}, but only {self.size - off} bytes remain (needs at least {max(n, 0) * item_size}): "
                "truncated or corrupt file",
                offset=off,
            )
        return n

    def timeline(self, off: int, proc: int) -> tuple[list[Seb], int]:
        """Decode the timeline at `off`; returns its SEBs and the offset just past it."""
        lay = self.lay
        n_logs = self._count(off, f"SEB count of proc {proc}", off, lay.seb.size)
        off += lay.int.size
        sebs: list[Seb] = []
        start = off
        try:
            while len(sebs) < n_logs:
                start = off
                seb, off = self._seb(off, n_logs)
                sebs.append(seb)
        except struct.error:
            raise TraceFormatError(
                self.path,
                f"truncated SEB record #{len(sebs)} of proc {proc}: the file ends at {self.size} inside it",
                offset=start,
            ) from None
        except _BadCount as exc:
            raise TraceFormatError(
                self.path, f"SEB record #{len(sebs)} of proc {proc}: {exc.args[0]}", offset=exc.args[1]
            ) from None
        return sebs, off

    def _seb(self, off: int, n_logs: int) -> tuple[Seb, int]:
        """One BgTimeLog record. Short reads surface as struct.error, bad counts as _BadCount."""
        data, lay = self.data, self.lay
        isz = lay.int.size
        size = self.size
        int_at = lay.int.unpack_from
        v = lay.seb.unpack_from(data, off)
        off += lay.seb.size
        ep, seqno, src_pe, src_msg = v[0], v[1], v[2], v[3]
        k = 4
        mpi_op = mpi_size = 0
        charm_ep = -1
        version = lay.version
        if version >= 6:
            mpi_op, mpi_size = v[4], v[5]
            k = 6
        if version >= 4:
            charm_ep = v[k]
            k += 1
        recv_t, eff_t, start_t, exec_t, end_t, flag, raw_name = v[k : k + 7]
        k += 7
        obj_id = tuple(v[k : k + lay.obj_id_len])
        n_msgs = v[-1]
        msg_size = lay.msg.size
        if n_msgs < 0 or n_msgs * msg_size > size - off:
            raise _BadCount(f"message count {n_msgs} does not fit the {size - off} bytes left", off - isz)
        msgs: list[MsgEntry] = []
        if n_msgs:
            end = off + n_msgs * msg_size
            if version > 0:
                msgs = [MsgEntry(*t) for t in lay.msg.iter_unpack(data[off:end])]
            else:
                msgs = [MsgEntry(*t, 1) for t in lay.msg.iter_unpack(data[off:end])]
            off = end
        n_evts = int_at(data, off)[0]
        off += isz
        events: list[SebEvent] = []
        if n_evts:
            if n_evts < 0 or n_evts > size - off:
                raise _BadCount(f"event count {n_evts} does not fit the {size - off} bytes left", off - isz)
            dsz = lay.double.size
            for _ in range(n_evts):
                etype = lay.char.unpack_from(data, off)[0]
                rtime = lay.double.unpack_from(data, off + 1)[0]
                if etype == EVENT_PROJ:
                    events.append(SebEvent(etype, rtime, index=int_at(data, off + 1 + dsz)[0]))
                    off += 1 + dsz + isz
                elif etype in (EVENT_PRINT, EVENT_MARK):
                    slen = int_at(data, off + 1 + dsz)[0]
                    off += 1 + dsz + isz
                    if slen < 0 or slen > size - off:
                        raise _BadCount(f"event string of {slen} bytes does not fit the {size - off} left", off - isz)
                    text = bytes(data[off : off + slen]).split(b"\0", 1)[0].decode("utf-8", "replace")
                    events.append(SebEvent(etype, rtime, text=text))
                    off += slen
                else:
                    raise _BadCount(f"unknown event type {etype}", off)
        n_back = int_at(data, off)[0]
        off += isz
        if n_back:
            if n_back < 0 or n_back * isz > size - off:
                raise _BadCount(
                    f"backward-dependency count {n_back} does not fit the {size - off} bytes left", off - isz
                )
            back = list(self._ints(n_back).unpack_from(data, off))
            off += n_back * isz
            for d in back:
                if not 0 <= d < n_logs:
                    raise _BadCount(f"backward dependency {d} outside the timeline of {n_logs} SEBs", off - isz)
        else:
            back = []
        n_fwd = int_at(data, off)[0]
        off += isz
        if n_fwd:
            if n_fwd < 0 or n_fwd * isz > size - off:
                raise _BadCount(f"forward-dependency count {n_fwd} does not fit the {size - off} bytes left", off - isz)
            fwd = list(self._ints(n_fwd).unpack_from(data, off))
            off += n_fwd * isz
        else:
            fwd = []
        name = raw_name.split(b"\0", 1)[0].decode("latin-1")
        seb = Seb(
            seqno,
            name,
            ep,
            src_pe,
            src_msg,
            mpi_op,
            mpi_size,
            charm_ep,
            recv_t,
            eff_t,
            start_t,
            exec_t,
            end_t,
            flag,
            obj_id,
            msgs,
            events,
            back,
            fwd,
            ep == self.thread_ep and ep != -1,
        )
        return seb, off

    def _ints(self, n: int) -> struct.Struct:
        st = self._int_structs.get(n)
        if st is None:
            st = self._int_structs[n] = self.lay.ints(n)
        return st


class _BadCount(Exception):
    """(message, offset): a count or value inside a record that cannot be right."""


def read_pe_file(path: Path, summary: Summary, file_num: int) -> tuple[dict[int, list[Seb]], dict[int, int]]:
    """Timelines of `bgTrace<file_num>`: ({proc: [Seb]}, {proc: byte offset of its timeline})."""
    path = Path(path)
    with _mapped(path) as data:
        m = _header(path, data)
        try:
            lay = VersionLayout(summary.version, m)
        except LayoutError as exc:
            raise TraceFormatError(path, str(exc), offset=0) from None
        isz = lay.int.size
        if len(data) < HEADER_SIZE + isz:
            raise TraceFormatError(path, "truncated: no proc count after the header", offset=len(data))
        n_local = lay.int.unpack_from(data, HEADER_SIZE)[0]
        if n_local < 0 or HEADER_SIZE + isz * (1 + n_local) > len(data):
            raise TraceFormatError(
                path, f"implausible proc count {n_local} or truncated offset table", offset=HEADER_SIZE
            )
        offsets = lay.ints(n_local).unpack_from(data, HEADER_SIZE + isz) if n_local else ()
        procs = procs_of_file(file_num, n_local, summary.num_wth, summary.num_pes)
        parser = _TimelineParser(path, data, lay, summary.thread_ep)
        timelines: dict[int, list[Seb]] = {}
        where: dict[int, int] = {}
        table_end = HEADER_SIZE + isz * (1 + n_local)
        spans: list[tuple[int, int, int]] = []  # (start, end, proc)
        for slot, (proc, off) in enumerate(zip(procs, offsets)):
            if not table_end <= off < len(data):
                raise TraceFormatError(
                    path,
                    f"offset table entry {slot} (proc {proc}) points to {off}, outside the data "
                    f"({table_end}..{len(data)})",
                    offset=HEADER_SIZE + isz * (1 + slot),
                )
            if proc >= summary.total_procs:
                raise TraceFormatError(
                    path, f"slot {slot} maps to proc {proc}, beyond the {summary.total_procs} procs of the summary"
                )
            sebs, end = parser.timeline(off, proc)
            timelines[proc] = sebs
            where[proc] = off
            spans.append((off, end, proc))
        # Every byte belongs to exactly one timeline: a gap or overlap means the records were
        # decoded with the wrong layout (e.g. a summary announcing the wrong version).
        pos = table_end
        for start, end, proc in sorted(spans):
            if start != pos:
                what = "overlaps the previous one" if start < pos else f"leaves {start - pos} bytes unread before it"
                raise TraceFormatError(
                    path,
                    f"the timeline of proc {proc} at {start} {what} (previous data ends at {pos}); "
                    f"is the log version ({summary.version}) right?",
                    offset=min(start, pos),
                )
            pos = end
        if pos != len(data):
            raise TraceFormatError(
                path,
                f"{len(data) - pos} unexpected trailing bytes after the last timeline; "
                f"is the log version ({summary.version}) right?",
                offset=pos,
            )
        return timelines, where


def find_summary(directory: Path) -> Optional[Path]:
    path = Path(directory) / SUMMARY_NAME
    return path if path.is_file() else None


def read_binary_logs(directory: Path) -> BigSimLog:
    """Read `DIR/bgTrace` and every `DIR/bgTrace<k>` it announces."""
    directory = Path(directory)
    summary_path = find_summary(directory)
    if summary_path is None:
        raise InputError(f"{directory}: no {SUMMARY_NAME} summary file")
    summary = read_summary(summary_path)
    timelines: dict[int, list[Seb]] = {}
    paths = [summary_path]
    origin: dict[int, tuple[Path, Optional[int]]] = {}
    for k in range(summary.num_pes):
        pe_path = directory / f"{SUMMARY_NAME}{k}"
        if not pe_path.is_file():
            raise InputError(f"{pe_path}: missing (the summary announces {summary.num_pes} emulating PE files)")
        got, where = read_pe_file(pe_path, summary, k)
        timelines.update(got)
        origin.update({p: (pe_path, off) for p, off in where.items()})
        paths.append(pe_path)
    # The summary's proc count is a claim: compare it with what the files hold before anything
    # is sized by it (a corrupt count would otherwise allocate billions of entries).
    if len(timelines) != summary.total_procs or any(not 0 <= p < summary.total_procs for p in timelines):
        missing = list(itertools.islice((p for p in range(summary.total_procs) if p not in timelines), 9))
        if not missing:
            raise TraceFormatError(
                summary_path,
                f"the summary announces {summary.total_procs} procs but the bgTrace<k> files hold "
                f"{len(timelines)} timelines",
                offset=HEADER_SIZE,
            )
        shown = ", ".join(map(str, missing[:8])) + (" ..." if len(missing) > 8 else "")
        raise TraceFormatError(summary_path, f"no timeline for procs {shown} in the bgTrace<k> files")
    return BigSimLog(
        timelines=dict(sorted(timelines.items())),
        summary=summary,
        num_wth=summary.num_wth,
        total_procs=summary.total_procs,
        source="binary",
        paths=paths,
        origin=origin,
    )


def is_bigsim_binary(path: Path) -> bool:
    """Cheap sniff: the PUP magic at byte 0 of a file named bgTrace*."""
    path = Path(path)
    if not path.name.startswith(SUMMARY_NAME) or not path.is_file():
        return False
    with open(path, "rb") as f:
        return f.read(4) == MAGIC


__all__ = [
    "read_summary",
    "read_pe_file",
    "read_binary_logs",
    "procs_of_file",
    "find_summary",
    "is_bigsim_binary",
]

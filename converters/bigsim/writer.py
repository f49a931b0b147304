"""Write a BigSimLog back to binary `bgTrace` files, in any log version and machine layout.

BigSim's own tools (rewritelog, text2log) rewrite logs the same way: summary, then one file per
emulating PE with an offset table. Here it serves two jobs: saving a log after edits, and
building the test logs of versions and layouts for which no public sample exists (v0-v5,
big-endian, 8-byte ints), which a round trip through the reader then checks. The layout comes
from layout.py, the same module the reader uses; the test suite also checks that re-writing the
real v6 samples reproduces them byte for byte.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from chakra.converters.bigsim.binary import SUMMARY_NAME, procs_of_file
from chakra.converters.bigsim.layout import NAME_LEN, VersionLayout, encode_machine_info
from chakra.converters.bigsim.model import EVENT_PROJ, BigSimLog, MachineInfo, Seb, Summary
from chakra.io import atomic_output, output_set


def encode_summary(
    summary: Summary, *, with_version: Optional[bool] = None, with_thread_ep: Optional[bool] = None
) -> bytes:
    """`bgTrace` bytes. Version 0 logs predate the version field, so it is left out by default."""
    lay = VersionLayout(summary.version, summary.machine)
    if with_version is None:
        with_version = summary.version > 0
    if with_thread_ep is None:
        with_thread_ep = summary.thread_ep != -1
    values = [
        summary.total_procs,
        summary.x,
        summary.y,
        summary.z,
        summary.num_cth,
        summary.num_wth,
        summary.stacksize,
        summary.timing_method,
        summary.num_pes,
    ]
    if with_version or with_thread_ep:
        values.append(summary.version)
    if with_thread_ep:
        values.append(summary.thread_ep)
    return encode_machine_info(summary.machine) + lay.ints(len(values)).pack(*values)


def encode_seb(seb: Seb, lay: VersionLayout) -> bytes:
    """One BgTimeLog record as `BgTimeLog::pup` writes it for `lay.version`."""
    v = lay.version
    name = seb.name.encode("latin-1")[: NAME_LEN - 1].ljust(NAME_LEN, b"\0")
    fields: list = [seb.ep, seb.seqno, seb.src_pe, seb.src_msg_id]
    if v >= 6:
        fields += [seb.mpi_op, seb.mpi_size]
    if v >= 4:
        fields += [seb.charm_ep]
    eff = seb.eff_recv_time if seb.eff_recv_time is not None else seb.recv_time
    fields += [seb.recv_time, eff, seb.start_time, seb.exec_time, seb.end_time, seb.flag, name]
    obj = tuple(seb.obj_id) + (-1,) * lay.obj_id_len
    fields += list(obj[: lay.obj_id_len])
    fields += [len(seb.msgs)]
    parts = [lay.seb.pack(*fields)]
    for m in seb.msgs:
        mf = [m.msg_id, m.dst_node, m.send_time, m.recv_time, m.tid, m.size]
        if v > 0:
            mf.append(m.group)
        parts.append(lay.msg.pack(*mf))
    parts.append(lay.int.pack(len(seb.events)))
    for e in seb.events:
        parts.append(lay.char.pack(e.etype) + lay.double.pack(e.rtime))
        if e.etype == EVENT_PROJ:
            parts.append(lay.int.pack(e.index))
        else:
            text = e.text.encode("utf-8") + b"\0"
            parts.append(lay.int.pack(len(text)) + text)
    parts.append(lay.int.pack(len(seb.back)))
    if seb.back:
        parts.append(lay.ints(len(seb.back)).pack(*seb.back))
    parts.append(lay.int.pack(len(seb.fwd)))
    if seb.fwd:
        parts.append(lay.ints(len(seb.fwd)).pack(*seb.fwd))
    return b"".join(parts)


def encode_timeline(sebs: list[Seb], lay: VersionLayout) -> bytes:
    return lay.int.pack(len(sebs)) + b"".join(encode_seb(s, lay) for s in sebs)


def encode_pe_file(log: BigSimLog, summary: Summary, file_num: int) -> bytes:
    """`bgTrace<file_num>`: header, local proc count, absolute offsets, timelines in slot order."""
    lay = VersionLayout(summary.version, summary.machine)
    n_nodes = summary.total_procs // summary.num_wth
    n_local_nodes = n_nodes // summary.num_pes + (1 if file_num < n_nodes % summary.num_pes else 0)
    procs = procs_of_file(file_num, n_local_nodes * summary.num_wth, summary.num_wth, summary.num_pes)
    bodies = [encode_timeline(log.timelines.get(p, []), lay) for p in procs]
    offsets = []
    pos = 16 + lay.int.size * (1 + len(procs))
    for body in bodies:
        offsets.append(pos)
        pos += len(body)
    head = encode_machine_info(summary.machine) + lay.int.pack(len(procs))
    if procs:
        head += lay.ints(len(procs)).pack(*offsets)
    return head + b"".join(bodies)


def write_binary_logs(
    log: BigSimLog,
    directory: Path,
    *,
    version: Optional[int] = None,
    machine: Optional[MachineInfo] = None,
    summary: Optional[Summary] = None,
) -> list[Path]:
    """Write `bgTrace` and `bgTrace<k>` into `directory`; returns the paths written.

    `summary` defaults to the log's own; `version` / `machine` override its version and layout.
    """
    base = summary or log.summary
    if base is None:
        raise ValueError("a log without a bgTrace summary needs an explicit `summary` to be written")
    s = Summary(**{k: getattr(base, k) for k in base.__dataclass_fields__})
    if version is not None:
        s.version = version
    if machine is not None:
        s.machine = machine
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    with output_set():
        path = directory / SUMMARY_NAME
        with atomic_output(path) as f:
            f.write(encode_summary(s))
        written.append(path)
        for k in range(s.num_pes):
            path = directory / f"{SUMMARY_NAME}{k}"
            with atomic_output(path) as f:
                f.write(encode_pe_file(log, s, k))
            written.append(path)
    return written

"""BigSim log versions 0-6, other machine layouts, MPI collectives, and malformed input.

Only v6 little-endian logs exist as public samples. The v0 log below is packed by hand, field by
field, to the layout documented in docs/input-formats.md §D (from charm's bigsim_logs.C
`BgTimeLog::pupCommon` / `BgMsgEntry::pup` and pup.h `machineInfo`), NOT with the package's
writer. The other versions and layouts are produced by the package's writer, which is first
shown to reproduce every real v6 sample byte for byte, then read back.
"""

from __future__ import annotations

import struct
import tarfile
from pathlib import Path

import pytest

from chakra.converters.bigsim import convert_log, load_logs, read_binary_logs, read_detail_file
from chakra.converters.bigsim.model import MPI_ALLREDUCE, MPI_BARRIER, MachineInfo
from chakra.converters.bigsim.writer import write_binary_logs
from chakra.errors import ChakraError, TraceFormatError
from chakra.schema import CollectiveType, NodeType
from chakra.schema.attrs import get_attr, get_int
from chakra.validate import validate_traces

CASES = [f"case{i}" for i in range(10)]


@pytest.fixture(scope="module")
def examples(samples_dir: Path, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bigsim_v")
    with tarfile.open(samples_dir / "bigsim" / "text2log_v6_examples.tgz") as tf:
        tf.extractall(out, filter="data")
    return out / "examples"


# --- a v0 log packed by hand -------------------------------------------------------------------

V0_HEADER = bytes([0x10, 0xEA, 0xBD, 0xF9, 0, 1, 2, 4, 4, 1, 4, 8, 1, 1, 0, 0])  # like the loadlog set


def v0_seb(ep, seqno, src, mid, recv, start, end, name, msgs=(), back=(), fwd=(), events=()) -> bytes:
    out = struct.pack("<4i", ep, seqno, src, mid)
    out += struct.pack("<5d", recv, recv, start, end - start, end)
    out += struct.pack("<b20s", 0, name.encode())  # no objId before v2, no charm_ep before v4
    out += struct.pack("<i", len(msgs))
    for msg_id, dst, sent, arrive, tid, size in msgs:
        out += struct.pack("<iiddhi", msg_id, dst, sent, arrive, tid, size)  # 30 bytes: no group in v0
    out += struct.pack("<i", len(events))
    for text in events:
        data = text.encode() + b"\0"
        out += struct.pack("<bdi", 2, 1e-6, len(data)) + data  # PRINT event
    out += struct.pack("<i", len(back)) + struct.pack(f"<{len(back)}i", *back)
    out += struct.pack("<i", len(fwd)) + struct.pack(f"<{len(fwd)}i", *fwd)
    return out


def pe_file(timelines: list[list[bytes]]) -> bytes:
    head = len(V0_HEADER) + 4 + 4 * len(timelines)
    bodies = [struct.pack("<i", len(t)) + b"".join(t) for t in timelines]
    offsets, pos = [], head
    for b in bodies:
        offsets.append(pos)
        pos += len(b)
    return V0_HEADER + struct.pack(f"<i{len(timelines)}i", len(timelines), *offsets) + b"".join(bodies)


@pytest.fixture
def v0_dir(tmp_path: Path) -> Path:
    """4 procs (2x2x1 nodes, 1 worker each) on 2 emulating PEs: file 0 = nodes 0, 2; file 1 = 1, 3.

    proc 0 sends msg 0 (100 B) to node 2 at 4 µs; proc 2 answers by broadcasting msg 0 (8 B) to
    all four procs (itself included) at the end of its second SEB.
    """
    us = 1e-6
    p0 = [
        v0_seb(1, 0, -1, -1, -1.0, 0, 10 * us, "start", msgs=[(0, 2, 4 * us, 5 * us, 0, 100)]),
        v0_seb(2, 1, 2, 0, 14 * us, 14 * us, 15 * us, "bcast_in"),
    ]
    p2 = [
        v0_seb(2, 0, 0, 0, 5 * us, 6 * us, 9 * us, "work", fwd=[1], events=["hello"]),
        v0_seb(-1, 1, -1, -1, -1.0, 9 * us, 12 * us, "split", msgs=[(0, -1, 12 * us, 13 * us, -1, 8)], back=[0]),
        v0_seb(2, 2, 2, 0, 13 * us, 13 * us, 14 * us, "bcast_in"),
    ]
    p1 = [v0_seb(2, 0, 2, 0, 13 * us, 13 * us, 16 * us, "bcast_in")]
    p3 = [v0_seb(2, 0, 2, 0, 13 * us, 13 * us, 17 * us, "bcast_in")]
    summary = V0_HEADER + struct.pack("<9i", 4, 2, 2, 1, 1, 1, 0, 0, 2)  # no version field: v0
    assert len(summary) == 52
    (tmp_path / "bgTrace").write_bytes(summary)
    (tmp_path / "bgTrace0").write_bytes(pe_file([p0, p2]))
    (tmp_path / "bgTrace1").write_bytes(pe_file([p1, p3]))
    return tmp_path


def test_hand_packed_v0_log(v0_dir: Path) -> None:
    log = read_binary_logs(v0_dir)
    assert log.version == 0 and log.total_procs == 4 and log.num_wth == 1
    assert log.summary.machine.int_bytes[:4] == (1, 2, 4, 4)
    assert [s.name for s in log.timelines[2]] == ["work", "split", "bcast_in"]  # file 0, slot 1
    assert [s.name for s in log.timelines[3]] == ["bcast_in"]  # file 1, slot 1
    assert log.timelines[2][0].events[0].text == "hello"
    assert log.timelines[0][0].msgs[0].group == 1  # v0 has no group field: default 1
    traces, summary = convert_log(log)
    assert summary.messages == 5 and summary.broadcast_entries == 1 and summary.unmatched_receivers == 0
    by_rank = {t.rank: t for t in traces}
    sends = [n for n in by_rank[2].nodes if n.type == NodeType.COMM_SEND_NODE]
    assert sorted(get_int(n, "comm_dst") for n in sends) == [0, 1, 2, 3]
    assert {get_int(n, "comm_size") for n in sends} == {8}
    # proc 0's first SEB is split at the 4 µs send: 4 + 6 µs
    comp0 = [n for n in by_rank[0].nodes if n.type == NodeType.COMP_NODE and get_int(n, "bigsim_seqno") == 0]
    assert [(n.start_time_micros, n.duration_micros) for n in comp0] == [(0, 4), (4, 6)]
    report = validate_traces(traces)
    assert report.ok, report.to_json()


# --- every version and layout through the writer ----------------------------------------------

LAYOUTS = {
    "le-int4": MachineInfo(version=0, int_bytes=(1, 2, 4, 4), little_endian=True, pointer_bytes=0),
    "be-int8": MachineInfo(
        version=1, int_bytes=(1, 2, 8, 8, 16), little_endian=False, float_little_endian=False, pointer_bytes=8
    ),
    "mixed-order": MachineInfo(version=1, int_bytes=(1, 4, 4, 8, 16), little_endian=False, float_little_endian=True),
}


@pytest.mark.parametrize("case", CASES)
def test_writer_reproduces_real_samples_byte_for_byte(examples: Path, case: str, tmp_path: Path) -> None:
    log = read_binary_logs(examples / case)
    write_binary_logs(log, tmp_path)
    for name in ("bgTrace", "bgTrace0"):
        assert (tmp_path / name).read_bytes() == (examples / case / name).read_bytes()


@pytest.mark.parametrize("version", range(7))
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_every_version_and_layout_converts_like_the_sample(examples: Path, tmp_path: Path, version, layout) -> None:
    original = read_binary_logs(examples / "case8")
    write_binary_logs(original, tmp_path, version=version, machine=LAYOUTS[layout])
    back = read_binary_logs(tmp_path)
    assert back.version == version and back.summary.machine == LAYOUTS[layout]
    ref, _ = convert_log(original)
    got, _ = convert_log(back)

    def key(n):
        return (n.name, n.type, n.start_time_micros, n.duration_micros, tuple(n.data_deps), get_attr(n, "comm_tag"))

    assert [[key(n) for n in t.nodes] for t in got] == [[key(n) for n in t.nodes] for t in ref]
    charm = {get_attr(n, "bigsim_charm_ep") for t in got for n in t.nodes if get_attr(n, "bigsim_start_s") is not None}
    assert (charm == {-1}) == (version < 4)  # charm_ep exists from v4 on


# --- MPI collectives (v6 mpiOp) ----------------------------------------------------------------


def test_mpi_collective_sebs(examples: Path, tmp_path: Path) -> None:
    log = read_binary_logs(examples / "case5")
    for sebs in log.timelines.values():
        sebs[-1].mpi_op, sebs[-1].mpi_size = MPI_ALLREDUCE, 64
        sebs[0].mpi_op = MPI_BARRIER
    write_binary_logs(log, tmp_path, version=6)
    traces, summary = convert_log(read_binary_logs(tmp_path))
    assert summary.collectives == 2 * len(traces)
    for t in traces:
        colls = [n for n in t.nodes if n.type == NodeType.COMM_COLL_NODE]
        assert [get_int(n, "comm_type") for n in colls] == [CollectiveType.BARRIER, CollectiveType.ALL_REDUCE]
        assert get_attr(colls[1], "comm_size") == 64
        by_id = {n.id: n for n in t.nodes}
        dep = by_id[colls[1].data_deps[0]]
        assert dep.type == NodeType.COMP_NODE and dep.name == log.timelines[t.rank][-1].name
    assert validate_traces(traces).ok


def test_detail_dump_mpi_line(tmp_path: Path) -> None:
    dump = tmp_path / "detail-0-0-0.0.log"
    dump.write_text(
        "[0] 0x1 name:AMPI_Allreduce (srcpe:-1 msgID:-1) ep:3 charm_ep:7 STARTEVENT\n"
        " recvtime:-1.000000 startTime:0.000010 endTime:0.000030 execTime:0.000020\n"
        " ObjID: 1 2 3 4\n"
        "MPI collective: MPI_Allreduce mpiSize: 128\n"
        "EVT: time:0.000001 string:checkpoint\n"
        "backward: \n"
        "forward: \n\n"
    )
    (seb,) = read_detail_file(dump)
    assert (seb.mpi_op, seb.mpi_size, seb.obj_id, seb.charm_ep, seb.flag) == (MPI_ALLREDUCE, 128, (1, 2, 3, 4), 7, 1)
    traces, summary = convert_log(load_logs([dump]))
    (coll,) = [n for n in traces[0].nodes if n.type == NodeType.COMM_COLL_NODE]
    assert get_int(coll, "comm_type") == CollectiveType.ALL_REDUCE and get_int(coll, "comm_size") == 128
    (comp,) = [n for n in traces[0].nodes if n.type == NodeType.COMP_NODE]
    assert (comp.start_time_micros, comp.duration_micros) == (10, 20) and list(coll.data_deps) == [comp.id]
    assert get_attr(comp, "bigsim_flag") == 1 and get_attr(comp, "bigsim_obj_id") == [1, 2, 3, 4]
    assert summary.collectives == 1


# --- malformed input ---------------------------------------------------------------------------


def _copy(examples: Path, case: str, dst: Path) -> Path:
    dst.mkdir(exist_ok=True)
    for p in (examples / case).iterdir():
        (dst / p.name).write_bytes(p.read_bytes())
    return dst


def test_wrong_magic(examples: Path, tmp_path: Path) -> None:
    d = _copy(examples, "case8", tmp_path / "c")
    data = bytearray((d / "bgTrace0").read_bytes())
    data[0] ^= 0xFF
    (d / "bgTrace0").write_bytes(bytes(data))
    with pytest.raises(TraceFormatError, match=r"bgTrace0 \(byte offset 0\): not a BigSim/PUP log"):
        read_binary_logs(d)


def test_truncated_record(examples: Path, tmp_path: Path) -> None:
    d = _copy(examples, "case8", tmp_path / "c")
    data = (d / "bgTrace0").read_bytes()
    (d / "bgTrace0").write_bytes(data[:300])  # inside proc 0's second SEB
    with pytest.raises(TraceFormatError) as err:
        read_binary_logs(d)
    msg = str(err.value)
    assert "bgTrace0" in msg and "byte offset" in msg and "proc 0" in msg


def test_unsupported_version(examples: Path, tmp_path: Path) -> None:
    d = _copy(examples, "case0", tmp_path / "c")
    data = bytearray((d / "bgTrace").read_bytes())
    data[52:56] = struct.pack("<i", 7)
    (d / "bgTrace").write_bytes(bytes(data))
    with pytest.raises(TraceFormatError, match=r"bgTrace \(byte offset 52\): unsupported bglog version 7"):
        read_binary_logs(d)


def test_wrong_version_is_caught(examples: Path, tmp_path: Path) -> None:
    """A summary claiming v5 over v6 records misreads every SEB; the byte accounting notices."""
    d = _copy(examples, "case3", tmp_path / "c")
    data = bytearray((d / "bgTrace").read_bytes())
    data[52:56] = struct.pack("<i", 5)
    (d / "bgTrace").write_bytes(bytes(data))
    with pytest.raises(TraceFormatError, match="bgTrace0"):
        read_binary_logs(d)


def test_bad_detail_line(examples: Path, tmp_path: Path) -> None:
    src = (examples / "case8" / "detail-0-0-0.4.log").read_text().splitlines()
    src[3] = "-msgID:x sent:?"
    bad = tmp_path / "detail-0-0-0.0.log"
    bad.write_text("\n".join(src) + "\n")
    with pytest.raises(TraceFormatError, match=r"detail-0-0-0.0.log \(line 4\): unreadable message line"):
        read_detail_file(bad)


def test_cli_reports_one_line(examples: Path, tmp_path: Path, run_cli) -> None:
    d = _copy(examples, "case8", tmp_path / "c")
    (d / "bgTrace0").write_bytes((d / "bgTrace0").read_bytes()[:100])
    res = run_cli("convert", "bigsim", str(d), "-o", str(tmp_path / "out"))
    assert res.exit_code == 1
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "bgTrace0" in lines[0] and "byte offset" in lines[0]
    assert not list(tmp_path.glob("out*"))  # nothing half-written


def test_not_bigsim_input(tmp_path: Path) -> None:
    f = tmp_path / "x.txt"
    f.write_text("hello\n")
    with pytest.raises(ChakraError, match="neither a BigSim"):
        load_logs([f])

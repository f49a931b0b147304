"""nsys cases the two real samples do not contain, built by editing a COPY of a real sample.

Neither sample has NCCL kernels, NVTX ranges, several processes or GPUs, or an older schema
layout. Each test copies the 2026.1 sample and adds or changes rows following the producer's
documented schema (column names from the export itself and from docs/input-formats.md §C), so the
converter still reads a real nsys file with real surrounding tables.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import orjson
import pytest

from chakra.converters.nsys import convert_reports
from chakra.errors import TraceFormatError
from chakra.io import read_trace, read_traces
from chakra.schema import CollectiveType, NodeType
from chakra.schema.attrs import get_attr
from chakra.validate import validate_traces

S2026 = "nsys/testcuda_nsys2026.1_report2.sqlite"
TID = 282464362751580  # the sample's only thread (pid = tid = 58972)
GPID = 282464362692608


def copy_sample(samples_dir: Path, tmp_path: Path, name: str = "copy.sqlite") -> Path:
    dst = tmp_path / name
    shutil.copyfile(samples_dir / S2026, dst)
    dst.chmod(0o644)
    return dst


def string_id(conn: sqlite3.Connection, value: str) -> int:
    row = conn.execute("SELECT id FROM StringIds WHERE value = ?", (value,)).fetchone()
    if row:
        return row[0]
    new = conn.execute("SELECT MAX(id) + 1 FROM StringIds").fetchone()[0]
    conn.execute("INSERT INTO StringIds VALUES (?, ?)", (new, value))
    return new


def insert_like(conn: sqlite3.Connection, table: str, **changes) -> None:
    """Insert a row copied from the table's first row with `changes` applied (keeps NOT NULL columns valid)."""
    cur = conn.execute(f"SELECT * FROM {table} LIMIT 1")
    cols = [d[0] for d in cur.description]
    row = dict(zip(cols, cur.fetchone()))
    row.update(changes)
    conn.execute(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})", list(row.values()))


NVTX_DDL = """CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
 rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER,
 textId INTEGER, domainId INTEGER, uint64Value INTEGER, int64Value INTEGER, doubleValue REAL,
 uint32Value INTEGER, int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, jsonText TEXT, binaryData TEXT)"""


def add_nvtx(conn, start, end, text, *, json_text=None, int_value=None, text_id=False):
    if text_id:
        conn.execute(
            "INSERT INTO NVTX_EVENTS (start, end, eventType, globalTid, textId, jsonText, int64Value) "
            "VALUES (?, ?, 59, ?, ?, ?, ?)",
            (start, end, TID, string_id(conn, text), json_text, int_value),
        )
    else:
        conn.execute(
            "INSERT INTO NVTX_EVENTS (start, end, eventType, globalTid, text, jsonText, int64Value) "
            "VALUES (?, ?, 59, ?, ?, ?, ?)",
            (start, end, TID, text, json_text, int_value),
        )


def add_launch(conn, corr, t0, kernel_name, stream=20, dur_api=5_000, delay=20_000, dur_kernel=100_000):
    launch = string_id(conn, "cudaLaunchKernel_v7000")
    insert_like(
        conn, "CUPTI_ACTIVITY_KIND_RUNTIME", start=t0, end=t0 + dur_api, correlationId=corr, nameId=launch, eventClass=0
    )
    name = string_id(conn, kernel_name)
    ks = t0 + delay
    insert_like(
        conn,
        "CUPTI_ACTIVITY_KIND_KERNEL",
        start=ks,
        end=ks + dur_kernel,
        correlationId=corr,
        streamId=stream,
        shortName=name,
        demangledName=name,
    )


@pytest.fixture
def nccl_report(samples_dir, tmp_path):
    """Four NCCL kernels (one per naming era + a SendRecv) after the sample's own work, with NCCL NVTX ranges."""
    path = copy_sample(samples_dir, tmp_path)
    conn = sqlite3.connect(path)
    conn.execute(NVTX_DDL)
    t = 2_000_000_000
    add_nvtx(conn, t - 1_000, t + 2_000_000, "layer1", text_id=True)  # a user layer around everything
    payload = orjson.dumps({"Communicator": 4660, "Message size [bytes]": 1048576, "Reduction operation": "Sum"})
    add_nvtx(conn, t, t + 10_000, "ncclAllReduce", json_text=payload.decode())
    add_launch(conn, 1001, t + 1_000, "ncclDevKernel_AllReduce_Sum_f32_RING_LL")
    add_nvtx(conn, t + 200_000, t + 210_000, "ncclAllGather", int_value=4096)
    add_launch(conn, 1002, t + 201_000, "ncclKernel_AllGather_RING_LL_Sum_int8_t")
    payload = orjson.dumps({"Communicator": 4660, "Message size [bytes]": 512})
    add_nvtx(conn, t + 400_000, t + 410_000, "ncclBroadcast", json_text=payload.decode())
    add_launch(conn, 1003, t + 401_000, "ncclBroadcastRingLLKernel_copy_i8", stream=21)
    add_launch(conn, 1004, t + 600_000, "ncclDevKernel_SendRecv")
    add_launch(conn, 1005, t + 800_000, "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL")  # no NVTX: size unknown
    conn.commit()
    conn.close()
    return path


def test_nccl_kernels_become_collectives(nccl_report, tmp_path):
    result = convert_reports([nccl_report], tmp_path / "n")
    trace = read_trace(tmp_path / "n.0.et")
    nodes = {get_attr(n, "correlation_id"): n for n in trace.nodes if get_attr(n, "kind") == "kernel"}
    ar, ag, bc, sr, rs = (nodes[c] for c in (1001, 1002, 1003, 1004, 1005))
    assert ar.type == ag.type == bc.type == rs.type == NodeType.COMM_COLL_NODE
    assert get_attr(ar, "comm_type") == CollectiveType.ALL_REDUCE
    assert get_attr(ag, "comm_type") == CollectiveType.ALL_GATHER
    assert get_attr(bc, "comm_type") == CollectiveType.BROADCAST
    assert get_attr(rs, "comm_type") == CollectiveType.REDUCE_SCATTER
    assert get_attr(ar, "comm_size") == 1048576  # from the JSON payload
    assert get_attr(ag, "comm_size") == 4096  # from a plain integer payload
    assert get_attr(bc, "comm_size") == 512
    assert get_attr(rs, "comm_size") == 0
    assert any("without a message size" in w for w in result.warnings)
    assert sr.type == NodeType.COMP_NODE and get_attr(sr, "nccl_op") == "SendRecv"
    assert any("point-to-point" in w for w in result.warnings)
    # communicator order: the two collectives on communicator 4660 are chained although on different streams
    assert get_attr(ar, "pg_name") == get_attr(bc, "pg_name") == "4660"
    assert ar.id in bc.data_deps
    assert result.ranks[0].counts["comm"] >= 1
    assert validate_traces([trace]).ok


def test_nvtx_ranges_name_layers(nccl_report, tmp_path):
    convert_reports([nccl_report], tmp_path / "l")
    trace = read_trace(tmp_path / "l.0.et")
    api = {get_attr(n, "correlation_id"): n for n in trace.nodes if get_attr(n, "kind") == "runtime"}
    gpu = {get_attr(n, "correlation_id"): n for n in trace.nodes if get_attr(n, "kind") == "kernel"}
    assert get_attr(api[1001], "layer") == "ncclAllReduce"  # innermost enclosing range
    assert get_attr(api[1004], "layer") == "layer1"  # registered string (textId), outer range
    assert get_attr(gpu[1004], "layer") == "layer1"  # GPU work inherits its launcher's layer (Daydream §4.3)
    assert get_attr(api[149], "layer") is None  # before any range


def two_process_report(samples_dir, tmp_path, device: int) -> Path:
    """The sample's process plus a clone with pid 777 and the SAME correlation ids, on `device`."""
    path = copy_sample(samples_dir, tmp_path, f"two{device}.sqlite")
    conn = sqlite3.connect(path)
    new_gpid = (GPID & ~(0xFFFFFF << 24)) | (777 << 24)
    new_tid = new_gpid | 777
    conn.execute(
        "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME SELECT start + 7, end + 7, eventClass, ?, correlationId, nameId, "
        "returnValue, callchainId FROM CUPTI_ACTIVITY_KIND_RUNTIME",
        (new_tid,),
    )
    for table in ("KERNEL", "MEMCPY", "SYNCHRONIZATION"):
        cols = [r[1] for r in conn.execute(f"PRAGMA table_info(CUPTI_ACTIVITY_KIND_{table})")]
        sel = [
            "start + 7" if c == "start" else "end + 7" if c == "end" else "?" if c == "globalPid" else
            str(device) if c == "deviceId" else c
            for c in cols
        ]  # fmt: skip
        conn.execute(
            f"INSERT INTO CUPTI_ACTIVITY_KIND_{table} SELECT {', '.join(sel)} FROM CUPTI_ACTIVITY_KIND_{table}",
            (new_gpid,),
        )
    cols = [r[1] for r in conn.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_CUDA_EVENT)")]
    sel = ["?" if c == "globalPid" else str(device) if c == "deviceId" else c for c in cols]
    conn.execute(
        f"INSERT INTO CUPTI_ACTIVITY_KIND_CUDA_EVENT SELECT {', '.join(sel)} FROM CUPTI_ACTIVITY_KIND_CUDA_EVENT",
        (new_gpid,),
    )
    conn.execute(
        "INSERT INTO TARGET_INFO_CUDA_STREAM "
        "SELECT streamId, hwId, vmId, 777, contextId, priority, flag FROM TARGET_INFO_CUDA_STREAM"
    )
    conn.commit()
    conn.close()
    return path


def _check_rank_is_one_process(trace, pid):
    api = {get_attr(n, "correlation_id"): n for n in trace.nodes if get_attr(n, "kind") == "runtime"}
    gpu = [n for n in trace.nodes if get_attr(n, "kind") in ("kernel", "memcpy")]
    assert len(gpu) == 16
    assert {get_attr(n, "pid") for n in trace.nodes} == {pid}
    for n in gpu:
        assert api[get_attr(n, "correlation_id")].id in n.data_deps
    assert get_attr(api[148], "sync") == "event"


@pytest.mark.parametrize("per", ["device", "process"])
def test_two_processes_two_gpus(samples_dir, tmp_path, per):
    src = two_process_report(samples_dir, tmp_path, device=1)
    result = convert_reports([src], tmp_path / per, per=per)
    traces = read_traces([tmp_path / per])
    assert len(traces) == 2
    # ranks follow the sorted keys: devices 0, 1 or pids 777, 58972
    pids = [58972, 777] if per == "device" else [777, 58972]
    _check_rank_is_one_process(traces[0], pids[0])
    _check_rank_is_one_process(traces[1], pids[1])
    assert len(traces[0].nodes) == len(traces[1].nodes)
    assert validate_traces(traces).ok
    key = get_attr(traces[1].metadata, "device" if per == "device" else "pid")
    assert key == (1 if per == "device" else 58972)
    assert not result.warnings


def test_two_processes_one_gpu(samples_dir, tmp_path):
    src = two_process_report(samples_dir, tmp_path, device=0)
    convert_reports([src], tmp_path / "d")
    (both,) = read_traces([tmp_path / "d"])  # per device: one GPU, one rank holding both processes
    assert {get_attr(n, "pid") for n in both.nodes} == {58972, 777}
    kernels = [n for n in both.nodes if get_attr(n, "kind") == "kernel"]
    assert len(kernels) == 8
    api = {
        (get_attr(n, "pid"), get_attr(n, "correlation_id")): n for n in both.nodes if get_attr(n, "kind") == "runtime"
    }
    for k in kernels:  # correlation ids repeat across processes: each kernel links to its own process's call
        assert api[(get_attr(k, "pid"), get_attr(k, "correlation_id"))].id in k.data_deps
    assert validate_traces([both]).ok
    convert_reports([src], tmp_path / "p", per="process")
    assert len(read_traces([tmp_path / "p"])) == 2


def test_old_layout_tolerated(samples_dir, tmp_path):
    """2023-style metadata table name, no greenContextId, syncType only under its old name, no CUDA_EVENT."""
    path = copy_sample(samples_dir, tmp_path)
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE META_DATA_EXPORT RENAME TO EXPORT_META_DATA")
    for table in ("KERNEL", "MEMCPY", "SYNCHRONIZATION"):
        conn.execute(f"ALTER TABLE CUPTI_ACTIVITY_KIND_{table} DROP COLUMN greenContextId")
    conn.execute("UPDATE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION SET deprecatedSyncType = syncType")
    conn.execute("ALTER TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION DROP COLUMN syncType")
    conn.commit()
    conn.close()
    convert_reports([samples_dir / S2026], tmp_path / "new")
    convert_reports([path], tmp_path / "old")
    new, old = read_trace(tmp_path / "new.0.et"), read_trace(tmp_path / "old.0.et")
    assert [(n.name, list(n.data_deps), n.duration_micros) for n in new.nodes] == [
        (n.name, list(n.data_deps), n.duration_micros) for n in old.nodes
    ]
    assert get_attr(old.metadata, "nsys_version") == "2026.1.1.204"

    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE CUPTI_ACTIVITY_KIND_CUDA_EVENT")  # older exports: no event records
    conn.commit()
    conn.close()
    result = convert_reports([path], tmp_path / "noev")
    trace = read_trace(tmp_path / "noev.0.et")
    sync = next(n for n in trace.nodes if n.name == "cudaEventSynchronize")
    assert get_attr(sync, "sync") == "device"  # falls back to waiting for every stream
    assert len(sync.data_deps) >= 5
    assert any("event record" in w for w in result.warnings)


# ------------------------------------------------------------------------------------------ errors


def test_not_sqlite(samples_dir, tmp_path, run_cli):
    bad = tmp_path / "x.sqlite"
    bad.write_text("hello\n")
    res = run_cli("convert", "nsys", str(bad), "-o", str(tmp_path / "o"))
    assert res.exit_code == 1
    assert "not an SQLite file" in res.stderr and str(bad) in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert not list(tmp_path.glob("o*"))


def test_sqlite_but_not_nsys(tmp_path, run_cli):
    other = tmp_path / "other.sqlite"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE t (a)")
    conn.commit()
    conn.close()
    res = run_cli("convert", "nsys", str(other), "-o", str(tmp_path / "o"))
    assert res.exit_code == 1 and "not an Nsight Systems export" in res.stderr


def test_truncated_sqlite(samples_dir, tmp_path, run_cli):
    cut = tmp_path / "cut.sqlite"
    cut.write_bytes((samples_dir / S2026).read_bytes()[:20000])
    res = run_cli("convert", "nsys", str(cut), "-o", str(tmp_path / "o"))
    assert res.exit_code == 1 and str(cut) in res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_no_cuda_activity(samples_dir, tmp_path, run_cli):
    path = copy_sample(samples_dir, tmp_path)
    conn = sqlite3.connect(path)
    for table in ("RUNTIME", "KERNEL", "MEMCPY"):
        conn.execute(f"DELETE FROM CUPTI_ACTIVITY_KIND_{table}")
    conn.commit()
    conn.close()
    res = run_cli("convert", "nsys", str(path), "-o", str(tmp_path / "o"))
    assert res.exit_code == 1 and "no CUDA activity" in res.stderr


def test_missing_required_column(samples_dir, tmp_path):
    path = copy_sample(samples_dir, tmp_path)
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN streamId")
    conn.commit()
    conn.close()
    with pytest.raises(TraceFormatError, match="CUPTI_ACTIVITY_KIND_KERNEL lacks column.*streamId"):
        convert_reports([path], tmp_path / "o")


def test_failure_leaves_no_outputs(samples_dir, tmp_path):
    bad = tmp_path / "bad.sqlite"
    bad.write_text("nope")
    with pytest.raises(TraceFormatError):
        convert_reports([samples_dir / S2026, bad], tmp_path / "o")
    assert not list(tmp_path.glob("o.*"))

"""nsys SQLite -> Chakra on the two real samples: node counts against SQL, every dependency type, replay span."""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from pathlib import Path

import pytest

from chakra.converters import detect
from chakra.converters.nsys import convert_reports
from chakra.graph import critical_path
from chakra.io import read_trace, read_traces
from chakra.schema import NodeType
from chakra.schema.attrs import get_attr
from chakra.validate import validate_traces

S2026 = "nsys/testcuda_nsys2026.1_report2.sqlite"
S2023 = "nsys/reconstream_nsys2023.1_report3.sqlite"


def sql(path: Path, query: str, *args):
    conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        return conn.execute(query, args).fetchall()
    finally:
        conn.close()


def table_exists(path: Path, table: str) -> bool:
    return bool(sql(path, "SELECT 1 FROM sqlite_master WHERE name = ?", table))


def count(path: Path, table: str, where: str = "1") -> int:
    if not table_exists(path, table):
        return 0
    return sql(path, f"SELECT COUNT(*) FROM {table} WHERE {where}")[0][0]


@pytest.fixture(scope="module", params=[S2026, S2023])
def converted(request, samples_dir, tmp_path_factory):
    src = samples_dir / request.param
    out = tmp_path_factory.mktemp("nsys") / "job"
    result = convert_reports([src], out)
    return src, result, read_traces([out])


def by_corr(trace, kinds):
    out = {}
    for n in trace.nodes:
        if get_attr(n, "kind") in kinds:
            out[get_attr(n, "correlation_id")] = n
    return out


def test_node_counts_match_sql(converted):
    src, result, traces = converted
    assert len(traces) == 1
    nodes = traces[0].nodes
    kinds = defaultdict(int)
    for n in nodes:
        kinds[get_attr(n, "kind")] += 1
    assert kinds["kernel"] == count(src, "CUPTI_ACTIVITY_KIND_KERNEL")
    assert kinds["memcpy"] == count(src, "CUPTI_ACTIVITY_KIND_MEMCPY")
    assert kinds["memset"] == count(src, "CUPTI_ACTIVITY_KIND_MEMSET")
    assert kinds["runtime"] == count(src, "CUPTI_ACTIVITY_KIND_RUNTIME", "eventClass = 0")
    assert kinds["driver"] == count(src, "CUPTI_ACTIVITY_KIND_RUNTIME", "eventClass = 1")
    assert len(nodes) == sum(kinds.values())
    assert set(kinds) <= {"kernel", "memcpy", "memset", "runtime", "driver", "gap"}
    assert result.ranks[0].nodes == len(nodes)


def test_api_names_lose_version_suffix(converted):
    src, _, traces = converted
    raw = {
        r[0] for r in sql(src, "SELECT s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId")
    }
    assert any("_v" in name for name in raw)
    names = {n.name for n in traces[0].nodes if get_attr(n, "is_cpu_op") and get_attr(n, "kind") != "gap"}
    assert {name.rsplit("_v", 1)[0] if name.rsplit("_v", 1)[-1].isdigit() else name for name in raw} == names


def test_memcpy_size_and_direction(converted):
    src, _, traces = converted
    rows = sql(src, "SELECT correlationId, bytes, copyKind FROM CUPTI_ACTIVITY_KIND_MEMCPY")
    copies = by_corr(traces[0], {"memcpy"})
    assert rows
    for corr, nbytes, kind in rows:
        node = copies[corr]
        assert get_attr(node, "tensor_size") == nbytes
        assert get_attr(node, "copy_kind") == {1: "HtoD", 2: "DtoH"}[kind]
        assert node.name == f"memcpy {get_attr(node, 'copy_kind')}"


def test_launch_edges_by_correlation(converted):
    src, _, traces = converted
    trace = traces[0]
    api = by_corr(trace, {"runtime", "driver"})
    gpu = by_corr(trace, {"kernel", "memcpy", "memset"})
    blocking = {n.id for n in trace.nodes if get_attr(n, "sync") == "copy"}
    for corr, node in gpu.items():
        launcher = api[corr]
        if launcher.id in blocking:  # a blocking copy: the call waits for the copy instead
            assert node.id in launcher.data_deps
        else:
            assert launcher.id in node.data_deps, (corr, node.name)


def test_stream_order(converted):
    src, _, traces = converted
    gpu = by_corr(traces[0], {"kernel", "memcpy", "memset"})
    per_stream = defaultdict(list)
    for table in ("KERNEL", "MEMCPY", "MEMSET"):
        if table_exists(src, f"CUPTI_ACTIVITY_KIND_{table}"):
            for start, stream, corr in sql(
                src, f"SELECT start, streamId, correlationId FROM CUPTI_ACTIVITY_KIND_{table}"
            ):
                per_stream[stream].append((start, corr))
    pairs = 0
    for tasks in per_stream.values():
        tasks.sort()
        for (_, a), (_, b) in zip(tasks, tasks[1:]):
            assert gpu[a].id in gpu[b].data_deps
            pairs += 1
    assert pairs > 0


def test_thread_order_keeps_gaps(converted):
    src, _, traces = converted
    trace = traces[0]
    nodes = trace.by_id()
    api = sorted(by_corr(trace, {"runtime", "driver"}).values(), key=lambda n: n.start_time_micros)
    rows = sql(src, "SELECT start, end FROM CUPTI_ACTIVITY_KIND_RUNTIME ORDER BY start")
    gaps_seen = 0
    for (prev, node), (prev_row, row) in zip(zip(api, api[1:]), zip(rows, rows[1:])):
        parents = [nodes[d] for d in node.data_deps if nodes[d].name == "cpu_gap" or nodes[d].id == prev.id]
        assert parents, node.name
        gap = parents[0]
        if gap.name == "cpu_gap":
            gaps_seen += 1
            assert list(gap.data_deps) == [prev.id]
            measured = (row[0] - prev_row[1]) / 1000
            assert abs(gap.duration_micros - measured) <= 1.0
    assert gaps_seen > len(api) // 3


def test_replay_reproduces_measured_span(converted):
    src, result, traces = converted
    parts = [
        f"SELECT MIN(start), MAX(end) FROM CUPTI_ACTIVITY_KIND_{t}"
        for t in ("RUNTIME", "KERNEL", "MEMCPY", "MEMSET")
        if table_exists(src, f"CUPTI_ACTIVITY_KIND_{t}")
    ]
    spans = [sql(src, p)[0] for p in parts]
    measured_us = (max(e for _, e in spans) - min(s for s, _ in spans)) / 1000
    length, path = critical_path(traces[0].nodes)
    assert abs(length - measured_us) / measured_us < 0.05
    assert abs(result.ranks[0].span_us - measured_us) < 1.0
    assert len(path) > 10


def test_validate_passes(converted):
    _, _, traces = converted
    report = validate_traces(traces)
    assert report.ok, report.errors


def test_event_sync_2026(samples_dir, tmp_path):
    """cudaEventSynchronize waits for the work recorded before its event: the record is on the legacy
    default stream, so it covers the last task of every blocking stream launched before it."""
    src = samples_dir / S2026
    result = convert_reports([src], tmp_path / "j")
    trace = read_trace(tmp_path / "j.0.et")
    counts = result.ranks[0].counts
    for kind in ("thread", "stream", "launch", "sync", "engine"):  # no NCCL here, so no comm edges
        assert counts[kind] > 0, kind
    assert counts.get("comm", 0) == 0
    api = by_corr(trace, {"runtime"})
    gpu = by_corr(trace, {"kernel", "memcpy"})
    ((sync_corr, ev_sync),) = sql(
        src, "SELECT correlationId, eventSyncId FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION WHERE syncType = 1"
    )
    ((record_corr,),) = sql(
        src, "SELECT correlationId FROM CUPTI_ACTIVITY_KIND_CUDA_EVENT WHERE eventSyncId = ?", ev_sync
    )
    last_per_stream = sql(
        src,
        "SELECT streamId, MAX(correlationId) FROM (SELECT streamId, correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL "
        "UNION ALL SELECT streamId, correlationId FROM CUPTI_ACTIVITY_KIND_MEMCPY) WHERE correlationId < ? "
        "GROUP BY streamId",
        record_corr,
    )
    assert len(last_per_stream) == 4
    sync = api[sync_corr]
    assert get_attr(sync, "sync") == "event"
    for _, corr in last_per_stream:
        assert gpu[corr].id in sync.data_deps
    # it waited 81 ms; replay keeps only what remains after the awaited copy finished
    assert get_attr(sync, "wall_duration_us") > 80_000
    assert sync.duration_micros < 200
    # the device synchronize that follows waits for every stream too
    ((dev_corr,),) = sql(src, "SELECT correlationId FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION WHERE syncType = 4")
    assert get_attr(api[dev_corr], "sync") == "device"
    assert {gpu[c].id for _, c in last_per_stream} <= set(api[dev_corr].data_deps)


def test_blocking_copy_and_driver_launches_2023(samples_dir, tmp_path):
    src = samples_dir / S2023
    result = convert_reports([src], tmp_path / "j")
    trace = read_trace(tmp_path / "j.0.et")
    api = by_corr(trace, {"runtime", "driver"})
    gpu = by_corr(trace, {"kernel", "memcpy", "memset"})
    ((corr, api_end, copy_end),) = sql(
        src,
        "SELECT m.correlationId, r.end, m.end FROM CUPTI_ACTIVITY_KIND_MEMCPY m "
        "JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = m.correlationId",
    )
    assert copy_end <= api_end
    call = api[corr]
    assert call.name == "cudaMemcpy" and get_attr(call, "sync") == "copy"
    assert gpu[corr].id in call.data_deps
    assert call.id not in gpu[corr].data_deps  # no cycle: the copy hangs from the call's predecessor
    driver_launches = sql(
        src,
        "SELECT r.correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
        "WHERE s.value = 'cuLaunchKernel'",
    )
    assert len(driver_launches) == 5
    for (c,) in driver_launches:
        assert get_attr(api[c], "kind") == "driver"
        assert api[c].id in gpu[c].data_deps
    edges = result.ranks[0].counts
    for kind in ("thread", "stream", "launch", "sync"):
        assert edges[kind] > 0


def test_metadata_names_version_and_device(converted):
    src, _, traces = converted
    md = traces[0].metadata
    (version,) = [
        v
        for t in ("META_DATA_EXPORT", "EXPORT_META_DATA")
        if table_exists(src, t)
        for (v,) in sql(src, f"SELECT value FROM {t} WHERE name = 'EXPORT_PRODUCT_VERSION'")
    ]
    assert get_attr(md, "nsys_version") == version
    (gpu_name,) = sql(src, "SELECT name FROM TARGET_INFO_GPU WHERE id = 0")[0]
    assert get_attr(md, "device_name") == gpu_name


def test_cli_convert_and_sniff(samples_dir, tmp_path, run_cli):
    src = samples_dir / S2026
    assert detect(src) == ["nsys"]
    assert detect(samples_dir / "SOURCES.md") == []
    res = run_cli("convert", "nsys", str(src), "-o", str(tmp_path / "c"), "--json")
    assert res.exit_code == 0, res.stderr
    import orjson

    data = orjson.loads(res.stdout)
    assert data["ranks"][0]["tasks"]["kernel"] == count(src, "CUPTI_ACTIVITY_KIND_KERNEL")
    assert data["ranks"][0]["edges"]["sync"] > 0
    res = run_cli("convert", "nsys", str(src), "-o", str(tmp_path / "e"), "--per", "gpu")
    assert res.exit_code == 2  # a usage error
    res = run_cli("convert", "auto", str(src), "-o", str(tmp_path / "d"), "-q")
    assert res.exit_code == 0, res.stderr
    assert (tmp_path / "d.0.et").exists()


def test_no_gaps_option(samples_dir, tmp_path):
    result = convert_reports([samples_dir / S2023], tmp_path / "g", gaps=False)
    trace = read_trace(tmp_path / "g.0.et")
    assert not any(n.name == "cpu_gap" for n in trace.nodes)
    assert result.ranks[0].nodes == len(trace.nodes)
    assert all(n.type == NodeType.COMP_NODE for n in trace.nodes)

"""Stream a report's CUDA activity as one time-ordered sequence of event tuples (SQL cursors, no lists).

Each table is read with `ORDER BY start` (SQLite sorts with bounded memory, spilling to temp
files) and the cursors are merged with `heapq.merge`. At equal start times NVTX ranges come first
(a range opens before the calls it encloses), then API calls, then GPU work (launched by them).

Event tuples (plain tuples: no per-row object on the hot path):
  NVTX:   (start, 0, K_NVTX, end, globalTid, name, json_text, int_value)
  API:    (start, 1, K_API, end, globalTid, corr, name_id, event_class,
           sync_type, sync_stream, sync_event, sync_event_sync, ev_stream, ev_context, ev_id, ev_sync)
  GPU:    (start, 2, kind, end, globalPid, device, context, stream, corr, name_id, bytes, copy_kind, src_kind, dst_kind)
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from operator import itemgetter

from chakra.converters.daydream import schema as S
from chakra.converters.daydream.schema import Report

K_NVTX, K_API, K_KERNEL, K_MEMCPY, K_MEMSET = 0, 1, 2, 3, 4
NVTX_RANGE_TYPES = (59, 60, 70, 71)  # push/pop, start/end, and their NVTXt forms

_PID_OF_TID = "((r.globalTid >> 24) << 24)"  # globalTid with the tid bits cleared == globalPid


def api_rows(report: Report) -> Iterator[tuple]:
    """CUDA runtime + driver API calls joined with their sync and event-record details (by pid, corr)."""
    t = S.RUNTIME
    if not report.has(t):
        return iter(())
    event_class = "r.eventClass" if report.has(t, "eventClass") else "0"
    joins = []
    sync_cols = "NULL, NULL, NULL, NULL"
    if report.has(S.SYNC, "correlationId"):
        sync_type = report.first_column(S.SYNC, "syncType", "deprecatedSyncType")
        pid = "globalPid" if report.has(S.SYNC, "globalPid") else "NULL"
        cols = [
            f'MAX("{sync_type}")' if sync_type else "NULL",
            'MAX("streamId")' if report.has(S.SYNC, "streamId") else "NULL",
            'MAX("eventId")' if report.has(S.SYNC, "eventId") else "NULL",
            'MAX("eventSyncId")' if report.has(S.SYNC, "eventSyncId") else "NULL",
        ]
        joins.append(
            f"LEFT JOIN (SELECT correlationId AS c, {pid} AS p, {cols[0]} AS st, {cols[1]} AS ss, {cols[2]} AS se,"
            f' {cols[3]} AS sy FROM "{S.SYNC}" GROUP BY 1, 2) s'
            f" ON s.c = r.correlationId AND (s.p IS NULL OR s.p = {_PID_OF_TID})"
        )
        sync_cols = "s.st, s.ss, s.se, s.sy"
    ev_cols = "NULL, NULL, NULL, NULL"
    if report.has(S.CUDA_EVENT, "correlationId"):
        pid = "globalPid" if report.has(S.CUDA_EVENT, "globalPid") else "NULL"
        cols = [
            f'MAX("{c}")' if report.has(S.CUDA_EVENT, c) else "NULL"
            for c in ("streamId", "contextId", "eventId", "eventSyncId")
        ]
        joins.append(
            f"LEFT JOIN (SELECT correlationId AS c, {pid} AS p, {cols[0]} AS es, {cols[1]} AS ec, {cols[2]} AS ei,"
            f' {cols[3]} AS ey FROM "{S.CUDA_EVENT}" GROUP BY 1, 2) e'
            f" ON e.c = r.correlationId AND (e.p IS NULL OR e.p = {_PID_OF_TID})"
        )
        ev_cols = "e.es, e.ec, e.ei, e.ey"
    sql = (
        f"SELECT r.start, 1, {K_API}, r.end, r.globalTid, r.correlationId, r.nameId, {event_class}, "
        f'{sync_cols}, {ev_cols} FROM "{t}" r {" ".join(joins)} ORDER BY r.start'
    )
    return report.conn.execute(sql)


def gpu_rows(report: Report, kind: int) -> Iterator[tuple]:
    """Kernels, memcpys or memsets of every device and stream, by start time."""
    table = {K_KERNEL: S.KERNEL, K_MEMCPY: S.MEMCPY, K_MEMSET: S.MEMSET}[kind]
    if not report.has(table):
        return iter(())
    c = report.col_or_null
    if kind == K_KERNEL:
        name = report.first_column(table, "shortName", "demangledName", "name", "mangledName")
        extra = f'"{name}", NULL, NULL, NULL, NULL'
    elif kind == K_MEMCPY:
        extra = f"NULL, {c(table, 'bytes')}, {c(table, 'copyKind')}, {c(table, 'srcKind')}, {c(table, 'dstKind')}"
    else:
        extra = f"NULL, {c(table, 'bytes')}, {c(table, 'value')}, {c(table, 'memKind')}, NULL"
    sql = (
        f"SELECT start, 2, {kind}, end, {c(table, 'globalPid')}, deviceId, {c(table, 'contextId')}, streamId, "
        f'correlationId, {extra} FROM "{table}" ORDER BY start'
    )
    return report.conn.execute(sql)


def nvtx_rows(report: Report) -> Iterator[tuple]:
    """Closed NVTX ranges (push/pop and start/end) with their text and payload, by start time."""
    t = S.NVTX
    if not report.has(t, "start") or not report.has(t, "end"):
        return iter(())
    has = report.has
    if has(t, "text") and has(t, "textId") and has("StringIds"):
        text = "COALESCE(n.text, (SELECT value FROM StringIds WHERE id = n.textId))"
    elif has(t, "text"):
        text = "n.text"
    elif has(t, "textId") and has("StringIds"):
        text = "(SELECT value FROM StringIds WHERE id = n.textId)"
    else:
        text = "NULL"
    json_text = "n.jsonText" if has(t, "jsonText") else "NULL"
    if has(t, "jsonTextId") and has("StringIds"):
        json_text = f"COALESCE({json_text}, (SELECT value FROM StringIds WHERE id = n.jsonTextId))"
    ints = [f"n.{c}" for c in ("uint64Value", "int64Value", "uint32Value", "int32Value") if has(t, c)]
    int_value = f"COALESCE({', '.join(ints)})" if len(ints) > 1 else (ints[0] if ints else "NULL")
    where = "n.end IS NOT NULL"
    if has(t, "eventType"):
        where += f" AND n.eventType IN {NVTX_RANGE_TYPES}"
    tid = "n.globalTid" if has(t, "globalTid") else "NULL"
    sql = (
        f"SELECT n.start, 0, {K_NVTX}, n.end, {tid}, {text}, {json_text}, {int_value} "
        f'FROM "{t}" n WHERE {where} ORDER BY n.start'
    )
    return report.conn.execute(sql)


def events(report: Report) -> Iterator[tuple]:
    """All event tuples of the report in (start, NVTX < API < GPU) order."""
    streams = [
        nvtx_rows(report),
        api_rows(report),
        gpu_rows(report, K_KERNEL),
        gpu_rows(report, K_MEMCPY),
        gpu_rows(report, K_MEMSET),
    ]
    return heapq.merge(*streams, key=itemgetter(0, 1))

"""CUPTI activity records as JSON (the Daydream-style input; format in docs/nsys.md).

CUPTI has no file format of its own: tools dump its activity buffers themselves. We read one
documented shape: JSON Lines (one record per line), a JSON array of records, or an object
`{"records": [...]}`, each record a flat object with a `kind` and CUPTI's field names.

`export_cupti_records` writes an nsys report in that shape (so the two input paths can be checked
against each other); `load_cupti_records` loads records into a temporary SQLite file laid out like
an nsys export, so one graph builder serves both (and SQLite sorts big inputs with bounded memory).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Optional

import ijson
import orjson

from chakra.converters.daydream import schema as S
from chakra.converters.daydream.build import COPY_KINDS, MEM_KINDS
from chakra.errors import TraceFormatError, excerpt
from chakra.io import atomic_output, input_file_errors

FORMAT_TAG = "chakra-cupti-records"
SYNC_TYPES = {
    0: "UNKNOWN",
    1: "EVENT_SYNCHRONIZE",
    2: "STREAM_WAIT_EVENT",
    3: "STREAM_SYNCHRONIZE",
    4: "CONTEXT_SYNCHRONIZE",
}
STREAM_FLAGS = {1: "default", 2: "non_blocking", 3: "null"}
_SYNC_BY_NAME = {v: k for k, v in SYNC_TYPES.items()}
_COPY_BY_NAME = {v: k for k, v in COPY_KINDS.items()}
_MEM_BY_NAME = {v: k for k, v in MEM_KINDS.items()}
_FLAG_BY_NAME = {v: k for k, v in STREAM_FLAGS.items()}
_KIND_ALIASES = {
    "RUNTIME": "RUNTIME",
    "DRIVER": "DRIVER",
    "API": "RUNTIME",
    "KERNEL": "KERNEL",
    "CONCURRENT_KERNEL": "KERNEL",
    "MEMCPY": "MEMCPY",
    "MEMCPY2": "MEMCPY",
    "MEMSET": "MEMSET",
    "SYNCHRONIZATION": "SYNCHRONIZATION",
    "CUDA_EVENT": "CUDA_EVENT",
    "MARKER": "MARKER",
    "NVTX": "MARKER",
    "RANGE": "MARKER",
    "STREAM": "STREAM",
    "DEVICE": "DEVICE",
}


# ------------------------------------------------------------------------------------------ export


def export_cupti_records(report_path: Path, out_path: Path) -> int:
    """Write the CUDA activity of an nsys SQLite report as CUPTI JSON Lines; returns the record count."""
    report = S.open_report(Path(report_path))
    n = 0
    try:
        with atomic_output(out_path, "wb") as out:
            out.write(orjson.dumps({"kind": "HEADER", "format": FORMAT_TAG, "version": 1, "source": "nsys"}) + b"\n")
            for rec in _export_records(report):
                out.write(orjson.dumps(rec) + b"\n")
                n += 1
    finally:
        report.close()
    return n


def _pid(g: Optional[int]) -> int:
    return S.split_global_id(g)[0]


def _export_records(report: S.Report) -> Iterator[dict[str, Any]]:
    c = report.col_or_null
    conn = report.conn
    if report.has(S.GPU_INFO, "id"):
        for dev, name, engines in conn.execute(
            f'SELECT id, {c(S.GPU_INFO, "name")}, {c(S.GPU_INFO, "asyncEngines")} FROM "{S.GPU_INFO}"'
        ):
            yield _clean({"kind": "DEVICE", "deviceId": dev, "name": name, "asyncEngines": engines})
    from chakra.converters.daydream.ranks import stream_flags

    for (pid, sid), flag in stream_flags(report).items():
        yield {"kind": "STREAM", "processId": pid, "streamId": sid, "flag": STREAM_FLAGS.get(flag, flag)}
    t = S.RUNTIME
    if report.has(t):
        ec = c(t, "eventClass")
        for start, end, cls, gtid, corr, name_id in conn.execute(
            f'SELECT start, end, {ec}, globalTid, correlationId, nameId FROM "{t}" ORDER BY start'
        ):
            pid, tid = S.split_global_id(gtid)
            yield {
                "kind": "DRIVER" if cls == 1 else "RUNTIME",
                "name": report.string(name_id),
                "start": start,
                "end": end,
                "processId": pid,
                "threadId": tid,
                "correlationId": corr,
            }
    t = S.KERNEL
    if report.has(t):
        name_col = report.first_column(t, "shortName", "demangledName", "name", "mangledName")
        dims = [d for d in ("gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ") if report.has(t, d)]
        extra = "".join(f", {d}" for d in dims)
        for row in conn.execute(
            f"SELECT start, end, {c(t, 'globalPid')}, deviceId, {c(t, 'contextId')}, streamId, correlationId, "
            f'"{name_col}"{extra} FROM "{t}" ORDER BY start'
        ):
            rec = _gpu(row)
            rec["kind"] = "KERNEL"
            rec["name"] = report.string(row[7])
            rec.update(zip(dims, row[8:]))
            yield rec
    t = S.MEMCPY
    if report.has(t):
        for row in conn.execute(
            f"SELECT start, end, {c(t, 'globalPid')}, deviceId, {c(t, 'contextId')}, streamId, correlationId, "
            f'{c(t, "bytes")}, {c(t, "copyKind")}, {c(t, "srcKind")}, {c(t, "dstKind")} FROM "{t}" ORDER BY start'
        ):
            rec = _gpu(row)
            rec.update(kind="MEMCPY", bytes=row[7], copyKind=COPY_KINDS.get(row[8], row[8]))
            rec.update(srcKind=MEM_KINDS.get(row[9], row[9]), dstKind=MEM_KINDS.get(row[10], row[10]))
            yield _clean(rec)
    t = S.MEMSET
    if report.has(t):
        for row in conn.execute(
            f"SELECT start, end, {c(t, 'globalPid')}, deviceId, {c(t, 'contextId')}, streamId, correlationId, "
            f'{c(t, "bytes")}, {c(t, "value")} FROM "{t}" ORDER BY start'
        ):
            rec = _gpu(row)
            rec.update(kind="MEMSET", bytes=row[7], value=row[8])
            yield _clean(rec)
    t = S.SYNC
    if report.has(t):
        st = report.first_column(t, "syncType", "deprecatedSyncType") or "NULL"
        for start, end, g, dev, ctx, sid, corr, stype, ev, evs in conn.execute(
            f"SELECT start, end, {c(t, 'globalPid')}, {c(t, 'deviceId')}, {c(t, 'contextId')}, {c(t, 'streamId')}, "
            f'correlationId, {st}, {c(t, "eventId")}, {c(t, "eventSyncId")} FROM "{t}" ORDER BY start'
        ):
            yield _clean(
                {
                    "kind": "SYNCHRONIZATION",
                    "type": SYNC_TYPES.get(stype, stype),
                    "start": start,
                    "end": end,
                    "processId": _pid(g),
                    "deviceId": dev,
                    "contextId": ctx,
                    "streamId": _opt(sid),
                    "correlationId": corr,
                    "eventId": _opt(ev),
                    "eventSyncId": _opt(evs),
                }
            )
    t = S.CUDA_EVENT
    if report.has(t):
        for g, dev, ctx, sid, corr, ev, evs in conn.execute(
            f"SELECT {c(t, 'globalPid')}, {c(t, 'deviceId')}, {c(t, 'contextId')}, streamId, correlationId, "
            f'{c(t, "eventId")}, {c(t, "eventSyncId")} FROM "{t}"'
        ):
            yield _clean(
                {
                    "kind": "CUDA_EVENT",
                    "processId": _pid(g),
                    "deviceId": dev,
                    "contextId": ctx,
                    "streamId": sid,
                    "correlationId": corr,
                    "eventId": ev,
                    "eventSyncId": evs,
                }
            )
    from chakra.converters.daydream.source import nvtx_rows

    for start, _, _, end, gtid, name, json_text, int_value in nvtx_rows(report):
        pid, tid = S.split_global_id(gtid)
        rec = {"kind": "MARKER", "name": name, "start": start, "end": end, "processId": pid, "threadId": tid}
        if json_text:
            with contextlib.suppress(orjson.JSONDecodeError):
                rec["payload"] = orjson.loads(json_text)
        if int_value is not None:
            rec["payloadValue"] = int_value
        yield rec


def _gpu(row: tuple) -> dict[str, Any]:
    start, end, g, dev, ctx, sid, corr = row[:7]
    return {
        "start": start,
        "end": end,
        "processId": _pid(g),
        "deviceId": dev,
        "contextId": ctx,
        "streamId": sid,
        "correlationId": corr,
    }


def _opt(v: Optional[int]) -> Optional[int]:
    """nsys writes 0xFFFFFFFF for "none" in some id columns; the records say null instead."""
    return None if v is None or v == 0xFFFFFFFF else v


def _clean(rec: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in rec.items() if v is not None}


# ------------------------------------------------------------------------------------------ import

_TABLES = f"""
CREATE TABLE META_DATA_EXPORT (name TEXT, value TEXT);
CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE {S.RUNTIME} (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER, globalTid INTEGER,
    correlationId INTEGER, nameId INTEGER NOT NULL);
CREATE TABLE {S.KERNEL} (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER, contextId INTEGER,
    streamId INTEGER, correlationId INTEGER, globalPid INTEGER, shortName INTEGER);
CREATE TABLE {S.MEMCPY} (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER, contextId INTEGER,
    streamId INTEGER, correlationId INTEGER, globalPid INTEGER, bytes INTEGER, copyKind INTEGER, srcKind INTEGER,
    dstKind INTEGER);
CREATE TABLE {S.MEMSET} (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER, contextId INTEGER,
    streamId INTEGER, correlationId INTEGER, globalPid INTEGER, bytes INTEGER, value INTEGER);
CREATE TABLE {S.SYNC} (start INTEGER, end INTEGER, deviceId INTEGER, contextId INTEGER, streamId INTEGER,
    correlationId INTEGER, globalPid INTEGER, syncType INTEGER, eventId INTEGER, eventSyncId INTEGER);
CREATE TABLE {S.CUDA_EVENT} (deviceId INTEGER, contextId INTEGER, streamId INTEGER, correlationId INTEGER,
    globalPid INTEGER, eventId INTEGER, eventSyncId INTEGER);
CREATE TABLE {S.NVTX} (start INTEGER, end INTEGER, eventType INTEGER, globalTid INTEGER, text TEXT,
    jsonText TEXT, int64Value INTEGER);
CREATE TABLE {S.STREAMS} (streamId INTEGER, processId INTEGER, contextId INTEGER, flag INTEGER);
CREATE TABLE {S.GPU_INFO} (id INTEGER, name TEXT, asyncEngines INTEGER);
"""


class _Ids:
    """Small, stable ids for pids/tids that do not fit nsys's 24-bit fields (CUPTI threadIds may be pthread_t)."""

    def __init__(self) -> None:
        self.map: dict[int, int] = {}

    def __call__(self, v: int) -> int:
        if 0 <= v < 0xFFFFFF:
            return v
        got = self.map.get(v)
        if got is None:
            got = self.map[v] = 0xFFFFFF - 1 - len(self.map)
        return got


def iter_records(path: Path) -> Iterator[tuple[dict[str, int], dict[str, Any]]]:
    """(line or index, record) for JSON Lines, a JSON array, or {"records": [...]}; streamed."""
    with input_file_errors(path, "CUPTI records file"):
        fh = open(path, "rb")  # noqa: SIM115 - closed by the with below
    with fh:
        head = fh.read(4096).lstrip()
        fh.seek(0)
        if not head:
            raise TraceFormatError(path, "empty file (expected CUPTI JSON records)")
        if head[:1] == b"[":
            yield from _ijson_items(path, fh, "item")
            return
        if head[:1] != b"{":
            raise TraceFormatError(
                path, "not CUPTI JSON records (expected JSON Lines, an array, or {'records': [...]})"
            )
        first = fh.readline()
        try:
            obj = orjson.loads(first)
        except orjson.JSONDecodeError:
            obj = None
        fh.seek(0)
        if isinstance(obj, dict) and "kind" in obj:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    rec = orjson.loads(line)
                except orjson.JSONDecodeError as exc:
                    raise TraceFormatError(path, f"bad JSON: {exc}", line=lineno) from None
                if not isinstance(rec, dict):
                    raise TraceFormatError(path, "record is not a JSON object", line=lineno)
                yield {"line": lineno}, rec
        else:
            yield from _ijson_items(path, fh, "records.item")


#: records are flat objects (a marker's payload may nest a little): deeper input is not CUPTI records,
#: and refusing it keeps the reader's memory and stack bounded
MAX_DEPTH = 64


def _ijson_items(path: Path, fh: IO[bytes], prefix: str) -> Iterator[tuple[dict[str, int], dict[str, Any]]]:
    """The records of a top-level array (`prefix` "item") or of {"records": [...]} ("records.item").

    Built from ijson's flat event stream (not `ijson.items`, whose per-event prefix strings cost
    memory quadratic in the nesting depth), refusing nesting deeper than `MAX_DEPTH`.
    """
    in_object = prefix != "item"
    stack: list[Any] = []  # containers being built, outermost first
    keys: list[Any] = []  # the pending key of each (maps)
    index = 0
    try:
        for event, value in ijson.basic_parse(fh, use_float=True):
            if event == "map_key":
                keys[-1] = value
                continue
            if event == "start_map" or event == "start_array":
                if len(stack) >= MAX_DEPTH:
                    raise TraceFormatError(path, f"JSON nested deeper than {MAX_DEPTH} levels", index=index)
                stack.append({} if event == "start_map" else [])
                keys.append(None)
                continue
            if event == "end_map" or event == "end_array":
                keys.pop()
                value = stack.pop()
            if not stack:
                continue
            depth = len(stack)
            # a finished element of the records array: hand it out instead of keeping it
            if (not in_object and depth == 1 and isinstance(stack[0], list)) or (
                in_object and depth == 2 and keys[0] == "records" and isinstance(stack[1], list)
                and isinstance(stack[0], dict)
            ):  # fmt: skip
                if not isinstance(value, dict):
                    raise TraceFormatError(path, "record is not a JSON object", index=index)
                yield {"index": index}, value
                index += 1
                continue
            parent = stack[-1]
            if isinstance(parent, list):
                parent.append(value)
            else:
                parent[keys[-1]] = value
    except ijson.JSONError as exc:  # yajl's message goes on to draw the spot over two more lines
        raise TraceFormatError(path, f"bad JSON: {str(exc).strip().splitlines()[0]}", index=index) from None


def load_cupti_records(path: Path, db_path: Path) -> dict[str, int]:
    """Load a CUPTI records file into a new SQLite file shaped like an nsys export; returns counts by kind."""
    path = Path(path)
    conn = sqlite3.connect(db_path)
    try:
        conn.executescript(_TABLES)
        counts = _load(path, conn)
        conn.executemany(
            "INSERT INTO META_DATA_EXPORT VALUES (?, ?)",
            [("CHAKRA_SOURCE_FORMAT", "cupti"), ("CHAKRA_SOURCE_FILE", str(path))],
        )
        conn.commit()
    finally:
        conn.close()
    return counts


def _load(path: Path, conn: sqlite3.Connection) -> dict[str, int]:
    strings: dict[str, int] = {}
    pids, tids = _Ids(), _Ids()
    batches: dict[str, list[tuple]] = {}
    counts: dict[str, int] = {}
    inserts = {
        "RUNTIME": f"INSERT INTO {S.RUNTIME} VALUES (?, ?, ?, ?, ?, ?)",
        "KERNEL": f"INSERT INTO {S.KERNEL} VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        "MEMCPY": f"INSERT INTO {S.MEMCPY} VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        "MEMSET": f"INSERT INTO {S.MEMSET} VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        "SYNCHRONIZATION": f"INSERT INTO {S.SYNC} VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        "CUDA_EVENT": f"INSERT INTO {S.CUDA_EVENT} VALUES (?, ?, ?, ?, ?, ?, ?)",
        "MARKER": f"INSERT INTO {S.NVTX} VALUES (?, ?, 59, ?, ?, ?, ?)",
        "STREAM": f"INSERT INTO {S.STREAMS} VALUES (?, ?, ?, ?)",
        "DEVICE": f"INSERT INTO {S.GPU_INFO} VALUES (?, ?, ?)",
    }

    def sid(name: str) -> int:
        got = strings.get(name)
        if got is None:
            got = strings[name] = len(strings) + 1
        return got

    def flush(kind: str) -> None:
        rows = batches.pop(kind, None)
        if rows:
            conn.executemany(inserts[kind], rows)

    for where, rec in iter_records(path):
        try:
            row, kind = _row(rec, pids, tids, sid)
        except (KeyError, TypeError, ValueError) as exc:
            raise TraceFormatError(path, f"bad {rec.get('kind', '?')} record: {_why(exc)}", **where) from None
        if kind is None:
            continue
        if kind in _SPANS and row[0] is not None and row[1] is not None and row[1] < row[0]:
            raise TraceFormatError(path, f"bad {kind} record: ends before it starts ({row[1]} < {row[0]})", **where)
        batch = batches.setdefault(kind, [])
        batch.append(row)
        counts[kind] = counts.get(kind, 0) + 1
        if len(batch) >= 10000:
            flush(kind)
    for kind in list(batches):
        flush(kind)
    conn.executemany("INSERT INTO StringIds VALUES (?, ?)", ((i, s) for s, i in strings.items()))
    # GPU records of a single-process dump need not repeat the pid: give them the process's pid
    api_pids = [r[0] for r in conn.execute(f"SELECT DISTINCT (globalTid >> 24) << 24 FROM {S.RUNTIME} LIMIT 2")]
    if len(api_pids) == 1:
        for t in (S.KERNEL, S.MEMCPY, S.MEMSET, S.SYNC, S.CUDA_EVENT):
            conn.execute(f"UPDATE {t} SET globalPid = ? WHERE globalPid IS NULL", (api_pids[0],))
    return counts


#: kinds whose rows begin (start, end, ...)
_SPANS = frozenset({"RUNTIME", "KERNEL", "MEMCPY", "MEMSET", "SYNCHRONIZATION", "MARKER"})


def _why(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"missing field {exc.args[0]!r}"
    return str(exc)


def _enum(value: Any, names: dict[str, int]) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, str):
        key = value if value in names else value.upper()
        if key not in names:
            raise ValueError(f"unknown value {excerpt(value)} (one of {', '.join(names)})")
        return names[key]
    if type(value) is not int or not 0 <= value <= _I64_MAX:
        raise ValueError(f"must be a name ({', '.join(names)}) or a non-negative integer, not {value!r:.40}")
    return value


def _gpid(pid: Optional[int], pids: _Ids) -> Optional[int]:
    return None if pid is None else (1 << 56) | (pids(int(pid)) << 24)


_I64_MAX = (1 << 63) - 1
_MISSING = object()


def _int(rec: dict[str, Any], key: str, default: Any = _MISSING, signed: bool = False) -> Any:
    """An integer field (0 .. 2**63-1, or int64 when `signed`: SQLite's and the trace's range), or
    `default` when absent."""
    v = rec[key] if default is _MISSING else rec.get(key, default)
    if v is None and default is None:
        return None
    if type(v) is float and v.is_integer():  # "1e3" parses as a float
        v = int(v)
    low = -_I64_MAX - 1 if signed else 0
    if type(v) is not int or not low <= v <= _I64_MAX:
        raise ValueError(f"field {key!r} must be an integer from {low} to 2**63-1, not {excerpt(v, 40)}")
    return v


def _str(rec: dict[str, Any], key: str, default: Any = _MISSING) -> Any:
    v = rec[key] if default is _MISSING else rec.get(key, default)
    if v is None and default is None:
        return None
    if type(v) is not str:
        raise ValueError(f"field {key!r} must be a string, not {excerpt(v, 40)}")
    return v


def _row(rec: dict[str, Any], pids: _Ids, tids: _Ids, sid) -> tuple[Optional[tuple], Optional[str]]:
    raw_kind = _str(rec, "kind").upper()
    if raw_kind == "HEADER":
        return None, None
    kind = _KIND_ALIASES.get(raw_kind)
    if kind is None:
        raise ValueError(f"unknown kind {excerpt(rec['kind'])}")
    g = rec.get
    if kind in ("RUNTIME", "DRIVER"):
        gtid = _gpid(_int(rec, "processId"), pids) | tids(_int(rec, "threadId"))  # type: ignore[operator]
        cls = 1 if kind == "DRIVER" else _int(rec, "eventClass", 0)
        return (
            _int(rec, "start"),
            _int(rec, "end"),
            cls,
            gtid,
            _int(rec, "correlationId", None),
            sid(_str(rec, "name")),
        ), "RUNTIME"
    if kind in ("KERNEL", "MEMCPY", "MEMSET"):
        base = (
            _int(rec, "start"),
            _int(rec, "end"),
            _int(rec, "deviceId", 0),
            _int(rec, "contextId", None),
            _int(rec, "streamId"),
            _int(rec, "correlationId", None),
            _gpid(_int(rec, "processId", None), pids),
        )
        if kind == "KERNEL":
            return base + (sid(_str(rec, "name")),), kind
        if kind == "MEMCPY":
            extra = (
                _int(rec, "bytes", 0),
                _enum(g("copyKind", 0), _COPY_BY_NAME),
                _enum(g("srcKind"), _MEM_BY_NAME),
                _enum(g("dstKind"), _MEM_BY_NAME),
            )
            return base + extra, kind
        return base + (_int(rec, "bytes", 0), _int(rec, "value", None, signed=True)), kind
    if kind == "SYNCHRONIZATION":
        row = (
            _int(rec, "start", None),
            _int(rec, "end", None),
            _int(rec, "deviceId", None),
            _int(rec, "contextId", None),
            _int(rec, "streamId", None),
            _int(rec, "correlationId"),
            _gpid(_int(rec, "processId", None), pids),
            _enum(g("type", g("syncType")), _SYNC_BY_NAME),
            _int(rec, "eventId", None),
            _int(rec, "eventSyncId", None),
        )
        return row, kind
    if kind == "CUDA_EVENT":
        row = (
            _int(rec, "deviceId", None),
            _int(rec, "contextId", None),
            _int(rec, "streamId"),
            _int(rec, "correlationId"),
            _gpid(_int(rec, "processId", None), pids),
            _int(rec, "eventId", None),
            _int(rec, "eventSyncId", None),
        )
        return row, kind
    if kind == "MARKER":
        payload = g("payload")
        gtid = _gpid(_int(rec, "processId"), pids) | tids(_int(rec, "threadId"))  # type: ignore[operator]
        json_text = orjson.dumps(payload).decode() if payload is not None else None
        return (
            _int(rec, "start"),
            _int(rec, "end"),
            gtid,
            _str(rec, "name"),
            json_text,
            _int(rec, "payloadValue", None, signed=True),
        ), kind
    if kind == "STREAM":
        return (
            _int(rec, "streamId"),
            pids(_int(rec, "processId")),
            _int(rec, "contextId", None),
            _enum(g("flag"), _FLAG_BY_NAME),
        ), kind
    return (_int(rec, "deviceId"), _str(rec, "name", None), _int(rec, "asyncEngines", None)), kind

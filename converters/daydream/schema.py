"""Open an Nsight Systems SQLite export and discover what it holds.

The export schema changes between nsys releases (the metadata table was renamed, columns come and
go, tables exist only when the report has that kind of data), so nothing here assumes a fixed
layout: tables and columns are read from `sqlite_master` / `PRAGMA table_info`, and every query
is built from what was found.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from chakra.errors import TraceFormatError, excerpt

SQLITE_MAGIC = b"SQLite format 3\x00"

RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
SYNC = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
CUDA_EVENT = "CUPTI_ACTIVITY_KIND_CUDA_EVENT"
NVTX = "NVTX_EVENTS"
STREAMS = "TARGET_INFO_CUDA_STREAM"
GPU_INFO = "TARGET_INFO_GPU"
META_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")  # new name first (2025+), old name (<= 2023)

#: Tables holding CUDA activity: a report with none of them (or all empty) has nothing to convert.
ACTIVITY_TABLES = (RUNTIME, KERNEL, MEMCPY, MEMSET)

_VERSION_SUFFIX = re.compile(r"_v\d+$")


def strip_version(api_name: str) -> str:
    """`cudaLaunchKernel_v7000` -> `cudaLaunchKernel`; `cudaGetDeviceProperties_v2_v12000` -> `..._v2`."""
    return _VERSION_SUFFIX.sub("", api_name)


def split_global_id(gid: Optional[int]) -> tuple[int, int]:
    """(pid, tid) from an nsys serialized globalTid/globalPid: bits 47-24 pid, bits 23-0 tid."""
    if gid is None:
        return 0, 0
    return (gid >> 24) & 0xFFFFFF, gid & 0xFFFFFF


def is_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(16) == SQLITE_MAGIC
    except OSError:
        return False


@dataclass
class Report:
    """An open export: connection, its tables with their columns, and the export metadata."""

    path: Path
    conn: sqlite3.Connection
    columns: dict[str, list[str]] = field(default_factory=dict)
    meta: dict[str, str] = field(default_factory=dict)
    display: Optional[Path] = None  # the name to show (defaults to path)
    _strings: dict[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.display is None:
            self.display = self.path

    def has(self, table: str, column: Optional[str] = None) -> bool:
        cols = self.columns.get(table)
        if cols is None:
            return False
        return column is None or column in cols

    def first_column(self, table: str, *candidates: str) -> Optional[str]:
        """The first of `candidates` that `table` has (columns renamed between versions)."""
        cols = self.columns.get(table, [])
        return next((c for c in candidates if c in cols), None)

    def col_or_null(self, table: str, column: str, alias: Optional[str] = None) -> str:
        """`column` if the table has it, else `NULL` (optional columns), as a select-list item."""
        expr = f'"{column}"' if self.has(table, column) else "NULL"
        return f"{expr} AS {alias or column}"

    def string(self, string_id: Optional[int]) -> str:
        """StringIds lookup with a cache (names repeat: a few thousand distinct in big reports)."""
        if string_id is None:
            return ""
        value = self._strings.get(string_id)
        if value is None:
            row = None
            if "StringIds" in self.columns:
                row = self.conn.execute("SELECT value FROM StringIds WHERE id = ?", (string_id,)).fetchone()
            value = row[0] if row else f"<string {string_id}>"
            if len(self._strings) < 1_000_000:
                self._strings[string_id] = value
        return value

    def count(self, table: str) -> int:
        if table not in self.columns:
            return 0
        return int(self.conn.execute(f'SELECT COUNT(*) FROM "{table}"').fetchone()[0])

    def any_rows(self, table: str) -> bool:
        if table not in self.columns:
            return False
        return self.conn.execute(f'SELECT 1 FROM "{table}" LIMIT 1').fetchone() is not None

    @property
    def product_version(self) -> str:
        return self.meta.get("EXPORT_PRODUCT_VERSION", "")

    @property
    def schema_version(self) -> str:
        return self.meta.get("EXPORT_SCHEMA_VERSION", "")

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Report:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _decode_text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def connect(path: Path) -> sqlite3.Connection:
    """Read-only connection; `immutable` so read-only sample folders need no lock/journal files."""
    uri = path.resolve().as_uri() + "?mode=ro&immutable=1"
    conn = sqlite3.connect(uri, uri=True)
    # names and NVTX texts are shown, never parsed: bytes that are not UTF-8 must not stop a conversion
    conn.text_factory = _decode_text
    conn.execute("PRAGMA cache_size = -16384")  # 16 MiB page cache; also caps each ORDER BY sorter before it spills
    conn.execute("PRAGMA temp_store = FILE")
    return conn


def open_report(path: Path, *, require_cuda: bool = True, display: Optional[Path] = None) -> Report:
    """Open and introspect `path`; one-line TraceFormatError for anything that is not an nsys export.

    `display` is the name errors and metadata use (the user's file when `path` is a temporary import).
    """
    path = Path(path)
    shown = Path(display) if display is not None else path
    if not path.exists():
        raise TraceFormatError(shown, "no such file")
    if not is_sqlite(path):
        raise TraceFormatError(shown, "not an SQLite file (make one with: nsys export --type sqlite REPORT.nsys-rep)")
    try:
        conn = connect(path)
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")]
        columns = {t: [r[1] for r in conn.execute(f'PRAGMA table_info("{t}")')] for t in tables}
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:  # a corrupt schema may not decode
        raise TraceFormatError(shown, f"unreadable SQLite file: {' '.join(str(exc).split())}") from None
    report = Report(path=path, conn=conn, columns=columns, display=shown)
    meta_table = next((t for t in META_TABLES if t in columns), None)
    if meta_table is None and not any(t.startswith("CUPTI_ACTIVITY_KIND_") for t in columns):
        conn.close()
        raise TraceFormatError(
            shown, "SQLite file is not an Nsight Systems export (no META_DATA_EXPORT/EXPORT_META_DATA or CUPTI tables)"
        )
    try:
        if meta_table is not None and {"name", "value"} <= set(columns[meta_table]):
            report.meta = {str(k): str(v) for k, v in conn.execute(f'SELECT name, value FROM "{meta_table}"')}
        _check_columns(report)
        _check_values(report)
        if require_cuda and not any(report.any_rows(t) for t in ACTIVITY_TABLES):
            if report.meta.get("CHAKRA_SOURCE_FORMAT") == "cupti":
                hint = "the file has no RUNTIME, DRIVER, KERNEL, MEMCPY or MEMSET records"
            else:
                hint = "no CUDA API, kernel, memcpy or memset rows; capture with: nsys profile --trace=cuda ..."
            raise TraceFormatError(shown, f"report has no CUDA activity ({hint})")
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:  # a corrupt schema may not decode
        conn.close()
        raise TraceFormatError(shown, f"unreadable SQLite file: {' '.join(str(exc).split())}") from None
    except TraceFormatError:
        conn.close()
        raise
    return report


_REQUIRED = {
    RUNTIME: ("start", "end", "globalTid", "correlationId", "nameId"),
    KERNEL: ("start", "end", "deviceId", "streamId", "correlationId"),
    MEMCPY: ("start", "end", "deviceId", "streamId", "correlationId"),
    MEMSET: ("start", "end", "deviceId", "streamId", "correlationId"),
}


def _check_columns(report: Report) -> None:
    for table, needed in _REQUIRED.items():
        if table in report.columns:
            missing = [c for c in needed if c not in report.columns[table]]
            if missing:
                raise TraceFormatError(report.display, f"table {table} lacks column(s) {', '.join(missing)}")
    if KERNEL in report.columns and report.first_column(KERNEL, "shortName", "demangledName", "name") is None:
        raise TraceFormatError(report.display, f"table {KERNEL} has no kernel name column (shortName/demangledName)")


# What the converter reads from each table, by value kind. SQLite columns take any type in any row,
# so the declared schema proves nothing: every value read is checked here, once, by one SQL scan
# per table (C speed), instead of failing deep in the graph builder.
_U, _S, _T = "unsigned", "signed", "text"
_GPU_COLS = {"start": _U, "end": _U, "globalPid": _U, "deviceId": _U, "contextId": _U, "streamId": _U,
             "correlationId": _U, "shortName": _U, "demangledName": _U, "name": _U, "mangledName": _U,
             "bytes": _U, "copyKind": _U, "srcKind": _U, "dstKind": _U, "value": _S, "memKind": _U}  # fmt: skip
_VALUE_KINDS: dict[str, dict[str, str]] = {
    RUNTIME: {"start": _U, "end": _U, "globalTid": _U, "correlationId": _U, "nameId": _U, "eventClass": _U},
    KERNEL: _GPU_COLS,
    MEMCPY: _GPU_COLS,
    MEMSET: _GPU_COLS,
    SYNC: {"start": _U, "end": _U, "globalPid": _U, "deviceId": _U, "contextId": _U, "streamId": _U,
           "correlationId": _U, "syncType": _U, "deprecatedSyncType": _U, "eventId": _U, "eventSyncId": _U},
    CUDA_EVENT: {"globalPid": _U, "deviceId": _U, "contextId": _U, "streamId": _U, "correlationId": _U,
                 "eventId": _U, "eventSyncId": _U},
    NVTX: {"start": _U, "end": _U, "globalTid": _U, "eventType": _U, "textId": _U, "jsonTextId": _U, "text": _T,
           "jsonText": _T, "uint64Value": _S, "int64Value": _S, "uint32Value": _U, "int32Value": _S},
    "StringIds": {"id": _U, "value": _T},
    STREAMS: {"streamId": _U, "processId": _U, "contextId": _U, "flag": _U},
    "TARGET_INFO_CUDA_NULL_STREAM": {"streamId": _U, "processId": _U},
    "TARGET_INFO_CUDA_CONTEXT_INFO": {"nullStreamId": _U, "processId": _U},
    GPU_INFO: {"id": _U, "name": _T, "asyncEngines": _U},
}  # fmt: skip
_BAD_VALUE = {
    _U: "typeof({c}) != 'integer' OR {c} < 0",
    _S: "typeof({c}) != 'integer'",
    _T: "typeof({c}) != 'text'",
}
_KIND_WORDS = {_U: "a non-negative integer", _S: "an integer", _T: "text"}


def _check_values(report: Report) -> None:
    """One TraceFormatError naming table, row and column for the first value of the wrong type or
    range (a negative time, text where an id belongs), and for a span that ends before it starts."""
    for table, kinds in _VALUE_KINDS.items():
        cols = [c for c in kinds if report.has(table, c)]
        if not cols:
            continue
        tests = [f'("{c}" IS NOT NULL AND ({_BAD_VALUE[kinds[c]].format(c=chr(34) + c + chr(34))}))' for c in cols]
        spans = report.has(table, "start") and report.has(table, "end")
        if spans:
            tests.append('("end" < "start")')
        select = ", ".join(f'"{c}"' for c in cols)
        row = report.conn.execute(
            f'SELECT rowid, {select} FROM "{table}" WHERE {" OR ".join(tests)} LIMIT 1'
        ).fetchone()
        if row is None:
            continue
        values = dict(zip(cols, row[1:]))
        for c in cols:
            v = values[c]
            kind = kinds[c]
            if v is None:
                continue
            ok = isinstance(v, str) if kind == _T else type(v) is int and (kind == _S or v >= 0)
            if not ok:
                raise TraceFormatError(
                    report.display, f"table {table} row {row[0]}: {c} must be {_KIND_WORDS[kind]}, not {excerpt(v, 40)}"
                )
        start, end = values.get("start"), values.get("end")
        if start is not None and end is not None and end < start:
            raise TraceFormatError(
                report.display, f"table {table} row {row[0]}: ends before it starts (start {start}, end {end})"
            )
        # SQLite saw a bad value that reads back fine: the file's pages disagree with each other
        raise TraceFormatError(report.display, f"table {table} row {row[0]}: inconsistent values (damaged file?)")

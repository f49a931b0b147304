"""Nsight Systems SQLite reports -> Chakra: Daydream's kernel-level dependency graph, one trace per GPU.

`chakra convert nsys REPORT.sqlite... -o PREFIX [--per device|process]`. The library entry point is
`convert_reports`; `export_cupti_records` writes a report as CUPTI JSON records (see docs/nsys.md).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from chakra.converters.nsys.cli import add_cli
from chakra.converters.nsys.driver import ConvertResult, RankSummary, convert_reports
from chakra.converters.nsys.schema import ACTIVITY_TABLES, META_TABLES, connect, is_sqlite

NAME = "nsys"
DESCRIPTION = "Nsight Systems SQLite export (nsys export --type sqlite): kernels, copies, CUDA API, NVTX, NCCL"

__all__ = [
    "NAME",
    "DESCRIPTION",
    "sniff",
    "convert_paths",
    "add_cli",
    "convert_reports",
    "ConvertResult",
    "RankSummary",
]


def sniff(path: Path) -> bool:
    """An SQLite file with an nsys metadata table or CUPTI activity tables."""
    path = Path(path)
    if not path.is_file() or not is_sqlite(path):
        return False
    try:
        conn = connect(path)
        try:
            names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        return False
    return bool(names & set(META_TABLES)) or bool(names & set(ACTIVITY_TABLES))


def convert_paths(inputs: list[Path], prefix: Path, *, quiet: bool = False) -> list[Path]:
    return convert_reports(inputs, prefix).paths

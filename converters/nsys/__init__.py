"""Nsight Systems SQLite reports -> Chakra: Daydream's kernel-level dependency graph, one trace per GPU.

`chakra convert nsys REPORT.sqlite... -o PREFIX [--per device|process]`. The library entry point is
`convert_reports`; `chakra.converters.cupti.records.export_cupti_records` writes a report as CUPTI
JSON records (see docs/nsys.md). This module is the converter plugin; the library names are
imported on first use so that listing the formats stays cheap.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from chakra.converters import lazy_exports
from chakra.converters.result import ConversionResult

NAME = "nsys"
DESCRIPTION = "Nsight Systems SQLite export (nsys export --type sqlite): kernels, copies, CUDA API, NVTX, NCCL"
EXTENSIONS = (".sqlite",)

_SQLITE_MAGIC = b"SQLite format 3\x00"
_LAZY = {"convert_reports": "driver", "ConvertResult": "driver", "RankSummary": "driver"}

__all__ = ["NAME", "DESCRIPTION", "EXTENSIONS", "accept", "convert", "add_cli", "convert_reports", "ConvertResult",
           "RankSummary"]  # fmt: skip


def accept(prefix: bytes) -> bool:
    """An SQLite database: nsys exports are the only SQLite input a converter takes (the tables
    are checked when it is opened, with an error naming what is missing)."""
    return prefix.startswith(_SQLITE_MAGIC)


def convert(inputs: Sequence[Path], prefix: Path, **options: Any) -> ConversionResult:
    """Convert nsys SQLite exports; ranks are numbered across reports in the order given.

    `options` are those of `convert_reports` (per, gaps, copy_engine_order, progress).
    """
    from chakra.converters.daydream.driver import convert_reports, plugin_result

    return plugin_result(convert_reports([Path(p) for p in inputs], Path(prefix), **options))


def batch_tasks(*args, **kwargs):
    """Batch conversion on Dask (chakra.converters.batch): one task per report."""
    from chakra.converters.nsys.batch import batch_tasks as plan

    return plan(*args, **kwargs)


def add_cli(app) -> None:
    from chakra.converters.nsys.cli import add_cli as register

    register(app, convert)


__getattr__ = lazy_exports("chakra.converters.daydream", _LAZY)

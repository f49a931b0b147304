"""CUPTI activity records (JSON) -> Chakra, through the same Daydream graph builder as nsys.

The records format (JSON Lines, a JSON array, or {"records": [...]}, one flat object per CUPTI
activity record with a `kind`) is described in docs/nsys.md; `records` reads and writes it. Each
input file is loaded into a temporary SQLite file shaped like an nsys export and converted like
one; ranks are numbered across files in the order given. This module is the converter plugin.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from chakra.converters.result import ConversionResult
from chakra.errors import InputError

NAME = "cupti"
DESCRIPTION = "CUPTI activity records as JSON (Daydream-style: kernels, memcpy, runtime/driver API, sync, NVTX)"
EXTENSIONS = (".json", ".jsonl")

_KINDS = b"HEADER|RUNTIME|DRIVER|KERNEL|CONCURRENT_KERNEL|MEMCPY|MEMSET|SYNCHRONIZATION|CUDA_EVENT|MARKER|STREAM|DEVICE"
_KIND = re.compile(rb'"kind"\s*:\s*"(' + _KINDS + rb')"', re.I)


def accept(prefix: bytes) -> bool:
    """A JSON document whose first bytes hold a record with a CUPTI activity `kind`."""
    head = prefix[:4096]
    return head.lstrip()[:1] in (b"{", b"[") and _KIND.search(head) is not None


def convert_records(inputs: Sequence[Path], prefix: Path, **options: Any) -> Any:
    """Convert CUPTI JSON record files: load each into a temporary nsys-shaped SQLite, then build the graph.

    `options` are those of `chakra.converters.daydream.driver.convert_reports` (per, gaps,
    copy_engine_order, progress). Returns the nsys `ConvertResult` (library use); `convert` wraps
    it as the plugin result.
    """
    from chakra.converters.cupti.records import load_cupti_records
    from chakra.converters.daydream.driver import convert_reports

    for p in inputs:
        if not Path(p).is_file():
            raise InputError(f"{p}: no such file")
    with tempfile.TemporaryDirectory(prefix="chakra-cupti-") as tmp:
        dbs = []
        for i, p in enumerate(inputs):
            db = Path(tmp) / f"records{i}.sqlite"
            load_cupti_records(Path(p), db)
            dbs.append(db)
        return convert_reports(dbs, prefix, display=[Path(p) for p in inputs], **options)


def convert(inputs: Sequence[Path], prefix: Path, **options: Any) -> ConversionResult:
    """Convert CUPTI record files with the nsys task graph (same options as `convert nsys`)."""
    from chakra.converters.daydream.driver import plugin_result

    return plugin_result(convert_records(inputs, Path(prefix), **options))


def add_cli(app) -> None:
    from chakra.converters.cupti.cli import register

    register(app, convert)

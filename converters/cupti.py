"""CUPTI activity records (JSON) -> Chakra, through the same Daydream graph builder as nsys.

The records format (JSON Lines, a JSON array, or {"records": [...]}, one flat object per CUPTI
activity record with a `kind`) is described in docs/nsys.md. Each input file is loaded into a
temporary SQLite file shaped like an nsys export and converted like one; ranks are numbered
across files in the order given.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import typer

from chakra.cli_common import JsonOption, QuietOption, handle_errors
from chakra.converters.nsys.cli import EngineOption, GapsOption, Per, PerOption
from chakra.converters.nsys.convert import ConvertResult, convert_reports
from chakra.converters.nsys.cupti_json import load_cupti_records
from chakra.errors import InputError

NAME = "cupti"
DESCRIPTION = "CUPTI activity records as JSON (Daydream-style: kernels, memcpy, runtime/driver API, sync, NVTX)"

_KINDS = b"HEADER|RUNTIME|DRIVER|KERNEL|CONCURRENT_KERNEL|MEMCPY|MEMSET|SYNCHRONIZATION|CUDA_EVENT|MARKER|STREAM|DEVICE"
_KIND = re.compile(rb'"kind"\s*:\s*"(' + _KINDS + rb')"', re.I)


def sniff(path: Path) -> bool:
    """A JSON file whose first bytes hold a record with a CUPTI activity `kind`."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    stripped = head.lstrip()
    return stripped[:1] in (b"{", b"[") and _KIND.search(head) is not None


def convert_records(
    inputs: list[Path],
    prefix: Path,
    *,
    per: str = "device",
    gaps: bool = True,
    copy_engine_order: bool = True,
    progress=None,
) -> ConvertResult:
    """Convert CUPTI JSON record files: load each into a temporary nsys-shaped SQLite, then build the graph."""
    for p in inputs:
        if not Path(p).is_file():
            raise InputError(f"{p}: no such file")
    with tempfile.TemporaryDirectory(prefix="chakra-cupti-") as tmp:
        dbs = []
        for i, p in enumerate(inputs):
            db = Path(tmp) / f"records{i}.sqlite"
            load_cupti_records(Path(p), db)
            dbs.append(db)
        return convert_reports(
            dbs,
            prefix,
            per=per,
            gaps=gaps,
            copy_engine_order=copy_engine_order,
            progress=progress,
            display=[Path(p) for p in inputs],
        )


def convert_paths(inputs: list[Path], prefix: Path, *, quiet: bool = False) -> list[Path]:
    return convert_records(inputs, prefix).paths


def add_cli(app: typer.Typer) -> None:
    @app.command(NAME)
    def convert_cupti(
        inputs: list[Path] = typer.Argument(..., help="CUPTI records files (JSON Lines, array, or {records: [...]})."),
        output: Path = typer.Option(..., "--output", "-o", help="Output PREFIX: writes PREFIX.<rank>.et."),
        per: Per = PerOption,
        gaps: bool = GapsOption,
        engine: bool = EngineOption,
        quiet: bool = QuietOption,
        as_json: bool = JsonOption,
    ) -> None:
        """Convert CUPTI activity records (JSON) to Chakra with the same task graph as `convert nsys`.

        One record per line, e.g.

          {"kind": "RUNTIME", "name": "cudaLaunchKernel", "start": 100, "end": 900,
           "processId": 7, "threadId": 7, "correlationId": 5}
          {"kind": "KERNEL", "name": "gemm", "start": 1000, "end": 5000,
           "deviceId": 0, "streamId": 7, "correlationId": 5}

        Example: chakra convert cupti records.json -o out/job   (see docs/nsys.md for every field)
        """
        from chakra.converters.nsys.cli import report, run_with_progress

        with handle_errors():
            result = run_with_progress(
                lambda cb: convert_records(
                    inputs, output, per=per.value, gaps=gaps, copy_engine_order=engine, progress=cb
                ),
                quiet or as_json,
            )
            report(result, quiet, as_json)

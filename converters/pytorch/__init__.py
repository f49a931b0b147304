"""PyTorch Execution Trace (+ Kineto) -> Chakra: every ET schema, real comm nodes, correct dependencies.

Library use::

    from chakra.converters.pytorch import convert_files, convert_rank, Options
    summaries = convert_files([Path("et.0.json")], [Path("kineto.0.json")], Path("out/mlp"))

Module map: `et` (ET loading, versions), `chakra.converters.kineto.trace` (Kineto loading), `link` (ET<->Kineto,
GPU launchers), `comms` + `commmap` (collectives and p2p), `roofline`, `dag` (timeline and
dependencies), `emit` (protobuf nodes), `driver` (per-rank + multi-rank driver), `summary`, `cli`.
This module is the converter plugin (contract in chakra/converters/__init__.py); the library names
above are imported on first use so that listing the formats stays cheap.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

from chakra.converters import lazy_exports
from chakra.converters.result import ConversionResult

NAME = "pytorch"
DESCRIPTION = "PyTorch Execution Trace JSON (1.0.1 ... 1.1.1-chakra.1.0.0), optionally with its Kineto trace"
EXTENSIONS = (".json", ".json.gz", ".tar.gz", ".tgz")
#: Kineto traces given with the ETs are paired with them by rank (`convert auto et.0.json kineto.0.json`).
COMPANIONS = ("kineto",)

_LAZY = {
    "convert_files": "driver",
    "convert_rank": "driver",
    "gather_inputs": "driver",
    "Options": "driver",
    "sniff_et_head": "et",
}


def accept(prefix: bytes) -> bool:
    """An ET: a JSON object that starts with its 'schema' key and holds 'nodes'."""
    from chakra.converters.pytorch.et import sniff_et_head

    return sniff_et_head(prefix)


def result_of(summaries: list[dict[str, Any]]) -> ConversionResult:
    """Per-rank summaries of `convert_files` as the plugin result (shared with the Kineto plugin)."""
    warnings = [f"rank {s['rank']}: {w}" for s in summaries for w in s.get("warnings", [])]
    return ConversionResult([Path(s["output"]) for s in summaries], summaries, warnings)


def convert(
    inputs: Sequence[Path],
    prefix: Path,
    *,
    kineto: Sequence[Path] = (),
    gap_min_us: float = 1.0,
    io: bool = True,
    jobs: int = 0,
    metadata_node: bool = False,
    profiled: bool = False,
    step_time_ns: Optional[float] = None,
) -> ConversionResult:
    """Convert ETs (Kineto files among `inputs` or in `kineto` are paired with them by rank).

    The profiler's cost is removed from host times (overhead.py) unless `profiled`; the untraced
    step time is `step_time_ns`, else read from a manifest beside the inputs, else estimated."""
    from chakra.converters.pytorch.driver import Options, convert_files
    from chakra.errors import InputError

    for p in [*inputs, *kineto]:
        if not Path(p).exists():
            raise InputError(f"{p}: no such file")
    options = Options(
        gap_min_us=gap_min_us, io=io, jobs=jobs, metadata_node=metadata_node,
        overhead="keep" if profiled else "remove", step_time_ns=step_time_ns,
    )  # fmt: skip
    return result_of(convert_files([Path(p) for p in inputs], [Path(p) for p in kineto], Path(prefix), options))


def batch_tasks(*args, **kwargs):
    """Batch conversion on Dask (chakra.converters.batch): one task per rank."""
    from chakra.converters.pytorch.batch import batch_tasks as plan

    return plan(*args, **kwargs)


def finish_batch(*args, **kwargs):
    """After a batch conversion: the whole job's profiler-cost fit, as the plain path does."""
    from chakra.converters.pytorch.batch import finish_batch as finish

    return finish(*args, **kwargs)


def add_cli(app) -> None:
    from chakra.converters.pytorch.cli import add_cli as register

    register(app, convert)


__getattr__ = lazy_exports("chakra.converters.pytorch", _LAZY)


__all__ = ["NAME", "DESCRIPTION", "EXTENSIONS", "accept", "convert", "add_cli", "convert_files", "convert_rank",
           "Options", "gather_inputs"]  # fmt: skip

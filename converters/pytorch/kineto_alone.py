"""Kineto (PyTorch profiler Chrome trace) alone -> Chakra, reusing the PyTorch converter package.

Many users have a profiler trace but no Execution Trace; the graph is then built from cpu_op /
user_annotation events (nesting by time), kernels/memcpy/memset (launch by correlation) and
NCCL kernels / record_param_comms args for communication. `trace` loads Kineto files (the
PyTorch converter links them to ETs with it); this module is the converter plugin.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from chakra.converters.result import ConversionResult

NAME = "kineto"
DESCRIPTION = "PyTorch profiler / Kineto Chrome-trace JSON alone (host ops, kernels, NCCL collectives)"
EXTENSIONS = (".pt.trace.json", ".json", ".json.gz")

# The PyTorch package imports chakra.converters.kineto.trace, so its names are imported where used.


def accept(prefix: bytes) -> bool:
    from chakra.converters.kineto.trace import sniff_kineto_head

    return sniff_kineto_head(prefix)


def convert(inputs: Sequence[Path], prefix: Path, *, gap_min_us: float = 1.0, jobs: int = 0) -> ConversionResult:
    """Convert Kineto traces, one per rank (no Execution Trace).

    The recorded durations are kept: without the Execution Trace observer the profiler's cost per
    operator is a fraction of what `chakra convert pytorch` removes, and a Kineto trace alone has
    no manifest beside it to fit that cost to."""
    from chakra.converters.pytorch import convert as convert_pytorch

    return convert_pytorch([], prefix, kineto=inputs, gap_min_us=gap_min_us, io=True, jobs=jobs, profiled=True)


def batch_tasks(*args, **kwargs):
    """Batch conversion on Dask (chakra.converters.batch): one task per rank."""
    from chakra.converters.pytorch.batch import kineto_batch_tasks

    return kineto_batch_tasks(*args, **kwargs)


def add_cli(app) -> None:
    from chakra.converters.pytorch.cli import add_kineto_cli

    add_kineto_cli(app, convert)

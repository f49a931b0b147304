"""Kineto (PyTorch profiler Chrome trace) alone -> Chakra, reusing the PyTorch converter package.

Many users have a profiler trace but no Execution Trace; the graph is then built from cpu_op /
user_annotation events (nesting by time), kernels/memcpy/memset (launch by correlation) and
NCCL kernels / record_param_comms args for communication.
"""

from __future__ import annotations

from pathlib import Path

import typer

from chakra.converters.pytorch import _head
from chakra.converters.pytorch.cli import add_kineto_cli
from chakra.converters.pytorch.convert import convert_files
from chakra.converters.pytorch.kineto_trace import sniff_kineto_head

NAME = "kineto"
DESCRIPTION = "PyTorch profiler / Kineto Chrome-trace JSON alone (host ops, kernels, NCCL collectives)"


def sniff(path: Path) -> bool:
    return sniff_kineto_head(_head(Path(path)))


def convert_paths(inputs: list[Path], prefix: Path, *, quiet: bool = False) -> list[Path]:
    return [Path(s["output"]) for s in convert_files([], inputs, prefix)]


def add_cli(app: typer.Typer) -> None:
    add_kineto_cli(app)

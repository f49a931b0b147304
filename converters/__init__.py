"""Converters from other trace formats to Chakra: one module (or package) per input format.

Each converter module defines:
  NAME: str                      the FORMAT word of `chakra convert FORMAT`
  DESCRIPTION: str               one line for `chakra convert --help`
  sniff(path: Path) -> bool      recognise its files by content (cheap: read a few KB at most)
  convert_paths(inputs: list[Path], prefix: Path, *, quiet: bool = False) -> list[Path]
                                 convert with default options, write PREFIX.<rank>.et, return paths
  add_cli(app: typer.Typer)      register `chakra convert NAME` with the format's own options

`chakra convert auto INPUT... -o PREFIX` sniffs the inputs and calls the matching `convert_paths`.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Optional

#: FORMAT word -> module that implements it (order = sniffing order: most specific first).
CONVERTERS: dict[str, str] = {
    "pytorch": "chakra.converters.pytorch",
    "kineto": "chakra.converters.kineto",
    "nsys": "chakra.converters.nsys",
    "cupti": "chakra.converters.cupti",
    "bigsim": "chakra.converters.bigsim",
    "flexflow": "chakra.converters.flexflow",
    "text": "chakra.converters.astrasim_text",
    "json": "chakra.converters.chakra_json",
}


def load(name: str) -> Optional[ModuleType]:
    """The converter module for FORMAT `name`, or None if it is not part of this build."""
    module_name = CONVERTERS[name]
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            _report_broken(name, exc)
        return None
    except Exception as exc:  # a broken converter must not take the others down; tests load each one
        _report_broken(name, exc)
        return None


def _report_broken(name: str, exc: BaseException) -> None:
    import sys

    print(f"chakra: converter {name!r} unavailable: {type(exc).__name__}: {exc}", file=sys.stderr)


def available() -> dict[str, ModuleType]:
    return {name: mod for name in CONVERTERS if (mod := load(name)) is not None}


def detect(path: Path) -> Optional[str]:
    """FORMAT name of the first converter whose sniff accepts `path`."""
    for name, mod in available().items():
        try:
            if mod.sniff(path):
                return name
        except OSError:
            continue
    return None

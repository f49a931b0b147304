"""`chakra convert json` and `chakra dejsonize`: JSON traces -> .et, one code path for both.

The two JSON forms themselves (our lossless form and the official C++ feeder's `workload_graph`
form) are read and written by `chakra.jsonform`; this module is the converter plugin that turns
files in either form back into `.et` files.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Callable

from chakra.converters.result import ConversionResult

NAME = "json"
DESCRIPTION = "Chakra JSON traces: our lossless form (chakra jsonize) or the official C++ feeder's workload_graph form."
EXTENSIONS = (".json", ".json.gz")


def accept(prefix: bytes) -> bool:
    head = prefix[:4096].lstrip()
    return head[:1] == b"{" and (b'"chakra-et-json/' in head or b'"workload_graph"' in head)


def write_et(sources: Sequence[Path], output: Callable[[Path, int], Path]) -> ConversionResult:
    """Read each JSON trace and write it as `.et` at `output(source, rank)`.

    The rank is the document's own, else the number in the file name, else the input's position.
    """
    from chakra.errors import InputError
    from chakra.io import is_json_file, output_set, rank_from_path, read_json_trace, write_trace

    written: list[Path] = []
    nodes: list[int] = []
    with output_set():  # every file or none
        for i, src in enumerate(Path(p) for p in sources):
            if not src.is_file():
                raise InputError(f"{src}: no such file")
            if not is_json_file(src):
                raise InputError(
                    f"{src}: not a JSON trace (it does not start with {{ or [); .et files need no conversion"
                )
            trace = read_json_trace(src)
            if trace.rank is None:
                from_name = rank_from_path(src)
                trace.rank = from_name if from_name is not None else i
            dst = Path(output(src, trace.rank))
            if dst in written:
                raise InputError(
                    f"{src}: would overwrite {dst} (rank {trace.rank} given twice; name files PREFIX.<rank>.json)"
                )
            if dst.resolve() == src.resolve():
                raise InputError(f"{src}: input and output are the same file")
            written.append(write_trace(dst, trace))
            nodes.append(len(trace.nodes))
    return ConversionResult(written, {"written": [str(p) for p in written], "nodes": nodes}, [])


def convert(inputs: Sequence[Path], prefix: Path) -> ConversionResult:
    """Write PREFIX.<rank>.et for every JSON trace."""
    from chakra.io import rank_path

    return write_et(inputs, lambda _src, rank: rank_path(prefix, rank))


def add_cli(app) -> None:
    from chakra.converters.chakra_json.cli import register

    register(app, convert, DESCRIPTION)

"""ASTRA-sim 1.0 text workloads (DATA, MODEL, HYBRID_*, MICRO, ...) -> Chakra.

`parse` reads the text format into a `Workload`; `build` turns it into one trace per NPU
following ASTRA-sim 1.0's training loops; this module is the `chakra convert text` plugin.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

from chakra.converters.result import ConversionResult
from chakra.errors import InputError, TraceFormatError

NAME = "text"
DESCRIPTION = "ASTRA-sim 1.0 text workload (DATA, MODEL, HYBRID_*, MICRO, ...)"
EXTENSIONS = (".txt",)

#: Library names, imported on first use (build pulls in the protobuf schema).
_LAZY = {
    "TextConversion": "build",
    "convert_text": "build",
    "DEFAULT_MAX_NPUS": "build",
    "Workload": "parse",
    "parse_text": "parse",
}

__all__ = ["NAME", "DESCRIPTION", "EXTENSIONS", "accept", "convert", "add_cli", *_LAZY]


def accept(prefix: bytes) -> bool:
    """A text workload starts with a parallelism keyword, then a bare layer count."""
    from chakra.converters.astrasim_text.parse import KEYWORDS, _content_lines

    try:
        text = prefix[:4096].decode("utf-8")
    except UnicodeDecodeError:
        return False
    lines = []
    for _, toks in _content_lines(text):
        lines.append(toks)
        if len(lines) == 2:
            break
    return len(lines) == 2 and lines[0][0] in KEYWORDS and len(lines[1]) == 1 and lines[1][0].isdigit()


def convert(
    inputs: Sequence[Path],
    prefix: Path,
    *,
    npus: Optional[int] = None,
    passes: int = 1,
    dims: Optional[Sequence[int]] = None,
    model_group: Optional[int] = None,
    max_npus: Optional[int] = None,
    quiet: bool = False,
) -> ConversionResult:
    """Convert one workload into PREFIX.<npu>.et (+ PREFIX.comm_groups.json).

    Without `npus` the header must name the count (`all_gpus: N`); either way at most `max_npus`
    trace files are written unless the limit is raised.
    """
    from chakra.converters.astrasim_text.build import DEFAULT_MAX_NPUS, convert_text
    from chakra.converters.astrasim_text.parse import header_npus, parse_text

    if len(inputs) != 1:
        raise InputError("the text converter takes exactly one workload file")
    path = Path(inputs[0])
    limit = DEFAULT_MAX_NPUS if max_npus is None else max_npus
    wl = parse_text(path)
    if npus is None:
        npus = header_npus(wl)
        if npus is None:
            raise InputError(
                f"{path}: a text workload does not say how many NPUs run it; "
                f"use: chakra convert text {path} --npus N -o {prefix}"
            )
        if npus > limit:
            raise TraceFormatError(
                path,
                f"all_gpus: {npus:,} would write {npus:,} trace files, above the limit of {limit:,}; "
                f"to allow it: chakra convert text {path} --npus {npus} --max-npus {npus} -o {prefix}",
                line=wl.header_line,
            )
    conv = convert_text(path, npus, passes, dims=dims, model_group=model_group, text=wl.text, max_npus=limit)
    written = conv.write(Path(prefix))
    return ConversionResult(written, {**conv.summary(), "written": [str(p) for p in written]}, list(conv.warnings))


def add_cli(app) -> None:
    import typer

    from chakra.cli_common import JsonOption, QuietOption, handle_errors, info, print_json, warn
    from chakra.converters.astrasim_text.build import DEFAULT_MAX_NPUS, _parse_dims
    from chakra.io import rank_path

    @app.command(NAME)
    def convert_text_cmd(
        workload: Path = typer.Argument(..., help="ASTRA-sim 1.0 text workload (.txt)."),
        output: Path = typer.Option(..., "--output", "-o", help="Output PREFIX: writes PREFIX.<npu>.et."),
        npus: int = typer.Option(..., "--npus", "-n", help="Number of NPUs (one trace file each)."),
        passes: int = typer.Option(1, "--passes", "-p", help="Training passes (iterations) per NPU."),
        dims: Optional[str] = typer.Option(
            None, "--dims", help="Network dimensions, lowest first (e.g. 4x8); must multiply to --npus."
        ),
        model_group: Optional[int] = typer.Option(
            None,
            "--model-group",
            help="Model-parallel group size (default: model_parallel_NPU_group from the header).",
        ),
        max_npus: int = typer.Option(
            DEFAULT_MAX_NPUS, "--max-npus", help="Refuse to write more trace files than this (one per NPU)."
        ),
        quiet: bool = QuietOption,
        json_out: bool = JsonOption,
    ) -> None:
        """Convert an ASTRA-sim 1.0 text workload into one Chakra trace per NPU.

        Every keyword ASTRA-sim 1.0 runs is accepted (MICRO, DATA, MODEL, HYBRID_DATA_MODEL,
        HYBRID_MODEL_DATA, HYBRID_DLRM[_ENHANCED], HYBRID_TRANSFORMER[_FWD_IN_BCKWD],
        HYBRID_CUSTOMIZED, DISTRIBUTED_INFERENCE). Hybrid modes put their collectives on
        process groups (pg_name) listed in PREFIX.comm_groups.json, ASTRA-sim's
        --comm-group-configuration file.

        Examples:

          chakra convert text Resnet50_DataParallel.txt --npus 8 --passes 2 -o out/resnet

          chakra convert text Transformer_HybridParallel.txt --npus 16 -o out/tf   # groups of 4 from the header

          chakra convert text MLP_HybridParallel_Data_Model.txt --npus 16 --dims 4x4 -o out/mlp
        """
        with handle_errors():
            result = convert(
                [workload], output, npus=npus, passes=passes, dims=_parse_dims(dims), model_group=model_group,
                max_npus=max_npus,
            )  # fmt: skip
            for message in result.warnings:
                warn(message)
            if json_out:
                print_json(result.summary)
            else:
                s = result.summary
                info(
                    f"{workload}: {s['parallelism']}, {s['layers']} layers -> "
                    f"{npus} traces of {s['nodes_per_rank']} nodes ({passes} pass{'es' if passes > 1 else ''})",
                    quiet,
                )
                info(f"wrote {rank_path(output, 0)} .. {rank_path(output, npus - 1)}", quiet)
                if s["process_groups"]:
                    info(f"wrote {output}.comm_groups.json ({s['process_groups']} process groups)", quiet)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"chakra.converters.astrasim_text.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

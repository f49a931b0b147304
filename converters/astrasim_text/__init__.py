"""ASTRA-sim 1.0 text workloads (DATA, MODEL, HYBRID_*, MICRO, ...) -> Chakra.

`parse` reads the text format into a `Workload`; `build` turns it into one trace per NPU
following ASTRA-sim 1.0's training loops; this module is the `chakra convert text` plugin.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from chakra.converters.astrasim_text.build import TextConversion, _parse_dims, convert_text
from chakra.converters.astrasim_text.parse import KEYWORDS, Workload, _content_lines, parse_text

from chakra.errors import InputError
from chakra.io import rank_path

NAME = "text"
DESCRIPTION = "ASTRA-sim 1.0 text workload (DATA, MODEL, HYBRID_*, MICRO, ...)"

__all__ = ["DESCRIPTION", "NAME", "TextConversion", "add_cli", "convert_paths", "convert_text", "parse_text", "sniff"]


def sniff(path: Path) -> bool:
    """A text workload starts with a parallelism keyword, then a bare layer count."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        return False
    lines = [toks for _, toks in _content_lines(text)][:2]
    return len(lines) == 2 and lines[0][0] in KEYWORDS and len(lines[1]) == 1 and lines[1][0].isdigit()


def _npus_from_header(wl: Workload) -> Optional[int]:
    value = wl.header.get("all_gpus")
    if value:
        try:
            return int(value[0])
        except ValueError:
            return None
    return None


def convert_paths(inputs: list[Path], prefix: Path, *, quiet: bool = False) -> list[Path]:
    """Default conversion for `chakra convert auto`: needs the NPU count in the header (all_gpus:)."""
    if len(inputs) != 1:
        raise InputError("the text converter takes exactly one workload file")
    wl = parse_text(Path(inputs[0]))
    npus = _npus_from_header(wl)
    if npus is None:
        raise InputError(
            f"{inputs[0]}: a text workload does not say how many NPUs run it; "
            f"use: chakra convert text {inputs[0]} --npus N -o {prefix}"
        )
    return convert_text(Path(inputs[0]), npus, text=wl.text).write(prefix)


def add_cli(app: typer.Typer) -> None:
    from chakra.cli_common import JsonOption, QuietOption, handle_errors, info, print_json, warn

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
            conv = convert_text(workload, npus, passes, dims=_parse_dims(dims), model_group=model_group)
            for message in conv.warnings:
                warn(message)
            written = conv.write(output)
            if json_out:
                print_json({**conv.summary(), "written": [str(p) for p in written]})
            else:
                info(
                    f"{workload}: {conv.workload.keyword}, {len(conv.workload.layers)} layers -> "
                    f"{npus} traces of {len(conv.nodes)} nodes ({passes} pass{'es' if passes > 1 else ''})",
                    quiet,
                )
                info(f"wrote {rank_path(output, 0)} .. {rank_path(output, npus - 1)}", quiet)
                if conv.groups.ids:
                    info(f"wrote {output}.comm_groups.json ({len(conv.groups.ids)} process groups)", quiet)

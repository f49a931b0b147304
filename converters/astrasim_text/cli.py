"""`chakra convert text`: options and the summary lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional

import typer

from chakra.cli_common import JsonOption, QuietOption, handle_errors, info, print_json, warn
from chakra.converters import one_input
from chakra.converters.astrasim_text.build import DEFAULT_MAX_NPUS, _parse_dims
from chakra.io import rank_path


def register(app: typer.Typer, convert: Callable[..., Any]) -> None:
    @app.command("text")
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
            workload = one_input("text", workload)
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

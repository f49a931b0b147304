"""`chakra convert bigsim`: options and output of the BigSim converter."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional

import typer

from chakra.cli_common import JsonOption, QuietOption, handle_errors, info, make_progress, print_json, warn
from chakra.converters import expand_inputs


def register(app: typer.Typer, convert: Callable[..., Any]) -> None:
    @app.command("bigsim")
    def convert_bigsim(
        inputs: list[Path] = typer.Argument(
            ..., help="A folder with bgTrace + bgTrace<k> (or detail dumps), bgTrace files, or detail-*.log dumps."
        ),
        output: Path = typer.Option(..., "--output", "-o", help="Output PREFIX: writes PREFIX.<proc>.et."),
        detail: bool = typer.Option(
            False, "--detail", help="Read the ASCII detail dumps of the folder even if binary logs are there."
        ),
        workers_per_node: Optional[int] = typer.Option(
            None,
            "--workers-per-node",
            help="numWth, for detail dumps without a bgTrace summary (otherwise inferred from the messages).",
        ),
        serialize: bool = typer.Option(
            False,
            "--serialize",
            help="Also chain each proc's SEBs in logged order with ctrl deps (the emulator's schedule).",
        ),
        quiet: bool = QuietOption,
        json_out: bool = JsonOption,
    ) -> None:
        """Convert BigSim (Charm++) logs to one Chakra trace per simulated processor.

        Binary logs of every version 0-6 are read with the sizes and byte order their headers declare. Each SEB becomes COMP_NODE piece(s), split where it sends a message; each message copy a send/recv pair (broadcasts expanded); MPI collective SEBs (v6) a COMM_COLL_NODE. See docs/bigsim.md.

        Examples:

          chakra convert bigsim logs/ -o out/app            (bgTrace + bgTrace<k>)

          chakra convert bigsim logs/ --detail -o out/app   (the detail-*.log dumps)

          chakra convert bigsim logs/ -o out/app --json     (summary for scripts)
        """  # noqa: E501
        with handle_errors():
            inputs = expand_inputs("bigsim", inputs, note=lambda line: info(line, quiet or json_out))[0]
            with make_progress(quiet or json_out) as bar:
                task = bar.add_task("writing traces", total=None)
                result = convert(
                    inputs,
                    output,
                    prefer_detail=detail,
                    workers_per_node=workers_per_node,
                    serialize=serialize,
                    progress=lambda done, total: bar.update(task, completed=done, total=total),
                )
            for note in result.warnings:
                warn(note)
            if json_out:
                print_json(result.summary)
                return
            s = result.summary
            version = f"v{s['version']}" if s["version"] is not None else "unknown version"
            info(
                f"{s['source']} logs ({version}): {s['procs']} procs, {s['sebs']:,} SEBs, "
                f"{s['messages']:,} messages ({s['broadcast_entries']} broadcast entries), "
                f"{s['collectives']} collectives -> {s['nodes']:,} nodes in {len(result.paths)} files "
                f"{output}.<proc>.et",
                quiet,
            )

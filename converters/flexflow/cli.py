"""`chakra convert flexflow`: options and the summary lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional

import typer

from chakra.cli_common import JsonOption, QuietOption, handle_errors, info, print_json, warn
from chakra.converters import one_input
from chakra.converters.result import DEFAULT_MAX_RANKS


def register(app: typer.Typer, convert: Callable[..., Any]) -> None:
    @app.command("flexflow")
    def convert_flexflow_cmd(
        taskgraph: Path = typer.Argument(..., help="Task graph .dot written by FlexFlow's --taskgraph."),
        output: Path = typer.Option(..., "--output", "-o", help="Output PREFIX: writes PREFIX.<npu>.et."),
        placement: Optional[str] = typer.Option(
            None,
            "--placement",
            help="Device of each task: a file, or inline 'NAME=DEVS;nodeN=DEV;*=DEV' (DEVS: 3, 0,1 or 0-3).",
        ),
        npus: Optional[int] = typer.Option(None, "--npus", help="Write this many rank files (default: devices used)."),
        bandwidth: Optional[float] = typer.Option(
            None, "--bandwidth", help="Link bandwidth in GB/s, to derive message sizes from transfer times."
        ),
        latency: float = typer.Option(0.0, "--latency", help="Per-hop link latency in µs (with --bandwidth)."),
        max_npus: int = typer.Option(
            DEFAULT_MAX_RANKS,
            "--max-npus",
            min=1,
            help="Refuse graphs needing more rank files than this (corrupt device ids).",
        ),
        quiet: bool = QuietOption,
        json_out: bool = JsonOption,
    ) -> None:
        """Split a FlexFlow task graph into one Chakra trace per device.

        Compute tasks become COMP nodes (times in µs), each transfer a send on its source and a
        receive on its destination with a shared comm_tag. The upstream export does not record
        devices: give --placement, or everything lands on NPU 0 (with a warning). Legacy graphs
        with 'npu=' labels carry their own devices.

        Examples:

          chakra convert flexflow taskgraph.dot --placement 'conv1=0-3;fc1=0-3;*=0' -o out/ff

          chakra convert flexflow taskgraph.dot --placement placement.json --bandwidth 25 -o out/ff

          chakra convert flexflow legacy_npu_graph.dot -o out/ff
        """
        with handle_errors():
            result = convert(
                [one_input("flexflow", taskgraph)],
                output,
                placement=placement,
                npus=npus,
                bandwidth_gbps=bandwidth,
                latency_us=latency,
                max_npus=max_npus,
            )
            for message in result.warnings:
                warn(message)
            written = result.paths
            if json_out:
                print_json(result.summary)
            else:
                s = result.summary
                info(
                    f"{taskgraph}: {s['variant']} task graph, {s['tasks']} tasks -> {s['npus']} traces "
                    f"({s['compute_nodes']} compute nodes, {s['messages']} messages, "
                    f"{s['sync_messages']} sync messages)",
                    quiet,
                )
                for path in written:
                    info(f"wrote {path}", quiet)

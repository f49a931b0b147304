"""Command-line pieces `chakra convert nsys` and `chakra convert cupti` share (same task graph,
same switches, same summary table)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Callable

import typer

from chakra.cli_common import console, info, make_progress, print_json, warn
from chakra.converters.result import ConversionResult


class Per(str, Enum):
    device = "device"
    process = "process"


PerOption = typer.Option(Per.device, "--per", help="One rank per GPU (device) or per process (process).")
GapsOption = typer.Option(True, "--gaps/--no-gaps", help="Keep the CPU time between API calls as gap nodes.")
EngineOption = typer.Option(
    True, "--copy-engine-order/--no-copy-engine-order", help="Order host<->device copies per copy engine."
)


def run_with_progress(fn: Callable, quiet: bool):
    """Run fn(progress_callback) with a spinner counting rows on stderr."""
    with make_progress(quiet) as bar:
        task = bar.add_task("converting rows", total=None)
        return fn(lambda rows, _total: bar.update(task, completed=rows))


def print_summary(result: ConversionResult, quiet: bool, as_json: bool) -> None:
    """Warnings, then a per-rank table (or the summary as JSON) of an nsys or CUPTI conversion."""
    for message in result.warnings:
        warn(message)
    if as_json:
        print_json(result.summary)
        return
    if quiet:
        return
    from rich.table import Table

    table = Table(title="converted", show_lines=False)
    for col in ("rank", "source", "of", "nodes", "API", "kernels", "copies", "memsets", "gaps", "coll", "span ms"):
        table.add_column(col, justify="left" if col in ("source", "of") else "right")
    for d in result.summary["ranks"]:
        t = d["tasks"]
        table.add_row(
            str(d["rank"]),
            Path(d["source"]).name,
            d["key"],
            str(d["nodes"]),
            str(t["runtime"] + t["driver"]),
            str(t["kernel"]),
            str(t["memcpy"]),
            str(t["memset"]),
            str(t["gap_nodes"]),
            str(d["collectives"]),
            f"{d['span_us'] / 1000:.3f}",
        )
    console.print(table)
    for d in result.summary["ranks"]:
        edges = ", ".join(f"{k} {v}" for k, v in d["edges"].items() if v)
        info(f"rank {d['rank']} dependencies: {edges or 'none'}", quiet)
    for path in result.paths:
        info(f"wrote {path}", quiet)

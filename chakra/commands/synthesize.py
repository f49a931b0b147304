"""`chakra synthesize`: learn a statistical model of real traces and sample new ones."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer

from chakra.cli_common import JsonOption, MetadataNodeOption, QuietOption, console, handle_errors, info, print_json

SYNTHESIZE_HELP = (
    "Fit a generative model to real multi-rank traces and sample a new job of --ranks ranks.\n\n"
    "The model learns the collective-type sequence (a Markov chain), message sizes per type (Gaussian "
    "mixtures), compute nodes between comm events, compute durations per operator class, and how soon work "
    "depends on each comm node. The output keeps the replay invariants: members of a process group issue the "
    "same collectives in the same order, and every send has its receive. --fidelity (or --report) prints a KS "
    "statistic per quantity, real vs synthetic.\n\n"
    "Needs scikit-learn: pip install 'chakra-et\\[synth]'.\n\n"
    "Example: chakra synthesize real/ddp --ranks 64 --seed 3 --obfuscate --report -o out/synth"
)


def synthesize_cmd(
    inputs: list[str] = typer.Argument(
        ...,
        help="Real traces: one PREFIX, folder or quoted pattern per job (each argument is one job; - reads one trace).",
    ),
    ranks: int = typer.Option(..., "--ranks", "-n", help="Rank count of the synthetic job (any number)."),
    output: Path = typer.Option(
        ..., "--output", "-o", help="Output PREFIX: writes PREFIX.<rank>.et (+ PREFIX.comm_groups.json)."
    ),
    seed: int = typer.Option(0, "--seed", help="Random seed (same seed, same output)."),
    obfuscate: bool = typer.Option(False, "--obfuscate", help="Replace operator and group names with neutral ones."),
    length: Optional[int] = typer.Option(
        None, "--length", help="Comm events per rank (default: drawn from the inputs)."
    ),
    fidelity: bool = typer.Option(
        False, "--fidelity", "--report", help="Compare real and synthetic distributions (KS per quantity)."
    ),
    metadata_node: bool = MetadataNodeOption,
    quiet: bool = QuietOption,
    as_json: bool = JsonOption,
) -> None:
    """Fit a generative model to real multi-rank traces and sample a new job of --ranks ranks."""
    with handle_errors():
        from chakra.dsl.synthesis import synthesize
        from chakra.io import read_traces

        started = time.perf_counter()
        jobs = []
        for arg in inputs:
            traces = read_traces([arg])
            info(f"read {len(traces)} rank(s) from {arg}", quiet)
            jobs.append(traces)
        result = synthesize(jobs, ranks, seed=seed, obfuscate=obfuscate, fidelity=fidelity, length=length)
        paths = result.workload.save(output, metadata_node=metadata_node)
        summary = {
            "ranks": ranks,
            "nodes": result.workload.node_count(metadata_node=metadata_node),
            "files": [str(p) for p in paths],
            "model": result.model.summary(),
            "seconds": round(time.perf_counter() - started, 3),
        }
        if fidelity:
            summary["fidelity"] = [row.to_json() for row in result.fidelity]
        if as_json:
            print_json(summary)
            return
        info(f"wrote {len(paths)} rank trace(s) ({summary['nodes']:,} nodes) to {output}.<rank>.et", quiet)
        if fidelity:
            from rich.markup import escape
            from rich.table import Table

            table = Table(title="real vs synthetic")
            for col in ("quantity", "measure", "real n", "synthetic n", "statistic", "p-value"):
                table.add_column(col, justify="left" if col == "quantity" else "right", no_wrap=col == "quantity")
            for row in result.fidelity:
                p = "-" if row.p_value is None else f"{row.p_value:.3g}"
                table.add_row(
                    escape(row.quantity), row.measure, str(row.real_n), str(row.synth_n), f"{row.statistic:.3f}", p
                )
            console.print(table)


def register(app: typer.Typer) -> None:
    app.command("synthesize", help=SYNTHESIZE_HELP)(synthesize_cmd)

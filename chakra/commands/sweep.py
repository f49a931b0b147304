"""`chakra sweep PREFIX --grid GRID.yaml -o RESULTS`: simulate a design space on Dask workers."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from chakra.cli_common import (
    JsonOption,
    QuietOption,
    SchedulerOption,
    WorkersOption,
    console,
    handle_errors,
    info,
    make_progress,
    print_json,
    warn,
)


def sweep_cmd(
    workload: str = typer.Argument(..., help="PREFIX of the traces to simulate (every PREFIX.<rank>.et)."),
    grid: Path = typer.Option(..., "--grid", "-g", help="Grid YAML: base configs and the axes to vary."),
    output: Path = typer.Option(..., "--output", "-o", help="RESULTS: writes RESULTS.parquet and RESULTS.csv."),
    retry_errors: bool = typer.Option(False, "--retry-errors", help="Rerun points that failed in an earlier run."),
    workers: Optional[int] = WorkersOption,
    scheduler: Optional[str] = SchedulerOption,
    json_out: bool = JsonOption,
    quiet: bool = QuietOption,
) -> None:
    """Simulate every point of a grid (network, system, memory, what-if recipes), one Dask task each.

    Results: one row per point (scope=overall: the slowest rank's finish, mean compute/comm/exposed
    comm/idle) and one per rank, with every parameter as a column. A rerun skips points already in
    RESULTS (keyed by a hash of the point); a failing point records its error and the rest go on.
    Without --scheduler, a local cluster of worker processes runs it (--workers N, default one per core).

    Examples:

      [bold]chakra sweep out/gpt --grid examples/sweeps/network.yaml -o out/gpt_sweep --workers 2[/]

      [bold]chakra sweep out/gpt --grid grid.yaml -o results --scheduler tcp://head:8786[/]

      [bold]chakra report out/gpt_sweep -o out/gpt_sweep.html[/]
    """
    from chakra.distributed.cluster import dask_client
    from chakra.distributed.grid import expand, load_grid
    from chakra.distributed.sweep import run_sweep, workload_ranks

    with handle_errors():
        g = load_grid(grid)
        total = len(expand(g, workload, workload_ranks(workload)))
        with dask_client(workers, scheduler, total) as client, make_progress(quiet or json_out) as bar:
            task = bar.add_task(f"simulating {total} point(s)", total=total)
            summary = run_sweep(
                g,
                workload,
                output,
                client=client,
                retry_errors=retry_errors,
                progress=lambda done, todo: bar.update(task, completed=done + (total - todo), total=total),
            )
        for pid, err in (summary.errors or [])[:10]:
            warn(f"point {pid}: {err}")
        if summary.failed > 10:
            warn(f"... and {summary.failed - 10} more failed point(s) (status=error rows in the results)")
        if json_out:
            print_json(summary.to_json())
            return
        console.print(
            f"{summary.points} point(s): {summary.ran} simulated ({summary.failed} failed), {summary.skipped} already "
            f"in the results; {summary.wall_s:.2f} s on {summary.workers} worker(s)"
        )
        info(f"wrote {summary.parquet} and {summary.csv}", quiet)


def register(app: typer.Typer) -> None:
    app.command("sweep")(sweep_cmd)

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
    workload: str = typer.Argument(
        ...,
        help="The traces to simulate: a PREFIX (every PREFIX.<rank>.et), a folder of rank files or a quoted pattern.",
    ),
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
    from contextlib import nullcontext

    from chakra.distributed.cluster import check_workers, dask_client
    from chakra.distributed.grid import load_grid
    from chakra.distributed.sweep import plan_sweep, run_sweep
    from chakra.errors import InputError

    with handle_errors():
        if workload == "-":  # every Dask task reads the workload by name
            raise InputError("-: a sweep's workload is read by each of its tasks; name its PREFIX, folder or pattern")
        check_workers(workers)
        g = load_grid(grid)
        plan = plan_sweep(g, workload, output, retry_errors=retry_errors)
        total, todo = len(plan.points), len(plan.todo)
        # Nothing left to run: no cluster to start (or reach).
        cluster = dask_client(workers, scheduler, todo) if todo else nullcontext(None)
        with cluster as client, make_progress(quiet or json_out) as bar:
            task = bar.add_task(f"simulating {todo} of {total} point(s)", total=total)
            summary = run_sweep(
                g,
                workload,
                output,
                client=client,
                plan=plan,
                progress=lambda done, n: bar.update(task, completed=done + (total - n), total=total),
            )
        for pid, err in (summary.errors or [])[:10]:
            warn(f"point {pid}: {err}")
        if summary.failed > 10:
            warn(f"... and {summary.failed - 10} more failed point(s) (status=error rows in the results)")
        if json_out:
            print_json(summary.to_json())
            return
        where = f"; {summary.wall_s:.2f} s on {summary.workers} worker(s)" if summary.ran else ""
        console.print(
            f"{summary.points} point(s): {summary.ran} simulated ({summary.failed} failed), {summary.skipped} already "
            f"in the results{where}"
        )
        info(f"wrote {summary.parquet} and {summary.csv}", quiet)


def register(app: typer.Typer) -> None:
    app.command("sweep")(sweep_cmd)

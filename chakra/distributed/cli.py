"""The CLI side of batch conversion: the hook `chakra convert FORMAT --workers/--scheduler` calls."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from chakra.cli_common import console, err_console, handle_errors, info, make_progress, print_json, warn
from chakra.errors import ChakraError


def wants_dask(workers: Optional[int], scheduler: Optional[str]) -> bool:
    return workers is not None or bool(scheduler)


def run_batch(
    fmt: str,
    inputs: list[Path],
    output: Path,
    *,
    workers: Optional[int],
    scheduler: Optional[str],
    options: dict[str, Any],
    kineto: Optional[list[Path]] = None,
    quiet: bool = False,
    json_out: bool = False,
) -> None:
    """Expand the inputs, convert every rank on Dask, print a table, exit 1 on any failure."""
    from chakra.distributed.batch import convert_batch
    from chakra.distributed.cluster import check_workers, dask_client
    from chakra.distributed.inputs import expand

    with handle_errors():
        check_workers(workers)
        files, _ = expand(inputs, fmt, note=lambda line: info(line, quiet or json_out))
        kin, _ = expand(kineto or [], "kineto", note=lambda line: info(line, quiet or json_out))
        # The plugin plans the tasks (one per rank, or per report); the bar's total follows it.
        tasks = len(files)
        with dask_client(workers, scheduler, tasks) as client, make_progress(quiet or json_out, transient=True) as bar:
            task = bar.add_task(f"converting {tasks} input(s)", total=tasks)
            result = convert_batch(
                fmt,
                files,
                output,
                client=client,
                kineto=kin,
                options=options,
                progress=lambda done, total: bar.update(task, completed=done, total=total),
            )
        if json_out:
            print_json(result.to_json())
        elif not quiet:
            _print(result)
        for o in result.failed:
            err_console.print(
                f"[bold red]error:[/] rank {o.rank if o.rank >= 0 else '?'} ({', '.join(o.inputs)}): {o.error}",
                highlight=False,
                soft_wrap=True,
                markup=True,
            )
        rep = result.cross_rank
        for f in rep.findings:
            (warn if f.severity == "warning" else _error_line)(f"cross-rank: {f.message}")
        if result.failed:
            raise typer.Exit(1)
        if not rep.ok:
            raise ChakraError(f"cross-rank check failed: {rep.error_count} error(s) (the rank files were written)")


def _error_line(message: str) -> None:
    from rich.markup import escape

    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)


def _print(result: Any) -> None:
    from rich.table import Table

    table = Table(title=f"converted on {result.workers} Dask worker(s) in {result.wall_s:.2f} s", title_justify="left")
    for col in ("rank", "inputs", "nodes", "task s", "output"):
        table.add_column(col, justify="left" if col in ("inputs", "output") else "right")
    shown = result.ranks if len(result.ranks) <= 32 else result.ranks[:16] + result.ranks[-16:]
    for o in shown:
        if o.error is not None:
            continue
        table.add_row(str(o.rank), ", ".join(Path(p).name for p in o.inputs), f"{o.stats.get('nodes', 0):,}",
                      f"{o.seconds:.2f}", o.output or "-")  # fmt: skip
    if len(shown) < len(result.ranks):
        table.caption = f"{len(result.ranks)} ranks: first and last 16 shown (--json for all)"
    console.print(table)
    ok = len(result.ranks) - len(result.failed)
    rep = result.cross_rank
    console.print(
        f"{ok} of {len(result.ranks)} rank(s) converted; cross-rank check: "
        + ("[green]ok[/]" if rep.ok else f"[red]{rep.error_count} error(s)[/]")
        + (f", {rep.warning_count} warning(s)" if rep.warning_count else "")
    )

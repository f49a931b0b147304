"""What every subcommand shares: consoles, error handling, progress bars, JSON output.

Subcommands live in `chakra/commands/<name>.py`, each with `register(app)`; `chakra/cli.py` wires
them. A subcommand body runs inside `handle_errors()`, so a ChakraError becomes one red line on
stderr and exit code 1 (the traceback only with `--debug` or CHAKRA_DEBUG=1).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import typer
from rich.console import Console

from chakra.errors import ChakraError

console = Console()
err_console = Console(stderr=True)


class State:
    debug: bool = bool(os.environ.get("CHAKRA_DEBUG"))
    quiet: bool = False
    interrupted: bool = False  # "interrupted" was said (once per run)


state = State()

# Reusable option declarations so every subcommand spells them the same way.
QuietOption = typer.Option(False, "--quiet", "-q", help="No progress bars or informational messages.")
JsonOption = typer.Option(False, "--json", help="Print machine-readable JSON on stdout instead of tables.")
#: Writers of traces (convert pytorch, generate, synthesize, whatif): process groups always go to
#: PREFIX.comm_groups.json; the PyTorch-style METADATA node only on request, as ASTRA-sim aborts on it.
MetadataNodeOption = typer.Option(
    False,
    "--metadata-node",
    help="Also write the process_group:init METADATA node (ASTRA-sim aborts on it; "
    "groups are always in PREFIX.comm_groups.json).",
)
# Scale-out on Dask (chakra.distributed): declared once, used by convert FORMAT and sweep.
WorkersOption = typer.Option(
    None, "--workers", "-W", help="Run as Dask tasks on N local worker processes (one task each at a time)."
)
SchedulerOption = typer.Option(
    None,
    "--scheduler",
    help="Run on an existing Dask cluster, e.g. tcp://HOST:8786 (workers read and write the paths given).",
)


@contextmanager
def handle_errors() -> Iterator[None]:
    """Turn user errors into one line + exit 1; keep tracebacks for --debug.

    Inputs opened inside are tracked, so no output of the command can replace one of them.
    """
    from chakra.io import track_inputs

    try:
        with track_inputs():
            yield
    except ChakraError as exc:
        if state.debug:
            raise
        err_console.print(f"[bold red]error:[/] {_escape(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        say_interrupted()
        raise typer.Exit(130) from None
    except (BrokenPipeError, MemoryError) as exc:
        if state.debug:
            raise
        err_console.print(f"[bold red]error:[/] {type(exc).__name__}: {_escape(str(exc))}")
        raise typer.Exit(1) from None


def say_interrupted() -> None:
    if not state.interrupted:
        state.interrupted = True
        err_console.print("[red]interrupted[/]")


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def info(message: str, quiet: bool = False) -> None:
    """An informational line on stderr (silenced by -q)."""
    if not (quiet or state.quiet):
        err_console.print(message, highlight=False)


def warn(message: str) -> None:
    err_console.print(f"[yellow]warning:[/] {_escape(message)}", highlight=False)


def print_json(obj: Any) -> None:
    """JSON on stdout (orjson: fast, handles 64-bit ints and numpy scalars)."""
    import orjson

    data = orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS)
    sys.stdout.buffer.write(data + b"\n")
    sys.stdout.flush()


def make_progress(quiet: bool = False, transient: bool = True) -> Any:
    """A rich progress bar on stderr; disabled with -q or when stderr is not a terminal... still cheap."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    return Progress(
        SpinnerColumn(),
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=transient,
        disable=quiet or state.quiet,
    )


def load_traces(args: list[str], quiet: bool = False, *, stream: bool = False) -> list:
    """chakra.io.read_traces with a progress bar on stderr: every subcommand reads PREFIXes this way.

    `stream`: leave `.et` nodes on disk (`chakra.columns.TraceFile`), for commands that walk them once."""
    from chakra.io import read_traces

    if stream:
        from chakra.columns import open_traces as read_traces  # noqa: F811
    with make_progress(quiet) as progress:
        task = progress.add_task("reading traces", total=None)
        return read_traces(args, on_progress=lambda done, total: progress.update(task, completed=done, total=total))

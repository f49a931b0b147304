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
from enum import Enum
from typing import Any, Optional

import typer

from chakra.errors import ChakraError, ReaderGone

# `console` (stdout) and `err_console` (stderr), rich Consoles made when first used (`_Console`
# below): a run that prints only JSON, or nothing, never imports rich's console (a third of a small
# `chakra simulate`'s start-up beyond `import typer, rich`). emoji=False: names are printed as they
# are (a node or file named `:fire:` stays that text), and rich's emoji table is never loaded.
_CONSOLES: list[Any] = []
_WIDTH: list[Optional[int]] = [None]  # what set_width was given

#: Width of output that is not a terminal (a pipe, a file, CI): wide enough that tables take the
#: width of their content, since nothing there wraps lines for the reader. rich's own default, 80
#: columns, cuts cells (numbers included) with an ellipsis.
UNBOUNDED_WIDTH = 1000


class _FoldTables:
    """A rich render hook for tables wider than the screen (a small terminal, --width): cells that
    do not fit wrap onto more lines instead of ending in an ellipsis, so no number or name is cut."""

    def process_renderables(self, renderables: list) -> list:
        from rich.table import Table

        for item in renderables:
            if isinstance(item, Table):
                for column in item.columns:
                    if column.overflow == "ellipsis":
                        column.overflow = "fold"
        return renderables


def _consoles() -> tuple[Any, Any]:
    """(stdout console, stderr console), made on first use with the width set so far."""
    if not _CONSOLES:
        from rich.console import Console

        _CONSOLES[:] = [Console(emoji=False), Console(stderr=True, emoji=False)]
        for con in _CONSOLES:
            con.push_render_hook(_FoldTables())
        _apply_width()
    return _CONSOLES[0], _CONSOLES[1]


class _Console:
    """`console` / `err_console`: stand-ins that make the rich Consoles on first use, so a command
    module may import them at its top and still print only JSON, or nothing, without rich's console
    module (a sixth of a small command's start-up)."""

    __slots__ = ("_index",)

    def __init__(self, index: int) -> None:
        object.__setattr__(self, "_index", index)

    def __getattr__(self, name: str) -> Any:
        return getattr(_consoles()[self._index], name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(_consoles()[self._index], name, value)


console: Any = _Console(0)
err_console: Any = _Console(1)


def set_width(width: Optional[int] = None) -> None:
    """Output width of every command: `width` (chakra --width) when given, else COLUMNS, else the
    terminal's; output that goes to no terminal is not wrapped at all (UNBOUNDED_WIDTH)."""
    _WIDTH[0] = width
    if _CONSOLES:
        _apply_width()


def _apply_width() -> None:
    width = _WIDTH[0]
    for con in _CONSOLES:
        if width:
            con.width = width
        elif os.environ.get("COLUMNS", "").isdigit() or con.is_terminal:
            con.width = None  # type: ignore[assignment]  # rich: COLUMNS, then the terminal size
        else:
            con.width = UNBOUNDED_WIDTH


class State:
    debug: bool = bool(os.environ.get("CHAKRA_DEBUG"))
    quiet: bool = False
    interrupted: bool = False  # "interrupted" was said (once per run)


state = State()


# Options that take one of a few words are enums: any other word is a usage error (exit 2, with
# click's message listing the choices), like a mistyped command name.
class Congestion(str, Enum):
    aware = "aware"
    unaware = "unaware"


class CommMode(str, Enum):
    model = "model"
    replay = "replay"


class MissingDeps(str, Enum):
    error = "error"
    drop = "drop"


# Reusable option declarations so every subcommand spells them the same way.
QuietOption = typer.Option(False, "--quiet", "-q", help="No progress bars or informational messages.")
JsonOption = typer.Option(False, "--json", help="Print machine-readable JSON on stdout instead of tables.")
#: What a trace argument may be, said the same way by every command (chakra/inputs.py, docs/inputs.md).
TRACES_HELP = (
    "Traces: a PREFIX (every PREFIX.<rank>.et), trace files, a folder of rank files, a quoted pattern "
    "('out/run.*.et') or - (standard input)"
)
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
        from chakra.inputs import as_typed  # standard input's copy is `-` to the user

        _consoles()[1].print(f"[bold red]error:[/] {_escape(as_typed(str(exc)))}", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None
    except ReaderGone:  # `| head` has what it wanted: a quiet end, as `cat` has
        raise typer.Exit(0) from None
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM / SIGHUP (chakra.errors.Stopped)
        raise typer.Exit(say_interrupted(getattr(exc, "signum", None))) from None
    except (BrokenPipeError, MemoryError) as exc:
        if state.debug:
            raise
        _consoles()[1].print(f"[bold red]error:[/] {type(exc).__name__}: {_escape(str(exc))}")
        raise typer.Exit(1) from None


def say_interrupted(signum: Optional[int] = None) -> int:
    """Say `interrupted` once (`interrupted by SIGTERM` for a stop signal); the exit code: 130 for
    Ctrl-C, 128 + the signal's number for the others, as a shell reports a process they ended."""
    import signal

    if not state.interrupted:
        state.interrupted = True
        by = f" by {signal.Signals(signum).name}" if signum else ""
        _consoles()[1].print(f"[red]interrupted{by}[/]", highlight=False)
    return 128 + (signum or signal.SIGINT)


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


# Environment variables under which rich colours or sizes output that goes to no terminal.
_RICH_ENV = ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "JUPYTER_COLUMNS", "JUPYTER_LINES")


def _said_plainly(text: str) -> bool:
    """Write `text` and a newline to stderr without rich where rich would write exactly that (stderr
    not a terminal, nothing forcing colour, every line printable and too short to wrap); False when
    rich must. A script or CI log reading a warning then never pays for rich's console import."""
    if _CONSOLES or any(name in os.environ for name in _RICH_ENV):
        return False
    columns = os.environ.get("COLUMNS", "")
    width = _WIDTH[0] or (int(columns) if columns.isdigit() else UNBOUNDED_WIDTH)
    try:
        if sys.stderr.isatty():
            return False
    except (AttributeError, ValueError):  # no stderr, or a closed one: rich says what it says
        return False
    if not all(line.isprintable() and 2 * len(line) < width for line in text.split("\n")):
        return False  # tabs and control codes (rich rewrites them), wide characters, wrapping
    sys.stderr.write(text + "\n")
    sys.stderr.flush()
    return True


def info(message: str, quiet: bool = False) -> None:
    """An informational line on stderr (silenced by -q)."""
    if not (quiet or state.quiet) and not ("[" not in message and _said_plainly(message)):
        _consoles()[1].print(message, highlight=False)


def warn(message: str) -> None:
    if not _said_plainly(f"warning: {message}"):
        _consoles()[1].print(f"[yellow]warning:[/] {_escape(message)}", highlight=False)


def print_json(obj: Any) -> None:
    """JSON on stdout (orjson: fast, handles 64-bit ints and numpy scalars)."""
    import orjson

    data = orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS)
    sys.stdout.buffer.write(data + b"\n")
    sys.stdout.flush()


class _NoBar:
    """What `make_progress` gives when the bar is off: the calls commands make, doing nothing,
    without importing rich.progress (start-up a small `chakra simulate` would pay)."""

    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def add_task(self, description: str, **fields: Any) -> int:
        return 0

    def update(self, task: int, **fields: Any) -> None:
        return None


def make_progress(quiet: bool = False, transient: bool = True) -> Any:
    """A rich progress bar on stderr; off with -q and when stderr is no terminal (a log gets no bar
    frames, and an error that follows starts on the first line)."""
    if quiet or state.quiet or not _consoles()[1].is_terminal:
        return _NoBar()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    return Progress(
        SpinnerColumn(),
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=_consoles()[1],
        transient=transient,
    )


def load_traces(args: list[str], quiet: bool = False, *, stream: bool = False) -> list:
    """chakra.io.read_traces with a progress bar on stderr: every subcommand reads PREFIXes this way.

    `stream`: leave `.et` nodes on disk (`chakra.columns.TraceFile`), for commands that walk them once."""
    from chakra.io import read_traces

    if stream:
        from chakra.columns import open_traces as read_traces  # noqa: F811
    with make_progress(quiet) as progress:
        task = progress.add_task("reading traces", total=None)
        return read_traces(args, progress=lambda done, total: progress.update(task, completed=done, total=total))

"""The `chakra` command: one typer app whose subcommands are imported only when run.

Each module in `chakra/commands/` exposes `register(app)`. `COMMANDS` below is the whole program
surface, in the order `chakra --help` shows it (the order a user meets them); its one-line
descriptions are the top-level help, so `chakra --help` and `chakra --version` import no
subcommand (see chakra/cli_group.py).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from typing import Any, Optional


def _interrupted_while_starting(signum: int, frame: object) -> None:
    by = b"" if signum == signal.SIGINT else b" by " + signal.Signals(signum).name.encode()
    with contextlib.suppress(OSError):
        os.write(2, b"interrupted" + by + b"\n")
    os._exit(128 + signum)


# Run as the `chakra` program (not imported by a library user or a test): a Ctrl-C while the
# imports below load is one line too, not an import traceback. main() hands Ctrl-C back to Python.
if os.path.basename(sys.argv[0]) == "chakra" or sys.argv[0].endswith(os.path.join("chakra", "cli.py")):
    signal.signal(signal.SIGINT, _interrupted_while_starting)
    # SIGTERM and SIGHUP too (main() makes them end a command as Ctrl-C does); an ignored SIGHUP
    # (nohup) stays ignored
    signal.signal(signal.SIGTERM, _interrupted_while_starting)
    if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:
        signal.signal(signal.SIGHUP, _interrupted_while_starting)
    # numpy's OpenBLAS starts a thread per core when imported; chakra does no linear algebra that
    # threads would speed up (a few small least-squares fits), so in its own process they only
    # cost start-up CPU: about a fifth of a small `chakra simulate`'s, which a batch of them run
    # side by side pays on every call. A value the user set is kept.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import typer  # noqa: E402

from chakra import __version__  # noqa: E402
from chakra.cli_group import LazyGroup, command_from  # noqa: E402
from chakra.cli_params import install as _install_fast_params  # noqa: E402

_install_fast_params()  # option values without importing pydantic (chakra/cli_params.py)

#: command -> (module in chakra/commands/, one line for `chakra --help`).
#: Adding a command is one step: write chakra/commands/<module>.py with `register(app)` (which
#: calls `app.command("<name>")(...)` or `app.add_typer(...)`), then add its line here. Keep the
#: module's top-level imports to typer, rich and chakra.cli_common; import the library (numpy,
#: protobuf, the simulator...) inside the command's function, so that no command pays for
#: another's imports and `chakra --help` imports none (tests/core/test_startup.py).
COMMANDS: dict[str, tuple[str, str]] = {
    "convert": ("convert", "Convert other tools' traces to Chakra (chakra convert --help lists the formats)"),
    "validate": (
        "validate",
        "Check traces are replayable: ids, dependencies, cycles, comm attributes, cross-rank agreement",
    ),
    "stats": ("stats", "Per-rank node, collective, p2p, compute and critical-path figures"),
    "visualize": ("visualize", "Draw dependency graphs (pdf/svg/png/dot/graphml) with filters and collapsed views"),
    "timeline": ("timeline", "Chrome/Perfetto timeline JSON from a simulation log or recorded start times"),
    "simulate": ("simulate", "Replay traces on ASTRA-sim-compatible compute, network and memory models"),
    "export": ("export", "Write a variant of any trace that the real ASTRA-sim runs to the end, with its configs"),
    "analyze": ("analyze", "Critical path, time breakdown and comm/compute overlap per rank"),
    "calibrate": ("calibrate", "Fit network bandwidth, latency and a compute scale to a recorded run's durations"),
    "memory": ("memory", "Peak live tensor bytes per rank, what is live then, and whether it fits a capacity"),
    "diff": ("diff", "Compare two traces or two simulation logs per operator class"),
    "whatif": ("whatif", "Apply a what-if recipe (AMP, fused optimizer, data parallel, ...) and predict step time"),
    "generate": ("generate", "Generate multi-rank traces from a DSL/YAML spec or built-in parallel workloads"),
    "synthesize": ("synthesize", "Sample statistically similar traces, at any rank count, from real ones"),
    "interpolate": ("interpolate", "Rewrite durations from fitted models or a scale factor (BigSim-style)"),
    "jsonize": ("jsonize", "Write the lossless JSON form of .et traces"),
    "dejsonize": ("jsonize", "Turn JSON traces (ours or the official form) back into .et (= chakra convert json)"),
    "sweep": ("sweep", "Simulate a grid of network/system/memory/what-if settings on Dask; Parquet + CSV results"),
    "report": ("report", "One self-contained interactive HTML report of sweep results"),
}  # fmt: skip


class ChakraGroup(LazyGroup):
    def lazy_names(self) -> list[str]:
        return list(COMMANDS)

    def lazy_help(self, name: str) -> str:
        return COMMANDS[name][1]

    def lazy_load(self, name: str) -> Optional[Any]:
        import importlib

        module_name = f"chakra.commands.{COMMANDS[name][0]}"
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:  # say which subcommand is broken; the others stay usable
            _broken_command(name, exc)
            return None
        command = command_from(module.register, name)
        if command is not None:
            command.short_help = COMMANDS[name][1]
        return command


app = typer.Typer(
    name="chakra",
    cls=ChakraGroup,
    help="Convert, check, view, feed and simulate MLCommons Chakra execution traces.\n\n"
    "A PREFIX argument means every PREFIX.<rank>.et file (ranks sorted numerically).",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"chakra {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show full tracebacks on errors."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
    width: Optional[int] = typer.Option(
        None,
        "--width",
        min=20,
        help="Columns for tables and messages (default: COLUMNS, else the terminal's; not wrapped when piped).",
    ),
) -> None:
    from chakra.cli_common import set_width, state

    set_width(width)
    if debug:
        state.debug = True


def _broken_command(name: str, exc: BaseException) -> None:
    print(f"chakra: subcommand {name!r} unavailable: {type(exc).__name__}: {exc}", file=sys.stderr)
    if "--debug" in sys.argv:
        raise exc


def main() -> None:
    """The `chakra` command on `sys.argv`, ending in SystemExit with its exit code (what a Python
    caller or a test gets; the program itself runs `run`)."""
    sys.exit(_command())


def run() -> None:
    """The `chakra` program: `main`, then the process ends without the interpreter's teardown
    where that is safe (`_leave`)."""
    _leave(_command())


def _command() -> Any:
    """Run the command on `sys.argv`; its exit code."""
    from chakra.cli_streams import flush_streams, install, stopped_by
    from chakra.errors import ReaderGone, StreamError

    signal.signal(signal.SIGINT, signal.default_int_handler)
    install()  # stdout/stderr errors and SIGTERM/SIGHUP as the commands expect (chakra/cli_streams.py)
    code: Any = 0
    try:
        try:
            app()
        finally:
            flush_streams()  # a full or closed stdout is reported now, not by the interpreter at exit
    except ReaderGone as exc:  # help text into `| head`, or output left at the end: quiet, as `cat`
        ended = exc.__context__
        code = ended.code if isinstance(ended, SystemExit) and ended.code else 0
    except StreamError as exc:
        _say_error(str(exc))
        code = 1
    except SystemExit as exc:
        code = exc.code
        if code == 130:  # Ctrl-C, SIGTERM or SIGHUP outside a command body (parsing, importing): one line
            from chakra.cli_common import say_interrupted

            code = say_interrupted(stopped_by())
    return code


def _leave(code: Any) -> None:
    """End the process with `code` once the command is done.

    Tearing the interpreter down frees, object by object, everything a command left alive (and a
    last garbage collection walks it first): 0.15-0.2 s of CPU after a large conversion has
    written its output, and 4% of a 1,024-rank simulation's command. Where nothing else can still
    be running (no other thread: an executor or a Dask client keeps one), the exit handlers run
    (logging, temporary folders, coverage, ...), the standard streams are flushed, and the process
    ends without the teardown, as the OS reclaims its memory anyway. Under a profiler or a tracer
    (`python -m cProfile`, a debugger), or with an exit message, the interpreter ends as usual."""
    import threading

    if (
        isinstance(code, (int, type(None)))
        and threading.active_count() == 1
        and sys.getprofile() is None
        and sys.gettrace() is None
    ):
        import atexit

        from chakra.cli_streams import flush_streams

        atexit._run_exitfuncs()
        with contextlib.suppress(Exception):  # a stream that failed was reported by `_command`
            flush_streams()
        os._exit(int(code or 0) & 0xFF)
    sys.exit(code)


def _say_error(message: str) -> None:
    """One error line on stderr, where that can still be written."""
    with contextlib.suppress(Exception):  # stderr may be the stream that failed
        sys.stderr.write(f"error: {message}\n")
        sys.stderr.flush()


if __name__ == "__main__":
    run()

"""The `chakra` command: one typer app; every subcommand is registered by its own module.

Each module in `chakra/commands/` exposes `register(app)`. The list below is the whole program
surface; keep it ordered as `chakra --help` should show it.
"""

from __future__ import annotations

import importlib
import sys

import typer

from chakra import __version__
from chakra.cli_common import state

COMMAND_MODULES = [
    "convert",
    "validate",
    "stats",
    "jsonize",
    "visualize",
    "timeline",
    "simulate",
    "generate",
    "synthesize",
    "whatif",
    "interpolate",
    "analyze",
    "diff",
]

app = typer.Typer(
    name="chakra",
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
) -> None:
    if debug:
        state.debug = True


def _broken_command(name: str, exc: BaseException) -> None:
    print(f"chakra: subcommand {name!r} unavailable: {type(exc).__name__}: {exc}", file=sys.stderr)
    if state.debug:
        raise exc


for _name in COMMAND_MODULES:
    try:
        _module = importlib.import_module(f"chakra.commands.{_name}")
    except ModuleNotFoundError as _exc:
        # A subcommand whose module is not part of this build is simply absent.
        if _exc.name != f"chakra.commands.{_name}":
            _broken_command(_name, _exc)
        continue
    except Exception as _exc:  # keep the other subcommands usable; tests require every one to load
        _broken_command(_name, _exc)
        continue
    _module.register(app)


def main() -> None:
    try:
        app()
    except BrokenPipeError:
        sys.exit(1)


if __name__ == "__main__":
    main()

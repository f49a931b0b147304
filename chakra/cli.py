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
    "export",
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


#: One line per subcommand for `chakra --help` (each command's own --help teaches the details).
SHORT_HELP = {
    "convert": "Convert PyTorch/Kineto, nsys, CUPTI, FlexFlow, BigSim, ASTRA-sim text or JSON traces to Chakra",
    "validate": "Check traces are replayable: ids, dependencies, cycles, comm attributes, cross-rank agreement",
    "stats": "Per-rank node, collective, p2p, compute and critical-path figures",
    "jsonize": "Write the lossless JSON form of .et traces",
    "dejsonize": "Turn JSON traces (ours or the official form) back into .et",
    "visualize": "Draw dependency graphs (pdf/svg/png/dot/graphml) with filters and collapsed views",
    "timeline": "Chrome/Perfetto timeline JSON from a simulation log or recorded start times",
    "simulate": "Replay traces on ASTRA-sim-compatible compute, network and memory models",
    "generate": "Generate multi-rank traces from a DSL/YAML spec or built-in parallel workloads",
    "export": "Write a variant of any trace that the real ASTRA-sim runs to the end, with its configs",
    "synthesize": "Sample statistically similar traces, at any rank count, from real ones",
    "whatif": "Apply a what-if recipe (AMP, fused optimizer, data parallel, ...) and predict step time",
    "interpolate": "Rewrite durations from fitted models or a scale factor (BigSim-style)",
    "analyze": "Critical path, time breakdown and comm/compute overlap per rank",
    "diff": "Compare two traces or two simulation logs per operator class",
}

for _cmd in app.registered_commands:
    if _cmd.name in SHORT_HELP:
        _cmd.short_help = SHORT_HELP[_cmd.name]
for _group in app.registered_groups:
    if _group.name in SHORT_HELP:
        _group.help = SHORT_HELP[_group.name]


def main() -> None:
    try:
        app()
    except BrokenPipeError:
        sys.exit(1)


if __name__ == "__main__":
    main()

"""`chakra convert FORMAT INPUT... -o PREFIX`: one subcommand per converter plugin, plus `auto`.

The format list, the help and `auto` come from the plugins' own declarations (NAME, DESCRIPTION,
EXTENSIONS, accept) through the registry in chakra/converters/__init__.py; a format's command
(with its own options) is imported only when it is run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from chakra import converters
from chakra.cli_common import JsonOption, QuietOption, handle_errors, info, print_json, warn
from chakra.cli_group import LazyGroup, command_from


def describe(name: str) -> str:
    """`DESCRIPTION (extensions)` of a format, as `chakra convert --help` lists it."""
    module = converters.load(name)
    if module is None:
        return "(unavailable in this build)"
    return f"{module.DESCRIPTION.rstrip('.')} ({', '.join(module.EXTENSIONS)})"


class ConvertGroup(LazyGroup):
    def lazy_names(self) -> list[str]:
        return list(converters.PLUGINS)

    def lazy_help(self, name: str) -> str:
        return describe(name)

    def lazy_load(self, name: str) -> Optional[Any]:
        module = converters.load(name)
        return None if module is None else command_from(module.add_cli, name)


convert_app = typer.Typer(
    cls=ConvertGroup,
    help="Convert traces of other tools to Chakra: writes PREFIX.<rank>.et, one file per rank.\n\n"
    "Name the format, or let [bold]auto[/] recognise it from the file contents.",
    no_args_is_help=True,
)


@convert_app.command("auto")
def convert_auto(
    inputs: list[Path] = typer.Argument(
        ..., help="Input files, folders, quoted patterns, PREFIXes or - (standard input)."
    ),
    output: Path = typer.Option(..., "--output", "-o", help="Output PREFIX: writes PREFIX.<rank>.et."),
    quiet: bool = QuietOption,
    json_out: bool = JsonOption,
) -> None:
    """Recognise the format from the file contents (every format's sniff is asked) and convert with its defaults."""
    with handle_errors():
        inputs = converters.expand_inputs(None, inputs, note=lambda line: info(line, quiet or json_out))[0]
        for extra in converters.unrecognised_extras(inputs):
            info(f"skipped {extra}: not a trace of any format, and no rank number in its name", quiet or json_out)
            inputs.remove(extra)
        fmt = converters.detect_format(inputs)
        info(f"detected format: [bold]{fmt}[/]", quiet or json_out)
        module = converters.load(fmt)
        assert module is not None  # detect_format only names formats that loaded
        result = module.convert(list(inputs), output)
        for message in result.warnings:
            warn(message)
        if json_out:
            print_json({"format": fmt, "written": [str(p) for p in result.paths], "summary": result.summary})
            return
        for path in result.paths:
            info(f"wrote {path}", quiet)


def register(app: typer.Typer) -> None:
    app.add_typer(convert_app, name="convert")

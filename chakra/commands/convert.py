"""`chakra convert FORMAT INPUT... -o PREFIX`: each converter registers its own FORMAT subcommand."""

from __future__ import annotations

from pathlib import Path

import typer

from chakra import converters
from chakra.cli_common import QuietOption, handle_errors, info
from chakra.errors import InputError

convert_app = typer.Typer(
    help="Convert traces of other tools to Chakra: writes PREFIX.<rank>.et, one file per rank.",
    no_args_is_help=True,
)


@convert_app.command("auto")
def convert_auto(
    inputs: list[Path] = typer.Argument(..., help="Input files (or a folder, for BigSim logs)."),
    output: Path = typer.Option(..., "--output", "-o", help="Output PREFIX: writes PREFIX.<rank>.et."),
    quiet: bool = QuietOption,
) -> None:
    """Detect the input format from the file contents and convert with default options."""
    with handle_errors():
        fmt = None
        for path in inputs:
            if not path.exists():
                raise InputError(f"{path}: no such file")
            found = converters.detect(path)
            if found is None:
                raise InputError(f"{path}: format not recognised; name it: chakra convert FORMAT ... (see --help)")
            if fmt is not None and found != fmt:
                raise InputError(f"{path}: is {found} but earlier inputs are {fmt}; convert them separately")
            fmt = found
        assert fmt is not None
        info(f"detected format: [bold]{fmt}[/]", quiet)
        module = converters.load(fmt)
        assert module is not None
        written = module.convert_paths(list(inputs), output, quiet=quiet)
        for path in written:
            info(f"wrote {path}", quiet)


def register(app: typer.Typer) -> None:
    for module in converters.available().values():
        add_cli = getattr(module, "add_cli", None)
        if add_cli is not None:  # a converter without a CLI yet is still usable from Python
            add_cli(convert_app)
    app.add_typer(
        convert_app,
        name="convert",
        help="Convert PyTorch, Kineto, nsys, CUPTI, FlexFlow, BigSim, text or JSON traces to Chakra.",
    )

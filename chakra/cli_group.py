"""A typer group whose subcommands are named up front and imported only when one is run.

`chakra --version` and `chakra --help` must not pay for importing every subcommand (converters,
numpy, protobuf): the group lists its commands from a table of one-line descriptions, shows those
in its help, and imports a command's module the first time that command is looked up to run (or
to show its own `--help`).

Help texts are written as docstrings, with line breaks where the source wraps; `reflow` turns
those into paragraphs, so that the help reads as sentences at any width (a terminal, or 80
columns when piped), while indented lines (examples) keep their own lines.
"""

from __future__ import annotations

import inspect
import re
from typing import Any, Callable, Optional

from typer.core import TyperCommand, TyperGroup


class LazyGroup(TyperGroup):
    """Subclasses provide `lazy_names()`, `lazy_help(name)` and `lazy_load(name)`."""

    _listing = False

    def lazy_names(self) -> list[str]:
        raise NotImplementedError

    def lazy_help(self, name: str) -> str:
        raise NotImplementedError

    def lazy_load(self, name: str) -> Optional[Any]:
        """The click command for `name` (imports its module), or None if it is unavailable."""
        raise NotImplementedError

    def list_commands(self, ctx: Any) -> list[str]:
        names = self.lazy_names()
        return [*names, *(n for n in self.commands if n not in names)]

    def get_command(self, ctx: Any, cmd_name: str) -> Optional[Any]:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        if cmd_name not in self.lazy_names():
            return None
        if self._listing:  # the group's help only needs the one-line description
            return TyperCommand(name=cmd_name, short_help=self.lazy_help(cmd_name), help=self.lazy_help(cmd_name))
        command = self.lazy_load(cmd_name)
        if command is not None:
            self.commands[cmd_name] = command
        return command

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        try:
            return super().resolve_command(ctx, args)
        except Exception as exc:  # click's UsageError; typer only suggests from commands already loaded
            message = getattr(exc, "message", None)
            if isinstance(message, str) and message.startswith("No such command") and "Did you mean" not in message:
                from difflib import get_close_matches

                matches = get_close_matches(args[0], self.list_commands(ctx)) if args else []
                if matches:
                    exc.message = f"{message.rstrip('.')}. Did you mean {', '.join(repr(m) for m in matches)}?"
            raise

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            return super().format_help(ctx, formatter)
        finally:
            self._listing = False


# A line that stands on its own in a help text: indented (an example, a literal block), a list
# item, or a command line written flush left ("chakra memory out/ddp4 ...").
_OWN_LINE = re.compile(r"[ \t]|[-*•] |(?:\[bold\])?chakra |\$ ")


def reflow(text: Optional[str]) -> Optional[str]:
    """`text` with the source's line breaks inside a paragraph turned into spaces, except before
    and after lines that stand on their own (see `_OWN_LINE`); paragraphs stay apart, and one
    marked with click's `\\b` is left as it is."""
    if not text:
        return text
    paragraphs = []
    for para in inspect.cleandoc(text).split("\n\n"):
        if para.startswith("\b"):
            paragraphs.append(para)
            continue
        lines: list[str] = []
        joinable = False  # may the next line continue the last one?
        for line in para.split("\n"):
            own = bool(_OWN_LINE.match(line))
            if lines and joinable and not own and line.strip():
                lines[-1] += " " + line.strip()
            else:
                lines.append(line)
            joinable = not own
        paragraphs.append("\n".join(lines))
    return "\n\n".join(paragraphs)


def reflow_help(command: Any) -> Any:
    """Reflow the help of a click command, of its parameters and of its subcommands."""
    command.help = reflow(command.help)
    for param in getattr(command, "params", ()):
        if getattr(param, "help", None):
            param.help = reflow(param.help)
    for sub in getattr(command, "commands", {}).values():
        reflow_help(sub)
    return command


def command_from(register: Callable[[Any], None], name: str) -> Optional[Any]:
    """The click command `name` that `register(typer_app)` defines (a command or a sub-group),
    its help reflowed."""
    import typer
    import typer.main

    app = typer.Typer(rich_markup_mode="rich", context_settings={"help_option_names": ["-h", "--help"]})
    register(app)
    command = typer.main.get_group(app).commands.get(name)
    return None if command is None else reflow_help(command)

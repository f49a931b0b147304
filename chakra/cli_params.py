"""Option values coerced without importing pydantic: the start-up of every command.

typer (0.2x) turns every option's value into its annotated type through a pydantic TypeAdapter,
built for every parameter of the command that runs, defaults included; importing pydantic for
that costs more than importing typer and rich together, and most of `chakra simulate`'s start-up
on a small trace. The values a command line gives are plain: a str, a list of str, a whole
number, a decimal, a Path, one of an Enum's words. `install()` puts a coercion in front of
typer's that handles exactly those with typer's own pydantic-free helpers, giving the very object
the adapter would give (tests/cli/test_startup.py compares the two on every option of every
command), and hands anything else (a constrained number, a parser, a file, a value it does not
recognise, any value that fails) to typer's own coercion, so every error message stays typer's.

Any other typer (one without `typer.core.build_runtime_param`, such as the click-based versions
that never import pydantic) is left as it is.
"""

from __future__ import annotations

import re
from enum import Enum
from pathlib import Path
from typing import Any, Callable, get_args, get_origin

# Strings whose int()/float() is what pydantic's lax number parsing gives: no sign but "-", no
# spaces, underscores, leading zeros or exponents (pydantic reads some of those its own way).
_INT_RE = re.compile(r"-?(?:0|[1-9][0-9]{0,17})\Z")
_FLOAT_RE = re.compile(r"-?(?:0|[1-9][0-9]{0,14})\.[0-9]{1,15}\Z")


class _Unhandled(Exception):
    """This value is for typer's own coercion."""


class FastParam:
    """typer's RuntimeParam interface (`coerce(value, param, ctx)`), trying the plain cases first.

    `build` makes typer's own runtime param, once, the first time a value is not a plain case."""

    def __init__(self, descriptor: Any, build: Callable[[Any], Any]) -> None:
        self.descriptor = descriptor
        self._build = build
        self._real: Any = None

    def real(self) -> Any:
        if self._real is None:
            self._real = self._build(self.descriptor)
        return self._real

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        is_multi_value = param.multiple or param.nargs == -1
        if value is None:  # as typer's RuntimeParam.coerce, before it needs an adapter
            return () if is_multi_value else None
        if not (is_multi_value and isinstance(value, str)):
            try:
                return self.fast(self.descriptor.annotation, value, ctx)
            except Exception:  # _Unhandled, or a value typer itself refuses: its own words, below
                pass
        return self.real().coerce(value, param=param, ctx=ctx)

    def fast(self, annotation: Any, value: Any, ctx: Any) -> Any:
        """The adapter's result for a plain value, or _Unhandled."""
        from typer import _param_types

        info = self.descriptor.parameter_info
        if self.descriptor.file_annotation is not None or info.parser is not None:
            raise _Unhandled
        if get_origin(annotation) is list:
            (item,) = get_args(annotation)
            if not isinstance(value, (list, tuple)):
                raise _Unhandled
            return [self.fast(item, v, ctx) for v in value]
        if isinstance(annotation, type) and issubclass(annotation, Enum):
            if not isinstance(value, (str, annotation)):
                raise _Unhandled
            return _param_types.coerce_cli_choice(
                value, choices=list(annotation), case_sensitive=info.case_sensitive, ctx=ctx
            )
        kind = type(value)
        if annotation is str and kind is str:
            return value
        if annotation in (int, float) and (info.min is not None or info.max is not None or info.clamp):
            raise _Unhandled
        if annotation is int:
            if kind is int:
                return value
            if kind is str and _INT_RE.match(value):
                return int(value)
        if annotation is float:
            if kind is float:
                return value
            if kind is int or (kind is str and (_INT_RE.match(value) or _FLOAT_RE.match(value))):
                return float(value)
        if annotation is Path and info.path_type in (None, Path):
            if kind is str and value:
                value = Path(value)
            if isinstance(value, Path):
                return _param_types.coerce_cli_path(value, info, path_type=Path)
        raise _Unhandled


def install() -> None:
    """Route typer's parameter coercion through FastParam (once; no-op on a typer without it)."""
    try:
        import typer.core as core
    except ImportError:  # pragma: no cover - typer is a dependency
        return
    build = getattr(core, "build_runtime_param", None)
    if build is None or getattr(build, "_chakra_fast", False):
        return

    def build_fast(descriptor: Any) -> Any:
        return FastParam(descriptor, build)

    build_fast._chakra_fast = True  # type: ignore[attr-defined]
    build_fast.typer_build = build  # type: ignore[attr-defined]
    core.build_runtime_param = build_fast

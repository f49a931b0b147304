"""Reading a config file (YAML, or JSON, which is YAML): one loader and one error style for every
config chakra takes (network/system/memory configs, comm groups, sweep grids, DSL specs).

Every failure is one `ConfigError` (or the caller's kind of `ChakraError`) naming the file and,
where the parser knows it, the line: `PATH (line N): not valid YAML: PROBLEM`. Missing or
unreadable files are `chakra.io.input_file_errors`'s one-liners. Nothing in a file is executed
(`yaml.safe_load`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from chakra.compression import PathLike
from chakra.errors import ChakraError, ConfigError
from chakra.files import STDIN, read_bounded
from chakra.io import input_file_errors


def _value_error(exc: ValueError) -> str:
    text = str(exc)
    return "an integer with thousands of digits" if "digits" in text else text[:80]


def read_config_text(path: PathLike, what: str, error: type[ChakraError] = ConfigError) -> str:
    """The text of config file `path` (`what` names it in messages: "network config", "grid").

    Only a regular file is read (a FIFO or device is refused before any read), and at most
    `MAX_CONFIG_BYTES`; a deliberate `-` reads standard input with the same bound."""
    p = Path(path)
    try:
        if os.fspath(path) == STDIN:
            return read_bounded(STDIN, what, allow_stdin=True).decode("utf-8")
        with input_file_errors(p, f"{what} file"):
            return read_bounded(p, f"{what} file").decode("utf-8")
    except UnicodeDecodeError:
        raise error(f"{p}: cannot read {what} (not UTF-8 text)") from None


def load_config(path: PathLike, what: str, *, json_only: bool = False, error: type[ChakraError] = ConfigError) -> Any:
    """The document in config file `path`: YAML (JSON is YAML), or strict JSON with `json_only`."""
    text = read_config_text(path, what, error)
    yaml_error: tuple[type[Exception], ...] = ()
    if not json_only:
        import yaml  # YAML configs only: a reader of JSON configs never loads it

        yaml_error = (yaml.YAMLError,)
    try:
        return json.loads(text) if json_only else yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        raise error(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except yaml_error as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise error(f"{path}{line}: not valid YAML: {problem}") from None
    except RecursionError:
        raise error(f"{path}: not a {what} (nested too deeply)") from None
    except ValueError as exc:  # e.g. an integer with thousands of digits
        raise error(f"{path}: unreadable value ({_value_error(exc)})") from None


def load_mapping(
    path: PathLike, what: str, *, json_only: bool = False, error: type[ChakraError] = ConfigError
) -> dict[str, Any]:
    """Like `load_config`, for configs whose document must be a mapping (an empty file is {})."""
    data = load_config(path, what, json_only=json_only, error=error)
    if data is None and not json_only:
        return {}
    if not isinstance(data, dict):
        raise error(f"{path}: expected a {'JSON object' if json_only else 'mapping'} of {what} keys")
    return data

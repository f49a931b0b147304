"""Reading a config file (YAML, or JSON, which is YAML): one loader and one error style for every
config chakra takes (network/system/memory configs, comm groups, sweep grids, DSL specs).

Every failure is one `ConfigError` (or the caller's kind of `ChakraError`) naming the file and,
where the parser knows it, the line: `PATH (line N): not valid YAML: PROBLEM`. Missing or
unreadable files are `chakra.io.input_file_errors`'s one-liners. Nothing in a file is executed
(`yaml.safe_load`).

Most configs are a few `key: [values]` lines (ASTRA-sim's network YAML) or JSON. Those are read
here without PyYAML (`_plain_document`), which costs a small `chakra simulate` a sixth of its
start-up, but only where the text keeps to a subset on which PyYAML's reading is known to give
the same document (tests/core/test_configfile_subset.py holds the two together on every config in
the repository and on variants); anything else, a quote, a tab, an anchor, a nested block, a value
YAML resolves to a bool or null, goes to PyYAML.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from chakra.compression import PathLike
from chakra.errors import ChakraError, ConfigError
from chakra.files import STDIN, read_bounded
from chakra.io import input_file_errors

# --- the plain subset --------------------------------------------------------------------------
# A number as PyYAML resolves it the way Python reads it (decimal, no `_`, no leading zero, no
# exponent: "1e3" is a string to PyYAML), or a word that resolves to a string (`_WORDS` aside).
_SCALAR = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?|[A-Za-z][A-Za-z0-9_]*"
_ENTRY = re.compile(
    rf"([A-Za-z_][A-Za-z0-9_-]*): +(\[ *(?:(?:{_SCALAR}) *(?:, *(?:{_SCALAR}) *)*)?\]|{_SCALAR})(?: +#.*)? *"
)
_TOKEN = re.compile(_SCALAR)
_SKIP = re.compile(r" *(?:#.*)?")  # a blank or comment line
# plain words YAML 1.1 reads as booleans or null (and y/n, which some YAML readers do)
_WORDS = frozenset({"y", "n", "yes", "no", "true", "false", "on", "off", "null"})
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)\.[0-9]+")  # JSON floats YAML reads as floats too
_PRINTABLE = re.compile(r"[ -~\n]*")


class _NotPlain(Exception):
    pass


def _scalar(token: str) -> Any:
    if token[0] == "-" or token[0].isdigit():
        return float(token) if "." in token else int(token)
    if token.lower() in _WORDS:
        raise _NotPlain
    return token


def _json_constant(literal: str) -> Any:
    raise _NotPlain  # NaN, Infinity: JSON extensions YAML reads as strings


def _json_float(literal: str) -> float:
    if not _JSON_NUMBER.fullmatch(literal):
        raise _NotPlain
    return float(literal)


_DEPTH = 16  # nesting a config never needs


def _shallow(value: Any, depth: int) -> bool:
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return depth > 0 and all(_shallow(v, depth - 1) for v in value)
    return True


def _plain_document(text: str) -> Any:
    """The document in `text` when it keeps to the plain subset (raises _NotPlain otherwise):
    unindented `key: value` lines whose values are a number, a word or a flow list of them, with
    blank and `#` comment lines between; or JSON without escapes, exponents or long strings."""
    if not _PRINTABLE.fullmatch(text):
        raise _NotPlain  # tabs, carriage returns, non-ASCII: PyYAML's rules there are its own
    head = text.lstrip(" \n")[:1]
    if head in ("{", "["):
        if "\\" in text or re.search(r"\n *:|\"[^\"\n]{1000,}\"", text):
            raise _NotPlain  # escapes, a key before a line break, a key too long for a YAML simple key
        try:
            doc = json.loads(text, parse_float=_json_float, parse_constant=_json_constant)
        except ValueError:  # not JSON (or an integer of thousands of digits): PyYAML says what
            raise _NotPlain from None
        if not _shallow(doc, _DEPTH):
            raise _NotPlain  # PyYAML's reader recurses: deep nesting is its error to give
        return doc
    doc: dict[str, Any] = {}
    for line in text.split("\n"):
        m = _ENTRY.fullmatch(line)
        if m is None:
            if _SKIP.fullmatch(line):
                continue
            raise _NotPlain
        key, value = m.groups()
        if key in doc or key.lower() in _WORDS:
            raise _NotPlain
        doc[key] = list(map(_scalar, _TOKEN.findall(value))) if value[0] == "[" else _scalar(value)
    if not doc:
        raise _NotPlain  # empty: PyYAML says what it is
    return doc


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
        try:
            return _plain_document(text)
        except (_NotPlain, ValueError, RecursionError):
            pass  # beyond the subset: PyYAML reads it, and says what is wrong
        import yaml  # only for YAML beyond the plain subset: most configs never load it

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

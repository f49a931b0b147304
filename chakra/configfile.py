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
the repository and on variants); anything else, an escape, a tab, an anchor, a nested block, a
value YAML resolves to a bool or null, goes to PyYAML.
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

# --- the plain subset --------------------------------------------------------------------------
# Read with str methods, not regular expressions: compiling those would cost about what PyYAML's
# import does. A scalar is a number as PyYAML resolves it the way Python reads it (decimal, no
# `_`, no leading zero, no exponent: "1e3" is a string to PyYAML) or a word that resolves to a
# string (letters, digits and `_`, starting with a letter; `_WORDS` aside), or a quoted string
# without escapes (a network config written by json.dumps quotes its topology names).
_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_WORD_CHARS = _LETTERS | frozenset("0123456789_")
_KEY_CHARS = _WORD_CHARS | {"-"}
# plain words YAML 1.1 reads as booleans or null (and y/n, which some YAML readers do)
_WORDS = frozenset({"y", "n", "yes", "no", "true", "false", "on", "off", "null"})
_DEPTH = 16  # JSON nesting a config never needs (PyYAML's reader recurses: deeper is its error to give)
_LONGEST = 1000  # longer JSON strings are left to PyYAML (a YAML simple key has a length limit)


class _NotPlain(Exception):
    pass


def _number(token: str, dot_needed: bool = False) -> Any:
    """An int or float from a decimal token (optional `-`, no leading zero, optional `.digits`)."""
    whole, dot, frac = (token[1:] if token[:1] == "-" else token).partition(".")
    if not whole.isdigit() or (whole[0] == "0" and len(whole) > 1) or (dot and not frac.isdigit()):
        raise _NotPlain
    if dot_needed and not dot:
        raise _NotPlain
    return float(token) if dot else int(token)


def _scalar(token: str) -> Any:
    quote = token[:1]
    if quote in ('"', "'"):
        # a quoted string with nothing YAML would unescape or fold: no backslash, no quote inside
        inner = token[1:-1]
        if len(token) < 2 or token[-1] != quote or quote in inner or "\\" in inner:
            raise _NotPlain
        return inner
    if token[:1] == "-" or token[:1].isdigit():
        return _number(token)
    if not token or token[0] not in _LETTERS or not _WORD_CHARS.issuperset(token) or token.lower() in _WORDS:
        raise _NotPlain
    return token


def _json_constant(literal: str) -> Any:
    raise _NotPlain  # NaN, Infinity: JSON extensions YAML reads as strings


def _json_float(literal: str) -> float:
    return _number(literal, dot_needed=True)  # 1e3, 1.5E+3: strings or other numbers to PyYAML


def _shallow(value: Any, depth: int) -> bool:
    """No deeper than `depth` lists and mappings, and no string longer than `_LONGEST`."""
    if isinstance(value, str):
        return len(value) <= _LONGEST
    if isinstance(value, dict):
        value = [*value, *value.values()]
    if isinstance(value, list):
        return depth > 0 and all(_shallow(v, depth - 1) for v in value)
    return True


def _entry(line: str) -> tuple[str, Any]:
    """`key: value  # comment` at the start of a line: value a scalar or a flow list of them."""
    key, colon, rest = line.partition(":")
    if not colon or key[:1] not in _LETTERS | {"_"} or not _KEY_CHARS.issuperset(key) or key.lower() in _WORDS:
        raise _NotPlain
    value, hash_, _ = rest.partition("#")
    if value[:1] != " " or (hash_ and value[-1:] != " "):
        raise _NotPlain  # `key:value`, or `#` right after a value (then part of it, to YAML)
    value = value.strip(" ")
    if value[:1] != "[":
        return key, _scalar(value)
    if value[-1:] != "]":
        raise _NotPlain
    inner = value[1:-1]
    return key, [_scalar(t.strip(" ")) for t in inner.split(",")] if inner.strip(" ") else []


def _plain_document(text: str) -> Any:
    """The document in `text` when it keeps to the plain subset (raises _NotPlain otherwise):
    unindented `key: value` lines whose values are a number, a word or a flow list of them, with
    blank and `#` comment lines between; or JSON without escapes, exponents or long strings."""
    if not text.isascii() or not text.replace("\n", "").isprintable():
        raise _NotPlain  # tabs, carriage returns, non-ASCII: PyYAML's rules there are its own
    lines = text.split("\n")
    if text.lstrip(" \n")[:1] in ("{", "["):
        if "\\" in text or any(line.lstrip(" ")[:1] == ":" for line in lines):
            raise _NotPlain  # escapes; a key and its colon on two lines
        try:
            doc = json.loads(text, parse_float=_json_float, parse_constant=_json_constant)
        except ValueError:  # not JSON (or an integer of thousands of digits): PyYAML says what
            raise _NotPlain from None
        if not _shallow(doc, _DEPTH):
            raise _NotPlain
        return doc
    doc: dict[str, Any] = {}
    for line in lines:
        if line.lstrip(" ")[:1] in ("", "#"):
            continue  # a blank or comment line
        key, value = _entry(line)
        if key in doc:
            raise _NotPlain
        doc[key] = value
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

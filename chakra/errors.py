"""Error types. The CLI prints any ChakraError as one red line (no traceback unless --debug)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Union

#: An error line longer than this is cut in the middle: messages quote offending values, and a
#: fuzzed or corrupt input can make those megabytes long.
MAX_MESSAGE = 600


def excerpt(value: object, width: int = 60) -> str:
    """repr() of a value for an error message, at most `width` characters.

    Never raises: a fuzzed input can hold values whose repr() itself fails (nesting deeper than
    the recursion limit, integers past Python's 4,300-digit str() limit)."""
    try:
        text = repr(value)
    except RecursionError:
        return f"<a {type(value).__name__} nested too deep to show>"
    except ValueError:
        bits = value.bit_length() if isinstance(value, int) else 0
        return f"<an integer of {bits} bits>" if bits else f"<a {type(value).__name__} too large to show>"
    return text if len(text) <= width else text[: width - 3] + "..."


class ChakraError(Exception):
    """Base for every error caused by the user's input, files or options (exit code 1)."""

    def __str__(self) -> str:
        text = super().__str__()
        if len(text) <= MAX_MESSAGE:
            return text
        head, tail = MAX_MESSAGE * 2 // 3, MAX_MESSAGE // 4
        return f"{text[:head]} ...[{len(text) - head - tail:,} characters cut]... {text[-tail:]}"


class TraceFormatError(ChakraError):
    """A file does not hold what its format promises; the message names file, record and offset."""

    def __init__(
        self,
        path: Union[str, Path, None],
        message: str,
        *,
        index: Optional[int] = None,
        offset: Optional[int] = None,
        line: Optional[int] = None,
    ) -> None:
        self.path = str(path) if path is not None else None
        self.index = index
        self.offset = offset
        self.line = line
        where = []
        if line is not None:
            where.append(f"line {line}")
        if index is not None:
            where.append(f"message {index}")
        if offset is not None:
            where.append(f"byte offset {offset}")
        prefix = self.path or "<input>"
        if where:
            prefix += f" ({', '.join(where)})"
        super().__init__(f"{prefix}: {message}")


class InputError(ChakraError):
    """Bad arguments: missing files, prefixes that match nothing, ranks that do not pair."""


class ConfigError(ChakraError):
    """A simulator or converter configuration file is malformed or inconsistent."""


class OutputError(ChakraError):
    """An output cannot be written where asked: missing directory, symlink, device, or an input."""


class StreamError(ChakraError):
    """Standard output or standard error cannot be written (`> /dev/full`, an I/O error)."""

    def __init__(self, stream: str, exc: OSError) -> None:
        self.stream = stream
        super().__init__(f"cannot write to standard {stream}: {exc.strerror or exc}")


class ReaderGone(Exception):
    """The reader of standard output (or error) went away, as `| head` does when it has enough.
    Not an error: the command ends quietly with exit code 0, as `cat` does."""

    def __init__(self, stream: str) -> None:
        self.stream = stream
        super().__init__(f"the reader of standard {stream} went away")


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP, handled as Ctrl-C is (clean up, one line), exit code 128 + `signum`."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(signum)

"""Standard output, standard error and stop signals, as a Unix tool treats them.

`install()` (run by `chakra.cli.main`, never on import) puts a guard under `sys.stdout` and
`sys.stderr`, so that whatever writes to them (print, rich's consoles, `print_json`,
`shutil.copyfileobj(..., sys.stdout.buffer)`) fails in one of two ways the CLI knows:

- `ReaderGone`: the reader of the stream went away (`chakra timeline LOG | head -c 64`): the
  command ends quietly with exit code 0, as `cat` does when `head` has what it wanted;
- `StreamError` (a ChakraError): the stream cannot be written (`> /dev/full`, an I/O error): one
  line naming the stream, exit code 1.

Before raising, the guard points the failed descriptor at /dev/null, so the interpreter's own
flush at exit (and the error line, when stderr is the stream that failed) has nowhere to fail
again: no "Exception ignored" trailer.

It also makes SIGTERM (what `kill`, Slurm and Kubernetes send) and SIGHUP (a closed terminal or
ssh session) raise `chakra.errors.Stopped`, a KeyboardInterrupt: every command already cleans up on
Ctrl-C (temporary files removed, a sweep keeps its finished points), and now does the same for them.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys
from typing import Any, Optional

from chakra.errors import ReaderGone, Stopped, StreamError

#: Signals that end a command the way Ctrl-C does (exit code 128 + the signal's number).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class _GuardedFile(io.FileIO):
    """The raw file under a standard stream: write errors become ReaderGone / StreamError."""

    def __init__(self, fd: int, stream: str) -> None:
        super().__init__(fd, "wb", closefd=False)
        self.stream = stream

    def write(self, data: Any) -> int:
        try:
            return super().write(data)
        except BrokenPipeError:
            self._silence()
            raise ReaderGone(self.stream) from None
        except OSError as exc:
            self._silence()
            raise StreamError(self.stream, exc) from None

    def _silence(self) -> None:
        """Later writes (a flush at exit, the error line itself) go to /dev/null."""
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self.fileno())
            os.close(null)
        except OSError:
            pass


def _guard(current: Any, fd: int, stream: str) -> Any:
    """`current` (sys.stdout or sys.stderr) rebuilt over a guarded raw file, same text settings."""
    if not isinstance(current, io.TextIOWrapper):
        return current  # replaced by someone else (a test runner): left as it is
    try:
        if current.fileno() != fd:
            return current
        current.flush()
    except (OSError, ValueError):
        return current
    raw = _GuardedFile(fd, stream)
    buffered = io.BufferedWriter(raw)
    return io.TextIOWrapper(
        buffered,
        encoding=current.encoding,
        errors=current.errors,
        line_buffering=current.line_buffering,
        write_through=current.write_through,
    )


_received: list[int] = []


def _stop(signum: int, frame: object) -> None:
    _received.append(signum)
    raise Stopped(signum)


def stopped_by() -> Optional[int]:
    """The stop signal received last (None: none; a Ctrl-C is not recorded here)."""
    return _received[-1] if _received else None


def install() -> None:
    """Guard stdout and stderr and turn SIGTERM and SIGHUP into `Stopped` (main thread only)."""
    sys.stdout = _guard(sys.stdout, 1, "output")
    sys.stderr = _guard(sys.stderr, 2, "error")
    for sig in STOP_SIGNALS:
        if signal.getsignal(sig) is not signal.SIG_IGN:  # `nohup chakra ...` keeps ignoring SIGHUP
            signal.signal(sig, _stop)


def flush_streams() -> None:
    """Flush both streams now (at the end of a run), so their errors come while they can be said."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(ValueError, AttributeError):  # a closed or replaced stream
            stream.flush()

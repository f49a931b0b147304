"""Files around the program, not their content: what may be read, how outputs are named while being
written, what a failed write says, and helper processes that must not outlive the command.

- Inputs must be regular files. A FIFO blocks the first read forever, and a device such as
  /dev/zero or /dev/urandom never ends: both are refused, with one line naming the path, before
  anything opens them. `-` (standard input) is accepted only where a caller says so.
- Reads of small inputs (configs, grids) are bounded, so that a wrong file never costs the
  machine's memory.
- Temporary outputs carry a recognisable name, `.NAME.chakra-HOST-PID-RANDOM.tmp`, next to the
  output. A later run writing the same output removes those whose process is gone: the name
  proves the file is a temporary copy of that output made by this program, on this host, by a
  process id that no longer runs, and the file belongs to the same user. Anything else is kept.
- Full disks and quotas (ENOSPC, EDQUOT) name the output and the disk (its mount point and free
  space), not an internal temporary file.
- Worker processes ask the kernel to kill them when the process that started them dies
  (`prctl(PR_SET_PDEATHSIG)` on Linux), so a SIGKILLed command leaves no pool behind.

This module sits at the bottom of the package: it imports nothing of chakra but `chakra.errors`.
"""

from __future__ import annotations

import errno
import functools
import os
import re
import signal
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Optional, Union

from chakra.errors import InputError, OutputError

PathLike = Union[str, os.PathLike]

STDIN = "-"
#: Bound on configuration-like inputs read whole (network/system/memory configs, sweep grids, specs).
MAX_CONFIG_BYTES = 16 << 20
#: Output names are cut to this many characters inside a temporary name (a file name holds 255 bytes).
_TEMP_NAME_CHARS = 150


# ---------------------------------------------------------------------------------------------
# Inputs


def _kind(mode: int) -> Optional[str]:
    """What a non-regular file is, in words (None for a regular file)."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def check_input(path: PathLike, what: str = "input file", *, allow_stdin: bool = False) -> Optional[os.stat_result]:
    """Refuse, with one line naming the path, anything but an existing regular file (symlinks are
    followed). Nothing is opened: a FIFO would block and a device would never end. Returns the
    file's stat (None for standard input)."""
    if allow_stdin and os.fspath(path) == STDIN:
        return None
    try:
        st = os.stat(path)
    except OSError as exc:
        raise read_error(path, exc) from None
    kind = _kind(st.st_mode)
    if kind is not None:
        hint = "" if kind == "a directory" else "; save its content to a file first"
        raise InputError(f"{path}: is {kind}, not a regular file; expected a {what}{hint}")
    return st


def read_error(path: PathLike, exc: OSError) -> InputError:
    """The one-line error for an input that could not be opened or read."""
    if isinstance(exc, FileNotFoundError):
        return InputError(f"{path}: no such file")
    if isinstance(exc, PermissionError):
        return InputError(f"{path}: permission denied")
    return InputError(f"{path}: cannot read: {exc.strerror}")


def is_special(path: PathLike) -> bool:
    """True when `path` exists and is neither a regular file nor a directory (FIFO, device, socket)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def read_bounded(path: PathLike, what: str, limit: int = MAX_CONFIG_BYTES, *, allow_stdin: bool = False) -> bytes:
    """The whole content of a small input, refused (one line) past `limit` bytes."""
    check_input(path, what, allow_stdin=allow_stdin)
    try:
        if allow_stdin and os.fspath(path) == STDIN:
            data = sys.stdin.buffer.read(limit + 1)
        else:
            with open(path, "rb") as f:
                data = f.read(limit + 1)
    except OSError as exc:
        raise read_error(path, exc) from None
    if len(data) > limit:
        raise InputError(f"{path}: larger than {limit >> 20} MiB; not a {what}")
    return data


# ---------------------------------------------------------------------------------------------
# Temporary outputs


@functools.cache
def _host_tag() -> str:
    """This machine's part of a temporary name: six hex digits of its host name (os.uname's node
    name is what socket.gethostname gives on POSIX; importing socket, or hashlib and its OpenSSL,
    would cost a command that writes one file a few ms)."""
    import zlib

    try:
        host = os.uname().nodename
    except AttributeError:  # Windows
        import socket

        host = socket.gethostname()
    return f"{zlib.crc32(host.encode('utf-8', 'replace')) & 0xFFFFFF:06x}"


_TEMP_RE = re.compile(r"\.chakra-(?P<host>[0-9a-f]{6})-(?P<pid>\d+)-[0-9a-f]{8}\.tmp$")


def _temp_stem(path: Path) -> str:
    return f".{path.name[:_TEMP_NAME_CHARS]}.chakra-"


def temp_path(path: PathLike, pid: Optional[int] = None) -> Path:
    """A recognisable temporary name next to `path` for process `pid` (default: this one)."""
    path = Path(path)
    return path.with_name(f"{_temp_stem(path)}{_host_tag()}-{pid or os.getpid()}-{os.urandom(4).hex()}.tmp")


def create_temp(path: PathLike) -> tuple[int, Path]:
    """Create (exclusively, mode 0600) a temporary file for output `path`: (fd, its path)."""
    for _ in range(100):
        tmp = temp_path(path)
        try:
            return os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(path))


def _process_gone(pid: int) -> bool:
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    """A killed worker whose new parent (a container's init, say) never reaps it stays a zombie:
    signal 0 still reaches it, yet it will never write again."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state in (b"Z", b"X")


# folder -> the names in it that look like this host's temporary files, from one listing per
# process: a command writing N outputs into one folder (16,384 rank files) must not list it N times.
# Files a process of this program leaves later are found by the next command.
_TEMP_NAMES: dict[str, list[str]] = {}


def _temp_names(parent: Path) -> list[str]:
    key = os.path.abspath(parent)
    names = _TEMP_NAMES.get(key)
    if names is None:
        try:
            with os.scandir(parent) as entries:
                names = []
                for entry in entries:
                    m = _TEMP_RE.search(entry.name)
                    if m is not None and m.group("host") == _host_tag():
                        names.append(entry.name)
        except OSError:
            return []
        _TEMP_NAMES[key] = names
    return names


def stale_temps(path: PathLike) -> Iterator[Path]:
    """Temporary files of output `path` left by processes of this program that are gone."""
    path = Path(path)
    stem = _temp_stem(path)
    parent = path.parent if str(path.parent) else Path(".")
    uid = os.geteuid() if hasattr(os, "geteuid") else None
    for name in _temp_names(parent):
        # A temporary file of this output, or one written atomically in turn by a worker process
        # (`..NAME.chakra-H-P-R.tmp.chakra-H-P2-R2.tmp`): the last process named must be gone.
        if not (name.startswith(stem) or name.startswith("." + stem)):
            continue
        m = _TEMP_RE.search(name)
        assert m is not None
        full = parent / name
        try:
            st = os.stat(full, follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode) or (uid is not None and st.st_uid != uid):
            continue
        if _process_gone(int(m.group("pid"))):
            yield full


def remove_stale_temps(path: PathLike) -> int:
    """Remove what `stale_temps` finds; returns how many went. Never raises."""
    n = 0
    for tmp in stale_temps(path):
        try:
            os.unlink(tmp)
            n += 1
        except OSError:
            pass
    return n


# ---------------------------------------------------------------------------------------------
# Write errors


def _mount_point(path: Path) -> Path:
    path = path.resolve()
    try:
        dev = os.stat(path).st_dev
    except OSError:
        return path
    while path.parent != path:
        try:
            if os.stat(path.parent).st_dev != dev:
                break
        except OSError:
            break
        path = path.parent
    return path


def _size(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n}"


def disk_of(path: PathLike) -> str:
    """`the disk at MOUNT (N free)` for the folder that holds `path`."""
    folder = Path(path).parent if not Path(path).is_dir() else Path(path)
    folder = folder if str(folder) else Path(".")
    mount = _mount_point(folder)
    try:
        st = os.statvfs(folder)
        free = f", {_size(st.f_bavail * st.f_frsize)} free"
    except OSError:
        free = ""
    return f"the disk at {mount}{free}"


#: errnos that only writing can cause (never reading an input).
WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})


def write_error(path: PathLike, exc: OSError) -> OutputError:
    """One line for a failed write of output `path`, naming the output (never a temp file) and, for a
    full disk or quota, the disk."""
    reason = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return OutputError(f"{path}: cannot write: {reason} ({disk_of(path)})")
    if exc.errno == errno.EROFS:
        return OutputError(f"{path}: cannot write: the folder {Path(path).parent} is on a read-only file system")
    return OutputError(f"{path}: cannot write: {reason}")


# ---------------------------------------------------------------------------------------------
# Processes


_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: Optional[int] = None, sig: int = signal.SIGKILL) -> None:
    """Ask the kernel to send `sig` to this process when its parent dies (Linux; elsewhere a no-op).

    For pool workers: pass it as the pool's initializer with `initargs=(os.getpid(),)`; without it
    a SIGKILLed command leaves its workers running. If `parent` is already gone, exit at once."""
    if not sys.platform.startswith("linux"):
        return
    parent = parent or os.getppid()
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:
        os._exit(1)


def _exit_quietly(signum: int, frame: object) -> None:
    os._exit(128 + signum)


def pool_worker_init(parent: int) -> None:
    """Initializer for pool worker processes: die with `parent` (see `die_with_parent`), and on
    Ctrl-C (which reaches the whole process group) end at once without a traceback: the parent
    says `interrupted` once, for everyone. SIGTERM and SIGHUP, sent to the group as `kill -- -PGID`
    and a closed terminal do, likewise (a forked worker would otherwise inherit the CLI's handler,
    which raises in the middle of its task)."""
    die_with_parent(parent)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _exit_quietly)

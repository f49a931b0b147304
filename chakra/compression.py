"""Un-gzipping inputs safely: one home for the guarded gunzip stream every reader uses (`chakra.io` opens the files).

Every decompression failure (bad header, CRC mismatch, corrupt deflate data, truncation) becomes
one `TraceFormatError` naming the file and the compressed byte offset where it went wrong, instead
of `zlib.error`, `gzip.BadGzipFile` or `EOFError` (click even turns a stray `EOFError` into a bare
"Aborted.").

Decompression bombs are refused early, while streaming, before they cost memory or disk:

- ratio: once more than `_RATIO_FLOOR` bytes came out, the output may be at most
  `CHAKRA_MAX_GZIP_RATIO` (default 200) times the compressed bytes consumed so far. Real traces
  compress 7-30x (JSON) and less for `.et`; zeros or spaces compress about 1000x.
- size: at most `CHAKRA_MAX_INPUT_BYTES` decompressed bytes per file (default 64 GiB).

Either variable set to 0 lifts that limit.
"""

from __future__ import annotations

import gzip
import io
import os
import zlib
from typing import BinaryIO, Optional, Union

from chakra.errors import InputError, TraceFormatError

PathLike = Union[str, os.PathLike]

GZIP_MAGIC = b"\x1f\x8b"
RATIO_ENV = "CHAKRA_MAX_GZIP_RATIO"
SIZE_ENV = "CHAKRA_MAX_INPUT_BYTES"
DEFAULT_MAX_RATIO = 200
DEFAULT_MAX_BYTES = 64 << 30
# Below this much output the ratio is not judged: small files and gzip headers are noise.
_RATIO_FLOOR = 8 << 20
_STEP = 1 << 20  # decompressed bytes per internal read: the granularity of the limit checks
_ERRORS = (OSError, EOFError, zlib.error)  # gzip.BadGzipFile is an OSError


def _env_limit(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise InputError(f"{name}={raw[:40]!r}: expected a whole number (0 lifts the limit)") from None
    if value < 0:
        raise InputError(f"{name}={value}: expected 0 (no limit) or a positive number")
    return value


def limits() -> tuple[int, int]:
    """(max ratio, max decompressed bytes) from the environment; 0 means unlimited."""
    return _env_limit(RATIO_ENV, DEFAULT_MAX_RATIO), _env_limit(SIZE_ENV, DEFAULT_MAX_BYTES)


class GuardedGzip(io.BufferedIOBase):
    """A read-only gunzipping stream that enforces the limits and names the file on any failure."""

    def __init__(self, raw: BinaryIO, path: PathLike) -> None:
        super().__init__()
        self._raw = raw
        self._gz = gzip.GzipFile(fileobj=raw, mode="rb")
        self.path = path
        self.out = 0  # decompressed bytes handed out so far
        self._ratio, self._max = limits()

    def readable(self) -> bool:
        return True

    def _fail(self, exc: BaseException) -> TraceFormatError:
        try:
            where: Optional[int] = self._raw.tell()
        except (OSError, ValueError):
            where = None
        detail = str(exc) or type(exc).__name__
        if isinstance(exc, EOFError) or "end-of-stream" in detail:
            detail = "truncated gzip data (no end-of-stream marker)"
        else:
            detail = f"corrupt gzip data ({detail})"
        if self.out:
            detail += f" after {self.out:,} decompressed bytes"
        return TraceFormatError(self.path, detail, offset=where)

    def _check(self) -> None:
        if self._max and self.out > self._max:
            raise TraceFormatError(
                self.path,
                f"decompresses to more than {self._max:,} bytes ({SIZE_ENV}); refusing it as a likely "
                f"decompression bomb. Set {SIZE_ENV} higher (or 0 for no limit) if the file is genuine",
            )
        if self._ratio and self.out > _RATIO_FLOOR:
            try:
                consumed = max(1, self._raw.tell())
            except (OSError, ValueError):
                return
            if self.out > self._ratio * consumed:
                raise TraceFormatError(
                    self.path,
                    f"expands more than {self._ratio}x ({self.out:,} bytes from the first {consumed:,} "
                    f"compressed bytes); refusing it as a likely decompression bomb. Set {RATIO_ENV} higher "
                    "(or 0 for no limit) if the file is genuine",
                )

    def read(self, size: Optional[int] = -1) -> bytes:
        if size is None or size < 0:
            parts = []
            while True:
                part = self.read(_STEP)
                if not part:
                    return b"".join(parts)
                parts.append(part)
        parts = []
        want = size
        while want > 0:
            try:
                part = self._gz.read(min(want, _STEP))
            except _ERRORS as exc:
                raise self._fail(exc) from None
            if not part:
                break
            self.out += len(part)
            self._check()
            parts.append(part)
            want -= len(part)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    read1 = read

    def readinto(self, b: Union[bytearray, memoryview]) -> int:  # type: ignore[override]
        data = self.read(len(b))
        n = len(data)
        b[:n] = data
        return n

    def close(self) -> None:
        if not self.closed:
            try:
                self._gz.close()
            finally:
                self._raw.close()
        super().close()


def gunzip_bytes(data: bytes, path: PathLike) -> bytes:
    """Decompress gzip data already in memory (e.g. a tar member), with the same limits and errors."""
    return GuardedGzip(io.BytesIO(data), path).read()  # type: ignore[arg-type]

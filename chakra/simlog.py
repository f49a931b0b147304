"""Reading simulator timeline logs: `issue`/`callback` records, streamed line by line.

Two spellings carry the same data (npu, time in ns, node id, node name):

- the chakra simulator's CSV log: `issue,<npu>,<time_ns>,<node_id>,<node_name>` and the same with
  `callback`; the name is the last field and is CSV-quoted when it holds commas or quotes
  (`"a, b"`, inner quotes doubled). Every line must parse (blank lines and `#` comments excepted).
- ASTRA-sim's workload trace lines (`sys->trace_enabled`), printed through spdlog with bracketed
  prefixes: `[...] [workload] [debug] issue,sys->id=0, tick=1000, node->id=5, node->name=foo,
  node->type=4`. Ticks are ns. The official tool's `key=value` spelling without the prefix and
  without `node->type` also matches. In such logs every other line is ordinary program output
  and is skipped.

The mode is fixed by the first record: a line starting with `issue,`/`callback,` whose second field
has no `=` means the strict CSV log.
"""

from __future__ import annotations

import csv
import itertools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Optional, Union

from chakra.errors import TraceFormatError
from chakra.files import is_special
from chakra.io import input_file_errors

_KEYED_RE = re.compile(
    r"(issue|callback),\s*[^=,\s]+=(\d+),\s*[^=,\s]+=(\d+),\s*[^=,\s]+=(\d+),\s*[^=,\s]+=(.*?)"
    r"(?:,\s*node->type=(\d+))?\s*$"
)
_KEYED_HINT = ("issue,sys->id=", "callback,sys->id=")


#: (event "issue"|"callback", npu, time_ns, node_id, name, node_type or None (only ASTRA-sim lines
#: carry it), line number). A plain tuple: this is the hot loop of a million-record conversion.
Record = tuple[str, int, int, int, str, Optional[int], int]


def iter_records(path: Union[str, Path]) -> Iterator[Record]:
    """Yield every issue/callback record of a log, in file order; errors name the line."""
    path = Path(path)
    with input_file_errors(path, "simulator log"):
        f = open(path, encoding="utf-8", errors="replace", newline="")  # noqa: SIM115 - closed below
    with f:
        # Find the first record to fix the mode; remember the first line a CSV log could not hold.
        junk: Optional[int] = None
        for lineno, raw in enumerate(f, 1):
            line = raw.rstrip("\r\n")
            if line.startswith(("issue,", "callback,")):
                second = line.split(",", 2)[1]
                if "=" not in second:
                    if junk is not None:
                        raise _cannot_parse(path, junk)
                    yield from _iter_csv(path, itertools.chain([raw], f), lineno)
                    return
            if ("issue," in line or "callback," in line) and _KEYED_RE.search(line):
                yield from _iter_keyed(path, itertools.chain([raw], f), lineno)
                return
            stripped = line.strip()
            if (
                junk is None
                and stripped
                and not stripped.startswith("#")
                and not (lineno == 1 and _is_header(stripped))
            ):
                junk = lineno
    raise TraceFormatError(path, "no issue/callback records found (is this a simulator log?)")


def _is_header(text: str) -> bool:
    return text.split(",", 1)[0].strip().lower() in ("event", "type", "kind")


def _cannot_parse(path: Path, lineno: int, line: str = "") -> TraceFormatError:
    shown = f" {_clip(line)!r}" if line else ""
    return TraceFormatError(path, f"cannot parse{shown}: expected issue|callback,npu,time_ns,id,name", line=lineno)


_FIELD_LIMIT = (1 << 31) - 1


def _iter_csv(path: Path, lines: Iterator[str], first_line: int) -> Iterator[Record]:
    """The strict CSV log through the C csv reader (quoted names, doubled quotes, embedded newlines)."""
    # A node name may be megabytes long; the file size bounds a field anyway (csv's default is 128 KiB).
    if csv.field_size_limit() < _FIELD_LIMIT:
        csv.field_size_limit(_FIELD_LIMIT)
    reader = csv.reader(lines)
    base = first_line - 1
    end = 0
    while True:
        try:
            row = next(reader, None)
        except csv.Error as exc:
            raise TraceFormatError(path, f"bad CSV ({exc})", line=base + end + 1) from None
        if row is None:
            return
        start = base + end + 1
        end = reader.line_num
        if len(row) == 5 and (row[0] == "issue" or row[0] == "callback"):
            name = row[4]
            # An unclosed quote swallows the following lines (and ends with the last newline).
            if "\n" in name and ("\nissue," in name or "\ncallback," in name or name.endswith("\n")):
                raise TraceFormatError(path, "quoted name is never closed", line=start)
            try:
                yield (row[0], int(row[1]), int(row[2]), int(row[3]), name, None, start)
            except ValueError:
                raise TraceFormatError(
                    path, f"npu, time_ns and node_id must be integers: {_clip(','.join(row))!r}", line=start
                ) from None
            continue
        yield from _slow_row(path, row, start)


def _slow_row(path: Path, row: list[str], start: int) -> Iterator[Record]:
    """Rows off the fast path: blank, comment, header, unquoted names with commas, or errors."""
    if not row or (len(row) == 1 and not row[0].strip()):
        return
    first = row[0].strip()
    if first.startswith("#") or (start == 1 and _is_header(first)):
        return
    text = ",".join(row)
    if first not in ("issue", "callback"):
        raise _cannot_parse(path, start, text)
    if len(row) < 5:
        raise TraceFormatError(
            path,
            f"expected 5 fields (event,npu,time_ns,node_id,node_name), got {len(row)}: {_clip(text)!r}",
            line=start,
        )
    try:
        if max(len(row[1]), len(row[2]), len(row[3])) > 24:
            raise ValueError
        record = (first, int(row[1]), int(row[2]), int(row[3]), ",".join(row[4:]), None, start)
    except ValueError:
        raise TraceFormatError(
            path, f"npu, time_ns and node_id must be integers: {_clip(text)!r}", line=start
        ) from None
    yield record


def _iter_keyed(path: Path, lines: Iterator[str], first_line: int) -> Iterator[Record]:
    """ASTRA-sim / official key=value records anywhere in a line; other lines are program output."""
    search = _KEYED_RE.search
    for lineno, raw in enumerate(lines, first_line):
        if "issue," not in raw and "callback," not in raw:
            continue
        m = search(raw.rstrip("\r\n"))
        if m is None:
            if any(h in raw for h in _KEYED_HINT):
                raise TraceFormatError(path, f"cannot parse ASTRA-sim trace line {_clip(raw.strip())!r}", line=lineno)
            continue
        ev, npu, tick, nid, name, ntype = m.groups()
        # the regex admits any run of digits; thousands of them are not a number Python will parse
        if max(len(npu), len(tick), len(nid), len(ntype or "")) > 19:
            raise TraceFormatError(path, f"number out of range in {_clip(raw.strip())!r}", line=lineno)
        yield (ev, int(npu), int(tick), int(nid), name, int(ntype) if ntype else None, lineno)


def _clip(text: str, width: int = 80) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def looks_like_log(path: Union[str, Path]) -> bool:
    """Cheap sniff: text whose first kilobytes hold an issue/callback record."""
    if is_special(path):  # a FIFO would block the sniff; the reader says what it is
        return False
    try:
        with open(path, "rb") as f:
            head = f.read(65536)
    except OSError:
        return False
    if not head or b"\x00" in head or head[:2] == b"\x1f\x8b":
        return False
    text = head.decode("utf-8", "replace")
    if text.lstrip()[:1] in ("{", "["):
        # JSON traces start with { or [; a log with spdlog prefixes starts with "[" too.
        return any(h in text for h in _KEYED_HINT) or "] issue," in text or "] callback," in text
    for line in text.splitlines():
        if line.startswith(("issue,", "callback,")) or any(h in line for h in _KEYED_HINT):
            return True
    return False

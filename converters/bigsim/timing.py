"""`TRACEBIGSIM:` timing samples: the input of BigSim-style interpolation models.

`endTraceBigSim(name, p1..p20)` (charm `examples/bigsim/tools/rewritelog/traceBigSim`) prints one
line per timed kernel:

    TRACEBIGSIM: event:{ angles }  time:{ 0.020026 }  PAPI:{ 33136473 18194 1772428 } params:{ 1.0 5790.0 }

Under the emulator the line goes to `param.<pe>`, prefixed by the SEB's seqno and with a
`seqno: { n }` field (the interpolation tool keys its rewrites by (pe, seqno)); the time may be
missing there. Lines carry no graph structure, only samples of (kernel, duration, parameters).
The parser reads every `key:{ ... }` field, so other fields are kept rather than rejected.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Union

from chakra.errors import TraceFormatError
from chakra.io import input_file_errors

MARKER = "TRACEBIGSIM"
#: the marker as a word followed by a field (not a mention of it in prose or quotes)
MARKER_RE = re.compile(r"(?<![\w\"'])TRACEBIGSIM:?\s*[A-Za-z_]\w*\s*:\s*\{")
FIELD_RE = re.compile(r"([A-Za-z_][\w]*)\s*:\s*\{([^{}]*)\}")
PARAM_FILE_RE = re.compile(r"^param\.(\d+)$")


@dataclass
class TimingSample:
    """One timed kernel: `name`, duration `time_s` (seconds; NaN when the line has none), `params`."""

    name: str
    time_s: float
    params: list[float] = field(default_factory=list)
    #: hardware counters printed by PAPI builds (`PAPI:{ ... }`), in print order.
    papi: list[int] = field(default_factory=list)
    #: SEB index in its proc's timeline (param.<pe> files), else None.
    seqno: Optional[int] = None
    #: emulating PE, from a `param.<pe>` file name, else None.
    pe: Optional[int] = None
    #: any other `key:{ ... }` fields, as text.
    extra: dict[str, str] = field(default_factory=dict)
    source: str = ""
    line: int = 0

    @property
    def has_time(self) -> bool:
        return not math.isnan(self.time_s)


def _floats(text: str, what: str, path: Path, lineno: int) -> list[float]:
    try:
        return [float(v) for v in text.split()]
    except ValueError:
        raise TraceFormatError(path, f"non-numeric {what} values {text.strip()!r}", line=lineno) from None


def parse_timing_line(line: str, *, path: Union[str, Path] = "<input>", lineno: int = 0) -> Optional[TimingSample]:
    """The sample on one line, or None when the line has no TRACEBIGSIM marker."""
    found = MARKER_RE.search(line)
    if found is None:
        return None
    pos = found.start()
    path = Path(path)
    prefix = line[:pos].split()
    seqno: Optional[int] = None
    if prefix:
        try:
            seqno = int(prefix[-1])
        except ValueError:
            seqno = None
    fields: dict[str, str] = {}
    for key, value in FIELD_RE.findall(line[pos + len(MARKER) :]):
        fields[key.lower()] = value
    if "event" not in fields:
        raise TraceFormatError(path, "TRACEBIGSIM line without an event:{ name } field", line=lineno)
    name = fields.pop("event").strip()
    if not name:
        raise TraceFormatError(path, "TRACEBIGSIM line with an empty event name", line=lineno)
    time_s = math.nan
    if "time" in fields:
        values = _floats(fields.pop("time"), "time", path, lineno)
        if len(values) != 1:
            raise TraceFormatError(path, f"time:{{ }} holds {len(values)} values, expected 1", line=lineno)
        time_s = values[0]
    params = _floats(fields.pop("params"), "params", path, lineno) if "params" in fields else []
    papi: list[int] = []
    if "papi" in fields:
        try:
            papi = [int(v) for v in fields.pop("papi").split()]
        except ValueError:
            raise TraceFormatError(path, "non-integer PAPI counter", line=lineno) from None
    if "seqno" in fields:
        values = _floats(fields.pop("seqno"), "seqno", path, lineno)
        if len(values) != 1 or values[0] != int(values[0]):
            raise TraceFormatError(path, "seqno:{ } must hold one integer", line=lineno)
        seqno = int(values[0])
    return TimingSample(
        name=name,
        time_s=time_s,
        params=params,
        papi=papi,
        seqno=seqno,
        extra={k: v.strip() for k, v in fields.items()},
        source=str(path),
        line=lineno,
    )


def read_timing_samples(path: Union[str, Path]) -> list[TimingSample]:
    """Every TRACEBIGSIM sample of a file (a NAMD-style log or an emulator `param.<pe>` file).

    Other lines (comments, program output) are skipped. A `param.<pe>` name sets `pe` on each
    sample. Raises TraceFormatError (file and line) on a marked line that cannot be read, and
    when the file holds no sample at all.
    """
    path = Path(path)
    pm = PARAM_FILE_RE.match(path.name)
    pe = int(pm.group(1)) if pm else None
    samples: list[TimingSample] = []
    with input_file_errors(path, "timing file"):
        text = path.read_text(encoding="utf-8", errors="replace")
    for lineno, line in enumerate(text.splitlines(), 1):
        if MARKER not in line or line.lstrip().startswith("#"):
            continue
        sample = parse_timing_line(line, path=path, lineno=lineno)
        if sample is not None:
            sample.pe = pe
            samples.append(sample)
    if not samples:
        raise TraceFormatError(path, "no TRACEBIGSIM lines")
    return samples


def read_param_files(directory: Union[str, Path]) -> list[TimingSample]:
    """Samples of every `param.<pe>` file in `directory`, in PE order (empty if there are none)."""
    directory = Path(directory)
    files = sorted(
        (p for p in directory.iterdir() if PARAM_FILE_RE.match(p.name)),
        key=lambda p: int(PARAM_FILE_RE.match(p.name).group(1)),  # type: ignore[union-attr]
    )
    out: list[TimingSample] = []
    for p in files:
        out.extend(read_timing_samples(p))
    return out

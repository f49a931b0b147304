"""Parsing ASTRA-sim 1.0 text workloads into a `Workload` (keyword, header options, layers).

The text format (docs/astra-sim.md §5, docs/chakra-format.md §4): line 1 is a parallelism keyword plus
optional header tokens, line 2 the layer count, then one line per layer with 12 columns
`name reserved fwd_comp fwd_type fwd_size ig_comp ig_type ig_size wg_comp wg_type wg_size update`
(13 for HYBRID_CUSTOMIZED: the layer's own keyword last). Every malformed field is reported with
its file and line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from chakra.errors import TraceFormatError
from chakra.io import input_file_errors

#: Keywords of ASTRA-sim 1.0's `decode_parallelsim`.
KEYWORDS = (
    "MICRO",
    "DATA",
    "MODEL",
    "HYBRID_DATA_MODEL",
    "HYBRID_MODEL_DATA",
    "HYBRID_DLRM",
    "HYBRID_DLRM_ENHANCED",
    "HYBRID_TRANSFORMER",
    "HYBRID_TRANSFORMER_FWD_IN_BCKWD",
    "HYBRID_CUSTOMIZED",
    "DISTRIBUTED_INFERENCE",
)
#: Per-layer keywords HYBRID_CUSTOMIZED accepts (anything that decodes to a dimension split).
LAYER_KEYWORDS = tuple(k for k in KEYWORDS if k != "HYBRID_CUSTOMIZED")

#: Comm types of the text format (build.COLLECTIVES maps them to Chakra collectives).
COMM_TYPES = ("ALLREDUCE", "ALLGATHER", "ALLTOALL", "REDUCESCATTER", "ALLREDUCEALLTOALL")
NONE = "NONE"
#: Sizes and times end up in int64/uint64 protobuf fields; anything larger cannot be written.
INT64_MAX = 2**63 - 1
LAYER_COLUMNS = 12
LAYER_FIELDS = "name reserved fwd_comp fwd_type fwd_size ig_comp ig_type ig_size wg_comp wg_type wg_size update"

_COMMENT = re.compile(r"(^|\s)(#|//).*$")


# ---------------------------------------------------------------------------------------------
# Parsing


@dataclass
class Layer:
    """One layer line. Times are the file's integers (cycles in ASTRA-sim 1.0, µs in Chakra)."""

    name: str
    line: int
    fwd_comp: int
    fwd_type: str
    fwd_size: int
    ig_comp: int
    ig_type: str
    ig_size: int
    wg_comp: int
    wg_type: str
    wg_size: int
    update_time: int
    policy: Optional[str] = None  # HYBRID_CUSTOMIZED: the layer's own keyword


@dataclass
class Workload:
    """A parsed text workload: keyword, header options and layers."""

    path: Path
    text: str
    keyword: str
    layers: list[Layer]
    header: dict[str, list[str]] = field(default_factory=dict)
    last_bottom_layer: Optional[int] = None  # HYBRID_DLRM*
    model_group: Optional[int] = None  # HYBRID_TRANSFORMER*: model_parallel_NPU_group
    checkpoints: frozenset[int] = frozenset()
    checkpoint_initiates: frozenset[int] = frozenset()
    header_line: int = 1  # line of the keyword and header options (after blank/comment lines)


def _content_lines(text: str) -> Iterator[tuple[int, list[str]]]:
    """(1-based line number, tokens) of every line that is not blank or a comment."""
    for number, raw in enumerate(text.splitlines(), 1):
        line = _COMMENT.sub("", raw).strip()
        if line:
            yield number, line.split()


def _int(path: Path, line: int, what: str, token: str, *, minimum: Optional[int] = 0, maximum: int = INT64_MAX) -> int:
    try:
        value = int(token)
    except ValueError:
        raise TraceFormatError(path, f"{what} must be an integer, got {token!r}", line=line) from None
    if minimum is not None and value < minimum:
        raise TraceFormatError(path, f"{what} must be >= {minimum}, got {value}", line=line)
    if value > maximum:
        raise TraceFormatError(path, f"{what} must be at most {maximum}, got {value}", line=line)
    return value


def _comm_type(path: Path, line: int, what: str, token: str) -> str:
    if token != NONE and token not in COMM_TYPES:
        expected = ", ".join([*COMM_TYPES, NONE])
        raise TraceFormatError(
            path, f"unknown {what} communication type {token!r} (expected one of {expected})", line=line
        )
    return token


def _header_pairs(tokens: Sequence[str]) -> dict[str, list[str]]:
    """`key: v v key2: v` -> {key: [v, v], key2: [v]}; a bare leading token gets key ''."""
    pairs: dict[str, list[str]] = {}
    key = ""
    for tok in tokens:
        if tok.endswith(":") and len(tok) > 1:
            key = tok[:-1]
            pairs.setdefault(key, [])
        elif ":" in tok and not tok.startswith(":") and not tok.endswith(":"):
            k, v = tok.split(":", 1)
            pairs.setdefault(k, []).append(v)
        else:
            pairs.setdefault(key, []).append(tok)
    return pairs


def _layer_list(path: Path, line: int, key: str, values: list[str]) -> frozenset[int]:
    """`checkpoints: N l1 .. lN` -> {l1..lN}; the count must match (ASTRA-sim reads exactly N)."""
    if not values:
        raise TraceFormatError(path, f"header '{key}:' needs a count and that many layer numbers", line=line)
    count = _int(path, line, f"'{key}:' count", values[0])
    if len(values) - 1 != count:
        raise TraceFormatError(path, f"header '{key}:' announces {count} layers but lists {len(values) - 1}", line=line)
    return frozenset(_int(path, line, f"'{key}:' layer", v) for v in values[1:])


def parse_text(path: Path, text: Optional[str] = None) -> Workload:
    """Parse a text workload, raising TraceFormatError (file and line) on anything malformed."""
    path = Path(path)
    if text is None:
        with input_file_errors(path, "text workload file"):
            text = path.read_text(encoding="utf-8", errors="replace")
    lines = _content_lines(text)
    first = next(lines, None)
    if first is None:
        raise TraceFormatError(path, "empty workload: expected a parallelism keyword on the first line")
    hline, htoks = first
    keyword = htoks[0]
    if keyword not in KEYWORDS:
        raise TraceFormatError(
            path, f"unknown parallelism keyword {keyword!r} (expected one of {', '.join(KEYWORDS)})", line=hline
        )
    wl = Workload(path=path, text=text, keyword=keyword, layers=[], header_line=hline)
    extra = htoks[1:]
    if keyword.startswith("HYBRID_DLRM"):
        if not extra:
            raise TraceFormatError(path, f"{keyword} needs the last bottom-MLP layer index after it", line=hline)
        wl.last_bottom_layer = _int(path, hline, "last bottom layer", extra[0], minimum=None)
        wl.header = _header_pairs(extra[1:])
    else:
        wl.header = _header_pairs(extra)
    if keyword.startswith("HYBRID_TRANSFORMER"):
        # ASTRA-sim reads `<name> <int>` positionally; the name is model_parallel_NPU_group.
        mp = next((v for k, v in wl.header.items() if k.lower() == "model_parallel_npu_group"), None)
        if mp is None and len(extra) >= 2:
            mp = [extra[1]]
        if not mp:
            raise TraceFormatError(path, f"{keyword} needs 'model_parallel_NPU_group: <size>' on line 1", line=hline)
        wl.model_group = _int(path, hline, "model_parallel_NPU_group", mp[0], minimum=1)
        if keyword == "HYBRID_TRANSFORMER_FWD_IN_BCKWD":
            if "checkpoints" in wl.header:
                wl.checkpoints = _layer_list(path, hline, "checkpoints", wl.header["checkpoints"])
            if "checkpoint_initiates" in wl.header:
                wl.checkpoint_initiates = _layer_list(
                    path, hline, "checkpoint_initiates", wl.header["checkpoint_initiates"]
                )
    else:
        mp = next((v for k, v in wl.header.items() if k.lower() == "model_parallel_npu_group"), None)
        if mp:
            wl.model_group = _int(path, hline, "model_parallel_NPU_group", mp[0], minimum=1)

    second = next(lines, None)
    if second is None:
        raise TraceFormatError(path, "missing the layer count (line 2)", line=hline + 1)
    cline, ctoks = second
    if len(ctoks) != 1:
        raise TraceFormatError(path, f"line 2 must hold only the layer count, found {len(ctoks)} fields", line=cline)
    count = _int(path, cline, "layer count", ctoks[0], minimum=1)

    ncols = LAYER_COLUMNS + (1 if keyword == "HYBRID_CUSTOMIZED" else 0)
    for number, toks in lines:
        if len(wl.layers) == count:
            raise TraceFormatError(path, f"more layer lines than the {count} announced on line {cline}", line=number)
        if len(toks) != ncols:
            columns = LAYER_FIELDS + (" parallelism" if ncols > LAYER_COLUMNS else "")
            raise TraceFormatError(path, f"layer line has {len(toks)} fields, expected {ncols}: {columns}", line=number)
        layer = Layer(
            name=toks[0],
            line=number,
            fwd_comp=_int(path, number, "forward compute time", toks[2]),
            fwd_type=_comm_type(path, number, "forward", toks[3]),
            fwd_size=_int(path, number, "forward comm size", toks[4]),
            ig_comp=_int(path, number, "input-gradient compute time", toks[5]),
            ig_type=_comm_type(path, number, "input-gradient", toks[6]),
            ig_size=_int(path, number, "input-gradient comm size", toks[7]),
            wg_comp=_int(path, number, "weight-gradient compute time", toks[8]),
            wg_type=_comm_type(path, number, "weight-gradient", toks[9]),
            wg_size=_int(path, number, "weight-gradient comm size", toks[10]),
            update_time=_int(path, number, "update time", toks[11], minimum=None),
        )
        _int(path, number, "reserved column", toks[1], minimum=None)
        if keyword == "HYBRID_CUSTOMIZED":
            if toks[12] not in LAYER_KEYWORDS:
                raise TraceFormatError(
                    path,
                    f"unknown per-layer parallelism {toks[12]!r} (expected one of {', '.join(LAYER_KEYWORDS)})",
                    line=number,
                )
            layer.policy = toks[12]
        wl.layers.append(layer)
    if len(wl.layers) < count:
        raise TraceFormatError(path, f"line {cline} announces {count} layers but the file has {len(wl.layers)}")
    for what, layers in (("checkpoints", wl.checkpoints), ("checkpoint_initiates", wl.checkpoint_initiates)):
        bad = sorted(i for i in layers if i >= count)
        if bad:
            raise TraceFormatError(path, f"header '{what}:' names layer {bad[0]}, but there are {count}", line=hline)
    return wl


def header_npus(wl: Workload) -> Optional[int]:
    """The NPU count the header names (`all_gpus: N`), or None when it names none."""
    value = wl.header.get("all_gpus")
    if not value:
        return None
    return _int(wl.path, wl.header_line, "all_gpus", value[0], minimum=1)

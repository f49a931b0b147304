"""FlexFlow simulated task graphs (graphviz dot) -> Chakra: one trace per device.

Reads the upstream `--taskgraph` export and the legacy `npu=` labelled variant (taskgraph.py),
with our own DOT parser (dot.py). Devices come from the labels (legacy) or from a placement
(placement.py); transfers become send/recv pairs (lower.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from chakra.converters import lazy_exports
from chakra.converters.result import DEFAULT_MAX_RANKS, ConversionResult
from chakra.errors import InputError

if TYPE_CHECKING:
    from .lower import Lowered
    from .taskgraph import TaskGraph

# The parser and lowering modules (and protobuf, through chakra.io) are imported where they are
# used, so that listing the converter formats does not load them.
_LAZY = {
    "DotGraph": "dot",
    "parse_dot": "dot",
    "Lowered": "lower",
    "lower": "lower",
    "Placement": "placement",
    "assign_devices": "placement",
    "parse_placement": "placement",
    "TaskGraph": "taskgraph",
    "read_taskgraph": "taskgraph",
}


__getattr__ = lazy_exports("chakra.converters.flexflow", _LAZY)


NAME = "flexflow"
DESCRIPTION = "FlexFlow simulated task graph (.dot from --taskgraph, or the legacy npu= labels)"
EXTENSIONS = (".dot",)

__all__ = [
    "NAME",
    "DESCRIPTION",
    "FlexFlowConversion",
    "convert_flexflow",
    "parse_dot",
    "parse_placement",
    "read_taskgraph",
    "EXTENSIONS",
    "accept",
    "convert",
    "add_cli",
    "DotGraph",
    "TaskGraph",
    "Placement",
]

_SNIFF_DIGRAPH = re.compile(r"^\s*(?:strict\s+)?digraph\b", re.IGNORECASE | re.MULTILINE)
_SNIFF_LABEL = re.compile(r"\|\s*(?:Forward|Backward|Comm|Update|Barrier)\s*\||npu(?:_id)?\s*=\s*\d+")


@dataclass
class FlexFlowConversion:
    taskgraph: TaskGraph
    lowered: Lowered
    placement: str
    warnings: list[str] = field(default_factory=list)

    def summary(self) -> dict:
        low = self.lowered
        return {
            "input": str(self.taskgraph.graph.path),
            "variant": self.taskgraph.variant,
            "tasks": len(self.taskgraph.tasks),
            "npus": len(low.traces),
            "placement": self.placement,
            "compute_nodes": low.compute_nodes,
            "messages": low.messages,
            "sync_messages": low.sync_messages,
            "local_transfers": low.local_transfers,
            "dropped_link_deps": low.dropped_link_deps,
            "nodes_per_rank": [len(t.nodes) for t in low.traces],
            "warnings": self.warnings,
        }

    def write(self, prefix: Path) -> list[Path]:
        from chakra.io import write_rank_traces

        return write_rank_traces(prefix, self.lowered.traces)


def convert_flexflow(
    path: Path,
    *,
    placement: Optional[str] = None,
    npus: Optional[int] = None,
    bandwidth_gbps: Optional[float] = None,
    latency_us: float = 0.0,
    text: Optional[str] = None,
    max_npus: int = DEFAULT_MAX_RANKS,
) -> FlexFlowConversion:
    """Parse a FlexFlow task graph and split it into per-device traces (nothing is written)."""
    from .dot import parse_dot
    from .lower import lower
    from .placement import assign_devices, parse_placement
    from .taskgraph import read_taskgraph

    path = Path(path)
    graph = parse_dot(path, text)
    tg = read_taskgraph(graph)
    warnings: list[str] = []
    if bandwidth_gbps is not None and not 0 < bandwidth_gbps < float("inf"):
        raise InputError(f"--bandwidth must be a finite number > 0, got {bandwidth_gbps}")
    if not 0 <= latency_us < float("inf"):
        raise InputError(f"--latency must be a finite number >= 0, got {latency_us}")
    if tg.variant == "legacy":
        if placement is not None:
            warnings.append("legacy npu= labels name each task's device; --placement is ignored")
        devices = [t.device for t in tg.tasks]
        how = "npu= labels"
        bytes_per_us = None
    else:
        if placement is None:
            devices = [None if t.is_comm else 0 for t in tg.tasks]
            how = "none (every task on NPU 0)"
            ncomm = sum(t.is_comm for t in tg.tasks)
            warnings.append(
                f"{path}: the FlexFlow --taskgraph export records no device, and no --placement was given: "
                f"all {len(tg.tasks) - ncomm} compute tasks are put on NPU 0 and its {ncomm} Comm tasks become "
                f"plain dependencies. Pass --placement FILE|SPEC (e.g. 'conv1=0-3;*=0') to split by device."
            )
        else:
            plan = parse_placement(placement)
            devices, notes = assign_devices(tg, plan)
            warnings.extend(notes)
            how = plan.source
        # 1 GB/s moves 1e3 bytes per µs.
        bytes_per_us = bandwidth_gbps * 1e3 if bandwidth_gbps is not None else None
    lowered = lower(
        tg,
        devices,
        npus=npus,
        bytes_per_us=bytes_per_us,
        latency_us=latency_us,
        max_npus=max_npus,
        metadata={"source_format": f"flexflow-taskgraph-{tg.variant}", "input_file": str(path)},
    )
    warnings.extend(lowered.warnings)
    if tg.variant == "upstream" and bytes_per_us is None and lowered.messages:
        warnings.append(
            "the upstream export gives transfer times but not sizes: comm_size is 0; "
            "pass --bandwidth GB/s (and --latency µs) to derive sizes from the times"
        )
    return FlexFlowConversion(tg, lowered, how, warnings)


def accept(prefix: bytes) -> bool:
    """A digraph whose record labels look like FlexFlow tasks (or legacy npu= labels)."""
    head = prefix[:8192].decode("utf-8", errors="replace")
    return bool(_SNIFF_DIGRAPH.search(head) and _SNIFF_LABEL.search(head))


def convert(
    inputs: list[Path],
    prefix: Path,
    *,
    placement: Optional[str] = None,
    npus: Optional[int] = None,
    bandwidth_gbps: Optional[float] = None,
    latency_us: float = 0.0,
    max_npus: int = DEFAULT_MAX_RANKS,
) -> ConversionResult:
    """Convert one task-graph .dot file (without a placement an upstream export lands on one NPU, with a warning)."""
    if len(inputs) != 1:
        raise InputError("the FlexFlow converter takes exactly one task-graph .dot file")
    conv = convert_flexflow(
        Path(inputs[0]),
        placement=placement,
        npus=npus,
        bandwidth_gbps=bandwidth_gbps,
        latency_us=latency_us,
        max_npus=max_npus,
    )
    written = conv.write(Path(prefix))
    return ConversionResult(written, {**conv.summary(), "written": [str(p) for p in written]}, list(conv.warnings))


def add_cli(app) -> None:
    from chakra.converters.flexflow.cli import register

    register(app, convert)

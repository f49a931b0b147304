"""Synthesis of Chakra traces from real ones (the Chakra paper's generative model, §4).

    from chakra.io import read_traces
    from chakra.dsl.synthesis import synthesize
    result = synthesize([read_traces(["ddp2/trace"])], ranks=64, seed=1, fidelity=True)
    result.workload.save("out/synth")
    for row in result.fidelity: print(row.quantity, row.statistic)

Needs the optional extra `synth` (scikit-learn, which brings scipy).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from chakra.dsl.synthesis.extract import JobView, job_view, op_class
from chakra.dsl.synthesis.fidelity import Row, compare
from chakra.dsl.synthesis.model import SynthesisError, SynthModel, fit, obfuscated_name
from chakra.dsl.synthesis.sample import sample
from chakra.dsl.workload import Workload
from chakra.trace import Trace

__all__ = [
    "compare",
    "JobView",
    "Row",
    "SynthModel",
    "SynthesisError",
    "Synthesis",
    "fit",
    "job_view",
    "op_class",
    "sample",
    "synthesize",
]


@dataclass
class Synthesis:
    workload: Workload
    model: SynthModel
    #: real vs synthetic, one KS row per quantity (asked for with `fidelity=True`)
    fidelity: list[Row] = field(default_factory=list)


def synthesize(
    jobs: list[list[Trace]],
    ranks: int,
    seed: int = 0,
    obfuscate: bool = False,
    fidelity: bool = False,
    length: Optional[int] = None,
) -> Synthesis:
    """Fit on `jobs` (each one multi-rank trace set), sample `ranks` ranks, optionally compare."""
    views = [job_view(traces) for traces in jobs if traces]
    model = fit(views, seed=seed)
    workload = sample(model, ranks, seed=seed, obfuscate=obfuscate, length=length)
    rows: list[Row] = []
    if fidelity:
        class_map = None
        if obfuscate:
            class_map = {obfuscated_name(i): c for i, (c, _) in enumerate(model.class_counts.most_common())}
        rows = compare(views, job_view(workload.traces()), class_map)
    return Synthesis(workload, model, rows)

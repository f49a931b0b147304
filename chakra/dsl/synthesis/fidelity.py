"""Real versus synthetic: two-sample Kolmogorov-Smirnov statistics per learned quantity.

Both sides go through the same extractor (`extract.job_view`), so a row compares like with
like: message sizes per collective type (from each job's master trace), compute durations
(overall and for the most common operator classes), compute nodes between comm events, and the
dependency lag after comm nodes. The communication type mix is compared by total variation
distance (a categorical quantity has no meaningful KS statistic).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from chakra.dsl.synthesis.extract import JobView
from chakra.dsl.synthesis.model import SynthesisError
from chakra.schema import collective_name

TOP_CLASSES = 5


@dataclass
class Row:
    quantity: str
    real_n: int
    synth_n: int
    statistic: float
    p_value: Optional[float]
    measure: str = "KS"

    def to_json(self) -> dict[str, Any]:
        return {
            "quantity": self.quantity,
            "measure": self.measure,
            "real_n": self.real_n,
            "synthetic_n": self.synth_n,
            "statistic": self.statistic,
            "p_value": self.p_value,
        }


def _ks(quantity: str, real: list[float], synth: list[float]) -> Optional[Row]:
    if not real or not synth:
        return None
    try:
        from scipy.stats import ks_2samp
    except ImportError:
        raise SynthesisError(
            "the KS report needs scipy (installed with scikit-learn): pip install 'chakra-et[synth]'"
        ) from None
    res = ks_2samp(np.asarray(real, dtype=float), np.asarray(synth, dtype=float))
    return Row(quantity, len(real), len(synth), float(res.statistic), float(res.pvalue))


def _master(job: JobView):
    return next((tl for tl in sorted(job.ranks, key=lambda t: t.rank) if tl.comms), None)


def _size_key(ev) -> str:
    return collective_name(ev.ctype) if ev.kind == "coll" else "SEND_RECV"


def _collect(jobs: list[JobView], class_map: Optional[dict[str, str]] = None) -> dict[str, Any]:
    sizes: dict[str, list[int]] = {}
    mix: Counter = Counter()
    durations: list[int] = []
    per_class: dict[str, list[int]] = {}
    gaps: list[int] = []
    lags: list[int] = []
    for job in jobs:
        master = _master(job)
        if master is not None:
            for ev in master.comms:
                key = _size_key(ev)
                sizes.setdefault(key, []).append(ev.size)
                mix[key] += 1
        for tl in job.ranks:
            durations.extend(tl.durations)
            for c, d in zip(tl.classes, tl.durations):
                cls = class_map.get(c, c) if class_map else c
                per_class.setdefault(cls, []).append(d)
            for ev in tl.comms:
                gaps.append(ev.gap)
                if ev.lag is not None:
                    lags.append(ev.lag)
    return {"sizes": sizes, "mix": mix, "durations": durations, "per_class": per_class, "gaps": gaps, "lags": lags}


def compare(real: list[JobView], synth: JobView, class_map: Optional[dict[str, str]] = None) -> list[Row]:
    """Rows of the report. `class_map` maps obfuscated operator names back to real classes."""
    r = _collect(real)
    s = _collect([synth], class_map)
    rows: list[Row] = []
    for key in sorted(set(r["sizes"]) | set(s["sizes"])):
        row = _ks(f"message size [{key}]", r["sizes"].get(key, []), s["sizes"].get(key, []))
        if row:
            rows.append(row)
    total_r, total_s = sum(r["mix"].values()), sum(s["mix"].values())
    if total_r and total_s:
        keys = set(r["mix"]) | set(s["mix"])
        tv = 0.5 * sum(abs(r["mix"][k] / total_r - s["mix"][k] / total_s) for k in keys)
        rows.append(Row("comm type mix", total_r, total_s, float(tv), None, "TV"))
    for name, q in (
        ("compute duration [all]", "durations"),
        ("compute nodes between comms", "gaps"),
        ("dependency lag after comm", "lags"),
    ):
        row = _ks(name, r[q], s[q])
        if row:
            rows.append(row)
    top = sorted(r["per_class"], key=lambda c: -len(r["per_class"][c]))[:TOP_CLASSES]
    for cls in top:
        row = _ks(f"duration [{cls}]", r["per_class"][cls], s["per_class"].get(cls, []))
        if row:
            rows.append(row)
    return rows

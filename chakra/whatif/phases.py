"""Where a GPU training step's device time goes: per phase, and against the roofline model.

Used to check what-if predictions against measured runs phase by phase (docs/whatif-validation.md):
a device node belongs to the phase of the host op that launched it (the PyTorch converter's
`launcher` attribute), not to the time it ran in, since a compute-bound GPU runs behind its CPU.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Optional

from chakra.schema import pb
from chakra.schema.attrs import get_attr
from chakra.schema.kinds import resource_of
from chakra.trace import Trace

PHASES = ("forward", "backward", "optimizer")

#: Kernel classes for the roofline error tables, first match wins.
KERNEL_CLASSES = (
    ("gemm", re.compile(r"gemm|cutlass|xmma|cublas|matmul|splitK", re.I)),
    ("attention", re.compile(r"fmha|flash|attention", re.I)),
    ("norm", re.compile(r"norm", re.I)),
    ("reduction", re.compile(r"reduce|softmax|sum|mean", re.I)),
    ("elementwise", re.compile(r"elementwise|vectorized|unrolled|pointwise|triton", re.I)),
)


def kernel_class(name: str) -> str:
    for cls, rx in KERNEL_CLASSES:
        if rx.search(name):
            return cls
    return "other"


def _device_nodes(trace: Trace) -> list[pb.Node]:
    """Device work of a trace (queue nodes, the stream waiting for a launch, left out)."""
    return [n for n in trace.nodes if resource_of(n) == "gpu" and get_attr(n, "queue_of", None) is None]


def gpu_time_by_phase(trace: Trace, *, optimizer: str = r"Optimizer\.step", steps: int = 1) -> dict[str, float]:
    """Device µs per step in forward, backward and optimizer.

    Backward: launched from another host thread than the one that records `ProfilerStep#N`
    (autograd runs backward on the device's own thread); optimizer: launched inside an optimizer
    step's span (or a node a what-if fused into one, named `fused_optimizer*`); forward: the rest
    (loss and zero_grad included). Device nodes without a launcher count as forward.
    """
    ids = trace.by_id()
    rx = re.compile(optimizer)
    spans = [
        (n.start_time_micros, n.start_time_micros + max(n.duration_micros, int(get_attr(n, "inclusive_dur", 0) or 0)))
        for n in trace.nodes
        if rx.search(n.name)
    ]
    main = next((get_attr(n, "tid", None) for n in trace.nodes if n.name.startswith("ProfilerStep#")), None)
    out = dict.fromkeys(PHASES, 0.0)
    for n in _device_nodes(trace):
        phase = "forward"
        launcher: Optional[pb.Node] = ids.get(get_attr(n, "launcher", -1))
        if n.name.startswith("fused_optimizer"):
            phase = "optimizer"
        elif launcher is not None:
            if main is not None and get_attr(launcher, "tid", main) != main:
                phase = "backward"
            elif any(a <= launcher.start_time_micros <= b for a, b in spans):
                phase = "optimizer"
        out[phase] += n.duration_micros
    return {k: v / steps for k, v in out.items()}


def roofline_errors(
    trace: Trace, *, flops_per_s: float, bytes_per_s: float, min_us: int = 1
) -> list[tuple[str, float, float]]:
    """(kernel class, roofline µs, measured µs) of every kernel with num_ops and tensor_size.

    Roofline time = max(num_ops / flops_per_s, tensor_size / bytes_per_s): the numbers the
    converter derives from the launching op's shapes (shared by duration among its kernels)
    against the measured peaks. Kernels shorter than `min_us` (rounding) are left out."""
    out = []
    for n in _device_nodes(trace):
        ops = get_attr(n, "num_ops", 0) or 0
        size = get_attr(n, "tensor_size", 0) or 0
        if not ops or not size or n.duration_micros < min_us:
            continue
        model = max(ops / flops_per_s, size / bytes_per_s) * 1e6
        out.append((kernel_class(n.name), model, float(n.duration_micros)))
    return out


def quartiles(xs: Sequence[float]) -> tuple[float, float, float]:
    """(25th, 50th, 75th) percentile, linear interpolation."""
    s = sorted(xs)
    if not s:
        return (float("nan"),) * 3

    def q(p: float) -> float:
        k = (len(s) - 1) * p
        lo = int(k)
        hi = min(lo + 1, len(s) - 1)
        return s[lo] + (s[hi] - s[lo]) * (k - lo)

    return q(0.25), q(0.5), q(0.75)

"""A one-line device model: durations from FLOPs and bytes by the roofline.

Generated traces carry `num_ops` and `tensor_size` so a roofline simulator can cost them itself;
`duration_micros` is filled from this model so replay-mode simulators (which only read the
duration) still see a plausible time.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Device:
    """Peak compute in TFLOP/s and memory bandwidth in GB/s (decimal, as ASTRA-sim's roofline)."""

    tflops: float = 100.0
    mem_bw: float = 2000.0

    def __post_init__(self) -> None:
        if self.tflops <= 0 or self.mem_bw <= 0:
            raise ValueError(f"device needs positive tflops and mem_bw, got {self.tflops} and {self.mem_bw}")

    def seconds(self, flops: float, nbytes: float) -> float:
        """Roofline time: the slower of the compute-bound and the memory-bound time."""
        return max(flops / (self.tflops * 1e12), nbytes / (self.mem_bw * 1e9))

    def duration_us(self, flops: float, nbytes: float) -> int:
        """Whole microseconds (the schema's unit); any work at all takes at least 1 us."""
        us = self.seconds(flops, nbytes) * 1e6
        if us <= 0:
            return 0
        return max(1, int(round(us)))

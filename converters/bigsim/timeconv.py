"""Seconds (IEEE doubles, as BigSim logs them) to integer microseconds, rounded exactly.

Chakra stores `start_time_micros` / `duration_micros` as integers, so a time is rounded to the
nearest microsecond of the double's *exact* binary value, ties to even. `x * 1e6` in floating
point is itself rounded and can land on the wrong side of a .5 tie, so values whose product sits
within a few ulps of a tie are recomputed with exact rationals (`fractions.Fraction`); every other
value takes the fast path. Times that are whole microseconds (all text2log inputs, every `%f`
dump) therefore convert with no error at all, and the converter keeps the exact seconds in
`bigsim_*_s` double attributes so sub-microsecond emulator timings are not lost either.
"""

from __future__ import annotations

import math
from fractions import Fraction

_MICRO = 1_000_000


def _near_tie(y: float) -> bool:
    frac = abs(y - math.floor(y))
    return abs(frac - 0.5) <= 8 * math.ulp(y) + 1e-300


def seconds_to_us(x: float) -> int:
    """round_half_even(x * 10**6) on the exact value of `x` (raises ValueError for inf/nan)."""
    y = x * 1e6
    if not math.isfinite(y):
        raise ValueError(f"time {x!r} s is not finite")
    if _near_tie(y):
        return round(Fraction(x) * _MICRO)
    return round(y)


def interval_us(later: float, earlier: float) -> int:
    """round_half_even((later - earlier) * 10**6), exact: the float subtraction may round too."""
    y = (later - earlier) * 1e6
    if not math.isfinite(y):
        raise ValueError(f"interval {later!r} - {earlier!r} s is not finite")
    if _near_tie(y) or abs(later - earlier) < 1e-300:
        return round((Fraction(later) - Fraction(earlier)) * _MICRO)
    return round(y)

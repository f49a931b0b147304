"""Seconds -> µs rounding used by the BigSim converter: exact round-half-even of the double's value."""

from __future__ import annotations

import random
from fractions import Fraction

from chakra.converters.bigsim.timeconv import interval_us, seconds_to_us


def exact(x: float) -> int:
    return round(Fraction(x) * 1_000_000)


def test_whole_microseconds_are_exact() -> None:
    for n in (0, 1, 2, 20, 38, 175, 10**6, 123456789):
        assert seconds_to_us(float(f"{n / 1e6:.6f}")) == n


def test_ties_and_neighbours_follow_the_exact_value() -> None:
    rng = random.Random(7)
    values = []
    for _ in range(3000):
        n = rng.randrange(0, 10**9)
        tie = (n + 0.5) / 1e6  # a double near a .5 µs tie: float x*1e6 may round the wrong way
        values += [tie, tie * (1 + 2**-52), tie * (1 - 2**-52), n / 1e6, rng.random() * 1e3]
    values += [2.5e-6, 0.5e-6, 1.5e-6, 1e-12, 0.0]
    for x in values:
        assert seconds_to_us(x) == exact(x), x


def test_intervals_are_exact() -> None:
    rng = random.Random(11)
    for _ in range(3000):
        a = rng.randrange(0, 10**7) / 1e6
        b = a + (rng.randrange(0, 10**6) + rng.choice((0, 0.5, 0.25))) / 1e6
        assert interval_us(b, a) == round((Fraction(b) - Fraction(a)) * 1_000_000)

"""Error lines quote offending values through `excerpt`, which must never fail itself."""

from __future__ import annotations

from chakra.errors import ChakraError, excerpt


def test_excerpt_cuts_long_values():
    assert excerpt("a" * 1000) == "'" + "a" * 56 + "..."
    assert len(excerpt(list(range(10_000)), 40)) == 40


def test_excerpt_survives_values_whose_repr_fails():
    nested: list = []
    for _ in range(20_000):  # deeper than the recursion limit: repr() raises RecursionError
        nested = [nested]
    assert excerpt(nested) == "<a list nested too deep to show>"
    assert excerpt(10**5000) == "<an integer of 16610 bits>"  # str() refuses > 4,300 digits


def test_error_lines_are_cut_in_one_place():
    text = str(ChakraError("x" * 100_000))
    assert len(text) < 700 and "characters cut" in text

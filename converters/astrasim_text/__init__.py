"""ASTRA-sim 1.0 text workloads (DATA, MODEL, HYBRID_*, MICRO, ...) -> Chakra."""

from chakra.converters.astrasim_text.build import (
    DESCRIPTION,
    NAME,
    TextConversion,
    add_cli,
    convert_paths,
    convert_text,
    parse_text,
    sniff,
)

__all__ = ["DESCRIPTION", "NAME", "TextConversion", "add_cli", "convert_paths", "convert_text", "parse_text", "sniff"]

"""What every converter plugin's `convert()` returns (one definition for all formats)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Default cap on the rank files one conversion may write (`--max-npus` raises it): a converter
#: writes one file per rank a header or device id claims, and a typo'd or corrupt count must not
#: fill a disk with them.
DEFAULT_MAX_RANKS = 4096


@dataclass
class ConversionResult:
    """The files a conversion wrote, its JSON-ready summary, and what the user should be told.

    `summary` is what `chakra convert FORMAT --json` prints for that format (its shape is the
    format's own); `warnings` are one line each, printed as `warning:` lines by the CLI.
    """

    paths: list[Path]
    summary: Any = None
    warnings: list[str] = field(default_factory=list)

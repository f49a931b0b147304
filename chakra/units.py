"""Human-readable quantities shared by library messages and the CLI."""

from __future__ import annotations

from typing import Optional


def fmt_bytes(n: Optional[float]) -> str:
    """`1536` -> `1.5 KiB`; None -> `-`."""
    if n is None:
        return "-"
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"

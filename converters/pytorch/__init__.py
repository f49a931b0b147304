"""PyTorch Execution Trace (+ Kineto) -> Chakra: every ET schema, real comm nodes, correct dependencies.

Library use::

    from chakra.converters.pytorch import convert_files, convert_rank, Options
    summaries = convert_files([Path("et.0.json")], [Path("kineto.0.json")], Path("out/mlp"))

Module map: `et` (ET loading, versions), `kineto_trace` (Kineto loading), `link` (ET<->Kineto,
GPU launchers), `comms` + `commmap` (collectives and p2p), `roofline`, `dag` (timeline and
dependencies), `emit` (protobuf nodes), `convert` (per-rank + multi-rank driver), `summary`, `cli`.
"""

from __future__ import annotations

from pathlib import Path

from .cli import add_cli
from .convert import Options, convert_files, convert_rank, gather_inputs
from .et import is_tar, sniff_et_head

NAME = "pytorch"
DESCRIPTION = "PyTorch Execution Trace JSON (1.0.1 ... 1.1.1-chakra.1.0.0), optionally with its Kineto trace"


def _head(path: Path, n: int = 65536) -> bytes:
    import gzip
    import io
    import tarfile
    import zlib

    with open(path, "rb") as f:
        raw = f.read(n)
    if raw[:2] == b"\x1f\x8b":
        try:
            with gzip.open(path, "rb") as g:
                raw = g.read(n)
        except (OSError, EOFError, zlib.error):  # un-gzip reading point (sniffing: unreadable = not ours)
            return b""
        if is_tar(raw):
            try:
                with tarfile.open(path, "r:gz") as tar:
                    for m in tar:
                        base = m.name.rsplit("/", 1)[-1]
                        if m.isfile() and base.endswith(".json") and not base.startswith("._"):
                            f2 = tar.extractfile(m)
                            return f2.read(n) if f2 else b""
            except (tarfile.TarError, OSError, EOFError, zlib.error):
                return b""
            return b""
    _ = io  # keep import local and explicit
    return raw


def sniff(path: Path) -> bool:
    """An ET: a JSON object that starts with its 'schema' key and holds 'nodes'."""
    return sniff_et_head(_head(Path(path)))


def convert_paths(inputs: list[Path], prefix: Path, *, quiet: bool = False) -> list[Path]:
    """Default conversion (Kineto files among the inputs are paired with the ETs by rank)."""
    return [Path(s["output"]) for s in convert_files(inputs, [], prefix)]


__all__ = ["NAME", "DESCRIPTION", "sniff", "convert_paths", "add_cli", "convert_files", "convert_rank", "Options",
           "gather_inputs"]  # fmt: skip

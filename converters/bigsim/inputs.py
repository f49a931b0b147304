"""Turn what the user names (a folder, `bgTrace*` files, detail dumps) into a BigSimLog."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Optional

from chakra.converters.bigsim.binary import SUMMARY_NAME, find_summary, is_bigsim_binary, read_binary_logs, read_summary
from chakra.converters.bigsim.detail import detail_proc_key, looks_like_detail, read_detail_logs
from chakra.converters.bigsim.model import BigSimLog
from chakra.errors import InputError


def detail_files_in(directory: Path) -> list[Path]:
    return sorted(p for p in Path(directory).iterdir() if p.is_file() and detail_proc_key(p) and looks_like_detail(p))


def load_logs(
    inputs: Sequence[Path], *, prefer_detail: bool = False, workers_per_node: Optional[int] = None
) -> BigSimLog:
    """Read the log set the inputs name.

    * a folder with a `bgTrace` summary: the binary logs (or, with `prefer_detail`, the detail
      dumps in it, still using the summary for the machine shape);
    * a folder of detail dumps only, or detail dump files: the dumps (a `bgTrace` beside them
      gives the machine shape; else `workers_per_node`, else it is inferred from the messages);
    * `bgTrace` / `bgTrace<k>` files: the binary logs of their folder.
    """
    if not inputs:
        raise InputError("no BigSim input given")
    binary_dirs: set[Path] = set()
    details: list[Path] = []
    for raw in inputs:
        path = Path(raw)
        if not path.exists():
            raise InputError(f"{path}: no such file or folder")
        if path.is_dir():
            found = detail_files_in(path)
            if find_summary(path) is not None and not (prefer_detail and found):
                binary_dirs.add(path.resolve())
            elif found:
                details.extend(found)
            else:
                raise InputError(f"{path}: no {SUMMARY_NAME} summary and no detail dumps (<name>-x-y-z.t.log) in it")
        elif is_bigsim_binary(path):
            binary_dirs.add(path.resolve().parent)
        elif detail_proc_key(path) and looks_like_detail(path):
            details.append(path)
        else:
            raise InputError(f"{path}: neither a BigSim bgTrace log nor a detail dump")
    if binary_dirs and details:
        raise InputError("give either binary bgTrace logs or detail dumps, not both (use --detail to pick the dumps)")
    if len(binary_dirs) > 1:
        raise InputError(f"binary logs from {len(binary_dirs)} folders; convert one log set at a time")
    if binary_dirs:
        log = read_binary_logs(binary_dirs.pop())
        if workers_per_node is not None and workers_per_node != log.num_wth:
            raise InputError(f"--workers-per-node {workers_per_node} contradicts the bgTrace summary ({log.num_wth})")
        return log
    folders = {p.resolve().parent for p in details}
    summary = None
    if len(folders) == 1:
        summary_path = find_summary(folders.pop())
        if summary_path is not None:
            summary = read_summary(summary_path)
    if workers_per_node is not None:
        if workers_per_node <= 0:
            raise InputError("--workers-per-node must be positive")
        if summary is not None and summary.num_wth != workers_per_node:
            raise InputError(
                f"--workers-per-node {workers_per_node} contradicts the bgTrace summary ({summary.num_wth})"
            )
    return read_detail_logs(details, summary=summary, num_wth=workers_per_node)


def sniff(path: Path) -> bool:
    """A folder holding a bgTrace summary or detail dumps, a bgTrace* file, or a detail dump."""
    path = Path(path)
    if path.is_dir():
        summary = find_summary(path)
        if summary is not None and is_bigsim_binary(summary):
            return True
        return any(detail_proc_key(p) and looks_like_detail(p) for p in list(path.iterdir())[:64])
    return is_bigsim_binary(path) or bool(detail_proc_key(path) and looks_like_detail(path))

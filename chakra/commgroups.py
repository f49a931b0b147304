"""Process groups of a trace: `PREFIX.comm_groups.json` beside the rank files, METADATA nodes.

A collective names its process group by `pg_name`. The members live in one of two places:

- `PREFIX.comm_groups.json`, ASTRA-sim's `--comm-group-configuration` file: `{"<id>": [ranks]}`,
  ids are integers > 0 (ASTRA-sim `stoi`s the key and reserves 0 for "all ranks"). Every writer
  of this project puts its groups there, because ASTRA-sim aborts on METADATA nodes.
- a PyTorch `process_group:init` METADATA node, whose `inputs.values` holds the process-group list
  (`[{"pg_name": "1", "ranks": [0, 1]}, ...]`, wrapped in a one-string list, sometimes encoded
  twice). Traces from PyTorch (and ours written with `--metadata-node`) carry it.

This module is the one place that finds, reads, writes and strips them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Optional, Union

import orjson

from chakra.configfile import load_mapping
from chakra.errors import ConfigError, excerpt
from chakra.schema import NodeType, pb

PathLike = Union[str, os.PathLike]
SUFFIX = ".comm_groups.json"
#: pg_names that mean "every rank" for ASTRA-sim (and so for us, unless a source defines them).
WORLD_NAMES = ("", "0")


def comm_groups_path(prefix: PathLike) -> Path:
    """`PREFIX.comm_groups.json`."""
    return Path(f"{os.fspath(prefix)}{SUFFIX}")


def prefix_of(path: PathLike) -> Optional[Path]:
    """The PREFIX of a rank file `PREFIX.<rank>.et` (also `.et.gz`, `.json`), else None."""
    from chakra.io import _RANK_RE

    p = Path(path)
    m = _RANK_RE.match(p.name)
    return p.with_name(m.group("prefix")) if m else None


def _prefixes(files: list[Path]) -> set[Optional[Path]]:
    """`prefix_of` of each file, as a set: the names matched as strings, one Path per prefix (a
    thousand rank files of one PREFIX make one)."""
    from chakra.io import _RANK_RE

    found: set[Optional[str]] = set()
    for p in files:
        head, sep, name = os.fspath(p).rpartition(os.sep)
        m = _RANK_RE.match(name)
        found.add(head + sep + m.group("prefix") if m else None)
    return {None if text is None else Path(text) for text in found}


def find_beside(args: Sequence[Any]) -> Optional[Path]:
    """The `PREFIX.comm_groups.json` of the traces named by CLI-style arguments (PREFIXes, rank
    files, or Traces read from rank files), when exactly one such file exists; None otherwise (no
    file, or traces built in memory)."""
    from chakra.errors import InputError
    from chakra.inputs import expand_traces

    found: set[Path] = set()
    for arg in args:
        if not isinstance(arg, (str, os.PathLike)):
            arg = getattr(arg, "path", None)  # a Trace read from a file
            if arg is None:
                return None
        try:  # a folder or a pattern: the PREFIXes of the rank files it names
            files = [p for _, p in expand_traces([arg])]
        except InputError:
            files = []
        for prefix in _prefixes(files) if files else {Path(arg)}:
            if prefix is None:
                continue
            cand = comm_groups_path(prefix)
            if cand.is_file():
                found.add(cand)
    return found.pop() if len(found) == 1 else None


def read_comm_groups(path: PathLike) -> dict[str, list[int]]:
    """ASTRA-sim's comm-group JSON `{"1": [0, 1, 2, 3], ...}` (ids > 0; 0 means all ranks)."""
    where = str(path)
    data = load_mapping(path, "comm-group config", json_only=True)
    groups: dict[str, list[int]] = {}
    for key, ranks in data.items():
        try:
            gid = int(key)
        except ValueError:
            raise ConfigError(f"{where}: group id {excerpt(key)} is not an integer") from None
        if gid <= 0:
            raise ConfigError(f"{where}: group id {key} must be > 0 (0 is reserved for all ranks)")
        if not isinstance(ranks, list) or not all(isinstance(r, int) and not isinstance(r, bool) for r in ranks):
            raise ConfigError(f"{where}: group {key}: expected a list of rank numbers")
        if len(set(ranks)) != len(ranks):
            raise ConfigError(f"{where}: group {key}: repeated rank")
        groups[str(gid)] = list(ranks)
    return groups


def groups_beside(args: Sequence[Any]) -> dict[str, list[int]]:
    """The groups in the comm_groups.json beside `args` (see `find_beside`), or {}."""
    path = find_beside(args)
    return read_comm_groups(path) if path is not None else {}


def file_groups(groups: dict[str, list[int]]) -> dict[str, list[int]]:
    """The entries ASTRA-sim's comm-group file may hold: integer ids > 0, sorted by id."""
    out = {}
    for name, ranks in groups.items():
        key = str(name)
        if key.isdigit() and int(key) > 0:
            out[str(int(key))] = list(ranks)
    return dict(sorted(out.items(), key=lambda kv: int(kv[0])))


def write_comm_groups(prefix: PathLike, groups: dict[str, list[int]]) -> Optional[Path]:
    """Write `PREFIX.comm_groups.json` (atomically) with the groups ASTRA-sim accepts in it.

    Groups that mean "all ranks" to ASTRA-sim ("" and "0") are left out. Nothing is written when no
    group is left, and a stale file from an earlier run is removed so it cannot be picked up."""
    from chakra.io import atomic_output

    path = comm_groups_path(prefix)
    entries = file_groups(groups)
    if not entries:
        path.unlink(missing_ok=True)
        return None
    with atomic_output(path) as f:
        f.write(orjson.dumps(entries, option=orjson.OPT_INDENT_2))
    return path


# ---------------------------------------------------------------------------------------------
# METADATA nodes


def _walk(obj: Any) -> Iterable[dict]:
    if isinstance(obj, dict):
        if "pg_name" in obj and "ranks" in obj:
            yield obj
        for v in obj.values():
            yield from _walk(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _walk(v)


def parse_pg_list(text: str) -> dict[str, list[int]]:
    """pg_name -> ranks from a `process_group:init` node's `inputs.values` (empty dict if none).

    Accepts the spellings seen in the wild: the JSON itself, wrapped in `['...']` (PyTorch's list
    of one string, what ASTRA-sim strips two characters from each end of), Python quotes, and JSON
    encoded twice. `"ranks": []` (PyTorch's default group) is kept as [] = all ranks."""
    text = text.strip()
    for candidate in (text, text[2:-2] if len(text) > 4 else ""):
        if not candidate:
            continue
        obj: Any = None
        for form in (candidate, candidate.replace('\\"', '"'), candidate.replace("'", '"')):
            try:
                obj = orjson.loads(form)
                break
            except orjson.JSONDecodeError:
                continue
        while isinstance(obj, (str, list)) and (isinstance(obj, str) or (len(obj) == 1 and isinstance(obj[0], str))):
            inner = obj if isinstance(obj, str) else obj[0]
            try:
                obj = orjson.loads(inner)
            except orjson.JSONDecodeError:
                obj = None
                break
        if obj is None:
            continue
        found = {}
        try:
            for pg in _walk(obj):
                ranks = pg.get("ranks")
                if isinstance(ranks, list) and all(isinstance(r, int) and not isinstance(r, bool) for r in ranks):
                    found[str(pg["pg_name"])[:200]] = list(ranks)  # a name, not a payload
        except RecursionError:  # absurdly nested text is not a process-group list either
            continue
        if found:
            return found
    return {}


def metadata_groups(nodes: Iterable[pb.Node]) -> dict[str, list[int]]:
    """Process groups from every METADATA node of one rank's nodes."""
    groups: dict[str, list[int]] = {}
    metadata = int(NodeType.METADATA_NODE)  # a plain int: this scans every node
    for n in nodes:
        if n.type == metadata and n.inputs.values:
            groups.update(parse_pg_list(n.inputs.values))
    return groups


def strip_metadata(nodes: list[pb.Node]) -> tuple[list[pb.Node], dict[str, list[int]], int]:
    """(nodes without METADATA nodes, the process groups those carried, how many were dropped).

    A node that depended on a dropped one inherits that node's own dependencies, so no ordering
    the METADATA node carried is lost and no dependency points at a missing id. The input nodes
    are not modified (a node whose dependencies change is copied)."""
    meta = {n.id: n for n in nodes if n.type == NodeType.METADATA_NODE}
    if not meta:
        return nodes, {}, 0
    groups = metadata_groups(meta.values())

    def expand(ids: Iterable[int], seen: set[int]) -> list[int]:
        out: list[int] = []
        for d in ids:
            m = meta.get(d)
            if m is None:
                out.append(d)
            elif d not in seen:
                seen.add(d)
                out.extend(expand([*m.data_deps, *m.ctrl_deps], seen))
        return out

    kept = []
    for n in nodes:
        if n.id in meta:
            continue
        if any(d in meta for d in n.data_deps) or any(d in meta for d in n.ctrl_deps):
            copy = pb.Node()
            copy.CopyFrom(n)
            for field in (copy.data_deps, copy.ctrl_deps):
                new = list(dict.fromkeys(expand(list(field), set())))
                del field[:]
                field.extend(new)
            n = copy
        kept.append(n)
    return kept, groups, len(meta)


def without_metadata(trace: Any) -> Any:
    """The `Trace` with its METADATA nodes dropped (see `strip_metadata`); the input is untouched."""
    from chakra.trace import Trace

    kept, _, dropped = strip_metadata(trace.nodes)
    if not dropped:
        return trace
    return Trace(metadata=trace.metadata, nodes=kept, rank=trace.rank, path=trace.path)

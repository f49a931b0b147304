"""Process groups: which ranks a collective's `pg_name` means.

Sources, in order: ASTRA-sim's comm-group JSON (`--comm-group`, `{"1": [0, 1, 2, 3]}`), then the
PyTorch process-group list a METADATA node carries in `inputs.values`
(`[{"pg_name": "0", "ranks": [0, 1]}, ...]`, possibly wrapped once more). `""` and `"0"` mean all
ranks unless a source defines them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Optional

from chakra.errors import ConfigError


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
    """Process groups from a METADATA node's `inputs.values` string (empty dict if none found)."""
    for candidate in (text, text[2:-2] if len(text) > 4 else ""):
        if not candidate:
            continue
        # RecursionError: absurdly nested text is not a process-group list either
        try:
            obj = json.loads(candidate)
        except (ValueError, RecursionError):
            try:
                obj = json.loads(candidate.replace("'", '"'))
            except (ValueError, RecursionError):
                continue
        if isinstance(obj, str):  # JSON encoded twice
            try:
                obj = json.loads(obj)
            except (ValueError, RecursionError):
                continue
        found = {}
        try:
            for pg in _walk(obj):
                ranks = pg.get("ranks")
                if isinstance(ranks, list) and all(type(r) is int for r in ranks):
                    found[str(pg["pg_name"])[:200]] = list(ranks)
        except RecursionError:
            continue
        if found:
            return found
    return {}


class GroupTable:
    """pg_name -> member tuple (in the listed order, which is the ring order)."""

    def __init__(self, num_ranks: int, comm_groups: Optional[dict[str, list[int]]] = None) -> None:
        self.num_ranks = num_ranks
        self.groups: dict[str, tuple[int, ...]] = {}
        self.source: dict[str, str] = {}
        for name, ranks in (comm_groups or {}).items():
            self._add(str(name), ranks, "comm-group file")

    def _add(self, name: str, ranks: list[int], source: str) -> None:
        if not ranks:  # PyTorch lists the default (world) group with "ranks": []
            ranks = list(range(self.num_ranks))
        bad = [r for r in ranks if not 0 <= r < self.num_ranks]
        if bad:
            raise ConfigError(f"{source}: group {name!r} names rank {bad[0]} but there are {self.num_ranks} ranks")
        members = tuple(ranks)
        old = self.groups.get(name)
        if old is not None and set(old) != set(members):
            raise ConfigError(
                f"{source}: process group {name!r} is {list(members)} but {self.source[name]} says {list(old)}"
            )
        if old is None:
            self.groups[name] = members
            self.source[name] = source

    def add_metadata(self, text: str, source: str) -> None:
        for name, ranks in parse_pg_list(text).items():
            if name in self.groups and self.source[name] == "comm-group file":
                continue
            self._add(name, ranks, source)

    def members(self, pg_name: Optional[str], where: str) -> tuple[int, ...]:
        key = "" if pg_name is None else str(pg_name)
        found = self.groups.get(key)
        if found is not None:
            return found
        if key in ("", "0"):
            return tuple(range(self.num_ranks))
        raise ConfigError(
            f"{where}: unknown process group pg_name={key!r} (define it with --comm-group or a METADATA node)"
        )

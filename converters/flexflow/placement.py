"""Which device runs each task, for task graphs that do not say (the upstream FlexFlow export).

A placement is a file or an inline spec of `KEY=DEVICES` entries:

* KEY is a DOT node name (`node12`), a task name (`conv1`), or `*` (every task not otherwise
  placed);
* DEVICES is one device (`3`), a list (`0,1,2,3`) or a range (`0-3`). A list given for a task name
  is dealt out in file order to the tasks carrying that name and type: FlexFlow names every
  partition of an op after the op, so `conv1=0-3` puts the 4 forward and the 4 backward tasks of a
  4-way data-parallel conv1 on devices 0..3.

Inline entries are separated by `;` (`conv1=0-3;fc=0;*=0`); a file has one entry per line
(`KEY=DEVICES`, `KEY: DEVICES` or `KEY DEVICES`, `#` comments) or is a JSON object
`{"conv1": [0, 1, 2, 3], "*": 0}`.

Unnamed tasks (FlexFlow's update and barrier tasks) not placed by node name follow their direct
compute neighbours when those agree on one device. Transfers (Comm tasks) are never placed: they
run from the device of their producer to the device of their consumer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import orjson

from chakra.converters.flexflow.taskgraph import TaskGraph
from chakra.errors import ConfigError

_RANGE = re.compile(r"^\s*(\d+)\s*-\s*(\d+)\s*$")


@dataclass
class Placement:
    source: str
    by_key: dict[str, list[int]] = field(default_factory=dict)
    default: Optional[list[int]] = None


#: longest device range a placement may spell out (far beyond any real job's devices per task)
_MAX_RANGE = 1 << 20


def _devices(value: object, where: str) -> list[int]:
    if isinstance(value, bool):
        raise ConfigError(f"{where}: device must be an integer, got {value!r}")
    if isinstance(value, int):
        items: list[object] = [value]
    elif isinstance(value, list):
        items = list(value)
    elif isinstance(value, str):
        items = []
        for part in value.split(","):
            part = part.strip()
            if not part:
                continue
            m = _RANGE.match(part)
            if m:
                lo, hi = int(m.group(1)), int(m.group(2))
                if hi < lo:
                    raise ConfigError(f"{where}: empty device range {part!r}")
                if hi - lo >= _MAX_RANGE:  # expanded below: a typo must not build a billion-entry list
                    raise ConfigError(f"{where}: device range {part!r} spans more than {_MAX_RANGE} devices")
                items.extend(range(lo, hi + 1))
            else:
                items.append(part)
    else:
        raise ConfigError(f"{where}: devices must be an integer, a list or a range, got {value!r}")
    out = []
    for item in items:
        try:
            dev = int(item) if not isinstance(item, bool) else -1  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise ConfigError(f"{where}: device {item!r} is not an integer") from None
        if dev < 0:
            raise ConfigError(f"{where}: device {item!r} must be a non-negative integer")
        out.append(dev)
    if not out:
        raise ConfigError(f"{where}: no device given")
    return out


def _add(p: Placement, key: str, value: object, where: str) -> None:
    key = key.strip()
    if not key:
        raise ConfigError(f"{where}: empty task name")
    devs = _devices(value, where)
    if key == "*":
        p.default = devs
    else:
        p.by_key[key] = devs


def _split_entry(entry: str, where: str) -> tuple[str, str]:
    for sep in ("=", ":"):
        if sep in entry:
            key, _, value = entry.rpartition(sep)
            return key, value
    parts = entry.rsplit(None, 1)
    if len(parts) != 2:
        raise ConfigError(f"{where}: expected KEY=DEVICES, got {entry!r}")
    return parts[0], parts[1]


def parse_placement(spec: str) -> Placement:
    """A placement from a file path or an inline `KEY=DEVICES;...` spec."""
    path = Path(spec)
    if path.is_file():
        text = path.read_text(encoding="utf-8", errors="replace")
        p = Placement(str(path))
        if text.lstrip().startswith("{"):
            try:
                data = orjson.loads(text)
            except orjson.JSONDecodeError as exc:
                raise ConfigError(f"{path}: not valid JSON: {exc}") from None
            if not isinstance(data, dict):
                raise ConfigError(f"{path}: a JSON placement is an object of task -> device(s)")
            for key, value in data.items():
                _add(p, key, value, f"{path} (entry {key!r})")
            return p
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw.split("#", 1)[0].strip()
            if line:
                where = f"{path} (line {number})"
                key, value = _split_entry(line, where)
                _add(p, key, value, where)
        return p
    p = Placement("--placement")
    entries = [e.strip() for e in re.split(r"[;\n]", spec) if e.strip()]
    if not entries:
        raise ConfigError("--placement: empty spec (give a file or KEY=DEVICES;...)")
    for entry in entries:
        if "=" not in entry:
            raise ConfigError(f"--placement: {entry!r} is neither an existing file nor a KEY=DEVICES entry")
        key, value = _split_entry(entry, "--placement")
        _add(p, key, value, f"--placement entry {entry!r}")
    return p


def assign_devices(tg: TaskGraph, placement: Placement) -> tuple[list[Optional[int]], list[str]]:
    """Device per task (None for transfers), and notes on how they were found."""
    tasks = tg.tasks
    devices: list[Optional[int]] = [None] * len(tasks)
    dealt: dict[tuple[str, str], int] = {}
    notes: list[str] = []
    used_keys: set[str] = set()
    node_keys = {t.key for t in tasks}
    for key, devs in placement.by_key.items():
        if key in node_keys and len(devs) != 1:
            raise ConfigError(f"{placement.source}: node {key} is one task; give it one device, not {devs}")

    def deal(devs: list[int], t_name: str, t_kind: str) -> int:
        k = (t_name, t_kind)
        i = dealt.get(k, 0)
        dealt[k] = i + 1
        return devs[i % len(devs)]

    for t in tasks:
        if t.is_comm:
            continue
        if t.key in placement.by_key:
            devices[t.index] = placement.by_key[t.key][0]
            used_keys.add(t.key)
        elif t.name and t.name in placement.by_key:
            devices[t.index] = deal(placement.by_key[t.name], t.name, t.kind)
            used_keys.add(t.name)

    # Unnamed tasks follow their compute neighbours (sweeps until nothing changes).
    changed = True
    while changed:
        changed = False
        for t in tasks:
            if t.is_comm or t.name or devices[t.index] is not None:
                continue
            for group in (t.preds, t.succs):
                around = {devices[i] for i in group if not tasks[i].is_comm and devices[i] is not None}
                if len(around) == 1:
                    devices[t.index] = around.pop()
                    changed = True
                    break

    missing = [t for t in tasks if not t.is_comm and devices[t.index] is None]
    if missing and placement.default is not None:
        for t in missing:
            devices[t.index] = deal(placement.default, t.name, t.kind)
        missing = []
    if missing:
        shown = ", ".join(f"{t.key} ({t.name or t.kind})" for t in missing[:5])
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise ConfigError(
            f"{placement.source}: no device for {len(missing)} task(s): {shown}{more}; "
            f"name them (NODE=DEV or NAME=DEVS) or add a default '*=DEV'"
        )
    unused = sorted(set(placement.by_key) - used_keys)
    if unused:
        notes.append(f"placement entries matching no task: {', '.join(unused[:10])}")
    return devices, notes

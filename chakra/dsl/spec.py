"""Declarative workloads: a YAML (data only) or Python (user code) file that describes a Workload.

YAML, read with `yaml.safe_load`, nothing in it is executed:

    ranks: 4
    name: demo
    device: {tflops: 100, mem_bw: 2000}      # optional roofline device for durations
    groups:                                   # optional process groups: name -> ranks
      left: [0, 1]
      right: [2, 3]
    ops:                                      # in program order; each item has one kind key
      - compute: {id: fwd, rank: all, name: forward, flops: 2e12, bytes: 4e9}
      - all_reduce: {id: ar, size: 64MiB, group: left, after: [fwd]}
      - send: {id: p, src: 1, dst: 2, size: 1MiB, after: [ar]}
      - compute: {rank: 2, name: consume, duration_us: 10, after: [p]}

`rank` is an int, a list of ints or `all`; sizes and byte counts take plain numbers or unit
strings (`64MiB`, `4KB`, `1e6`). `after` lists the `id`s of earlier ops.

Python: a file defining `build()` that returns a `chakra.dsl.Workload`. It is imported as a
module, i.e. it runs as the user's own code, exactly as `python FILE` would.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from typing import Any, Union

from chakra.configfile import load_config
from chakra.dsl.device import Device
from chakra.dsl.workload import DSLError, Ref, Workload, collective_type
from chakra.errors import ChakraError, InputError, excerpt
from chakra.files import STDIN, check_input, is_special

_UNITS = {
    "": 1,
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
    "k": 1000,
    "m": 1000**2,
    "g": 1000**3,
    "t": 1000**4,
}
_QUANTITY = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*$")

COLLECTIVE_KINDS = (
    "all_reduce",
    "reduce",
    "all_gather",
    "gather",
    "scatter",
    "broadcast",
    "all_to_all",
    "reduce_scatter",
    "reduce_scatter_block",
    "barrier",
)
_KEYS = {
    "compute": {"id", "rank", "name", "duration_us", "flops", "bytes", "after", "cpu"},
    "load": {"id", "rank", "name", "bytes", "after", "duration_us", "location"},
    "store": {"id", "rank", "name", "bytes", "after", "duration_us", "location"},
    "send": {"id", "src", "dst", "size", "tag", "name", "after", "duration_us"},
    **{
        k: {"id", "size", "group", "name", "after", "duration_us", "root", "involved_dim", "priority"}
        for k in COLLECTIVE_KINDS
    },
    "collective": {"id", "type", "size", "group", "name", "after", "duration_us", "root", "involved_dim", "priority"},
}


def parse_quantity(value: Any, what: str = "value") -> float:
    """A number, or a string like "64MiB", "4KB", "1.5e9", "2G" (decimal k/M/G, binary KiB/MiB/GiB)."""
    if isinstance(value, bool):
        raise DSLError(f"{what}: expected a number, got {excerpt(value)}")
    if isinstance(value, (int, float)):
        if value < 0:
            raise DSLError(f"{what}: must be >= 0, got {value}")
        return value
    if isinstance(value, str):
        m = _QUANTITY.match(value)
        if m and m.group(2).lower() in _UNITS:
            return float(m.group(1)) * _UNITS[m.group(2).lower()]
    raise DSLError(f"{what}: cannot read {excerpt(value)} as a size (try 1024, 4KiB, 64MiB, 1e9)")


def load_spec(path: Union[str, Path]) -> Workload:
    """Build the Workload a `.yaml`/`.yml`/`.json` or `.py` spec file describes; `-`: a YAML or
    JSON spec on standard input, as every config option reads it."""
    if str(path) == STDIN:
        return build_from_dict(load_config(STDIN, "spec", error=DSLError), "<stdin>")
    path = Path(path)
    if is_special(path):
        check_input(path, "spec file")
    if not path.is_file():
        raise InputError(f"{path}: no such spec file")
    if path.suffix == ".py":
        return _load_python(path)
    if path.suffix.lower() in (".yaml", ".yml", ".json"):
        data = load_config(path, "spec", error=DSLError)
        return build_from_dict(data, str(path))
    raise InputError(f"{path}: a spec is a .yaml, .yml, .json or .py file")


def _load_python(path: Path) -> Workload:
    name = f"_chakra_spec_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise InputError(f"{path}: cannot import as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    # Like `python FILE`: the spec's own folder is importable (for helpers next to it).
    folder = str(path.resolve().parent)
    sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
        build = getattr(module, "build", None)
        if not callable(build):
            raise DSLError(f"{path}: a Python spec must define build() returning a chakra.dsl.Workload")
        workload = build()
    except ChakraError:
        raise
    except Exception as exc:  # the user's own code failed: one line, full traceback with --debug
        raise DSLError(f"{path}: {type(exc).__name__}: {exc} (run with --debug for the traceback)") from exc
    finally:
        sys.modules.pop(name, None)
        if folder in sys.path:
            sys.path.remove(folder)
    if not isinstance(workload, Workload):
        raise DSLError(f"{path}: build() returned {type(workload).__name__}, expected a chakra.dsl.Workload")
    return workload


def build_from_dict(data: Any, source: str = "<spec>") -> Workload:
    """A Workload from the parsed YAML structure (see the module docstring)."""
    if not isinstance(data, dict):
        raise DSLError(f"{source}: the top level must be a mapping with ranks: and ops:")
    unknown = set(data) - {"ranks", "name", "device", "groups", "ops"}
    if unknown:
        raise DSLError(f"{source}: unknown top-level key(s) {sorted(unknown)}")
    ranks = data.get("ranks")
    if isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 1:
        raise DSLError(f"{source}: ranks: must be a positive integer, got {excerpt(ranks)}")
    device = None
    if data.get("device") is not None:
        dev = data["device"]
        if not isinstance(dev, dict) or set(dev) - {"tflops", "mem_bw"}:
            raise DSLError(f"{source}: device: takes tflops: and mem_bw:")
        try:
            device = Device(**{k: float(v) for k, v in dev.items()})
        except (TypeError, ValueError) as exc:
            raise DSLError(f"{source}: device: {exc}") from None
    w = Workload(ranks, device=device, name=str(data.get("name") or Path(source).stem))
    groups = data.get("groups") or {}
    if not isinstance(groups, dict):
        raise DSLError(f"{source}: groups: must map names to rank lists")
    for gname, members in groups.items():
        if not isinstance(members, list):
            raise DSLError(f"{source}: groups.{gname}: must be a list of ranks")
        try:
            w.group(members, str(gname))
        except DSLError as exc:
            raise DSLError(f"{source}: groups.{gname}: {exc}") from None
    ops = data.get("ops") or []
    if not isinstance(ops, list):
        raise DSLError(f"{source}: ops: must be a list")
    refs: dict[str, Ref] = {}
    for i, item in enumerate(ops):
        if not isinstance(item, dict) or len(item) != 1:
            raise DSLError(f"{source}: ops[{i}]: each op is a mapping with exactly one kind key (e.g. compute:)")
        ((kind, args),) = item.items()
        where = f"{source}: ops[{i}] ({kind})"
        if kind not in _KEYS:
            raise DSLError(f"{where}: unknown op kind; use one of {', '.join(sorted(_KEYS))}")
        args = dict(args or {})
        bad = set(args) - _KEYS[kind]
        if bad:
            raise DSLError(f"{where}: unknown key(s) {sorted(bad)}; allowed: {sorted(_KEYS[kind])}")
        try:
            ref = _apply(w, kind, args, refs, where)
        except DSLError as exc:
            msg = str(exc)
            raise DSLError(msg if msg.startswith(source) else f"{where}: {msg}") from None
        op_id = args.get("id")
        if op_id is not None:
            if str(op_id) in refs:
                raise DSLError(f"{where}: id {excerpt(op_id)} is used twice")
            refs[str(op_id)] = ref
    return w


def _ranks(w: Workload, value: Any, where: str) -> Any:
    if value == "all":
        return w.all_ranks
    if isinstance(value, list) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise DSLError(f"rank: must be an int, a list of ints or 'all', got {excerpt(value)}")


def _after(args: dict, refs: dict[str, Ref]) -> Any:
    after = args.get("after")
    if after is None:
        return None
    if not isinstance(after, list):
        after = [after]
    out = []
    for name in after:
        if str(name) not in refs:
            raise DSLError(f"after: no earlier op with id {excerpt(name)}")
        out.append(refs[str(name)])
    return out


def _apply(w: Workload, kind: str, a: dict, refs: dict[str, Ref], where: str) -> Ref:
    after = _after(a, refs)
    if kind == "compute":
        if "rank" not in a or "name" not in a:
            raise DSLError("compute needs rank: and name:")
        return w.compute(
            _ranks(w, a["rank"], where),
            str(a["name"]),
            duration_us=a.get("duration_us"),
            flops=parse_quantity(a.get("flops", 0), "flops"),
            bytes=parse_quantity(a.get("bytes", 0), "bytes"),
            after=after,
            cpu=bool(a.get("cpu", False)),
        )
    if kind in ("load", "store"):
        if "rank" not in a or "bytes" not in a:
            raise DSLError(f"{kind} needs rank: and bytes:")
        fn = w.load if kind == "load" else w.store
        return fn(
            _ranks(w, a["rank"], where),
            str(a.get("name", kind)),
            parse_quantity(a["bytes"], "bytes"),
            after=after,
            duration_us=a.get("duration_us"),
            location=str(a.get("location", "local")),
        )
    if kind == "send":
        for key in ("src", "dst", "size"):
            if key not in a:
                raise DSLError(f"send needs src:, dst: and size: (missing {key})")
        return w.send(
            a["src"],
            a["dst"],
            parse_quantity(a["size"], "size"),
            tag=a.get("tag"),
            name=a.get("name"),
            after=after,
            duration_us=a.get("duration_us"),
        )
    ctype = collective_type(a.get("type") if kind == "collective" else kind)
    size = 0 if kind == "barrier" else parse_quantity(a.get("size", 0), "size")
    if kind not in ("barrier",) and "size" not in a:
        raise DSLError(f"{kind} needs size:")
    group = a.get("group")
    return w.collective(
        ctype,
        size,
        group=str(group) if isinstance(group, str) else group,
        name=a.get("name"),
        after=after,
        duration_us=a.get("duration_us"),
        root=a.get("root"),
        involved_dim=a.get("involved_dim"),
        priority=a.get("priority"),
    )

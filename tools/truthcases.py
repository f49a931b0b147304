"""ASTRA-sim truth cases: compact case specs and the code that turns one into traces and configs.

A case spec is plain JSON, stored with ASTRA-sim's recorded result under
`tests/data/astrasim_truth/<class>.json` (written by `tools/astrasim_truth.py`). Everything the
real binaries read is rebuilt from the spec by this module, so the parity tests feed our simulator
exactly the traces and configs ASTRA-sim ran.

Spec keys:

- `name`: unique id; `cls`: feature class; `backend`: "aware" | "unaware" (congestion model);
- `network`: `{topology, npus_count, bandwidth, latency}` (analytical YAML, lists per dim);
- `system`: overrides of `BASE_SYSTEM` (ASTRA-sim's regression system config);
- `custom`: `{collective: algorithm}` custom collective algorithms (`*-implementation-custom`),
  each `{"algorithm": name, "ranks", "size", "reduce_us"?, "dims"?}` for `chakra.dsl.collectives.generate`
  or `{"describe": {...}}` (the YAML description as a mapping) or `{"sample": path}` (files
  PATH.<rank>.et under tests/data/samples); written beside the configs and
  named by absolute path in the system JSON;
- `memory`: remote-memory JSON (default NO_MEMORY_EXPANSION); `groups`: comm-group JSON or absent;
- `options`: extra command-line options of the binaries (`injection-scale`, `comm-scale`,
  `num-queues-per-dim`, `rendezvous-protocol`);
- `nodes`: one entry per node id, the same id on every rank that has it:
  - `{"id", "op": "comp", "us": int | [per rank]}` COMP_NODE of `us` microseconds (GPU op);
  - `{"id", "op": "coll", "coll": "ALL_REDUCE", "size": bytes, "involved_dim"?: [bool],
    "pg"?: "1", "us"?: int}` COMM_COLL_NODE;
  - `{"id", "op": "send" | "recv", "pairs": [[src, dst], ...], "size", "tag"}`: the send exists
    on each `src`, the receive on each `dst` (a rank may appear in one pair per node);
  - `{"id", "op": "load" | "store", "size": bytes, "loc"?: "local" | "remote"}` MEM node;
  - `{"id", "op": "meta"}`: PyTorch's `process_group:init` METADATA node;
  - common: `"ranks"`: the ranks holding the node (default all), `"deps"` data deps and
    `"ctrl"` ctrl deps (ids; a dep on an id the rank lacks is dropped unless `"keep_missing"`),
    `"name"`.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Optional

from chakra.io import write_rank_traces
from chakra.schema import CollectiveType, NodeType
from chakra.trace import Trace, make_metadata, make_node

#: ASTRA-sim's regression system config (tests/rt_template), the base every case overrides.
BASE_SYSTEM: dict[str, Any] = {
    "scheduling-policy": "LIFO",
    "endpoint-delay": 10,
    "active-chunks-per-dimension": 1,
    "preferred-dataset-splits": 4,
    "all-reduce-implementation": ["ring"],
    "all-gather-implementation": ["ring"],
    "reduce-scatter-implementation": ["ring"],
    "all-to-all-implementation": ["ring"],
    "collective-optimization": "localBWAware",
    "local-mem-bw": 50,
    "boost-mode": 0,
}
NO_MEMORY: dict[str, Any] = {"memory-type": "NO_MEMORY_EXPANSION"}
IMPL_KEYS = (
    "all-reduce-implementation",
    "all-gather-implementation",
    "reduce-scatter-implementation",
    "all-to-all-implementation",
)


def num_npus(spec: Mapping[str, Any]) -> int:
    return math.prod(int(x) for x in spec["network"]["npus_count"])


def system_json(spec: Mapping[str, Any]) -> dict[str, Any]:
    data = dict(BASE_SYSTEM)
    data.update(spec.get("system") or {})
    return data


def memory_json(spec: Mapping[str, Any]) -> dict[str, Any]:
    return dict(spec.get("memory") or NO_MEMORY)


def network_yaml(spec: Mapping[str, Any]) -> str:
    net = spec["network"]

    def row(key: str) -> str:
        return f"{key}: [ {', '.join(str(v) for v in net[key])} ]\n"

    return "".join(row(k) for k in ("topology", "npus_count", "bandwidth", "latency"))


def _per_rank(value: Any, rank: int) -> Any:
    return value[rank] if isinstance(value, list) else value


def node_ranks(entry: Mapping[str, Any], n: int) -> list[int]:
    op = entry["op"]
    if op == "send":
        return [int(p[0]) for p in entry["pairs"]]
    if op == "recv":
        return [int(p[1]) for p in entry["pairs"]]
    return list(entry.get("ranks", range(n)))


def _pair_of(entry: Mapping[str, Any], rank: int) -> tuple[int, int]:
    side = 0 if entry["op"] == "send" else 1
    for p in entry["pairs"]:
        if int(p[side]) == rank:
            return int(p[0]), int(p[1])
    raise KeyError(rank)


def _build_node(entry: Mapping[str, Any], rank: int, present: set[int]) -> Any:
    op = entry["op"]
    nid = int(entry["id"])
    keep = bool(entry.get("keep_missing"))
    deps = [d for d in entry.get("deps", ()) if keep or d in present]
    ctrl = [d for d in entry.get("ctrl", ()) if keep or d in present]
    name = entry.get("name") or f"{op}_{nid}"
    common: dict[str, Any] = {"data_deps": deps, "ctrl_deps": ctrl}
    if op == "comp":
        return make_node(
            nid,
            name,
            NodeType.COMP_NODE,
            duration_micros=int(_per_rank(entry["us"], rank)),
            attrs={"is_cpu_op": False},
            **common,
        )
    if op == "coll":
        attrs: dict[str, Any] = {
            "is_cpu_op": False,
            "comm_type": int(CollectiveType[entry["coll"]]),
            "comm_size": int(_per_rank(entry["size"], rank)),
        }
        if "involved_dim" in entry:
            attrs["involved_dim"] = [bool(b) for b in entry["involved_dim"]]
        if "pg" in entry:
            attrs["pg_name"] = str(_per_rank(entry["pg"], rank))
        return make_node(
            nid,
            name,
            NodeType.COMM_COLL_NODE,
            duration_micros=int(entry.get("us", 0)),
            attrs=attrs,
            **common,
        )
    if op in ("send", "recv"):
        src, dst = _pair_of(entry, rank)
        ntype = NodeType.COMM_SEND_NODE if op == "send" else NodeType.COMM_RECV_NODE
        attrs = {
            "is_cpu_op": False,
            "comm_src": src,
            "comm_dst": dst,
            "comm_size": int(_per_rank(entry["size"], rank)),
            "comm_tag": int(entry.get("tag", 0)),
        }
        return make_node(nid, name, ntype, attrs=attrs, **common)
    if op in ("load", "store"):
        ntype = NodeType.MEM_LOAD_NODE if op == "load" else NodeType.MEM_STORE_NODE
        attrs = {"is_cpu_op": False, "tensor_size": int(_per_rank(entry["size"], rank))}
        if "loc" in entry:
            attrs["tensor_loc"] = str(entry["loc"])
        return make_node(nid, name, ntype, attrs=attrs, **common)
    if op == "meta":
        node = make_node(nid, "process_group:init", NodeType.METADATA_NODE, attrs={"is_cpu_op": False}, **common)
        node.inputs.values = "['[]']"
        node.inputs.types = "['String']"
        node.inputs.shapes = "[[]]"
        return node
    raise ValueError(f"unknown op {op!r} in case node {nid}")


def build_traces(spec: Mapping[str, Any]) -> list[Trace]:
    """One Trace per NPU of the case's network, nodes in spec order."""
    n = num_npus(spec)
    per_rank: list[list[Mapping[str, Any]]] = [[] for _ in range(n)]
    for entry in spec["nodes"]:
        for r in node_ranks(entry, n):
            per_rank[r].append(entry)
    out = []
    for rank in range(n):
        present = {int(e["id"]) for e in per_rank[rank]}
        nodes = [_build_node(e, rank, present) for e in per_rank[rank]]
        out.append(Trace(metadata=make_metadata(), nodes=nodes, rank=rank))
    return out


def write_custom(spec: Mapping[str, Any], folder: Path) -> dict[str, str]:
    """Write the case's custom collective algorithms under `folder`; the system JSON keys naming them."""
    from chakra.dsl.collectives import from_description, generate

    keys = {}
    for coll, how in sorted((spec.get("custom") or {}).items()):
        prefix = folder.resolve() / "algorithms" / coll
        if "sample" in how:  # files shipped under tests/data/samples: used as they are
            src = Path(__file__).resolve().parent.parent / "tests" / "data" / "samples" / how["sample"]
            for i, f in enumerate(sorted(src.parent.glob(src.name + ".*.et"))):
                prefix.parent.mkdir(parents=True, exist_ok=True)
                (prefix.parent / f"{coll}.{i}.et").write_bytes(f.read_bytes())
            keys[f"{coll}-implementation-custom"] = [str(prefix)]
            continue
        if "describe" in how:
            desc = folder / f"{coll}.describe.json"
            desc.write_text(json.dumps(how["describe"]))
            alg = from_description(desc)
        else:
            dims = tuple(how["dims"]) if how.get("dims") else None
            alg = generate(
                how["algorithm"], int(how["ranks"]), coll, int(how["size"]), int(how.get("reduce_us", 0)), dims
            )
        alg.save(prefix)
        keys[f"{coll}-implementation-custom"] = [str(prefix)]
    return keys


def write_configs(spec: Mapping[str, Any], folder: Path) -> dict[str, Path]:
    """Write the case's network, system, memory (and comm-group) files under `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {
        "network": folder / "network.yml",
        "system": folder / "system.json",
        "memory": folder / "memory.json",
    }
    paths["network"].write_text(network_yaml(spec))
    paths["system"].write_text(json.dumps({**system_json(spec), **write_custom(spec, folder)}, indent=1))
    paths["memory"].write_text(json.dumps(memory_json(spec), indent=1))
    if spec.get("groups"):
        paths["groups"] = folder / "groups.json"
        paths["groups"].write_text(json.dumps(spec["groups"]))
    return paths


def write_case(spec: Mapping[str, Any], folder: Path) -> dict[str, Path]:
    """Write the case's traces (`folder/trace.<rank>.et`) and configs; returns the paths by role."""
    paths = write_configs(spec, folder)
    paths["workload"] = folder / "trace"
    write_rank_traces(paths["workload"], build_traces(spec))
    return paths


def binary_args(spec: Mapping[str, Any], paths: Mapping[str, Path], log_dir: Optional[Path] = None) -> list[str]:
    """The binaries' command-line options for a written case (binary path not included)."""
    args = [
        f"--workload-configuration={paths['workload']}",
        f"--system-configuration={paths['system']}",
        f"--network-configuration={paths['network']}",
        f"--remote-memory-configuration={paths['memory']}",
    ]
    if "groups" in paths:
        args.append(f"--comm-group-configuration={paths['groups']}")
    for key, value in sorted((spec.get("options") or {}).items()):
        text = str(value).lower() if isinstance(value, bool) else str(value)
        args.append(f"--{key}={text}")
    if log_dir is not None:
        args.append(f"--logging-folder={log_dir}")
    return args


BINARY_NAMES = {
    "aware": "AstraSim_Analytical_Congestion_Aware",
    "unaware": "AstraSim_Analytical_Congestion_Unaware",
}
#: ASTRA-sim's per-rank result line (1 cycle = 1 ns); a rank that never finishes prints none.
FINISHED = re.compile(r"sys\[(\d+)\] finished, (\d+) cycles")


def find_binaries(explicit: Optional[str] = None) -> Optional[Path]:
    """The folder holding both analytical binaries: `explicit`, else $ASTRA_SIM_BIN, else
    ../shared/tools/astra-sim/bin beside a checkout of the repository; None when none has them
    (the binaries are an optional extra: callers skip or say so)."""
    beside_checkout = Path(__file__).resolve().parents[1].parent / "shared" / "tools" / "astra-sim" / "bin"
    for cand in (explicit, os.environ.get("ASTRA_SIM_BIN"), str(beside_checkout)):
        if cand and all((Path(cand) / name).is_file() for name in BINARY_NAMES.values()):
            return Path(cand)
    return None


def finish_cycles(output: str) -> dict[int, int]:
    """{rank: finish ns} from an ASTRA-sim run's output (ranks that never finished are absent)."""
    return {int(r): int(c) for r, c in FINISHED.findall(output)}


#: The binaries' command-line options as `chakra simulate` spells them.
CLI_OPTIONS = {
    "num-queues-per-dim": "--num-queues-per-dim",
    "rendezvous-protocol": "--rendezvous-protocol",
    "injection-scale": "--injection-scale",
    "comm-scale": "--comm-scale",
}


def simulate_args(spec: Mapping[str, Any], paths: Mapping[str, Path]) -> list[str]:
    """`chakra simulate` arguments for a written case: the files and options ASTRA-sim ran with."""
    args = ["simulate", str(paths["workload"]), "--network", str(paths["network"]), "--system", str(paths["system"])]
    args += ["--memory", str(paths["memory"]), "--congestion", spec["backend"]]
    if "groups" in paths:
        args += ["--comm-group", str(paths["groups"])]
    for key, value in (spec.get("options") or {}).items():
        if isinstance(value, bool):
            args += [CLI_OPTIONS[key]] if value else []
        else:
            args += [CLI_OPTIONS[key], str(value)]
    return args

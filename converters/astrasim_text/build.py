"""ASTRA-sim 1.0 text workloads -> Chakra: building one trace per NPU, P training passes each.

The workload is parsed by `parse.py` (format described there).

Why not copy the official converter: it rejects three of ASTRA-sim 1.0's keywords, turns `NONE`
into a size-0 all-reduce (which ASTRA-sim then inflates), drops `involved_dim`, keeps counting
node ids across rank files and gets some waits wrong. The graph here follows ASTRA-sim 1.0's own
training loops (`Workload::iterate_*`), read as one sequential thread per NPU:

* each compute waits for the thread's previous step (the "cursor");
* a blocking collective moves the cursor to itself; a non-blocking one only records itself
  for the explicit waits the loop performs later (`is_*_comm_finished_blocking`);
* the forward pass of layer i waits for layer i's weight-gradient collective of the previous pass.

A collective exists only when its type is not NONE and the dimensions the parallelism gives it
(ASTRA-sim's `decode_involved_dimensions`) span more than one NPU; that is why DATA ignores the
forward/input-gradient columns and MODEL the weight-gradient one. Compute with 0 time is left out
(ASTRA-sim 1.0 does not wait for it). Dimensions become `involved_dim` (bool_list over the logical
network dimensions) and, for collectives over a subgroup, a numeric `pg_name` whose members are
written to `PREFIX.comm_groups.json` (ASTRA-sim's `--comm-group-configuration` format).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import orjson

from chakra.converters.astrasim_text.parse import NONE, Workload, parse_text
from chakra.converters.result import DEFAULT_MAX_RANKS
from chakra.errors import InputError, TraceFormatError
from chakra.io import TraceWriter, atomic_output, output_set, rank_path
from chakra.schema import CollectiveType, NodeType, pb
from chakra.schema.attrs import set_attr
from chakra.trace import Trace, make_metadata, make_node

#: Text comm type -> Chakra collective. ALLREDUCEALLTOALL is ASTRA-sim 1.0's all-reduce done with
#: all-to-all phases: the result is an all-reduce, so it is written as one (name kept in an attr).
COLLECTIVES = {
    "ALLREDUCE": CollectiveType.ALL_REDUCE,
    "ALLGATHER": CollectiveType.ALL_GATHER,
    "ALLTOALL": CollectiveType.ALL_TO_ALL,
    "REDUCESCATTER": CollectiveType.REDUCE_SCATTER,
    "ALLREDUCEALLTOALL": CollectiveType.ALL_REDUCE,
}
DEFAULT_MAX_NPUS = DEFAULT_MAX_RANKS

# ---------------------------------------------------------------------------------------------
# Dimensions and process groups


@dataclass
class Topology:
    """Logical network dimensions (dim 0 varies fastest in the rank number, as in ASTRA-sim)."""

    dims: list[int]

    @property
    def npus(self) -> int:
        n = 1
        for d in self.dims:
            n *= d
        return n

    def coords(self, rank: int) -> list[int]:
        out = []
        for d in self.dims:
            out.append(rank % d)
            rank //= d
        return out

    def span(self, mask: Sequence[bool]) -> int:
        """Number of NPUs in a group spanning the masked dimensions."""
        n = 1
        for d, on in zip(self.dims, mask):
            if on:
                n *= d
        return n


def break_dimension(dims: list[int], group: int, path: Path) -> tuple[list[int], int]:
    """ASTRA-sim's `Sys::break_dimension`: (logical dims, last model dimension index, -1 if none).

    The model-parallel group covers the lowest dimensions; a dimension the group size ends inside
    is split in two, as ASTRA-sim does with its logical topologies.
    """
    if group == 1:
        return list(dims), -1
    prod = 1
    for i, d in enumerate(dims):
        if prod * d < group:
            prod *= d
            continue
        if prod * d == group:
            return list(dims), i
        inner = group // prod
        if group % prod or d % inner:
            raise InputError(f"{path}: model-parallel group {group} does not divide the network dimensions {dims}")
        return [*dims[:i], inner, d // inner, *dims[i + 1 :]], i
    raise InputError(f"{path}: model-parallel group {group} is larger than the {prod} NPUs of dimensions {dims}")


@dataclass
class Masks:
    fwd: tuple[bool, ...]
    ig: tuple[bool, ...]
    wg: tuple[bool, ...]


def policy_masks(policy: str, ndims: int, model_boundary: int) -> Masks:
    """ASTRA-sim's `decode_involved_dimensions` over `ndims` logical dimensions."""
    all_ = (True,) * ndims
    none = (False,) * ndims
    first = tuple(i == 0 for i in range(ndims))
    rest = tuple(i > 0 for i in range(ndims))
    if policy in ("DATA", "MICRO", "HYBRID_DLRM", "HYBRID_DLRM_ENHANCED"):
        return Masks(none, none, all_)
    if policy in ("MODEL", "DISTRIBUTED_INFERENCE"):
        return Masks(all_, all_, none)
    if policy == "HYBRID_DATA_MODEL":  # model on dimension 0, data on the others
        return Masks(first, first, rest)
    if policy == "HYBRID_MODEL_DATA":  # data on dimension 0, model on the others
        return Masks(rest, rest, first)
    if policy in ("HYBRID_TRANSFORMER", "HYBRID_TRANSFORMER_FWD_IN_BCKWD"):
        model = tuple(i <= model_boundary for i in range(ndims))
        return Masks(model, model, tuple(not m for m in model))
    if policy == "ALL":
        return Masks(all_, all_, all_)
    raise ValueError(policy)


class Groups:
    """Numbers the subgroups (ASTRA-sim comm-group ids start at 1; 0/'' is all ranks).

    Ids are assigned up front: masks in order of first use, then each mask's groups in order of
    their lowest rank, so the numbering does not depend on which rank is written first.
    """

    def __init__(self, topo: Topology, masks: Sequence[tuple[bool, ...]] = ()) -> None:
        self.topo = topo
        self.ids: dict[tuple, int] = {}
        self.members: dict[tuple, list[int]] = {}
        self._rank_key: dict[tuple[bool, ...], list[tuple]] = {}
        for mask in dict.fromkeys(masks):
            if topo.span(mask) in (1, topo.npus):
                continue
            keys = [self.key(mask, r) for r in range(topo.npus)]
            self._rank_key[mask] = keys
            for rank, key in enumerate(keys):
                if key not in self.ids:
                    self.ids[key] = len(self.ids) + 1
                    self.members[key] = []
                self.members[key].append(rank)

    def key(self, mask: tuple[bool, ...], rank: int) -> tuple:
        coords = self.topo.coords(rank)
        return (mask, tuple(c for c, on in zip(coords, mask) if not on))

    def pg_name(self, mask: tuple[bool, ...], rank: int) -> Optional[str]:
        """pg_name for `rank`'s group over `mask`, or None when the group is every rank."""
        keys = self._rank_key.get(mask)
        return None if keys is None else str(self.ids[keys[rank]])

    def as_json(self) -> dict[str, list[int]]:
        return {str(i): self.members[k] for k, i in self.ids.items()}


# ---------------------------------------------------------------------------------------------
# Graph construction (one template for every rank; only pg_name differs between ranks)


@dataclass
class _Coll:
    node: pb.Node
    mask: tuple[bool, ...]


class _Builder:
    """ASTRA-sim 1.0's sequential workload thread, recorded as a Chakra dependency graph."""

    def __init__(self, wl: Workload, topo: Topology, boundary: int) -> None:
        self.wl = wl
        self.topo = topo
        self.boundary = boundary
        self.nodes: list[pb.Node] = []
        self.colls: list[_Coll] = []
        self.cursor: list[int] = []
        self.prev_wg: dict[int, int] = {}  # layer -> its weight-gradient collective, last pass
        ndims = len(topo.dims)
        general = wl.keyword if wl.keyword != "HYBRID_CUSTOMIZED" else None
        self.masks: list[Masks] = []
        for i, layer in enumerate(wl.layers):
            if wl.keyword.startswith("HYBRID_DLRM") and i == 0:
                policy = "ALL"  # the embedding layer's all-to-all spans every dimension
            else:
                policy = layer.policy or general or "DATA"
            self.masks.append(policy_masks(policy, ndims, boundary))

    # -- primitives
    def _add(self, name: str, ntype: int, **kw) -> pb.Node:
        node = make_node(len(self.nodes), name, ntype, data_deps=sorted(set(self.cursor)), **kw)
        self.nodes.append(node)
        return node

    def compute(self, layer: int, phase: str, duration: int) -> None:
        if duration <= 0:
            return
        name = f"COMP_NODE_{self.wl.layers[layer].name}_{phase}"
        node = self._add(name, NodeType.COMP_NODE, duration_micros=duration, attrs={"is_cpu_op": False})
        self.cursor = [node.id]

    def issue(self, layer: int, phase: str, blocking: bool) -> Optional[int]:
        """Issue layer's fwd/ig/wg collective; returns its node id (None if it does not exist)."""
        lay = self.wl.layers[layer]
        ctype, size = {
            "FWD": (lay.fwd_type, lay.fwd_size),
            "IG": (lay.ig_type, lay.ig_size),
            "WG": (lay.wg_type, lay.wg_size),
        }[phase]
        mask = getattr(self.masks[layer], phase.lower())
        if ctype == NONE or self.topo.span(mask) <= 1:
            return None
        attrs = {
            "is_cpu_op": False,
            "comm_type": int(COLLECTIVES[ctype]),
            "comm_size": size,
            "involved_dim": list(mask),
        }
        if ctype == "ALLREDUCEALLTOALL":
            attrs["text_comm_type"] = ctype
        node = self._add(f"COMM_COLL_NODE_{lay.name}_{phase}_{ctype}", NodeType.COMM_COLL_NODE, attrs=attrs)
        self.colls.append(_Coll(node, mask))
        if blocking:
            self.cursor = [node.id]
        return node.id

    def wait(self, node_id: Optional[int]) -> None:
        if node_id is not None and node_id not in self.cursor:
            self.cursor = [*self.cursor, node_id]

    # -- phases shared by the loops
    def forward(self, i: int, comm: str) -> None:
        """Forward of layer i: wait for last pass's WG collective, compute, then the fwd comm."""
        self.wait(self.prev_wg.pop(i, None))
        self.compute(i, "FWD", self.wl.layers[i].fwd_comp)
        if comm == "blocking":
            self.issue(i, "FWD", blocking=True)

    # -- the training loops (Workload::iterate_*)
    def run(self, passes: int) -> None:
        """Run `passes` training passes; the cursor carries over from one pass to the next."""
        loop = {
            "MICRO": self._micro,
            "DATA": self._data,
            "MODEL": self._model,
            "HYBRID_DATA_MODEL": self._hybrid,
            "HYBRID_MODEL_DATA": self._hybrid,
            "HYBRID_CUSTOMIZED": self._hybrid,
            "HYBRID_TRANSFORMER": self._transformer,
            "HYBRID_TRANSFORMER_FWD_IN_BCKWD": self._transformer,
            "HYBRID_DLRM": self._dlrm,
            "HYBRID_DLRM_ENHANCED": self._dlrm,
            "DISTRIBUTED_INFERENCE": self._inference,
        }[self.wl.keyword]
        for _ in range(passes):
            loop()

    def _micro(self) -> None:
        # iterate_micro_benchmark: layer 0's WG collective once per pass, all issued at once.
        self.cursor = []
        self.issue(0, "WG", blocking=False)

    def _data(self) -> None:
        n = len(self.wl.layers)
        for i in range(n):
            self.forward(i, "none")
        for i in range(n - 1, -1, -1):
            self.compute(i, "BWD_WG", self.wl.layers[i].wg_comp)
            self.prev_wg[i] = self.issue(i, "WG", blocking=False)
            if i > 0:
                self.compute(i, "BWD_IG", self.wl.layers[i].ig_comp)

    def _model(self) -> None:
        n = len(self.wl.layers)
        for i in range(n):
            self.forward(i, "blocking")
        for i in range(n - 1, -1, -1):
            self.compute(i, "BWD_IG", self.wl.layers[i].ig_comp)
            ig = self.issue(i, "IG", blocking=False) if i > 0 else None
            self.compute(i, "BWD_WG", self.wl.layers[i].wg_comp)
            self.wait(ig)

    def _hybrid(self) -> None:
        n = len(self.wl.layers)
        for i in range(n):
            self.forward(i, "blocking")
        for i in range(n - 1, -1, -1):
            self.compute(i, "BWD_IG", self.wl.layers[i].ig_comp)
            ig = self.issue(i, "IG", blocking=False) if i > 0 else None
            self.compute(i, "BWD_WG", self.wl.layers[i].wg_comp)
            self.prev_wg[i] = self.issue(i, "WG", blocking=False)
            self.wait(ig)

    def _transformer(self) -> None:
        wl = self.wl
        n = len(wl.layers)
        for i in range(n):
            self.forward(i, "blocking")
        i = n - 1
        initiated = False
        while i >= 0:
            if i in wl.checkpoint_initiates and not initiated:
                # Forward_In_BackPass: recompute from the nearest checkpoint at or below i.
                below = [c for c in wl.checkpoints if c <= i]
                if not below:
                    raise TraceFormatError(
                        wl.path,
                        f"layer {i} initiates a forward-in-backward recompute but no checkpoint is at or below it",
                    )
                j = max(below)
                while True:
                    self.compute(j, "FWD_RECOMPUTE", wl.layers[j].fwd_comp)
                    self.issue(j, "FWD", blocking=True)
                    j += 1
                    if j >= n:
                        raise TraceFormatError(
                            wl.path,
                            f"the recompute from checkpoint {max(below)} runs past the last layer "
                            f"(no initiating layer above it); ASTRA-sim would read out of bounds",
                        )
                    if j in wl.checkpoint_initiates:
                        break
                i = j
                initiated = True
                continue
            self.compute(i, "BWD_IG", wl.layers[i].ig_comp)
            self.issue(i, "IG", blocking=True)
            initiated = False
            self.compute(i, "BWD_WG", wl.layers[i].wg_comp)
            self.prev_wg[i] = self.issue(i, "WG", blocking=False)
            i -= 1

    def _dlrm(self) -> None:
        wl = self.wl
        n = len(wl.layers)
        lbl = wl.last_bottom_layer
        enhanced = wl.keyword == "HYBRID_DLRM_ENHANCED"
        embedding_fwd: Optional[int] = None
        for i in range(n):
            self.wait(self.prev_wg.pop(i, None))
            self.compute(i, "FWD", wl.layers[i].fwd_comp)
            if wl.layers[i].fwd_type == "ALLTOALL":
                fc = self.issue(i, "FWD", blocking=False)
                if i == 0:
                    embedding_fwd = fc
            elif i == lbl:
                self.wait(embedding_fwd)  # the top MLP needs the embedding all-to-all
        embedding_ig: Optional[int] = None
        for i in range(n - 1, -1, -1):
            self.compute(i, "BWD_WG", wl.layers[i].wg_comp)
            self.prev_wg[i] = self.issue(i, "WG", blocking=False)
            if i == 0:
                if not enhanced:
                    self.wait(embedding_ig)
                break
            self.compute(i, "BWD_IG", wl.layers[i].ig_comp)
            if lbl is not None and i == lbl + 1:
                embedding_ig = self.issue(0, "IG", blocking=False)

    def _inference(self) -> None:
        for i in range(len(self.wl.layers)):
            self.forward(i, "blocking")


# ---------------------------------------------------------------------------------------------
# Conversion


@dataclass
class TextConversion:
    """Everything one conversion produces, before it is written."""

    workload: Workload
    npus: int
    passes: int
    topology: Topology
    nodes: list[pb.Node]  # the per-rank template (pg_name filled per rank)
    colls: list[_Coll]
    groups: Groups
    warnings: list[str]

    def metadata(self, rank: int) -> pb.GlobalMetadata:
        return make_metadata(
            source_format="astra-sim-1.0-text",
            input_file=self.workload.text,
            parallelism=self.workload.keyword,
            num_npus=self.npus,
            num_passes=self.passes,
            network_dims=",".join(map(str, self.topology.dims)),
            rank=rank,
        )

    def _fill(self, rank: int) -> None:
        for coll in self.colls:
            pg = self.groups.pg_name(coll.mask, rank)
            if pg is not None:
                set_attr(coll.node, "pg_name", pg)

    def rank_nodes(self, rank: int) -> list[pb.Node]:
        """A fresh copy of the nodes for `rank`."""
        self._fill(rank)
        out = []
        for node in self.nodes:
            copy = pb.Node()
            copy.CopyFrom(node)
            out.append(copy)
        return out

    def traces(self) -> Iterator[Trace]:
        for rank in range(self.npus):
            yield Trace(metadata=self.metadata(rank), nodes=self.rank_nodes(rank), rank=rank)

    def write(self, prefix: Path) -> list[Path]:
        """Write PREFIX.<rank>.et for every NPU (and PREFIX.comm_groups.json if there are subgroups)."""
        written = []
        with output_set():
            for rank in range(self.npus):
                self._fill(rank)
                path = rank_path(prefix, rank)
                with TraceWriter(path) as w:
                    w.write_metadata(self.metadata(rank))
                    w.write_nodes(self.nodes)
                written.append(path)
            groups = self.groups.as_json()
            if groups:
                gpath = Path(f"{prefix}.comm_groups.json")
                with atomic_output(gpath) as f:
                    f.write(orjson.dumps(groups, option=orjson.OPT_INDENT_2))
                written.append(gpath)
        return written

    def summary(self) -> dict:
        counts: dict[str, int] = {}
        for n in self.nodes:
            key = NodeType(n.type).name
            counts[key] = counts.get(key, 0) + 1
        return {
            "input": str(self.workload.path),
            "parallelism": self.workload.keyword,
            "layers": len(self.workload.layers),
            "npus": self.npus,
            "passes": self.passes,
            "network_dims": self.topology.dims,
            "nodes_per_rank": len(self.nodes),
            "node_types": counts,
            "process_groups": len(self.groups.ids),
            "warnings": self.warnings,
        }


def _topology(
    wl: Workload, npus: int, dims: Optional[Sequence[int]], model_group: Optional[int]
) -> tuple[Topology, int, list[str]]:
    """Logical dimensions, the model-parallel boundary and warnings for this workload."""
    warnings: list[str] = []
    path = wl.path
    group = model_group if model_group is not None else wl.model_group
    if dims:
        physical = list(dims)
        if any(d < 1 for d in physical):
            raise InputError(f"--dims {physical}: every dimension must be >= 1")
        prod = 1
        for d in physical:
            prod *= d
        if prod != npus:
            raise InputError(f"--dims {'x'.join(map(str, physical))} is {prod} NPUs but --npus is {npus}")
    elif group is not None and 1 < group < npus:
        if npus % group:
            raise InputError(f"{path}: model-parallel group {group} does not divide --npus {npus}")
        physical = [npus // group, group] if wl.keyword == "HYBRID_MODEL_DATA" else [group, npus // group]
    else:
        physical = [npus]
    if group is not None and group > npus:
        raise InputError(f"{path}: model-parallel group {group} is larger than --npus {npus}")
    boundary = -1
    if wl.keyword.startswith("HYBRID_TRANSFORMER") or (
        wl.keyword == "HYBRID_CUSTOMIZED"
        and any(la.policy and la.policy.startswith("HYBRID_TRANSFORMER") for la in wl.layers)
    ):
        if group is None:
            raise InputError(f"{path}: transformer layers need a model-parallel group size: pass --model-group M")
        physical, boundary = break_dimension(physical, group, path)
    uses_split = wl.keyword in ("HYBRID_DATA_MODEL", "HYBRID_MODEL_DATA") or (
        wl.keyword == "HYBRID_CUSTOMIZED"
        and any(la.policy in ("HYBRID_DATA_MODEL", "HYBRID_MODEL_DATA") for la in wl.layers)
    )
    if uses_split and len(physical) == 1 and npus > 1:
        warnings.append(
            f"{wl.keyword} splits the network into a model and a data dimension, but the network is 1-D "
            f"({npus} NPUs): one of the two gets no collectives. Pass --model-group M or --dims to split it."
        )
    return Topology(physical), boundary, warnings


def convert_text(
    path: Path,
    npus: int,
    passes: int = 1,
    *,
    dims: Optional[Sequence[int]] = None,
    model_group: Optional[int] = None,
    text: Optional[str] = None,
    max_npus: int = DEFAULT_MAX_NPUS,
) -> TextConversion:
    """Parse and build the per-rank graph of a text workload (nothing is written)."""
    if npus < 1:
        raise InputError(f"--npus must be >= 1, got {npus}")
    if npus > max_npus:
        raise InputError(
            f"{path}: --npus {npus:,} would write {npus:,} trace files, above the limit of {max_npus:,}; "
            f"pass --max-npus {npus} to allow it"
        )
    if passes < 1:
        raise InputError(f"--passes must be >= 1, got {passes}")
    wl = parse_text(Path(path), text)
    topo, boundary, warnings = _topology(wl, npus, dims, model_group)
    if wl.keyword == "MICRO" and len(wl.layers) > 1:
        warnings.append(
            f"MICRO runs only the first layer's weight-gradient collective; {len(wl.layers) - 1} layers ignored"
        )
    builder = _Builder(wl, topo, boundary)
    builder.run(passes)
    if not builder.nodes:
        warnings.append("the workload produced no nodes (all times are 0 and no collective spans more than one NPU)")
    groups = Groups(topo, [c.mask for c in builder.colls])
    return TextConversion(wl, npus, passes, topo, builder.nodes, builder.colls, groups, warnings)


def _parse_dims(spec: Optional[str]) -> Optional[list[int]]:
    if not spec:
        return None
    try:
        return [int(x) for x in re.split(r"[x,\s]+", spec.strip()) if x]
    except ValueError:
        raise InputError(f"--dims {spec!r}: expected sizes like 4x8 or 4,8") from None

"""ASTRA-sim 1.0 text workloads -> Chakra: one trace per NPU, P training passes each.

The text format (docs/astra-sim.md §5, docs/chakra-format.md §4): line 1 is a parallelism keyword plus
optional header tokens, line 2 the layer count, then one line per layer with 12 columns
`name reserved fwd_comp fwd_type fwd_size ig_comp ig_type ig_size wg_comp wg_type wg_size update`
(13 for HYBRID_CUSTOMIZED: the layer's own keyword last).

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import orjson
import typer

from chakra.errors import InputError, TraceFormatError
from chakra.io import TraceWriter, atomic_output, input_file_errors, output_set, rank_path
from chakra.schema import CollectiveType, NodeType, pb
from chakra.schema.attrs import set_attr
from chakra.trace import Trace, make_metadata, make_node

NAME = "text"
DESCRIPTION = "ASTRA-sim 1.0 text workload (DATA, MODEL, HYBRID_*, MICRO, ...)"

#: Keywords of ASTRA-sim 1.0's `decode_parallelsim`.
KEYWORDS = (
    "MICRO",
    "DATA",
    "MODEL",
    "HYBRID_DATA_MODEL",
    "HYBRID_MODEL_DATA",
    "HYBRID_DLRM",
    "HYBRID_DLRM_ENHANCED",
    "HYBRID_TRANSFORMER",
    "HYBRID_TRANSFORMER_FWD_IN_BCKWD",
    "HYBRID_CUSTOMIZED",
    "DISTRIBUTED_INFERENCE",
)
#: Per-layer keywords HYBRID_CUSTOMIZED accepts (anything that decodes to a dimension split).
LAYER_KEYWORDS = tuple(k for k in KEYWORDS if k != "HYBRID_CUSTOMIZED")

#: Text comm type -> Chakra collective. ALLREDUCEALLTOALL is ASTRA-sim 1.0's all-reduce done with
#: all-to-all phases: the result is an all-reduce, so it is written as one (name kept in an attr).
COMM_TYPES = {
    "ALLREDUCE": CollectiveType.ALL_REDUCE,
    "ALLGATHER": CollectiveType.ALL_GATHER,
    "ALLTOALL": CollectiveType.ALL_TO_ALL,
    "REDUCESCATTER": CollectiveType.REDUCE_SCATTER,
    "ALLREDUCEALLTOALL": CollectiveType.ALL_REDUCE,
}
NONE = "NONE"
LAYER_COLUMNS = 12
LAYER_FIELDS = "name reserved fwd_comp fwd_type fwd_size ig_comp ig_type ig_size wg_comp wg_type wg_size update"

_COMMENT = re.compile(r"(^|\s)(#|//).*$")


# ---------------------------------------------------------------------------------------------
# Parsing


@dataclass
class Layer:
    """One layer line. Times are the file's integers (cycles in ASTRA-sim 1.0, µs in Chakra)."""

    name: str
    line: int
    fwd_comp: int
    fwd_type: str
    fwd_size: int
    ig_comp: int
    ig_type: str
    ig_size: int
    wg_comp: int
    wg_type: str
    wg_size: int
    update_time: int
    policy: Optional[str] = None  # HYBRID_CUSTOMIZED: the layer's own keyword


@dataclass
class Workload:
    """A parsed text workload: keyword, header options and layers."""

    path: Path
    text: str
    keyword: str
    layers: list[Layer]
    header: dict[str, list[str]] = field(default_factory=dict)
    last_bottom_layer: Optional[int] = None  # HYBRID_DLRM*
    model_group: Optional[int] = None  # HYBRID_TRANSFORMER*: model_parallel_NPU_group
    checkpoints: frozenset[int] = frozenset()
    checkpoint_initiates: frozenset[int] = frozenset()


def _content_lines(text: str) -> Iterator[tuple[int, list[str]]]:
    """(1-based line number, tokens) of every line that is not blank or a comment."""
    for number, raw in enumerate(text.splitlines(), 1):
        line = _COMMENT.sub("", raw).strip()
        if line:
            yield number, line.split()


def _int(path: Path, line: int, what: str, token: str, *, minimum: Optional[int] = 0) -> int:
    try:
        value = int(token)
    except ValueError:
        raise TraceFormatError(path, f"{what} must be an integer, got {token!r}", line=line) from None
    if minimum is not None and value < minimum:
        raise TraceFormatError(path, f"{what} must be >= {minimum}, got {value}", line=line)
    return value


def _comm_type(path: Path, line: int, what: str, token: str) -> str:
    if token != NONE and token not in COMM_TYPES:
        expected = ", ".join([*COMM_TYPES, NONE])
        raise TraceFormatError(
            path, f"unknown {what} communication type {token!r} (expected one of {expected})", line=line
        )
    return token


def _header_pairs(tokens: Sequence[str]) -> dict[str, list[str]]:
    """`key: v v key2: v` -> {key: [v, v], key2: [v]}; a bare leading token gets key ''."""
    pairs: dict[str, list[str]] = {}
    key = ""
    for tok in tokens:
        if tok.endswith(":") and len(tok) > 1:
            key = tok[:-1]
            pairs.setdefault(key, [])
        elif ":" in tok and not tok.startswith(":") and not tok.endswith(":"):
            k, v = tok.split(":", 1)
            pairs.setdefault(k, []).append(v)
        else:
            pairs.setdefault(key, []).append(tok)
    return pairs


def _layer_list(path: Path, line: int, key: str, values: list[str]) -> frozenset[int]:
    """`checkpoints: N l1 .. lN` -> {l1..lN}; the count must match (ASTRA-sim reads exactly N)."""
    if not values:
        raise TraceFormatError(path, f"header '{key}:' needs a count and that many layer numbers", line=line)
    count = _int(path, line, f"'{key}:' count", values[0])
    if len(values) - 1 != count:
        raise TraceFormatError(path, f"header '{key}:' announces {count} layers but lists {len(values) - 1}", line=line)
    return frozenset(_int(path, line, f"'{key}:' layer", v) for v in values[1:])


def parse_text(path: Path, text: Optional[str] = None) -> Workload:
    """Parse a text workload, raising TraceFormatError (file and line) on anything malformed."""
    path = Path(path)
    if text is None:
        with input_file_errors(path, "text workload file"):
            text = path.read_text(encoding="utf-8", errors="replace")
    lines = _content_lines(text)
    first = next(lines, None)
    if first is None:
        raise TraceFormatError(path, "empty workload: expected a parallelism keyword on the first line")
    hline, htoks = first
    keyword = htoks[0]
    if keyword not in KEYWORDS:
        raise TraceFormatError(
            path, f"unknown parallelism keyword {keyword!r} (expected one of {', '.join(KEYWORDS)})", line=hline
        )
    wl = Workload(path=path, text=text, keyword=keyword, layers=[])
    extra = htoks[1:]
    if keyword.startswith("HYBRID_DLRM"):
        if not extra:
            raise TraceFormatError(path, f"{keyword} needs the last bottom-MLP layer index after it", line=hline)
        wl.last_bottom_layer = _int(path, hline, "last bottom layer", extra[0], minimum=None)
        wl.header = _header_pairs(extra[1:])
    else:
        wl.header = _header_pairs(extra)
    if keyword.startswith("HYBRID_TRANSFORMER"):
        # ASTRA-sim reads `<name> <int>` positionally; the name is model_parallel_NPU_group.
        mp = next((v for k, v in wl.header.items() if k.lower() == "model_parallel_npu_group"), None)
        if mp is None and len(extra) >= 2:
            mp = [extra[1]]
        if not mp:
            raise TraceFormatError(path, f"{keyword} needs 'model_parallel_NPU_group: <size>' on line 1", line=hline)
        wl.model_group = _int(path, hline, "model_parallel_NPU_group", mp[0], minimum=1)
        if keyword == "HYBRID_TRANSFORMER_FWD_IN_BCKWD":
            if "checkpoints" in wl.header:
                wl.checkpoints = _layer_list(path, hline, "checkpoints", wl.header["checkpoints"])
            if "checkpoint_initiates" in wl.header:
                wl.checkpoint_initiates = _layer_list(
                    path, hline, "checkpoint_initiates", wl.header["checkpoint_initiates"]
                )
    else:
        mp = next((v for k, v in wl.header.items() if k.lower() == "model_parallel_npu_group"), None)
        if mp:
            wl.model_group = _int(path, hline, "model_parallel_NPU_group", mp[0], minimum=1)

    second = next(lines, None)
    if second is None:
        raise TraceFormatError(path, "missing the layer count (line 2)", line=hline + 1)
    cline, ctoks = second
    if len(ctoks) != 1:
        raise TraceFormatError(path, f"line 2 must hold only the layer count, found {len(ctoks)} fields", line=cline)
    count = _int(path, cline, "layer count", ctoks[0], minimum=1)

    ncols = LAYER_COLUMNS + (1 if keyword == "HYBRID_CUSTOMIZED" else 0)
    for number, toks in lines:
        if len(wl.layers) == count:
            raise TraceFormatError(path, f"more layer lines than the {count} announced on line {cline}", line=number)
        if len(toks) != ncols:
            columns = LAYER_FIELDS + (" parallelism" if ncols > LAYER_COLUMNS else "")
            raise TraceFormatError(path, f"layer line has {len(toks)} fields, expected {ncols}: {columns}", line=number)
        layer = Layer(
            name=toks[0],
            line=number,
            fwd_comp=_int(path, number, "forward compute time", toks[2]),
            fwd_type=_comm_type(path, number, "forward", toks[3]),
            fwd_size=_int(path, number, "forward comm size", toks[4]),
            ig_comp=_int(path, number, "input-gradient compute time", toks[5]),
            ig_type=_comm_type(path, number, "input-gradient", toks[6]),
            ig_size=_int(path, number, "input-gradient comm size", toks[7]),
            wg_comp=_int(path, number, "weight-gradient compute time", toks[8]),
            wg_type=_comm_type(path, number, "weight-gradient", toks[9]),
            wg_size=_int(path, number, "weight-gradient comm size", toks[10]),
            update_time=_int(path, number, "update time", toks[11], minimum=None),
        )
        _int(path, number, "reserved column", toks[1], minimum=None)
        if keyword == "HYBRID_CUSTOMIZED":
            if toks[12] not in LAYER_KEYWORDS:
                raise TraceFormatError(
                    path,
                    f"unknown per-layer parallelism {toks[12]!r} (expected one of {', '.join(LAYER_KEYWORDS)})",
                    line=number,
                )
            layer.policy = toks[12]
        wl.layers.append(layer)
    if len(wl.layers) < count:
        raise TraceFormatError(path, f"line {cline} announces {count} layers but the file has {len(wl.layers)}")
    for what, layers in (("checkpoints", wl.checkpoints), ("checkpoint_initiates", wl.checkpoint_initiates)):
        bad = sorted(i for i in layers if i >= count)
        if bad:
            raise TraceFormatError(path, f"header '{what}:' names layer {bad[0]}, but there are {count}", line=hline)
    return wl


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
            "comm_type": int(COMM_TYPES[ctype]),
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
) -> TextConversion:
    """Parse and build the per-rank graph of a text workload (nothing is written)."""
    if npus < 1:
        raise InputError(f"--npus must be >= 1, got {npus}")
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


# ---------------------------------------------------------------------------------------------
# Plugin interface


def sniff(path: Path) -> bool:
    """A text workload starts with a parallelism keyword, then a bare layer count."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        return False
    lines = [toks for _, toks in _content_lines(text)][:2]
    return len(lines) == 2 and lines[0][0] in KEYWORDS and len(lines[1]) == 1 and lines[1][0].isdigit()


def _npus_from_header(wl: Workload) -> Optional[int]:
    value = wl.header.get("all_gpus")
    if value:
        try:
            return int(value[0])
        except ValueError:
            return None
    return None


def convert_paths(inputs: list[Path], prefix: Path, *, quiet: bool = False) -> list[Path]:
    """Default conversion for `chakra convert auto`: needs the NPU count in the header (all_gpus:)."""
    if len(inputs) != 1:
        raise InputError("the text converter takes exactly one workload file")
    wl = parse_text(Path(inputs[0]))
    npus = _npus_from_header(wl)
    if npus is None:
        raise InputError(
            f"{inputs[0]}: a text workload does not say how many NPUs run it; "
            f"use: chakra convert text {inputs[0]} --npus N -o {prefix}"
        )
    return convert_text(Path(inputs[0]), npus, text=wl.text).write(prefix)


def add_cli(app: typer.Typer) -> None:
    from chakra.cli_common import JsonOption, QuietOption, handle_errors, info, print_json, warn

    @app.command(NAME)
    def convert_text_cmd(
        workload: Path = typer.Argument(..., help="ASTRA-sim 1.0 text workload (.txt)."),
        output: Path = typer.Option(..., "--output", "-o", help="Output PREFIX: writes PREFIX.<npu>.et."),
        npus: int = typer.Option(..., "--npus", "-n", help="Number of NPUs (one trace file each)."),
        passes: int = typer.Option(1, "--passes", "-p", help="Training passes (iterations) per NPU."),
        dims: Optional[str] = typer.Option(
            None, "--dims", help="Network dimensions, lowest first (e.g. 4x8); must multiply to --npus."
        ),
        model_group: Optional[int] = typer.Option(
            None,
            "--model-group",
            help="Model-parallel group size (default: model_parallel_NPU_group from the header).",
        ),
        quiet: bool = QuietOption,
        json_out: bool = JsonOption,
    ) -> None:
        """Convert an ASTRA-sim 1.0 text workload into one Chakra trace per NPU.

        Every keyword ASTRA-sim 1.0 runs is accepted (MICRO, DATA, MODEL, HYBRID_DATA_MODEL,
        HYBRID_MODEL_DATA, HYBRID_DLRM[_ENHANCED], HYBRID_TRANSFORMER[_FWD_IN_BCKWD],
        HYBRID_CUSTOMIZED, DISTRIBUTED_INFERENCE). Hybrid modes put their collectives on
        process groups (pg_name) listed in PREFIX.comm_groups.json, ASTRA-sim's
        --comm-group-configuration file.

        Examples:

          chakra convert text Resnet50_DataParallel.txt --npus 8 --passes 2 -o out/resnet

          chakra convert text Transformer_HybridParallel.txt --npus 16 -o out/tf   # groups of 4 from the header

          chakra convert text MLP_HybridParallel_Data_Model.txt --npus 16 --dims 4x4 -o out/mlp
        """
        with handle_errors():
            conv = convert_text(workload, npus, passes, dims=_parse_dims(dims), model_group=model_group)
            for message in conv.warnings:
                warn(message)
            written = conv.write(output)
            if json_out:
                print_json({**conv.summary(), "written": [str(p) for p in written]})
            else:
                info(
                    f"{workload}: {conv.workload.keyword}, {len(conv.workload.layers)} layers -> "
                    f"{npus} traces of {len(conv.nodes)} nodes ({passes} pass{'es' if passes > 1 else ''})",
                    quiet,
                )
                info(f"wrote {rank_path(output, 0)} .. {rank_path(output, npus - 1)}", quiet)
                if conv.groups.ids:
                    info(f"wrote {output}.comm_groups.json ({len(conv.groups.ids)} process groups)", quiet)

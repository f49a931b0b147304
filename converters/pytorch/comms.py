"""Communication: recognising collectives and p2p in every backend and computing their metadata.

Sources, most trusted first: `record_param_comms` (its `collective_name`, element counts, dtype,
process group), the `c10d::<op>` call (its name and positional arguments), Kineto comm args on a
cpu_op or NCCL kernel, and finally the executor's own name (`gloo:<op>`, `nccl:<op>`, NCCL
kernels of the three naming eras). The c10d name beats the executor name because gloo runs a
reduce_scatter as `gloo:all_reduce` calls.

Sizes follow ASTRA-sim's semantics (docs/astra-sim.md §1.6): all-reduce/broadcast/reduce = buffer
bytes; reduce-scatter = full input; all-to-all = per-rank input; all-gather/gather = per-rank
input; scatter = per-rank output; send/recv = message bytes; barrier = its token tensor.

An all-to-all with per-peer splits (`all_to_all_single` with split lists, `all_to_all` of tensor
lists) also keeps the bytes it sends to and receives from each peer of its group
(`send_splits`/`recv_splits`), written as the `comm_send_bytes`/`comm_recv_bytes` attributes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional

from chakra.converters.pytorch.ops import Op
from chakra.schema import CollectiveType, NodeType

SEND = "send"
RECV = "recv"

#: normalised collective word -> CollectiveType (or SEND/RECV)
_WORDS: dict[str, Any] = {
    "allreduce": CollectiveType.ALL_REDUCE,
    "allreducecoalesced": CollectiveType.ALL_REDUCE,
    "reduce": CollectiveType.REDUCE,
    "allgather": CollectiveType.ALL_GATHER,
    "allgatherbase": CollectiveType.ALL_GATHER,
    "allgatherintotensor": CollectiveType.ALL_GATHER,
    "allgatherintotensorcoalesced": CollectiveType.ALL_GATHER,
    "allgathercoalesced": CollectiveType.ALL_GATHER,
    "gather": CollectiveType.GATHER,
    "scatter": CollectiveType.SCATTER,
    "broadcast": CollectiveType.BROADCAST,
    "alltoall": CollectiveType.ALL_TO_ALL,
    "alltoallv": CollectiveType.ALL_TO_ALL,
    "alltoallbase": CollectiveType.ALL_TO_ALL,
    "reducescatter": CollectiveType.REDUCE_SCATTER,
    "reducescatterbase": CollectiveType.REDUCE_SCATTER,
    "reducescattertensor": CollectiveType.REDUCE_SCATTER,
    "reducescattertensorcoalesced": CollectiveType.REDUCE_SCATTER,
    "reducescatterblock": CollectiveType.REDUCE_SCATTER_BLOCK,
    "barrier": CollectiveType.BARRIER,
    "monitoredbarrier": CollectiveType.BARRIER,
    "send": SEND,
    "recv": RECV,
    "recvanysource": RECV,
}

#: c10d op name -> (index of the argument whose tensors give the size, index of root/peer arg, index of tag arg)
_C10D_ARGS: dict[str, tuple[int, int, int]] = {
    "allreduce_": (0, -1, -1),
    "allreduce_coalesced_": (0, -1, -1),
    "broadcast_": (0, 2, -1),
    "reduce_": (0, 3, -1),
    "allgather_": (1, -1, -1),
    "_allgather_base_": (1, -1, -1),
    "allgather_coalesced_": (1, -1, -1),
    "allgather_into_tensor_coalesced_": (1, -1, -1),
    "gather_": (1, 3, -1),
    "scatter_": (0, 3, -1),
    "reduce_scatter_": (1, -1, -1),
    "_reduce_scatter_base_": (1, -1, -1),
    "reduce_scatter_tensor_coalesced_": (1, -1, -1),
    "alltoall_base_": (1, -1, -1),
    "alltoall_": (1, -1, -1),
    "send": (0, 2, 3),
    "recv_": (0, 2, 3),
    "recv_any_source_": (0, -1, 2),
    "barrier": (0, -1, -1),
    "monitored_barrier_": (0, -1, -1),
}

_DTYPE_BYTES = {
    "float": 4, "float32": 4, "double": 8, "float64": 8, "half": 2, "float16": 2, "bfloat16": 2,
    "c10::half": 2, "c10::bfloat16": 2, "long": 8, "long int": 8, "int64": 8, "int": 4, "int32": 4,
    "short": 2, "int16": 2, "byte": 1, "unsigned char": 1, "uint8": 1, "char": 1, "signed char": 1,
    "int8": 1, "bool": 1, "complexfloat": 8, "complexdouble": 16, "float8_e4m3fn": 1, "float8_e5m2": 1,
}  # fmt: skip

_NCCL_OLD = re.compile(r"^nccl([A-Z][A-Za-z]+?)(?:Ring|Tree|CollNet|Nvls)?(?:LL128|LL|Simple)?Kernel")
_NCCL_MID = re.compile(r"^ncclKernel_([A-Za-z]+)")
_NCCL_NEW = re.compile(r"^ncclDevKernel_([A-Za-z]+)")


def norm_word(text: str) -> str:
    return text.replace("_", "").replace("-", "").replace(" ", "").lower()


def coll_from_word(text: str) -> Any:
    """CollectiveType / SEND / RECV for a collective word such as 'all_gather' or 'AllReduce', else None."""
    return _WORDS.get(norm_word(text))


def nccl_kernel_coll(name: str) -> Any:
    """Collective of an NCCL kernel name (all three eras), None if not an NCCL kernel, 'unknown' if unparsable."""
    short = name[5:] if name.startswith("void ") else name
    if not short.startswith("nccl"):
        return None
    for pattern in (_NCCL_NEW, _NCCL_MID, _NCCL_OLD):
        m = pattern.match(short)
        if m:
            word = m.group(1)
            if norm_word(word) == "sendrecv":
                return "sendrecv"
            if norm_word(word) == "generic":
                return "unknown"
            coll = coll_from_word(word)
            return "unknown" if coll is None else coll
    return "unknown"


def dtype_bytes(dtype: Any) -> int:
    if not isinstance(dtype, str):
        return 0
    return _DTYPE_BYTES.get(dtype.lower(), 0)


def tensor_bytes(value: Any) -> int:
    """Total bytes of the tensors in an ET value (a 6-list tensor or nested lists of them).

    Runs for every input and output of every modelled aten op, so scalars are skipped without a call.
    """
    if not isinstance(value, list):
        return 0
    if len(value) == 6 and isinstance(value[3], int) and isinstance(value[4], int) and isinstance(value[5], str):
        return value[3] * value[4]
    total = 0
    for v in value:
        if isinstance(v, list):
            if len(v) == 6 and isinstance(v[3], int) and isinstance(v[4], int) and isinstance(v[5], str):
                total += v[3] * v[4]  # a tensor: counted here, without a call
            else:
                total += tensor_bytes(v)
    return total


@dataclass
class CommInfo:
    """What the emitted comm node needs."""

    coll: Any  # CollectiveType, SEND or RECV
    size: int = 0
    pg_name: str = ""
    peer: int = -1  # group rank of the peer (p2p) or root (rooted collectives)
    tag: int = 0
    dtype: str = ""
    source: str = ""  # which record gave the type/size
    # all-to-all only: bytes to / from each group rank, in group-rank order (() = even split)
    send_splits: tuple[int, ...] = ()
    recv_splits: tuple[int, ...] = ()

    @property
    def node_type(self) -> int:
        if self.coll == SEND:
            return NodeType.COMM_SEND_NODE
        if self.coll == RECV:
            return NodeType.COMM_RECV_NODE
        return NodeType.COMM_COLL_NODE


def split_bytes(splits: Any, total_bytes: int) -> tuple[int, ...]:
    """Per-peer bytes of a split list (rows of the first dimension, as PyTorch records them) over a
    tensor of `total_bytes`; () where the list is empty (an even split) or does not fit the tensor."""
    if isinstance(splits, (str, bytes)):
        import orjson

        try:
            splits = orjson.loads(splits)
        except orjson.JSONDecodeError:
            return ()
    if not isinstance(splits, list) or not splits:
        return ()
    if not all(type(v) is int and v >= 0 for v in splits):
        return ()
    rows = sum(splits)
    if rows == 0 or total_bytes <= 0 or total_bytes % rows:
        return ()
    row = total_bytes // rows
    return tuple(v * row for v in splits)


def _tensor_list_bytes(value: Any) -> tuple[int, ...]:
    """Bytes of each tensor of a tensor list (`all_to_all` takes one tensor per peer)."""
    if not isinstance(value, list) or not value or not all(isinstance(v, list) for v in value):
        return ()
    if len(value) == 6 and isinstance(value[3], int) and isinstance(value[5], str):
        return ()  # one tensor, not a list of them
    return tuple(tensor_bytes(v) for v in value)


def _set_splits(info: CommInfo, send: tuple[int, ...], recv: tuple[int, ...]) -> None:
    """Keep both lists when they describe one group (same length), else neither."""
    if send and recv and len(send) == len(recv):
        info.send_splits, info.recv_splits = send, recv


def from_c10d(op: Op) -> Optional[CommInfo]:
    """CommInfo from a `c10d::<op>` call's name and positional args; None if not a known collective."""
    short = op.name[6:]
    coll = coll_from_word(short.rstrip("_"))
    spec = _C10D_ARGS.get(short)
    if coll is None or spec is None:
        return None
    values = op.inputs[0] if op.inputs else []
    size_i, peer_i, tag_i = spec
    info = CommInfo(coll, source="c10d")
    if size_i < len(values):
        info.size = tensor_bytes(values[size_i])
    if 0 <= peer_i < len(values) and isinstance(values[peer_i], int):
        info.peer = values[peer_i]
    if 0 <= tag_i < len(values) and isinstance(values[tag_i], int):
        info.tag = values[tag_i]
    if coll == CollectiveType.ALL_TO_ALL and len(values) > 1:
        if short == "alltoall_base_" and len(values) > 4:
            # (output, input, group, output_split_sizes, input_split_sizes, ...)
            _set_splits(
                info,
                split_bytes(values[4], tensor_bytes(values[1])),
                split_bytes(values[3], tensor_bytes(values[0])),
            )
        elif short == "alltoall_":  # (output tensors, input tensors, ...): one tensor per peer
            _set_splits(info, _tensor_list_bytes(values[1]), _tensor_list_bytes(values[0]))
    return info


def from_record_param_comms(op: Op) -> Optional[CommInfo]:
    """CommInfo from a `record_param_comms` node (attrs in 1.1.0+, positional inputs before)."""
    extra = op.extra or {}
    values = op.inputs[0] if op.inputs else []
    types = op.inputs[2] if op.inputs else []
    name = extra.get("collective_name")
    pg_name = extra.get("pg_name")
    if name is None:
        # [input_tensors?, seq, pg, rank, coll_name, in_split, out_split, ...]: the name is the first
        # String after the leading (optional) tensor argument.
        for v, t in zip(values, types):
            if t == "String" and isinstance(v, str):
                name = v
                break
        for v, t in zip(values, types):
            if t.startswith("Tuple[String") and isinstance(v, list) and v:
                pg_name = v[0]
                break
    if not name or norm_word(name) == "wait":
        return None
    coll = coll_from_word(name)
    if coll is None:
        return None
    info = CommInfo(coll, source="record_param_comms", pg_name=str(pg_name) if pg_name is not None else "")
    dtype = extra.get("dtype", "")
    nelems = extra.get("in_msg_nelems") if coll not in (RECV, CollectiveType.SCATTER) else extra.get("out_msg_nelems")
    if isinstance(nelems, int) and dtype_bytes(dtype):
        info.size = nelems * dtype_bytes(dtype)
        info.dtype = dtype
    elif values and types and "Tensor" in types[0]:
        info.size = tensor_bytes(values[0])
    elif op.outputs and op.outputs[0]:
        info.size = tensor_bytes(op.outputs[0][0])
    if coll == CollectiveType.ALL_TO_ALL:
        in_split, out_split = extra.get("in_split_size"), extra.get("out_split_size")
        if in_split is None:  # positional: the two lists right after the collective name
            for k, v in enumerate(values):
                if v == name and k + 2 < len(values):
                    in_split, out_split = values[k + 1], values[k + 2]
                    break
        width = dtype_bytes(dtype)
        in_n, out_n = extra.get("in_msg_nelems"), extra.get("out_msg_nelems")
        in_bytes = in_n * width if isinstance(in_n, int) and width else info.size
        out_bytes = out_n * width if isinstance(out_n, int) and width else in_bytes
        _set_splits(info, split_bytes(in_split, in_bytes), split_bytes(out_split, out_bytes))
    return info


def from_kineto_args(args: dict, fallback_name: str = "") -> Optional[CommInfo]:
    """CommInfo from Kineto comm args (record_param_comms cpu_op or NCCL kernel)."""
    name = args.get("Collective name")
    if not name:
        return None
    coll = coll_from_word(str(name))
    if coll is None or norm_word(str(name)) == "wait":
        return None
    dtype = str(args.get("dtype", ""))
    nelems = args.get("In msg nelems") if coll not in (RECV, CollectiveType.SCATTER) else args.get("Out msg nelems")
    info = CommInfo(coll, source="kineto", dtype=dtype)
    if isinstance(nelems, int):
        info.size = nelems * (dtype_bytes(dtype) or 1)
    pg = args.get("Process Group Name")
    if pg is not None:
        info.pg_name = str(pg)
    if coll == CollectiveType.ALL_TO_ALL:
        width = dtype_bytes(dtype) or 1
        out_n = args.get("Out msg nelems")
        out_bytes = out_n * width if isinstance(out_n, int) else info.size
        _set_splits(
            info, split_bytes(args.get("In split size"), info.size), split_bytes(args.get("Out split size"), out_bytes)
        )
    key = "Src Rank" if coll == RECV else "Dst Rank"
    if coll in (SEND, RECV) and isinstance(args.get(key), int) and args[key] >= 0:
        info.peer = args[key]
    return info


def executor_coll(name: str) -> Any:
    """Collective of an executor name: 'gloo:all_reduce', 'nccl:all_gather', or an NCCL kernel."""
    if name.startswith(("gloo:", "nccl:")):
        return coll_from_word(name[5:])
    return nccl_kernel_coll(name)


def is_executor_name(name: str) -> bool:
    """Names that run a collective's data movement (as opposed to launching it)."""
    if name.startswith("gloo:"):
        return True
    if name.startswith("nccl:"):
        return not name.startswith("nccl:coalesced")
    return False


def parse_process_groups(text: Any) -> list[dict]:
    """The process-group list of a `## process_group:init ##` node (its JSON string input)."""
    import orjson

    if isinstance(text, list):
        text = text[0] if text else "[]"
    try:
        groups = orjson.loads(text) if isinstance(text, (str, bytes)) else []
    except orjson.JSONDecodeError:
        return []
    return [g for g in groups if isinstance(g, dict)] if isinstance(groups, list) else []

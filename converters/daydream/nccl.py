"""NCCL kernel names -> collective type, in all three naming eras, and NCCL NVTX payloads -> size.

Kernel names carry the collective (and the element type) but never the message size; the size
comes from NCCL's own NVTX ranges (`ncclAllReduce` ... with a payload) when the capture has them.
"""

from __future__ import annotations

import re
from typing import Any, Optional

import orjson

from chakra.schema import CollectiveType

#: NCCL operation word -> Chakra collective. SendRecv/Send/Recv are point-to-point (no collective).
COLLECTIVES: dict[str, int] = {
    "allreduce": CollectiveType.ALL_REDUCE,
    "reduce": CollectiveType.REDUCE,
    "allgather": CollectiveType.ALL_GATHER,
    "gather": CollectiveType.GATHER,
    "scatter": CollectiveType.SCATTER,
    "broadcast": CollectiveType.BROADCAST,
    "bcast": CollectiveType.BROADCAST,
    "alltoall": CollectiveType.ALL_TO_ALL,
    "reducescatter": CollectiveType.REDUCE_SCATTER,
    "barrier": CollectiveType.BARRIER,
}
P2P_OPS = ("sendrecv", "send", "recv")

# >= 2.19: ncclDevKernel_<Coll>[_<RedOp>_<ty>]_<ALGO>_<PROTO>, ncclDevKernel_SendRecv, ncclDevKernel_Generic[_4]
# 2.8 - 2.18: ncclKernel_<Coll>_<ALGO>_<PROTO>_<RedOp>_<ty>
_MODERN = re.compile(r"^nccl(?:Dev)?Kernel_([A-Za-z]+)")
# <= 2.7: ncclAllReduceRingLLKernel_sum_f32, ncclBroadcastTreeLL128Kernel_..., ncclSendRecvKernel_copy_i8
_LEGACY = re.compile(r"^nccl(AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|SendRecv|Send|Recv|AllToAll)")
# NVTX range names NCCL emits for its API calls: ncclAllReduce, ncclGroupEnd, ...
_API = re.compile(r"^nccl([A-Za-z]+)")


def is_nccl_kernel(name: str) -> bool:
    return name.startswith("nccl") and "Kernel" in name


def nccl_op(name: str) -> Optional[str]:
    """The NCCL operation word of a kernel name (`AllReduce`, `SendRecv`, `Generic`), or None if not NCCL."""
    if not is_nccl_kernel(name):
        return None
    m = _MODERN.match(name)
    if m:
        return m.group(1)
    m = _LEGACY.match(name)
    return m.group(1) if m else "Generic"


def collective_of(op: Optional[str]) -> Optional[int]:
    """Chakra CollectiveType for an NCCL operation word (kernel or API name), None if not a collective."""
    if not op:
        return None
    return COLLECTIVES.get(op.lower())


def is_p2p(op: Optional[str]) -> bool:
    return bool(op) and op.lower() in P2P_OPS


def nvtx_op(range_name: str) -> Optional[str]:
    """`ncclAllReduce` -> `AllReduce`; None for non-NCCL ranges and group markers."""
    m = _API.match(range_name)
    if not m:
        return None
    word = m.group(1)
    if word.lower() in ("groupstart", "groupend", "comminitrank", "commdestroy", "comminitall", "commsplit"):
        return None
    return word


def payload_of(json_text: Optional[str], int_value: Optional[int]) -> tuple[Optional[int], Optional[str]]:
    """(message bytes, communicator id) from an NVTX payload: NCCL's JSON schema fields, or a plain integer.

    NCCL's payload schema names its fields `Message size [bytes]` and `Communicator` (nvtx_payload_schemas.h);
    we accept any key mentioning size/bytes and comm, case-insensitively, so renamed fields still work.
    """
    size: Optional[int] = None
    comm: Optional[str] = None
    if json_text:
        try:
            data: Any = orjson.loads(json_text)
        except orjson.JSONDecodeError:
            data = None
        if isinstance(data, dict):
            for key, value in _flatten(data):
                low = key.lower()
                if size is None and ("size" in low or "bytes" in low) and isinstance(value, (int, float)):
                    size = int(value)
                elif comm is None and "comm" in low and not isinstance(value, (dict, list)):
                    comm = str(value)
    if size is None and int_value is not None:
        size = int(int_value)
    return size, comm


def _flatten(data: dict, depth: int = 0) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for key, value in data.items():
        if isinstance(value, dict) and depth < 3:
            out.extend(_flatten(value, depth + 1))
        else:
            out.append((str(key), value))
    return out

"""Roofline data for common aten operators: FLOPs (`num_ops`) and bytes moved (`tensor_size`).

Bytes = every input tensor plus every output tensor (`numel * itemsize` from the ET's 6-element
tensor values), i.e. read + written, not de-duplicated for in-place ops. FLOPs are the usual
counts: a multiply-add is 2; elementwise ops count 1 per output element; reductions 1 per input
element; softmax 5 and the norms 8 per element (mean, variance, normalise, affine).
"""

from __future__ import annotations

from math import prod
from typing import Any

from chakra.converters.pytorch.comms import tensor_bytes
from chakra.converters.pytorch.ops import Op

_ELEMENTWISE = frozenset(
    [
        "add",
        "add_",
        "sub",
        "sub_",
        "mul",
        "mul_",
        "div",
        "div_",
        "relu",
        "relu_",
        "gelu",
        "gelu_backward",
        "silu",
        "silu_backward",
        "sigmoid",
        "tanh",
        "sigmoid_backward",
        "tanh_backward",
        "threshold_backward",
        "clamp",
        "clamp_",
        "clamp_min",
        "clamp_min_",
        "neg",
        "exp",
        "log",
        "sqrt",
        "rsqrt",
        "pow",
        "abs",
        "addcmul_",
        "addcdiv_",
        "lerp_",
        "where",
        "masked_fill_",
        "fill_",
        "zero_",
        "copy_",
        "dropout",
        "native_dropout",
        "hardtanh",
        "leaky_relu",
        "elu",
        "mish",
        "sin",
        "cos",
        "maximum",
        "minimum",
    ]
)
_REDUCTIONS = frozenset(
    [
        "sum",
        "mean",
        "max",
        "min",
        "amax",
        "amin",
        "norm",
        "linalg_vector_norm",
        "var",
        "std",
        "prod",
        "argmax",
        "argmin",
    ]
)
_SOFTMAX = frozenset(
    ["softmax", "_softmax", "log_softmax", "_log_softmax", "_softmax_backward_data", "_log_softmax_backward_data"]
)
_NORMS = frozenset(
    [
        "layer_norm",
        "native_layer_norm",
        "native_layer_norm_backward",
        "batch_norm",
        "native_batch_norm",
        "cudnn_batch_norm",
        "_batch_norm_impl_index",
        "native_batch_norm_backward",
        "group_norm",
        "native_group_norm",
        "rms_norm",
        "_fused_rms_norm",
    ]
)
_CONV = frozenset(
    ["convolution", "_convolution", "conv1d", "conv2d", "conv3d", "cudnn_convolution", "mkldnn_convolution"]
)
_LOSS3 = frozenset(["mse_loss", "mse_loss_backward"])


#: aten ops (short names) that get roofline data
MODELLED = frozenset(
    _ELEMENTWISE | _REDUCTIONS | _SOFTMAX | _NORMS | _CONV | _LOSS3
    | {"mm", "matmul", "bmm", "addmm", "baddbmm", "addbmm", "linear", "embedding", "embedding_backward",
       "embedding_dense_backward"}
)  # fmt: skip


def _tensor_shapes(op: Op) -> list[Any]:
    return op.inputs[1] if op.inputs else []


def _out_numel(op: Op) -> int:
    if not op.outputs:
        return 0
    for v in op.outputs[0]:
        if isinstance(v, list) and len(v) == 6 and isinstance(v[3], int) and isinstance(v[5], str):
            return v[3]
    return 0


def _in_numel(op: Op) -> int:
    if not op.inputs:
        return 0
    for v in op.inputs[0]:
        if isinstance(v, list) and len(v) == 6 and isinstance(v[3], int) and isinstance(v[5], str):
            return v[3]
    return 0


def _dims(shape: Any) -> list[int]:
    return shape if isinstance(shape, list) and all(isinstance(d, int) for d in shape) else []


def _matmul_flops(a: list[int], b: list[int]) -> int:
    if not a or not b:
        return 0
    if len(a) == 1:
        a = [1] + a
    if len(b) == 1:
        b = b + [1]
    m, k = a[-2], a[-1]
    n = b[-1]
    batch = max(prod(a[:-2]) if len(a) > 2 else 1, prod(b[:-2]) if len(b) > 2 else 1)
    return 2 * batch * m * k * n


def flops_of(op: Op) -> int:
    """FLOPs of an aten op from its input shapes, 0 when the op is not modelled."""
    name = op.name
    if not name.startswith("aten::"):
        return 0
    short = name[6:]
    shapes = _tensor_shapes(op)
    if short in ("mm", "matmul", "bmm"):
        return _matmul_flops(_dims(shapes[0]) if shapes else [], _dims(shapes[1]) if len(shapes) > 1 else [])
    if short in ("addmm", "baddbmm", "addbmm"):
        f = _matmul_flops(_dims(shapes[1]) if len(shapes) > 1 else [], _dims(shapes[2]) if len(shapes) > 2 else [])
        return f + _out_numel(op) if f else 0
    if short == "linear":
        x = _dims(shapes[0]) if shapes else []
        w = _dims(shapes[1]) if len(shapes) > 1 else []
        if not x or len(w) != 2:
            return 0
        f = 2 * prod(x[:-1]) * w[1] * w[0]
        has_bias = len(shapes) > 2 and bool(_dims(shapes[2]))
        return f + (prod(x[:-1]) * w[0] if has_bias else 0)
    if short in _CONV:
        w = _dims(shapes[1]) if len(shapes) > 1 else []
        out = _out_numel(op)
        return 2 * out * prod(w[1:]) if len(w) >= 3 and out else 0
    if short in _ELEMENTWISE:
        return _out_numel(op) or _in_numel(op)
    if short in _REDUCTIONS:
        return _in_numel(op)
    if short in _SOFTMAX:
        return 5 * (_in_numel(op) or _out_numel(op))
    if short in _NORMS:
        return 8 * _in_numel(op)
    if short in _LOSS3:
        return 3 * _in_numel(op)
    if short in ("embedding", "embedding_backward", "embedding_dense_backward"):
        return 0
    return 0


def bytes_of(op: Op) -> int:
    """Bytes read + written: every input and output tensor."""
    total = 0
    if op.inputs:
        total += tensor_bytes(op.inputs[0])
    if op.outputs:
        total += tensor_bytes(op.outputs[0])
    return total


def fill_roofline(op: Op) -> None:
    """Set op.flops/op.bytes for the modelled aten ops (`MODELLED`)."""
    if op.name.startswith("aten::") and (op.inputs or op.outputs) and op.name[6:] in MODELLED:
        op.flops = flops_of(op)
        op.bytes = bytes_of(op)
        if op.flops >= 1 << 63 or op.bytes >= 1 << 63:  # the loader reports it with the node's index
            raise ValueError(f"tensor shapes of {op.name} give {op.flops} FLOPs / {op.bytes} bytes: beyond 64 bits")

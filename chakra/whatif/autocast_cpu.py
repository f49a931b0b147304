"""Which operators of an fp32 CPU trace would run in bf16 under `torch.autocast("cpu")`.

A converted PyTorch trace keeps every operator's inputs and outputs (ET tensor values
`[id, storage id, offset, numel, itemsize, device]`, their shapes and types) and its `op_schema`.
This module walks one step's operators in the order they ran and propagates dtypes by tensor id,
as autocast would change them, without torch:

- **forward** (the step outside backward and the optimizer; autocast is active there): an op on
  autocast's CPU lower-precision list casts its floating inputs to bf16 and returns bf16; an op on
  its fp32 list casts back to fp32; any other op runs in its inputs' dtype (promoted: bf16 only
  when every floating tensor input is bf16), so elementwise ops after a linear run in bf16;
- **backward** (inside `autograd::engine::evaluate_function` windows): autocast is off and every
  op runs in its inputs' dtypes; a tensor autocast cast to bf16 in the forward is saved for
  backward as its bf16 copy (the weights' transposes read in backward are bf16);
- **gradient accumulation and the optimizer** stay fp32: autocast keeps weights and gradients in
  fp32, the bf16 gradient of a cast weight is cast back (autograd's `ToCopyBackward0`) before it
  is accumulated; those casts are listed so their cost can be added.

The unit of work is a *top-level operator*: an `aten::` op not nested in another `aten::` op on
its thread (`aten::linear`, not the `aten::addmm` inside it); its nested ops and its `gap` nodes
(the converter's self-time segments, `gap_of`) belong to it. Nesting comes from the recorded
windows (start, `inclusive_dur`) per `tid`.

The lists are torch's own (aten/src/ATen/autocast_mode.cpp, `AutocastCPU`, torch 2.x); a test
checks them against the installed torch's behaviour.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from chakra.footprint import is_tensor_value
from chakra.schema import pb
from chakra.schema.attrs import get_attr
from chakra.schema.kinds import resource_of
from chakra.whatif.transforms import TIME_ORDER, span_us

#: autocast's CPU lower-precision ops: inputs cast to bf16, output bf16.
CPU_LOWER = frozenset(
    {
        "conv1d",
        "conv2d",
        "conv3d",
        "bmm",
        "mm",
        "linalg_vecdot",
        "baddbmm",
        "addmm",
        "addbmm",
        "linear",
        "_convolution",
        "matmul",
        "conv_tbc",
        "mkldnn_rnn_layer",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
        "prelu",
        "scaled_dot_product_attention",
        "_native_multi_head_attention",
    }
)
#: Ops whose floating result has the dtype of their first input whatever their other inputs are
#: (CPU normalisations accept a bf16 input with fp32 weights and statistics).
FIRST_INPUT = frozenset(
    {
        "batch_norm",
        "native_batch_norm",
        "_native_batch_norm_legit",
        "layer_norm",
        "native_layer_norm",
        "group_norm",
        "native_group_norm",
        "instance_norm",
        "rms_norm",
        "_fused_rms_norm",
        "dropout",
        "feature_dropout",
    }
)
#: autocast's CPU fp32 ops: inputs cast to fp32, output fp32 (losses, reductions that overflow, linalg).
CPU_FP32 = frozenset(
    {
        "avg_pool3d",
        "binary_cross_entropy",
        "grid_sampler",
        "polar",
        "prod",
        "quantile",
        "nanquantile",
        "stft",
        "cdist",
        "trace",
        "view_as_complex",
        "cholesky",
        "cholesky_inverse",
        "cholesky_solve",
        "inverse",
        "lu_solve",
        "orgqr",
        "ormqr",
        "pinverse",
        "max_pool3d",
        "max_unpool2d",
        "max_unpool3d",
        "adaptive_avg_pool3d",
        "reflection_pad1d",
        "reflection_pad2d",
        "replication_pad1d",
        "replication_pad2d",
        "replication_pad3d",
        "mse_loss",
        "cosine_embedding_loss",
        "nll_loss",
        "nll_loss2d",
        "hinge_embedding_loss",
        "poisson_nll_loss",
        "smooth_l1_loss",
        "cross_entropy_loss",
        "l1_loss",
        "huber_loss",
        "margin_ranking_loss",
        "soft_margin_loss",
        "triplet_margin_loss",
        "multi_margin_loss",
        "ctc_loss",
        "kl_div",
        "multilabel_margin_loss",
        "binary_cross_entropy_with_logits",
        "fft_fft",
        "fft_ifft",
        "fft_fft2",
        "fft_ifft2",
        "fft_fftn",
        "fft_ifftn",
        "fft_rfft",
        "fft_irfft",
        "fft_rfft2",
        "fft_irfft2",
        "fft_rfftn",
        "fft_irfftn",
        "fft_hfft",
        "fft_ihfft",
        "linalg_cond",
        "linalg_matrix_rank",
        "linalg_solve",
        "linalg_cholesky",
        "linalg_svdvals",
        "linalg_eigvals",
        "linalg_eigvalsh",
        "linalg_inv",
        "linalg_householder_product",
        "linalg_tensorinv",
        "linalg_tensorsolve",
        "fake_quantize_per_tensor_affine",
        "geqrf",
        "_lu_with_info",
        "qr",
        "svd",
        "triangular_solve",
        "fractional_max_pool2d",
        "fractional_max_pool3d",
        "adaptive_max_pool3d",
        "multilabel_margin_loss_forward",
        "linalg_qr",
        "linalg_cholesky_ex",
        "linalg_svd",
        "linalg_eig",
        "linalg_eigh",
        "linalg_lstsq",
        "linalg_inv_ex",
    }
)

FP32, BF16 = "float", "c10::BFloat16"
BACKWARD = "autograd::engine::evaluate_function:"
ACCUMULATE = re.compile(r"AccumulateGrad")
OPTIMIZER = re.compile(r"^Optimizer\.(step|zero_grad)#")


def _type_dtype(t: str) -> Optional[str]:
    m = re.fullmatch(r"Tensor\((.*)\)", t)
    return m.group(1) if m else None


def tensors(values: Any, types: Any, shapes: Any = None) -> list[tuple[list[int], str, list[int]]]:
    """(ET tensor value, recorded dtype, shape) of every tensor in an input/output list, lists flattened."""
    out: list[tuple[list[int], str, list[int]]] = []
    shapes = shapes if isinstance(shapes, list) and len(shapes) == len(values) else [[]] * len(values)
    for v, t, s in zip(values, types, shapes):
        if is_tensor_value(v):
            dt = _type_dtype(t)
            if dt:
                out.append((v, dt, s if isinstance(s, list) else []))
        elif isinstance(v, list) and isinstance(t, str) and t.startswith("GenericList["):
            inner = re.findall(r"Tensor\(([^)]*)\)", t)
            ss = s if isinstance(s, list) and len(s) == len(v) else [[]] * len(v)
            listed = [(x, sx) for x, sx in zip(v, ss) if is_tensor_value(x)]
            for (x, sx), dt in zip(listed, inner):
                out.append((x, dt, sx))
    return out


def io_of(node: pb.Node) -> tuple[list[Any], list[str], list[Any], list[Any], list[str]]:
    """(input values, input types, input shapes, output values, output types), parsed."""

    def load(text: str) -> list[Any]:
        try:
            v = json.loads(text) if text else []
        except ValueError:
            return []
        return v if isinstance(v, list) else []

    return (
        load(node.inputs.values),
        load(node.inputs.types),
        load(node.inputs.shapes),
        load(node.outputs.values),
        load(node.outputs.types),
    )


def op_name(node: pb.Node) -> str:
    """`aten::addmm` -> `addmm` (overload dropped)."""
    return node.name.split("::", 1)[-1].split(".", 1)[0]


@dataclass
class Unit:
    """One top-level operator: where it ran (phase), its nested nodes, and its dtypes under autocast."""

    node: pb.Node
    phase: str  # forward | backward | accumulate | optimizer | other
    members: list[int] = field(default_factory=list)  # node ids whose time is this op's (itself included)
    in_dtypes: list[Optional[str]] = field(default_factory=list)  # per input position (None: not a tensor)
    out_dtype: Optional[str] = None  # floating outputs' dtype under autocast
    autocast: bool = False  # runs with autocast active (forward)
    policy: str = "same"  # lower | fp32 | same
    backward_casts: list[tuple[list[int], str, str]] = field(default_factory=list)  # (shape, from, to) of grads
    backward_of: Optional[int] = None  # backward: the node id of the forward op it differentiates
    step: str = ""  # the ProfilerStep# it ran in

    @property
    def changed(self) -> bool:
        """Whether the op runs differently under autocast (a cast, or a bf16 input or output)."""
        return self.policy != "same" or BF16 in self.in_dtypes or self.out_dtype == BF16 or bool(self.backward_casts)


def windows(nodes: Sequence[pb.Node]) -> dict[int, Optional[int]]:
    """node id -> the innermost non-gap node whose recorded window holds it on the same thread."""
    parent: dict[int, Optional[int]] = {}
    by_tid: dict[Any, list[pb.Node]] = {}
    for n in nodes:
        if n.name == "gap" or resource_of(n) != "cpu":
            continue
        by_tid.setdefault(get_attr(n, "tid", None), []).append(n)
    for lst in by_tid.values():
        lst.sort(key=lambda n: (n.start_time_micros, -span_us(n), n.id))
        stack: list[pb.Node] = []
        for n in lst:
            while stack and n.start_time_micros >= stack[-1].start_time_micros + span_us(stack[-1]):
                stack.pop()  # (a zero-length window holds nothing)
            parent[n.id] = stack[-1].id if stack else None
            stack.append(n)
    return parent


def units(nodes: Sequence[pb.Node]) -> list[Unit]:
    """Top-level operators in the order they ran, with their phase and members (no dtypes yet)."""
    parent = windows(nodes)
    ids = {n.id: n for n in nodes}

    def chain(i: int) -> list[pb.Node]:
        out = []
        p = parent.get(i)
        while p is not None:
            out.append(ids[p])
            p = parent.get(p)
        return out

    top: dict[int, Unit] = {}
    owner: dict[int, int] = {}
    order = sorted((n for n in nodes if n.id in parent), key=TIME_ORDER)
    for n in order:
        anc = chain(n.id)
        aten = [a for a in anc if a.name.startswith("aten::")]
        if aten:
            owner[n.id] = aten[-1].id  # the outermost aten op holding it
            continue
        if not n.name.startswith("aten::") and not ACCUMULATE.search(n.name):
            continue
        if ACCUMULATE.search(n.name) and n.name.startswith(BACKWARD):
            continue  # the wrapper; its `torch::autograd::AccumulateGrad` child names the gradient
        names = [a.name for a in anc]
        if any(OPTIMIZER.search(x) for x in names):
            phase = "optimizer"
        elif ACCUMULATE.search(n.name) or any(ACCUMULATE.search(x) for x in names):
            phase = "accumulate"
        elif any(x.startswith(BACKWARD) for x in names):
            phase = "backward"
        elif any(x.startswith("ProfilerStep#") for x in names):
            phase = "forward"
        else:
            phase = "other"
        top[n.id] = Unit(n, phase, [n.id], step=next((x for x in names if x.startswith("ProfilerStep#")), ""))
        owner[n.id] = n.id
    for n in nodes:
        if n.name == "gap":
            o = owner.get(int(get_attr(n, "gap_of", -1)))
            if o is not None:
                top[o].members.append(n.id)
        elif n.id in owner and owner[n.id] != n.id and owner[n.id] in top:
            top[owner[n.id]].members.append(n.id)
    return sorted(top.values(), key=lambda u: (u.node.start_time_micros, u.node.id))


def _params(us: Sequence[Unit]) -> set[int]:
    """Storages the optimizer updates: the model's parameters (and their optimizer state)."""
    out: set[int] = set()
    for u in us:
        if u.phase == "optimizer":
            vals, types, *_ = io_of(u.node)
            out.update(v[1] for v, _rec, _s in tensors(vals, types))
    return out


def _function_seq(nodes: Sequence[pb.Node], parent: dict[int, Optional[int]]) -> dict[int, int]:
    """Backward top-level op id -> the sequence number of the autograd function running it (that of
    the forward op it differentiates)."""
    ids = {n.id: n for n in nodes}
    wrapper_seq: dict[int, int] = {}  # evaluate_function wrapper -> its function's seq_id
    for n in nodes:
        p = parent.get(n.id)
        seq = get_attr(n, "seq_id", None)
        if p is not None and seq is not None and ids[p].name.startswith(BACKWARD):
            wrapper_seq.setdefault(p, int(seq))
    out: dict[int, int] = {}
    for n in nodes:
        p = parent.get(n.id)
        while p is not None:
            a = ids[p]
            seq = get_attr(a, "seq_id", None)
            if not a.name.startswith(("aten::", BACKWARD)) and seq is not None:
                out[n.id] = int(seq)
                break
            if a.name.startswith(BACKWARD):  # work of the engine around the function (validate_outputs' sum_to)
                if p in wrapper_seq:
                    out[n.id] = wrapper_seq[p]
                break
            p = parent.get(p)
    return out


def propagate(nodes: Sequence[pb.Node]) -> list[Unit]:
    """Every top-level operator with the dtypes it would see and produce under CPU bf16 autocast.

    Forward ops follow autocast's policy (module doc); a backward op runs in the dtype autocast
    gave the forward op it differentiates (linked by the autograd sequence number, `seq_id`), as
    PyTorch documents; a forward cast of a tensor that requires grad (a weight, an activation)
    puts the reverse cast of its gradient into backward (`backward_casts` of the forward op)."""
    out = units(nodes)
    parent = windows(nodes)
    seq_of = _function_seq(nodes, parent)
    params = _params(out)
    owner_of_seq: dict[int, Unit] = {}
    members = {m: u for u in out if u.phase == "forward" for m in u.members}
    # ops that make no autograd node record the next sequence number too: the op that made the
    # node is the last to record it
    for n in sorted(nodes, key=TIME_ORDER):
        seq = get_attr(n, "seq_id", None)
        if seq is not None and n.id in members:
            owner_of_seq[int(seq)] = members[n.id]
    dtype: dict[int, str] = {}  # tensor id -> dtype under autocast, where it differs from the recording
    grad: set[int] = set()  # forward tensor ids that require grad
    seen: set[int] = set()  # tensor ids of the forward
    made_bw: set[int] = set()  # tensor ids made in backward (gradients)
    cast: set[int] = set()  # tensors autocast cast to bf16 in the forward (their bf16 copies are saved)
    cast_params: set[int] = set()  # storages of the weights among them (backward reads their views)

    def saved(v: list[int]) -> str:
        return BF16 if v[0] in cast or v[1] in cast_params else dtype.get(v[0], FP32)

    by_id = {n.id: n for n in nodes}
    lower = {u.node.id for u in out if u.phase == "forward" and _holds_lower(u, nodes)}
    step = None
    for u in out:
        if u.step != step:  # a new step: the previous one's tensors are gone (their ids are reused)
            step = u.step
            for state in (dtype, grad, seen, made_bw, cast, cast_params):
                state.clear()
        vals, types, shapes, ovals, otypes = io_of(u.node)
        name = op_name(u.node)
        if u.phase == "backward":
            fwd = owner_of_seq.get(seq_of.get(u.node.id, -1))
            run = fwd.out_dtype if fwd is not None and fwd.out_dtype else FP32
            u.backward_of = fwd.node.id if fwd is not None else None
            # a tensor of the forward is read as autocast left it (saved for backward); a gradient
            # (made in backward) has the dtype the forward op ran in
            u.in_dtypes = [
                d if d != FP32 else (saved(v) if v[0] in seen and v[0] not in made_bw else run)
                for v, d in zip(vals, _recorded(vals, types))
            ]
            u.out_dtype = run if any(d in (FP32, BF16) for d in u.in_dtypes) else None
            # its results are gradients, whatever forward tensor had the same id before (ids are reused)
            made_bw.update(
                v[0] for m in u.members if m in by_id and by_id[m].name != "gap" for v, _d, _s in _outputs(by_id[m])
            )
            continue
        if u.phase != "forward":
            u.in_dtypes = _recorded(vals, types)
            continue
        u.autocast = True
        pos = tensors(vals, types, shapes)
        now = [dtype.get(v[0], d) if d == FP32 else d for v, d, _s in pos]
        needs = [v[0] in grad or v[1] in params for v, _d, _s in pos]
        single = iter(now)
        u.in_dtypes = [next(single) if d is not None else None for d in _recorded(vals, types)]
        floats = [d for d in now if d in (FP32, BF16)]
        if name in CPU_FP32:
            u.policy, res = "fp32", FP32
        elif u.node.id in lower:
            u.policy, res = "lower", BF16
            cast.update(v[0] for (v, _d, _s), d in zip(pos, now) if d == FP32)
            cast_params.update(v[1] for (v, _d, _s), d in zip(pos, now) if d == FP32 and v[1] in params)
        elif not floats:
            res = FP32
        elif name.endswith("_") or name in FIRST_INPUT:
            res = floats[0]  # in place: the result is `self`; a norm: its input's dtype
        else:
            res = BF16 if all(d == BF16 for d in floats) else FP32
        if u.policy != "same":
            for (_v, _d, s), d, g in zip(pos, now, needs):
                if d in (FP32, BF16) and d != res and g:
                    u.backward_casts.append((list(s) if isinstance(s, list) else [], res, d))
        u.out_dtype = res if floats or u.policy != "same" else None
        requires = any(needs)
        seen.update(v[0] for v, _d, _s in pos)
        made = [t for m in u.members[1:] if m in by_id and by_id[m].name != "gap" for t in _outputs(by_id[m])]
        for v, rec, _s in made + tensors(ovals, otypes):  # nested ops' results too (ids are reused)
            cast.discard(v[0])
            seen.add(v[0])
            if requires:
                grad.add(v[0])
            if rec == FP32 and res == BF16:
                dtype[v[0]] = BF16
            else:
                dtype.pop(v[0], None)
    return out


def _holds_lower(u: Unit, nodes: Sequence[pb.Node]) -> bool:
    """Whether the op or an op nested in it is on autocast's lower-precision list (`aten::lstm`
    runs `mkldnn_rnn_layer`)."""
    if op_name(u.node) in CPU_LOWER:
        return True
    inner = {m for m in u.members}
    return any(n.id in inner and n.name.startswith("aten::") and op_name(n) in CPU_LOWER for n in nodes)


def _outputs(node: pb.Node) -> list[tuple[list[int], str, list[int]]]:
    _v, _t, _s, ovals, otypes = io_of(node)
    return tensors(ovals, otypes)


def _recorded(vals: list[Any], types: list[Any]) -> list[Optional[str]]:
    """Per input position: the recorded dtype of a single tensor, else None."""
    return [_type_dtype(t) if is_tensor_value(v) and isinstance(t, str) else None for v, t in zip(vals, types)]


__all__ = [
    "windows",
    "BF16",
    "CPU_FP32",
    "CPU_LOWER",
    "FP32",
    "Unit",
    "io_of",
    "op_name",
    "propagate",
    "tensors",
    "units",
]

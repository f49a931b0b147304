"""The Chakra paper's MLP case study: six fully connected layers on a two-dimensional network.

Modes (paper §6.2.3): `mp` splits every layer's weights over all NPUs; `dp-mp` runs data
parallelism along the first network dimension and model parallelism along the second; `mp-dp`
the reverse. Ranks are laid out dimension 1 fastest (rank = i1 + d1 * i2), and every collective
carries `involved_dim` saying which network dimension it uses (ASTRA-sim's multi-dim plan).

Model parallelism is a column split: forward GEMM on h/mp output columns then an all-gather of
the activations; backward input-gradient GEMM then an all-reduce of the input gradient, and the
weight-gradient GEMM. Data parallelism all-reduces each layer's weight gradient (overlapped with
the rest of backward) before an SGD update (2 FLOPs per parameter).
FLOPs of a step: 6 * batch * layers * hidden^2 (GEMMs) + 2 * layers * hidden^2 * dp (updates).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from chakra.dsl.device import Device
from chakra.dsl.template import Program
from chakra.dsl.workload import DSLError, Workload
from chakra.schema import CollectiveType as CT

MODES = ("mp", "dp-mp", "mp-dp")


@dataclass
class MLPConfig:
    dim1: int = 4
    dim2: int = 4
    mode: str = "dp-mp"
    layers: int = 6
    hidden: int = 4096
    batch: int = 512
    dtype_bytes: int = 2

    def sizes(self) -> tuple[int, int]:
        """(dp, mp) degrees."""
        if self.mode == "mp":
            return 1, self.dim1 * self.dim2
        if self.mode == "dp-mp":
            return self.dim1, self.dim2
        return self.dim2, self.dim1

    def check(self) -> None:
        if self.mode not in MODES:
            raise DSLError(f"mlp: --mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        for f in ("dim1", "dim2", "layers", "hidden", "batch"):
            if getattr(self, f) < 1:
                raise DSLError(f"mlp: --{f} must be >= 1")
        dp, mp = self.sizes()
        if self.batch % dp:
            raise DSLError(f"mlp: batch {self.batch} is not divisible by the data-parallel degree {dp}")
        if self.hidden % mp:
            raise DSLError(f"mlp: hidden {self.hidden} is not divisible by the model-parallel degree {mp}")

    def flops(self) -> float:
        dp, _ = self.sizes()
        return 6 * self.batch * self.layers * self.hidden**2 + 2 * self.layers * self.hidden**2 * dp


def build_mlp(cfg: MLPConfig, device: Optional[Device] = None) -> Workload:
    cfg.check()
    device = device or Device()
    dp, mp = cfg.sizes()
    n = cfg.dim1 * cfg.dim2
    h, db = cfg.hidden, cfg.dtype_bytes
    b = cfg.batch // dp
    if cfg.mode == "mp":
        mp_dims, dp_dims = (True, True), (False, False)
    elif cfg.mode == "dp-mp":
        dp_dims, mp_dims = (True, False), (False, True)
    else:
        mp_dims, dp_dims = (True, False), (False, True)

    p = Program(device)
    prev = None
    for layer in range(cfg.layers):
        prev = p.compute(f"L{layer}.fwd", 2 * b * h * h / mp, db * (b * h + h * h / mp + b * h / mp), after=[prev])
        if mp > 1:
            prev = p.collective(
                CT.ALL_GATHER, b * h / mp * db, "mp", after=[prev], name=f"L{layer}.fwd.ag", involved_dim=mp_dims
            )
    grads = []
    for layer in reversed(range(cfg.layers)):
        prev = p.compute(
            f"L{layer}.bwd.dgrad", 2 * b * h * h / mp, db * (b * h / mp + h * h / mp + b * h), after=[prev]
        )
        wgrad = p.compute(
            f"L{layer}.bwd.wgrad", 2 * b * h * h / mp, db * (b * h + b * h / mp + h * h / mp), after=[prev]
        )
        prev = wgrad
        if dp > 1:
            grads.append(
                (
                    layer,
                    p.collective(
                        CT.ALL_REDUCE,
                        h * h / mp * db,
                        "dp",
                        after=[wgrad],
                        name=f"L{layer}.grad_ar",
                        involved_dim=dp_dims,
                    ),
                )
            )
        if mp > 1 and layer > 0:
            prev = p.collective(
                CT.ALL_REDUCE, b * h * db, "mp", after=[prev], name=f"L{layer}.bwd.ar", involved_dim=mp_dims
            )
    ready = dict(grads)
    for layer in range(cfg.layers):
        params = h * h / mp
        prev = p.compute(f"L{layer}.sgd", 2 * params, 3 * params * db, after=[prev, ready.get(layer)])

    w = Workload(n, device=device, name=f"mlp-{cfg.mode}")
    d1 = cfg.dim1

    def coords(r: int) -> tuple[int, int]:
        return r % d1, r // d1

    dp_groups, mp_groups = {}, {}
    for r in range(n):
        i1, i2 = coords(r)
        if cfg.mode == "mp":
            dp_key, mp_key = r, 0
            dp_members, mp_members = [r], list(range(n))
        elif cfg.mode == "dp-mp":
            dp_key, mp_key = i2, i1
            dp_members = [i + d1 * i2 for i in range(cfg.dim1)]
            mp_members = [i1 + d1 * j for j in range(cfg.dim2)]
        else:
            mp_key, dp_key = i2, i1
            mp_members = [i + d1 * i2 for i in range(cfg.dim1)]
            dp_members = [i1 + d1 * j for j in range(cfg.dim2)]
        if dp > 1 and dp_key not in dp_groups:
            dp_groups[dp_key] = w.group(dp_members, f"dp:{dp_key}")
        if mp > 1 and mp_key not in mp_groups:
            mp_groups[mp_key] = w.group(mp_members, f"mp:{mp_key}")
        groups = {}
        if dp > 1:
            groups["dp"] = dp_groups[dp_key]
        if mp > 1:
            groups["mp"] = mp_groups[mp_key]
        w.adopt(r, p.stamp(r, groups, {}), p.flops)
    return w

"""Data-parallel training step written with the DSL: run `chakra generate spec examples/data_parallel.py -o out/dp`.

Each rank runs forward and backward over three layers; every layer's gradient all-reduce starts as
soon as that layer's backward is done (overlapping the rest of backward), and the optimizer waits
for all of them.
"""

from chakra.dsl import Device, Workload

RANKS = 8
LAYERS = 3
HIDDEN = 4096
BATCH = 64  # per rank


def build() -> Workload:
    w = Workload(RANKS, device=Device(tflops=100, mem_bw=2000), name="data_parallel")
    ranks = w.all_ranks
    gemm_flops = 2 * BATCH * HIDDEN * HIDDEN
    gemm_bytes = 2 * (2 * BATCH * HIDDEN + HIDDEN * HIDDEN)
    prev = None
    for layer in range(LAYERS):
        prev = w.compute(ranks, f"L{layer}.fwd", flops=gemm_flops, bytes=gemm_bytes, after=prev)
    grads = []
    for layer in reversed(range(LAYERS)):
        prev = w.compute(ranks, f"L{layer}.bwd", flops=2 * gemm_flops, bytes=2 * gemm_bytes, after=prev)
        grads.append(w.all_reduce(2 * HIDDEN * HIDDEN, after=prev, name=f"L{layer}.grad_allreduce"))
    w.compute(
        ranks,
        "optimizer",
        flops=10 * LAYERS * HIDDEN * HIDDEN,
        bytes=16 * LAYERS * HIDDEN * HIDDEN,
        after=[prev, *grads],
    )
    return w


if __name__ == "__main__":
    build().save("out/data_parallel")

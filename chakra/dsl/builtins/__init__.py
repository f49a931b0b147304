"""Built-in parallel workloads (`chakra generate NAME`): microbench, mlp, transformer, dlrm.

Each module has a config dataclass with a `check()` that rejects impossible layouts, a closed-form
FLOP count to check the trace against, and a `build_*` function returning a `Workload` built from
one `Program` per distinct rank shape, stamped onto every rank of that shape.
"""

"""When a simulation runs without numpy: the lean path for small traces.

numpy backs the simulator's bulk work (indexing a rank's nodes, compiling them, the per-rank
figures, the ASTRA-sim checks' dependency columns), and importing it costs about 40 ms of CPU:
most of a small `chakra simulate`'s start-up. Below `LEAN_NODES` nodes a job is indexed, checked
and compiled in plain Python into `array`s instead (`chakra.feeder.table`, `chakra.sim.compiler`,
`chakra.sim.api.rank_stats`, `chakra.export.astrasim`), to exactly the same results
(tests/sim/test_lean.py); above it, or once numpy is imported anyway, numpy does it.
"""

from __future__ import annotations

import sys

#: Nodes one simulation reads lean before it turns to numpy: below this, plain Python takes less
#: CPU over them than importing numpy does (bench/startup_bench.py).
LEAN_NODES = 8192


def lean_budget() -> int:
    """Nodes the next simulation (or check) may handle lean: none once numpy is imported (it is
    then free, and faster per node)."""
    return 0 if "numpy" in sys.modules else LEAN_NODES

"""Running a job with Python's cyclic garbage collector paused."""

from __future__ import annotations

import functools
import gc
from typing import Any, Callable


def without_gc(fn: Callable) -> Callable:
    """Run `fn` with the cyclic garbage collector paused: the simulator and the ASTRA-sim checks
    allocate hundreds of thousands of small acyclic objects (tuples, ints, decoded nodes), and
    generation sweeps over them cost more than the work (about 15% of the checks of a 1,024-rank
    3-D step)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        enabled = gc.isenabled()
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if enabled:
                gc.enable()

    return wrapper

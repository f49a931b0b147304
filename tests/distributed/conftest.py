"""A local Dask cluster per test module (two worker processes, one thread each: ~2 s to start)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def client():
    pytest.importorskip("distributed", reason="Dask (distributed) is not installed: pip install 'chakra-et[dist]'")
    from chakra.distributed.cluster import dask_client

    with dask_client(workers=2) as c:
        yield c

"""ETFeeder speed and memory. Prints figures; not a test.

1. Writes an N-node `.et` (default 10,000,000 nodes; four interleaved dependency chains plus a
   cross edge every 16 nodes, so several nodes are ready at once), encoded straight to the wire
   format for speed.
2. Opens it with `ETFeeder` (one indexing pass) and drains it with the official protocol
   (`get_next_issuable_id` / `free_children_nodes`), reporting issue+free nodes/s and peak RSS.
3. Drains the first 1,000,000 nodes of a second feeder with `get_next_issuable_node` (decoding
   each node lazily from the memory map through the bounded cache).

    .venv/bin/python bench/feeder_bench.py [--nodes 10000000]
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

from chakra.feeder import ETFeeder
from chakra.io import encode_varint
from chakra.schema import pb


def _v(x: int) -> bytes:
    return encode_varint(x)


def write_big(path: Path, n: int) -> None:
    """Nodes: id=i, name="n", COMP, data_deps=[i-4] (+ [i-1] every 16th), duration 1 us."""
    md = pb.GlobalMetadata(version="0.0.4").SerializeToString()
    with open(path, "wb") as f:
        f.write(_v(len(md)) + md)
        buf = []
        for i in range(n):
            deps = b""
            if i >= 4:
                packed = _v(i - 4) + (_v(i - 1) if i % 16 == 15 else b"")
                deps = b"\x2a" + _v(len(packed)) + packed
            body = b"\x08" + _v(i) + b"\x12\x01n\x18\x04" + deps + b"\x38\x01"
            buf.append(_v(len(body)) + body)
            if len(buf) >= 100_000:
                f.write(b"".join(buf))
                buf.clear()
        f.write(b"".join(buf))


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=10_000_000)
    args = ap.parse_args()
    n = args.nodes
    with tempfile.TemporaryDirectory(prefix="chakra-feederbench-") as d:
        path = Path(d) / "big.0.et"
        t0 = time.perf_counter()
        write_big(path, n)
        print(f"wrote {n:,} nodes, {path.stat().st_size / 2**20:,.0f} MiB in {time.perf_counter() - t0:.1f} s")
        base = rss_mib()
        t0 = time.perf_counter()
        c0 = time.process_time()
        f = ETFeeder(path)
        t_index = time.perf_counter() - t0
        print(f"index cpu time: {time.process_time() - c0:.1f} s")
        rate = n / t_index
        print(f"index: {t_index:.1f} s ({rate:,.0f} nodes/s), peak RSS {rss_mib():,.0f} MiB (before {base:,.0f})")
        t0 = time.perf_counter()
        c0 = time.process_time()
        get = f.get_next_issuable_id
        free = f.free_children_nodes
        count = 0
        while True:
            nid = get()
            if nid is None:
                break
            free(nid)
            count += 1
        t_drain = time.perf_counter() - t0
        c_drain = time.process_time() - c0
        assert count == n and not f.has_nodes_to_issue()
        print(
            f"issue+free (ids): {count:,} nodes in {t_drain:.1f} s = {count / t_drain:,.0f} nodes/s "
            f"(cpu {c_drain:.1f} s = {count / c_drain:,.0f} nodes per cpu s)"
        )
        print(f"peak RSS after draining {n:,} nodes: {rss_mib():,.0f} MiB")
        f.close()
        del f, get, free
        g = ETFeeder(path, cache_size=4096)
        limit = min(n, 1_000_000)
        t0 = time.perf_counter()
        for _ in range(limit):
            node = g.get_next_issuable_node()
            g.free_children_nodes(node.id)
        t_dec = time.perf_counter() - t0
        print(f"issue+free (decoded nodes, cache 4096): {limit / t_dec:,.0f} nodes/s over {limit:,} nodes")
        print(f"peak RSS overall: {rss_mib():,.0f} MiB")
        g.close()


if __name__ == "__main__":
    main()

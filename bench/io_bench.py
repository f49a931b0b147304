"""I/O throughput on a synthetic 1,000,000-node trace (3 deps and 4 attributes per node).

Prints nodes/s and MB/s for writing, for reading with chakra.io, and for bare loops over the same
payloads: `Node.FromString(p)` and `Node().ParseFromString(p)` (the floor any reader that hands
out one message per node pays). read/bare shows how much the framing costs on top of protobuf.

    python bench/io_bench.py [--nodes N] [--dir DIR]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from google.protobuf.internal import api_implementation

from chakra.io import TraceReader, TraceWriter, iter_raw_messages
from chakra.schema import NodeType, pb
from chakra.schema.attrs import set_attrs
from chakra.trace import make_metadata


def build_nodes(n: int) -> list[pb.Node]:
    nodes = []
    for i in range(n):
        node = pb.Node(id=i, name="aten::mm", type=NodeType.COMP_NODE, duration_micros=i % 97)
        node.data_deps.extend((max(i - 1, 0), max(i - 2, 0), max(i - 3, 0)))
        set_attrs(node, {"is_cpu_op": False, "num_ops": 1 << 20, "tensor_size": 4096 + i, "stream": 7})
        nodes.append(node)
    return nodes


def best_of(fn, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--dir", type=Path, default=None)
    args = ap.parse_args()
    print(f"protobuf backend: {api_implementation.Type()}")
    nodes = build_nodes(args.nodes)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        path = Path(tmp) / "bench.0.et"

        def write() -> None:
            with TraceWriter(path) as w:
                w.write_metadata(make_metadata())
                w.write_nodes(nodes)

        t_write = best_of(write)
        size_mb = path.stat().st_size / 1e6

        def read() -> None:
            with TraceReader(path) as r:
                for _ in r:
                    pass

        t_read = best_of(read)
        payloads = [p for _, _, p in iter_raw_messages(path)][1:]
        from_string = pb.Node.FromString

        def bare() -> None:
            for p in payloads:
                from_string(p)

        t_bare = best_of(bare)
        node_class = pb.Node

        def bare_parse() -> None:
            for p in payloads:
                node_class().ParseFromString(p)

        t_parse = best_of(bare_parse)
    n = args.nodes
    print(f"trace: {n:,} nodes, {size_mb:.1f} MB")
    print(f"write: {n / t_write:>12,.0f} nodes/s  {size_mb / t_write:8.1f} MB/s  ({t_write:.2f} s)")
    print(f"read : {n / t_read:>12,.0f} nodes/s  {size_mb / t_read:8.1f} MB/s  ({t_read:.2f} s)")
    print(f"bare : {n / t_bare:>12,.0f} nodes/s  {size_mb / t_bare:8.1f} MB/s  ({t_bare:.2f} s)  Node.FromString loop")
    print(
        f"parse: {n / t_parse:>12,.0f} nodes/s  {size_mb / t_parse:8.1f} MB/s  ({t_parse:.2f} s)"
        "  Node().ParseFromString loop"
    )
    print(
        f"read/bare = {t_bare / t_read:.0%} of the FromString loop, {t_parse / t_read:.0%} of the ParseFromString loop"
    )


if __name__ == "__main__":
    main()

"""Point-to-point ring: every rank sends a block to its right neighbour, then reduces what it got.

Run: chakra generate spec examples/ring_exchange.py -o out/ring  (or: python examples/ring_exchange.py)
"""

from chakra.dsl import Workload

RANKS = 4
BLOCK = 8 << 20


def build() -> Workload:
    w = Workload(RANKS, name="ring_exchange")
    produce = w.compute(w.all_ranks, "produce", duration_us=50, flops=1e9, bytes=BLOCK)
    received = []
    for r in range(RANKS):
        pair = w.send(r, (r + 1) % RANKS, BLOCK, after=produce)
        received.append(pair.recv)
    for r in range(RANKS):
        w.compute(r, "reduce", duration_us=20, flops=BLOCK // 2, bytes=2 * BLOCK, after=received[(r - 1) % RANKS])
    return w


if __name__ == "__main__":
    build().save("out/ring_exchange")

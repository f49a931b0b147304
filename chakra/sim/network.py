"""The analytical network: message times between two NPUs, congestion-unaware and congestion-aware.

Ranks are mixed-radix addresses with dimension 0 fastest (docs/astra-sim.md §3.2). Both backends charge a
message on the lowest dimension whose coordinate differs, with that dimension's topology, latency L
(ns) and bandwidth B' (bytes/ns, GB = 2^30):

- unaware: floor(hops * L + size / B'), hops = ring distance (shorter way), 1 (FullyConnected) or
  2 (Switch): one serialization whatever the hop count;
- aware: unidirectional links, store-and-forward per hop: each link delivers after
  floor(L + size / B') and is busy for floor(size / B'); chunks queue FIFO per link. ASTRA-sim's
  aware backend accepts one dimension only; here each dimension gets its own links (an extension).
"""

from __future__ import annotations

import math

from chakra.sim.config import NetworkConfig


class Network:
    def __init__(self, cfg: NetworkConfig, aware: bool) -> None:
        self.cfg = cfg
        self.aware = aware
        self.counts = [int(c) for c in cfg.npus_count]
        self.strides = [math.prod(self.counts[:d]) for d in range(len(self.counts))]
        self.bpn = [cfg.bytes_per_ns(d) for d in range(cfg.dims)]
        self.lat = [float(x) for x in cfg.latency]
        self.topo = list(cfg.topology)
        self._p2p: dict[tuple[int, int, int], int] = {}
        self._routes: dict[tuple[int, int], list[tuple]] = {}
        self._link_times: dict[tuple[int, int], tuple[int, int]] = {}

    def coord(self, rank: int, dim: int) -> int:
        return (rank // self.strides[dim]) % self.counts[dim]

    def diff_dim(self, src: int, dst: int) -> int:
        for d in range(len(self.counts)):
            if self.coord(src, d) != self.coord(dst, d):
                return d
        return -1

    def hops(self, dim: int, a: int, b: int) -> int:
        topo = self.topo[dim]
        if topo == "Ring":
            p = self.counts[dim]
            k = (b - a) % p
            return min(k, p - k)
        return 1 if topo == "FullyConnected" else 2

    def p2p_time(self, src: int, dst: int, size: int) -> int:
        """Delivery time of one message on idle links (send/recv nodes use this)."""
        key = (src, dst, size)
        t = self._p2p.get(key)
        if t is None:
            d = self.diff_dim(src, dst)
            if d < 0:
                t = 0
            else:
                h = self.hops(d, self.coord(src, d), self.coord(dst, d))
                if self.aware:
                    t = h * int(self.lat[d] + size / self.bpn[d])
                else:
                    t = int(h * self.lat[d] + size / self.bpn[d])
            self._p2p[key] = t
        return t

    # -- congestion-aware: per-link FIFO, store-and-forward ------------------------------------

    def link_times(self, dim: int, size: int) -> tuple[int, int]:
        """(busy, delivery) ns of one message on one link of dimension `dim` (aware backend)."""
        key = (dim, size)
        got = self._link_times.get(key)
        if got is None:
            ser = size / self.bpn[dim]
            got = self._link_times[key] = (int(ser), int(self.lat[dim] + ser))
        return got

    def route(self, src: int, dst: int) -> list[tuple]:
        """The links (dim, line, from, to) a message takes on the aware backend (memoised)."""
        key = (src, dst)
        got = self._routes.get(key)
        if got is None:
            got = self._routes[key] = self._route(src, dst)
        return got

    def _route(self, src: int, dst: int) -> list[tuple]:
        d = self.diff_dim(src, dst)
        if d < 0:
            if self.aware and self.topo[0] == "Switch":
                # ASTRA-sim's Switch routes a message to itself up to the switch and back down
                # (its Ring and FullyConnected abort on one)
                a = self.coord(src, 0)
                return [(0, src - a, a, -1), (0, src - a, -1, a)]
            return []
        a, b = self.coord(src, d), self.coord(dst, d)
        line = src - a * self.strides[d]  # identifies the 1-D line the message travels on
        topo = self.topo[d]
        if topo == "FullyConnected":
            return [(d, line, a, b)]
        if topo == "Switch":
            return [(d, line, a, -1), (d, line, -1, b)]
        p = self.counts[d]
        cw = (b - a) % p
        step = 1 if cw <= p - cw else -1  # shorter way, ties clockwise
        links = []
        x = a
        while x != b:
            y = (x + step) % p
            links.append((d, line, x, y))
            x = y
        return links

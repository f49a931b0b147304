"""Where the bytes went: an optional recorder of every message and every link occupancy.

The messenger calls it (when one is attached; nothing is recorded, and nothing costs, otherwise)
at two places:

- `message(now, src, dst, size, key)`: a message leaves `src` (both backends). Its bytes count once
  on the dimension the network charges it to (the lowest one whose coordinate differs), and on the
  collective or point-to-point pair that sent it (the message key names it).
- `link(link, now, busy, size, key)`: a message starts serializing on one link of the
  congestion-aware backend, holding it `busy` ns. Bytes count once per link crossed.

Busy time and utilization:

- per link (aware): ns the link spent serializing; utilization = busy / run span;
- per dimension, aware: the summed busy time of its links over (its link count x span);
- per dimension, unaware: the backend has no links and never queues, so busy time is what the
  senders spent serializing (`size / bandwidth` per message) over (NPUs x span). Many messages at
  once from one NPU overlap there, so this utilization can pass 100%: a sign the real fabric
  would congest.

Time bins split the run span into equal parts; a busy interval counts in the bins it overlaps.
"""

from __future__ import annotations

from array import array
from collections import defaultdict
from typing import Any

import numpy as np

from chakra.schema import collective_name


def _short(x: float) -> float:
    """Four significant digits: bins of a long run stay readable in JSON."""
    return float(f"{x:.4g}")


def _owner(key: Any) -> Any:
    """The collective ((pg, seq)) or point-to-point pair (("p2p", src, dst, tag)) a message key
    belongs to; rendezvous handshakes (("rv", key)) count on the message they precede."""
    if key[0] == "rv":
        key = key[1]
    if key[0] == "p2p":
        return key
    return key[0]


class TrafficRecorder:
    """Collects messages and link occupancy during one simulation (see module doc)."""

    def __init__(self, net: Any, bins: int = 40) -> None:
        self.net = net
        self.bins = max(1, int(bins))
        dims = len(net.counts)
        self.dim_bytes = [0] * dims
        self.dim_msgs = [0] * dims
        self.dim_iv = [array("q") for _ in range(dims)]  # unaware: (start, serialization) pairs
        self.local_bytes = 0  # messages between an NPU and itself (no dimension)
        self.link_iv: dict[tuple, array] = {}  # aware: (start, busy) pairs per link
        self.link_bytes: dict[tuple, int] = defaultdict(int)
        self.link_by_owner: dict[tuple, dict[Any, int]] = defaultdict(lambda: defaultdict(int))
        self.owner_dim_bytes: dict[Any, list[int]] = {}
        self.colls: dict[Any, tuple[int, int, int, int]] = {}  # (pg, seq) -> (type, size, node id, members)
        self._summary: Any = None

    # -- hooks ---------------------------------------------------------------------------------
    def collective(self, key: Any, ctype: int, size: int, node_id: int, members: int) -> None:
        """A collective met for the first time (its first member issued it)."""
        self.colls[key] = (ctype, size, node_id, members)

    def message(self, now: int, src: int, dst: int, size: int, key: Any) -> None:
        net = self.net
        d = net.diff_dim(src, dst)
        if d < 0:
            self.local_bytes += size
            return
        self.dim_bytes[d] += size
        self.dim_msgs[d] += 1
        owner = _owner(key)
        per = self.owner_dim_bytes.get(owner)
        if per is None:
            per = self.owner_dim_bytes[owner] = [0] * len(self.dim_bytes)
        per[d] += size
        if not net.aware:
            iv = self.dim_iv[d]
            iv.append(now)
            iv.append(int(size / net.bpn[d]))

    def link(self, link: tuple, now: int, busy: int, size: int, key: Any) -> None:
        iv = self.link_iv.get(link)
        if iv is None:
            iv = self.link_iv[link] = array("q")
        iv.append(now)
        iv.append(busy)
        self.link_bytes[link] += size
        self.link_by_owner[link][_owner(key)] += size

    # -- the answer ----------------------------------------------------------------------------
    def link_name(self, link: tuple) -> str:
        d, line, a, b = link
        stride = self.net.strides[d]

        def end(x: int) -> str:
            return "switch" if x < 0 else f"npu {line + x * stride}"

        return f"dim {d}: {end(a)} -> {end(b)}"

    def owner_name(self, owner: Any) -> str:
        if owner and owner[0] == "p2p":
            return f"send/recv {owner[1]}->{owner[2]} tag {owner[3]}"
        got = self.colls.get(owner)
        pg, seq = owner
        group = pg or "all"
        if got is None:
            return f"collective #{seq} on group {group}"
        ctype, size, node_id, _ = got
        return f"{collective_name(ctype)} #{seq} on group {group} ({size:,} B, node {node_id})"

    def links_per_dim(self, d: int) -> int:
        """Links the aware backend gives dimension d (both directions)."""
        p = self.net.counts[d]
        lines = int(np.prod(self.net.counts)) // p if p else 0
        topo = self.net.topo[d]
        if p < 2:
            return 0
        if topo == "FullyConnected":
            per = p * (p - 1)
        elif topo == "Switch":
            per = 2 * p
        else:
            per = 2 * p if p > 2 else 2
        return per * lines

    def summary(self, span_ns: int, top: int = 8) -> dict[str, Any]:
        """Everything as plain JSON-able data; `span_ns` = the run's finish time."""
        key = (span_ns, top)
        if self._summary is None or self._summary[0] != key:
            self._summary = (key, self._compute(span_ns, top))
        return self._summary[1]

    def log_lines(self, span_ns: int) -> str:
        """The summary as comment lines for the simulator's CSV log (readers skip `#` lines)."""
        s = self.summary(span_ns)
        out = [f"# traffic,{s['backend']},span_ns={s['span_ns']},bins={s['bins']},bin_ns={s['bin_ns']:.1f}\n"]
        for d in s["dimensions"]:
            out.append(
                f"# traffic,dim,{d['dim']},bytes={d['bytes']},busy_ns={d['busy_ns']},"
                f"utilization={d['utilization']:.6g},bins={' '.join(str(x) for x in d['bins'])}\n"
            )
        for row in s["links"]:
            out.append(
                f"# traffic,link,{row['link']},bytes={row['bytes']},busy_ns={row['busy_ns']},"
                f"utilization={row['utilization']:.6g},bins={' '.join(str(x) for x in row['bins'])}\n"
            )
        return "".join(out)

    def _compute(self, span_ns: int, top: int) -> dict[str, Any]:
        net = self.net
        span = max(int(span_ns), 1)
        nb = self.bins
        edges = np.linspace(0, span, nb + 1)
        bin_ns = span / nb

        def binned(iv: array) -> np.ndarray:
            a = np.frombuffer(iv, dtype=np.int64).reshape(-1, 2) if len(iv) else np.zeros((0, 2), np.int64)
            s = a[:, 0].astype(np.float64)
            b = a[:, 1].astype(np.float64)
            # busy time before each edge, summed over intervals; consecutive differences = per bin
            covered = np.clip(edges[:, None] - s[None, :], 0, b[None, :]).sum(axis=1)
            return np.diff(covered)

        dims = []
        aware = bool(net.aware)
        link_rows = []
        dim_busy = [0] * len(net.counts)
        dim_bins = [np.zeros(nb) for _ in net.counts]
        if aware:
            for link, iv in self.link_iv.items():
                per_bin = binned(iv)
                busy = int(np.frombuffer(iv, dtype=np.int64)[1::2].sum())
                dim_busy[link[0]] += busy
                dim_bins[link[0]] += per_bin
                owners = sorted(self.link_by_owner[link].items(), key=lambda kv: -kv[1])
                link_rows.append(
                    {
                        "link": self.link_name(link),
                        "dim": link[0],
                        "bytes": int(self.link_bytes[link]),
                        "messages": len(iv) // 2,
                        "busy_ns": busy,
                        "utilization": busy / span,
                        "bins": [_short(float(x) / bin_ns) for x in per_bin],
                        "collectives": [{"name": self.owner_name(o), "bytes": int(v)} for o, v in owners[:top]],
                    }
                )
        for d in range(len(net.counts)):
            if aware:
                capacity = self.links_per_dim(d)
                busy = dim_busy[d]
                per_bin = dim_bins[d]
            else:
                capacity = int(np.prod(net.counts))
                busy = int(np.frombuffer(self.dim_iv[d], dtype=np.int64)[1::2].sum()) if len(self.dim_iv[d]) else 0
                per_bin = binned(self.dim_iv[d])
            cap = max(capacity, 1)
            dims.append(
                {
                    "dim": d,
                    "topology": net.topo[d],
                    "npus": int(net.counts[d]),
                    "bandwidth_GBps": float(net.cfg.bandwidth[d]),
                    "capacity": capacity,
                    "capacity_unit": "links" if aware else "NPUs",
                    "messages": self.dim_msgs[d],
                    "bytes": int(self.dim_bytes[d]),
                    "busy_ns": int(busy),
                    "utilization": busy / (cap * span),
                    "bins": [_short(float(x) / (cap * bin_ns)) for x in per_bin],
                }
            )
        link_rows.sort(key=lambda r: (-r["bytes"], -r["busy_ns"], r["link"]))
        colls = []
        for owner, per in sorted(self.owner_dim_bytes.items(), key=lambda kv: -sum(kv[1])):
            row = {"name": self.owner_name(owner), "bytes_per_dim": [int(x) for x in per], "bytes": int(sum(per))}
            got = self.colls.get(owner) if not (owner and owner[0] == "p2p") else None
            if got is not None:
                row.update(type=collective_name(got[0]), size=got[1], node=got[2], members=got[3])
            colls.append(row)
        return {
            "backend": "aware" if aware else "unaware",
            "span_ns": int(span_ns),
            "bins": nb,
            "bin_ns": bin_ns,
            "dimensions": dims,
            "local_bytes": int(self.local_bytes),
            "links": link_rows,
            "heaviest_links": [r["link"] for r in link_rows[:top]],
            "collectives": colls,
        }

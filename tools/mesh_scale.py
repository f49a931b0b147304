#!/usr/bin/env python3
"""Grow a converted 2-D DeviceMesh job (outer x inner) to more ranks along the outer dimension.

A recorded 8-rank TP x DP or HSDP job (mesh (2, 4): `mesh_dp`/`mesh_replicate` outer, `mesh_tp`/
`mesh_shard` inner, torch's row-major rank order r = outer * inner + inner_index) becomes an
(N / inner, inner) job: new rank (o, i) runs the recorded rank (o mod outer, i)'s trace, its inner
collectives on the inner group of its own row, its outer collectives on the outer group of its
column (N / inner members). Message sizes are the recorded ones: the job is the recorded step on a
bigger data-parallel dimension, with the same mesh layout (strided outer groups, contiguous inner
groups), so the simulators' group handling is what is tested at scale.

    python tools/mesh_scale.py OUT/hsdp8/raw --ranks 1024 -o OUT/hsdp1024/raw
    chakra simulate OUT/hsdp1024/raw
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

from chakra.commgroups import groups_beside, write_comm_groups
from chakra.io import read_traces, write_rank_traces
from chakra.schema import NodeType
from chakra.schema.attrs import get_attr, set_attr
from chakra.trace import Trace


def _descs(et_dir: Path, rank: int) -> dict[str, str]:
    with gzip.open(et_dir / f"et.{rank}.json.gz") as fh:
        nodes = json.load(fh)["nodes"]
    init = next(n for n in nodes if "process_group:init" in n["name"])
    return {str(g["pg_name"]): g["pg_desc"] for g in json.loads(init["inputs"]["values"][0])}


def scale(prefix: Path, et_dir: Path, ranks: int, out: Path) -> dict:
    traces = read_traces([prefix])
    groups = groups_beside([prefix])
    world = len(traces)
    descs = {t.rank: _descs(et_dir, t.rank) for t in traces}
    inner_desc = {d for ds in descs.values() for d in ds.values() if d in ("mesh_tp", "mesh_shard")}
    outer_desc = {d for ds in descs.values() for d in ds.values() if d in ("mesh_dp", "mesh_replicate")}
    if len(inner_desc) != 1 or len(outer_desc) != 1:
        raise SystemExit(f"{prefix}: not a 2-D (dp|replicate, tp|shard) mesh job: {sorted(inner_desc | outer_desc)}")
    inner = len(next(groups[n] for n, d in descs[0].items() if d in inner_desc))
    outer = world // inner
    if ranks % inner:
        raise SystemExit(f"--ranks {ranks} is not a multiple of the inner dimension {inner}")
    rows = ranks // inner
    # new groups: inner group of row o is "i<o>", outer group of column i is "o<i>" (ids for the file)
    new_groups: dict[str, list[int]] = {}
    for o in range(rows):
        new_groups[str(1 + o)] = [o * inner + i for i in range(inner)]
    for i in range(inner):
        new_groups[str(1 + rows + i)] = [o * inner + i for o in range(rows)]
    by_rank = {t.rank: t for t in traces}
    out_traces = []
    for r in range(ranks):
        o, i = divmod(r, inner)
        src = by_rank[(o % outer) * inner + i]
        rename = {}
        for name, desc in descs[src.rank].items():
            if desc in inner_desc:
                rename[name] = str(1 + o)
            elif desc in outer_desc:
                rename[name] = str(1 + rows + i)
        nodes = []
        for n in src.nodes:
            if n.type == NodeType.COMM_COLL_NODE:
                m = type(n)()
                m.CopyFrom(n)
                pg = str(get_attr(m, "pg_name"))
                if pg not in rename:
                    raise SystemExit(f"rank {src.rank} node {n.id}: group {pg} is neither mesh dimension")
                set_attr(m, "pg_name", rename[pg])
                nodes.append(m)
            elif n.type in (NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE):
                raise SystemExit(f"rank {src.rank}: point-to-point nodes are not scaled by this tool")
            else:
                nodes.append(n)
        out_traces.append(Trace(metadata=src.metadata, nodes=nodes, rank=r))
    out.parent.mkdir(parents=True, exist_ok=True)
    write_rank_traces(out, out_traces)
    write_comm_groups(out, new_groups)
    return {"ranks": ranks, "mesh": [rows, inner], "recorded_mesh": [outer, inner], "groups": len(new_groups)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("prefix", type=Path, help="converted job (PREFIX of PREFIX.<rank>.et)")
    ap.add_argument(
        "--et-dir", type=Path, required=True, help="the recording (et.<rank>.json.gz: pg_desc of each group)"
    )
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("-o", "--output", type=Path, required=True)
    args = ap.parse_args(argv)
    print(json.dumps(scale(args.prefix, args.et_dir, args.ranks, args.output)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

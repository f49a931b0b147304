"""Process groups as PyTorch made them, on real DeviceMesh recordings (tests/data/samples/pytorch/,
`tools/record_pytorch.py zoo`, torch 2.13 CPU, gloo): DTensor TP x DP, HSDP, FSDP2 + TP.

gloo records no group on its calls; the converter places each collective from the rank's gloo
threads, the functional collectives' group names and the other ranks (converters/pytorch/
gloogroups.py). What a user checks: each collective is on the mesh dimension the recipe puts it on
(`pg_desc` in the rank's own `process_group:init`), none is left on the default group, validate
passes and the job simulates to the end.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from chakra.commgroups import groups_beside
from chakra.converters.pytorch import convert_files
from chakra.converters.pytorch.gloogroups import Survey, candidates, solve
from chakra.io import read_traces
from chakra.schema import CollectiveType, NodeType
from chakra.schema.attrs import get_attr
from chakra.validate import validate_traces

#: sample -> mesh dimension (pg_desc) -> the collective types the recipe issues on it
EXPECTED = {
    "tpdp4": {"mesh_tp": {"ALL_REDUCE", "ALL_GATHER", "REDUCE_SCATTER"}, "mesh_dp": {"ALL_REDUCE"}},
    "tpdp8": {"mesh_tp": {"ALL_REDUCE", "ALL_GATHER", "REDUCE_SCATTER"}, "mesh_dp": {"ALL_REDUCE"}},
    "hsdp4": {"mesh_shard": {"ALL_GATHER", "REDUCE_SCATTER"}, "mesh_replicate": {"ALL_REDUCE"}},
    "hsdp8": {"mesh_shard": {"ALL_GATHER", "REDUCE_SCATTER"}, "mesh_replicate": {"ALL_REDUCE"}},
    "fsdptp4": {"mesh_tp": {"ALL_REDUCE", "ALL_GATHER", "REDUCE_SCATTER"}, "mesh_dp": {"ALL_GATHER", "REDUCE_SCATTER"}},
    "mesh3d8": {"mesh_tp": {"ALL_REDUCE", "ALL_GATHER", "REDUCE_SCATTER"}, "mesh_dp": {"ALL_GATHER", "REDUCE_SCATTER"}},
}


def _world(d: Path) -> int:
    return json.loads((d / "manifest.json").read_text())["world_size"]


def _descs(d: Path, rank: int) -> dict[str, str]:
    """pg_name -> pg_desc from the rank's own `process_group:init` node."""
    with gzip.open(d / f"et.{rank}.json.gz") as fh:
        nodes = json.load(fh)["nodes"]
    (init,) = [n for n in nodes if "process_group:init" in n["name"]]
    return {g["pg_name"]: g["pg_desc"] for g in json.loads(init["inputs"]["values"][0])}


@pytest.fixture(scope="module")
def converted(samples_dir: Path, tmp_path_factory) -> dict:
    cache: dict[str, tuple[Path, list[dict]]] = {}

    def get(name: str) -> tuple[Path, list[dict]]:
        if name not in cache:
            d = samples_dir / "pytorch" / name
            world = _world(d)
            prefix = tmp_path_factory.mktemp(name) / "raw"
            summaries = convert_files(
                [d / f"et.{r}.json.gz" for r in range(world)], [d / f"kineto.{r}.json.gz" for r in range(world)], prefix
            )
            cache[name] = (prefix, summaries)
        return cache[name]

    return get


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_collectives_on_their_mesh_dimension(name, converted, samples_dir):
    prefix, summaries = converted(name)
    d = samples_dir / "pytorch" / name
    assert all(s["comm_pg_defaulted"] == 0 for s in summaries), [s["comm_pg_defaulted"] for s in summaries]
    traces = read_traces([prefix])
    groups = groups_beside([prefix])
    for t in traces:
        descs = _descs(d, t.rank)
        seen: dict[str, set] = defaultdict(set)
        for n in t.nodes:
            if n.type == NodeType.COMM_COLL_NODE:
                pg = str(get_attr(n, "pg_name"))
                assert t.rank in groups[pg], (t.rank, pg, groups[pg])  # a group the rank is in
                seen[descs[pg]].add(CollectiveType(get_attr(n, "comm_type")).name)
        assert dict(seen) == EXPECTED[name], (t.rank, dict(seen))
    report = validate_traces(traces, groups=groups)
    assert report.ok, [f.to_json() for f in report.errors[:5]]


def test_groups_made_every_other_way(converted):
    """`new_subgroups` (consecutive pairs), `new_subgroups_by_enumeration` (strided pairs), a mesh
    flattened over every rank and a mesh slice: the four all-reduces of the step, in issue order,
    run on groups with exactly those members (groups with the same members are interchangeable)."""
    prefix, summaries = converted("subgroups4")
    assert all(s["comm_pg_defaulted"] == 0 for s in summaries)
    groups = groups_beside([prefix])
    for t in read_traces([prefix]):
        colls = sorted((n for n in t.nodes if n.type == NodeType.COMM_COLL_NODE), key=lambda n: n.start_time_micros)
        members = [sorted(groups.get(str(get_attr(n, "pg_name")), range(4))) for n in colls]
        pair = [t.rank - t.rank % 2, t.rank - t.rank % 2 + 1]
        assert members == [pair, [t.rank % 2, t.rank % 2 + 2], [0, 1, 2, 3], pair], (t.rank, members)


def test_pipeline_sends_reach_the_pp_neighbour(converted, samples_dir):
    """FSDP2 x TP x pipelining on a (pp, dp, tp) mesh: a stage sends to group rank 1 of its pp group
    ([r, r + 4]), i.e. to global rank r + 4, and every send has its receive."""
    prefix, _ = converted("mesh3d8")
    traces = read_traces([prefix])
    pairs: Counter = Counter()
    for t in traces:
        for n in t.nodes:
            if n.type in (NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE):
                src, dst = get_attr(n, "comm_src"), get_attr(n, "comm_dst")
                assert {src, dst} == {t.rank % 4, t.rank % 4 + 4}, (t.rank, n.id, src, dst)
                pairs[(src, dst, n.type == NodeType.COMM_SEND_NODE)] += 1
    assert pairs and all(pairs[(s, d, True)] == pairs[(s, d, False)] for s, d, _ in pairs), pairs
    assert {(s, d) for s, d, _ in pairs} == {(r, r + 4) for r in range(4)} | {(r + 4, r) for r in range(4)}


@pytest.mark.parametrize("name", ["tpdp4", "hsdp4", "fsdptp4"])
def test_mesh_job_simulates_to_the_end(name, converted, run_cli):
    """The issue's symptom was a deadlock: every rank now finishes (model mode, one collective at a
    time per rank, as ASTRA-sim runs them)."""
    prefix, _ = converted(name)
    res = run_cli("simulate", str(prefix), "--json", "-q")
    assert res.exit_code == 0, res.stderr[-800:]
    ranks = json.loads(res.stdout)["ranks"]
    assert len(ranks) == 4 and all(v["finish_ns"] > 0 for v in ranks.values())


def _surveys(samples_dir: Path, name: str) -> list[Survey]:
    """Every rank's gloo survey, as the converter's first pass takes it."""
    from chakra.converters.kineto.trace import load_kineto
    from chakra.converters.pytorch.driver import GlooJob, convert_rank
    from chakra.converters.pytorch.et import load_et, read_input_bytes

    d = samples_dir / "pytorch" / name
    job = GlooJob(defer=True)
    for r in range(_world(d)):
        ((en, eraw),) = read_input_bytes(d / f"et.{r}.json.gz")
        ((kn, kraw),) = read_input_bytes(d / f"kineto.{r}.json.gz")
        convert_rank(load_et(en, eraw), load_kineto(kn, kraw), r, job=job)
    return [job.surveys[r] for r in sorted(job.surveys)]


def test_hsdp_threads_need_the_other_ranks(samples_dir):
    """HSDP calls `all_gather_into_tensor` / `reduce_scatter_tensor` / `all_reduce` directly: no call
    names its group, and a rank alone admits several placements (its groups: default, replicate,
    shard). Across the ranks one placement is left, the recipe's."""
    surveys = _surveys(samples_dir, "hsdp4")
    assert all(not any(c.pinned for cs in s.threads.values() for c in cs) for s in surveys)
    assert all(len(candidates(s)) > 1 for s in surveys)
    placed, warnings = solve(surveys)
    assert not warnings
    for s in surveys:
        descs = _descs(samples_dir / "pytorch" / "hsdp4", s.rank)
        for tid, pg in placed[s.rank].items():
            kinds = {CollectiveType(c.coll).name for c in s.threads[tid]}
            want = "mesh_replicate" if kinds == {"ALL_REDUCE"} else "mesh_shard"
            assert descs[pg] == want, (s.rank, tid, kinds, descs[pg])


def test_overlap_in_time_rules_out_the_world_group(samples_dir):
    """The dp threads of TP x DP issue the same all-reduces on every rank, so by sequence alone they
    fit the default (world) group as well as their dp group; the recording shows the two dp groups
    running those all-reduces at different times (a 4-rank all-reduce cannot end on one rank before
    it starts on another), which leaves only the dp groups. Without the times, the tie-break
    (later-created groups) still picks them."""
    surveys = _surveys(samples_dir, "tpdp4")
    timed, _ = solve(surveys)
    for s in surveys:
        for c in [c for cs in s.threads.values() for c in cs]:
            c.start = c.end = None
    untimed, _ = solve(surveys)
    assert timed == untimed
    for s in surveys:
        descs = _descs(samples_dir / "pytorch" / "tpdp4", s.rank)
        assert Counter(descs[pg] for pg in timed[s.rank].values()).keys() <= {"mesh_dp", "mesh_tp"}
        assert "mesh_dp" in {descs[pg] for pg in timed[s.rank].values()}


def test_one_rank_alone_is_placed_with_a_warning(samples_dir, tmp_path):
    """Converted by itself, an HSDP rank's gloo threads fit several placements: the converter still
    places them (same rules, no other ranks) and says it did so from one rank."""
    d = samples_dir / "pytorch" / "hsdp4"
    (summary,) = convert_files([d / "et.1.json.gz"], [d / "kineto.1.json.gz"], tmp_path / "one")
    assert summary["comm_pg_defaulted"] == 0 and summary["comm_pg_from_threads"] == 12
    assert any("this rank's trace alone" in w for w in summary["warnings"]), summary["warnings"]
    descs = _descs(d, 1)
    (trace,) = read_traces([tmp_path / "one"])
    kinds = {(descs[str(get_attr(n, "pg_name"))], n.name) for n in trace.nodes if n.type == NodeType.COMM_COLL_NODE}
    assert kinds == {("mesh_replicate", "gloo:all_reduce"), ("mesh_shard", "gloo:all_gather"),
                     ("mesh_shard", "gloo:all_reduce")}  # fmt: skip

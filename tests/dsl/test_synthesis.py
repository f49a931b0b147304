"""Synthesis: fit on real traces, sample other rank counts, keep replay invariants, report KS."""

from __future__ import annotations

from collections import Counter

import orjson
import pytest

from chakra.dsl.builtins.transformer import TransformerConfig, build_transformer
from chakra.dsl.synthesis import compare, fit, job_view, op_class, sample, synthesize
from chakra.io import read_traces
from chakra.schema import NodeType
from chakra.schema.attrs import get_int
from chakra.validate import validate_traces

pytest.importorskip("sklearn", reason="synthesis needs the optional 'synth' extra (scikit-learn)")


@pytest.fixture(scope="module")
def pytorch_jobs(samples_dir, tmp_path_factory):
    """ddp2 and collectives2 (real 2-rank PyTorch runs) converted to Chakra by our converter."""
    from chakra.converters.pytorch import convert

    out = tmp_path_factory.mktemp("real")
    jobs = {}
    for name in ("ddp2", "collectives2"):
        src = samples_dir / "pytorch" / name
        inputs = [src / f"et.{r}.json" for r in (0, 1)] + [src / f"kineto.{r}.json" for r in (0, 1)]
        convert(inputs, out / name)
        jobs[name] = read_traces([out / name])
    return jobs, out


def _coll_types(traces):
    return Counter(get_int(n, "comm_type") for t in traces for n in t.nodes if n.type == NodeType.COMM_COLL_NODE)


@pytest.fixture(scope="module")
def fitted(pytorch_jobs):
    """One model per real job (fitting is the slow part; sampling is per rank count)."""
    jobs, _ = pytorch_jobs
    out = {}
    for name, traces in jobs.items():
        views = [job_view(traces)]
        out[name] = (views, fit(views, seed=5))
    return out


@pytest.mark.parametrize("ranks", [2, 8, 64])
@pytest.mark.parametrize("job", ["ddp2", "collectives2"])
def test_synthesis_from_pytorch_samples(pytorch_jobs, fitted, job, ranks):
    jobs, _ = pytorch_jobs
    views, model = fitted[job]
    workload = sample(model, ranks, seed=7)
    traces = workload.traces()
    assert len(traces) == ranks
    report = validate_traces(traces)
    assert report.ok, [f.message for f in report.errors][:5]
    # Only collective types the real trace contains appear in the synthetic one.
    assert set(_coll_types(traces)) <= set(_coll_types(jobs[job]))
    rows = {row.quantity: row for row in compare(views, job_view(traces))}
    assert "compute duration [all]" in rows and "comm type mix" in rows
    assert any(q.startswith("message size [") for q in rows)
    for row in rows.values():
        assert 0.0 <= row.statistic <= 1.0 and row.real_n > 0 and row.synth_n > 0
    # Durations are learned, not invented: the distributions stay close.
    assert rows["compute duration [all]"].statistic < 0.1
    print(f"\n{job} -> {ranks} ranks:")
    for row in rows.values():
        print(f"  {row.quantity:34s} {row.measure} {row.statistic:.3f}")


def test_synthesis_from_both_samples_together(pytorch_jobs):
    jobs, _ = pytorch_jobs
    result = synthesize([jobs["ddp2"], jobs["collectives2"]], 8, seed=1, fidelity=True)
    assert validate_traces(result.workload.traces()).ok
    assert result.model.input_worlds == [2, 2] and len(result.model.lengths) == 2
    assert result.fidelity


def test_synthesize_cli_fidelity_json(pytorch_jobs, tmp_path, run_cli):
    _, real = pytorch_jobs
    res = run_cli(
        "synthesize", str(real / "ddp2"), "--ranks", "8", "--seed", "1", "--obfuscate", "--fidelity", "--json",
        "-o", str(tmp_path / "syn"), "-q",
    )  # fmt: skip
    assert res.exit_code == 0, res.stderr
    out = orjson.loads(res.stdout)
    assert len(out["files"]) == 8 and out["fidelity"]
    assert {"quantity", "statistic", "p_value"} <= set(out["fidelity"][0])
    traces = read_traces([tmp_path / "syn"])
    assert validate_traces(traces).ok
    names = {n.name for t in traces for n in t.nodes if n.type == NodeType.COMP_NODE}
    assert names and all(name.startswith("op_") for name in names)  # obfuscated
    # --report, the flag's first name (README), still asks for the same table
    res = run_cli("synthesize", str(real / "ddp2"), "--ranks", "8", "--report", "-o", str(tmp_path / "t"))
    assert res.exit_code == 0 and "message size" in res.stdout


def test_synthesis_scales_group_classes_and_is_deterministic():
    cfg = TransformerConfig(layers=2, hidden=128, heads=4, seq=64, batch=8, microbatches=2, dp=2, tp=2, pp=1, vocab=256)
    real = build_transformer(cfg).traces()
    a = synthesize([real], 16, seed=3)
    b = synthesize([real], 16, seed=3)
    ta, tb = a.workload.traces(), b.workload.traces()
    assert [t.nodes for t in ta] == [t.nodes for t in tb]
    assert validate_traces(ta).ok
    # The 2-rank tp/dp groups of the input become 2-rank groups on 16 ranks, never the world.
    sizes = {len(g.ranks) for g in a.workload.groups if g.pg_name != "0"}
    assert sizes == {2}
    # Compute nodes carry FLOPs and bytes of a real node of the same class (roofline-ready).
    real_work = {(op_class(n.name), get_int(n, "num_ops"), get_int(n, "tensor_size")) for t in real for n in t.nodes}
    synth_comp = [n for t in ta for n in t.nodes if n.type == NodeType.COMP_NODE]
    assert synth_comp and any(get_int(n, "num_ops") > 0 for n in synth_comp)
    assert all((n.name, get_int(n, "num_ops"), get_int(n, "tensor_size")) in real_work for n in synth_comp)
    c = synthesize([real], 16, seed=4)
    assert [t.nodes for t in c.workload.traces()] != [t.nodes for t in ta]


def test_no_communication_is_a_clear_error(tmp_path, run_cli):
    from chakra.dsl import Workload

    w = Workload(2)
    w.compute(w.all_ranks, "only_compute", duration_us=3)
    w.save(tmp_path / "nocomm")
    res = run_cli("synthesize", str(tmp_path / "nocomm"), "--ranks", "4", "-o", str(tmp_path / "x"))
    assert res.exit_code == 1 and "no communication" in res.stderr
    assert not list(tmp_path.glob("x.*"))


def test_missing_sklearn_message(monkeypatch):
    import builtins

    from chakra.dsl.synthesis.model import SynthesisError, _sklearn_mixture

    real_import = builtins.__import__

    def fake(name, *args, **kw):
        if name.startswith("sklearn"):
            raise ImportError(name)
        return real_import(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", fake)
    with pytest.raises(SynthesisError, match=r"chakra-et\[synth\]"):
        _sklearn_mixture()


@pytest.mark.parametrize("job", ["ddp2", "collectives2"])
def test_synthesized_traces_simulate(fitted, job):
    from chakra.sim import simulate

    workload = sample(fitted[job][1], 8, seed=2)
    traces = workload.traces()
    result = simulate(traces, comm_groups=workload.comm_groups())
    assert sorted(result.ranks) == list(range(8))
    for t in traces:
        rank = result.ranks[t.rank]
        assert rank.nodes == len(t.nodes)  # every node ran: nothing left waiting
        compute_us = sum(n.duration_micros for n in t.nodes if n.type == NodeType.COMP_NODE)
        assert rank.finish_ns >= compute_us * 1000 > 0


def test_sizes_follow_the_sequence(pytorch_jobs, fitted):
    """DDP alternates two bucket sizes; the size component in each token keeps that order."""
    jobs, _ = pytorch_jobs
    _, model = fitted["ddp2"]

    def pairs(trace):
        seq = [
            (get_int(n, "comm_type"), get_int(n, "comm_size")) for n in trace.nodes if n.type == NodeType.COMM_COLL_NODE
        ]
        return set(zip(seq, seq[1:]))

    real = pairs(jobs["ddp2"][0])
    assert len({size for (_, size), _ in real}) >= 3  # broadcasts plus two bucket sizes
    for seed in range(3):
        assert pairs(sample(model, 8, seed=seed).traces()[5]) <= real


@pytest.mark.parametrize("ranks", [1, 3, 12])
def test_synthesis_to_awkward_rank_counts(ranks):
    """Groups that do not tile the new rank count fall back to the world; P2P keeps only whole pairs."""
    cfg = TransformerConfig(layers=2, hidden=128, heads=4, seq=64, batch=8, microbatches=2, dp=2, tp=2, pp=2, vocab=256)
    result = synthesize([build_transformer(cfg).traces()], ranks, seed=1)
    traces = result.workload.traces()
    assert len(traces) == ranks
    assert validate_traces(traces).ok
    sizes = {len(g.ranks) for g in result.workload.groups}
    assert sizes == ({ranks} if ranks % 2 else {2, ranks})


def test_synthetic_operators_keep_their_names_and_line_up_in_diff(pytorch_jobs, run_cli, tmp_path):
    """Digits inside names survive (`c10d::allreduce_`, not `c#d::allreduce_`), step numbers go
    (`ProfilerStep#1` -> `ProfilerStep`), and `chakra diff` of real and synthetic traces matches the
    real collectives' wrappers and gives synthetic collectives their recorded durations."""
    _, out = pytorch_jobs
    res = run_cli("synthesize", str(out / "ddp2"), "--ranks", "4", "-o", str(tmp_path / "s"), "-q")
    assert res.exit_code == 0, res.stderr
    synth = read_traces([tmp_path / "s"])
    names = {n.name for t in synth for n in t.nodes}
    assert "c10d::allreduce_" in names and "ProfilerStep" in names
    assert not any("#" in name and name.split("#", 1)[0] in ("c", "ProfilerStep") for name in names)
    diff = run_cli("diff", str(out / "ddp2"), str(tmp_path / "s"), "--json")
    rows = {r["class"]: r for r in orjson.loads(diff.stdout)["classes"]}
    assert rows["c10d::allreduce_"]["count_a"] > 0 and rows["c10d::allreduce_"]["count_b"] > 0
    coll = rows["COMM_COLL:ALL_REDUCE"]
    assert coll["total_b_ns"] > 0 and coll["count_b"] > 0
    # Per collective, the synthetic durations are drawn from the real ones.
    real = sorted(
        n.duration_micros for t in pytorch_jobs[0]["ddp2"] for n in t.nodes if n.type == NodeType.COMM_COLL_NODE
    )
    fake = {n.duration_micros for t in synth for n in t.nodes if n.type == NodeType.COMM_COLL_NODE}
    assert fake <= set(real)

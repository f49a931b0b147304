"""Model parser, least-squares fits (NAMD TRACEBIGSIM sample), duration rewriting, CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from chakra.io import read_traces, write_rank_traces
from chakra.trace import Trace
from chakra.whatif.interpolate import Model, ModelError, Samples, fit, fit_all, load_samples, rewrite, samples_from_csv

from .helpers import cpu


def test_parser_precedence_and_functions():
    m = Model("c0 + c1*p1^2 - 2*c2/p2 + c3*sqrt(p1) + c4*-p1")
    x, off = m.design({"p1": np.array([4.0]), "p2": np.array([8.0])}, 1)
    assert m.coefs == ["c0", "c1", "c2", "c3", "c4"]
    assert x.tolist() == [[1.0, 16.0, -0.25, 2.0, -4.0]] and off.tolist() == [0.0]
    m2 = Model("3 + c1*p1 ** 2")
    x2, off2 = m2.design({"p1": np.array([2.0])}, 1)
    assert x2.tolist() == [[4.0]] and off2.tolist() == [3.0]


@pytest.mark.parametrize(
    "expr",
    ["c1*c2", "c1^2", "p1/c1", "log(c1)", "c0 +", "__import__('os')", "c0 + p1.real", "", "p1 + 2", "c0 + foo(p1)"],
)
def test_parser_rejects_nonlinear_or_bad_expressions(expr):
    with pytest.raises(ModelError):
        Model(expr)


def test_fit_recovers_bigsim_style_model_from_a_csv(tmp_path):
    # A CSV written to the documented (name, params..., duration) layout, durations from a known model.
    rows = ["name,atoms,carbons,duration_us"]
    for p1 in range(10, 200, 17):
        for p2 in (1, 5, 9):
            rows.append(f"doWork,{p1},{p2},{5 + 2 * p1 + 0.5 * p1 * p1 + 3 * p2}")
    path = tmp_path / "samples.csv"
    path.write_text("\n".join(rows) + "\n")
    groups = samples_from_csv(path)
    f = fit(groups["doWork"], Model("c1 + c2*atoms + c3*atoms^2 + c4*carbons"))
    assert f is not None and f.n == len(rows) - 1
    assert f.coefs == pytest.approx({"c1": 5, "c2": 2, "c3": 0.5, "c4": 3}, rel=1e-6)
    assert f.r2 == pytest.approx(1.0) and f.chi2 < 1e-6
    assert f.predict({"atoms": 100, "carbons": 2}) == pytest.approx(5 + 200 + 5000 + 6)


def test_namd_tracebigsim_sample_fit(samples_dir):
    groups = load_samples(samples_dir / "bigsim" / "sample_namd_timings.txt")
    assert {k: len(v) for k, v in groups.items()} == {
        "angles": 9,
        "dihedrals": 9,
        "calc_self_energy_fullelect": 112,
        "calc_pair_energy_fullelect": 870,
    }
    fits = fit_all(groups, Model("c0 + c1*p2"))
    # Cross-check against numpy.polyfit on the same samples (durations in µs).
    for name in ("angles", "dihedrals"):
        s = groups[name]
        slope, intercept = np.polyfit(s.params["p2"], s.duration_us, 1)
        assert fits[name].coefs["c1"] == pytest.approx(slope, rel=1e-9)
        assert fits[name].coefs["c0"] == pytest.approx(intercept, rel=1e-9)
    # angles/dihedrals scale with the count in p2; the pair/self kernels do not follow p2 at all.
    assert fits["angles"].r2 > 0.98 and fits["dihedrals"].r2 > 0.99
    assert fits["calc_pair_energy_fullelect"].r2 < 0.05
    # The PAPI counters explain the pair kernel much better than p2.
    papi = fit_all(groups, Model("c0 + c1*papi1"), match="pair")
    assert list(papi) == ["calc_pair_energy_fullelect"] and papi["calc_pair_energy_fullelect"].r2 > 0.4


def test_rewrite_uses_fits_where_parameters_exist_and_scales_the_rest():
    s = Samples("aten::mm", {"flops": [100.0, 200.0, 400.0]}, [12.0, 22.0, 42.0])
    f = fit(s, Model("c0 + c1*flops"))
    tr = Trace(nodes=[cpu(0, "aten::mm", 99, num_ops=300), cpu(1, "aten::relu", 10), cpu(2, "aten::mm", 8)], rank=0)
    rep = rewrite([tr], {"aten::mm": f}, scale=0.5)
    assert [n.duration_micros for n in tr.nodes] == [32, 5, 4]
    assert rep.modelled == 1 and rep.scaled == 2


def test_interpolate_cli_fit_only_and_rewrite(tmp_path, run_cli, samples_dir):
    namd = samples_dir / "bigsim" / "sample_namd_timings.txt"
    res = run_cli("interpolate", "--samples", str(namd), "--model", "c0 + c1*p2", "--match", "angles", "--json")
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    assert [f["name"] for f in out["fits"]] == ["angles"] and out["fits"][0]["r2"] > 0.98
    write_rank_traces(tmp_path / "in", [Trace(nodes=[cpu(0, "a", 10), cpu(1, "b", 7, [0])], rank=0)])
    res = run_cli("interpolate", str(tmp_path / "in"), "--scale", "2", "-o", str(tmp_path / "out"), "-q")
    assert res.exit_code == 0, res.stderr
    assert [n.duration_micros for n in read_traces([str(tmp_path / "out")])[0].nodes] == [20, 14]
    bad = run_cli("interpolate", "--samples", str(namd), "--model", "c1*c2")
    assert bad.exit_code == 1 and "not linear" in bad.stderr
    bad2 = run_cli("interpolate", str(tmp_path / "in"), "--scale", "2")
    assert bad2.exit_code == 1 and "--output" in bad2.stderr


def test_samples_from_another_trace_use_flops_and_bytes(tmp_path, run_cli):
    # "Machine B" timings: aten::mm takes 2 µs + 1 µs per 1000 FLOPs.
    other = [
        cpu(i, "aten::mm", 2 + f // 1000, num_ops=f, tensor_size=64) for i, f in enumerate((1000, 4000, 9000, 20000))
    ]
    write_rank_traces(tmp_path / "b", [Trace(nodes=other, rank=0)])
    groups = load_samples(tmp_path / "b")
    assert list(groups) == ["aten::mm"] and groups["aten::mm"].params["flops"] == [1000, 4000, 9000, 20000]
    mine = [cpu(0, "aten::mm", 50, num_ops=30000), cpu(1, "aten::relu", 10, [0])]
    write_rank_traces(tmp_path / "a", [Trace(nodes=mine, rank=0)])
    res = run_cli(
        "interpolate", str(tmp_path / "a"), "--samples", str(tmp_path / "b.0.et"), "--model", "c0 + c1*flops",
        "--scale", "0.5", "-o", str(tmp_path / "moved"), "--json",
    )  # fmt: skip
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["rewrite"]["modelled"] == 1
    assert [n.duration_micros for n in read_traces([str(tmp_path / "moved")])[0].nodes] == [32, 5]

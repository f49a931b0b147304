"""Exit codes as the README documents them: 2 for every usage error, bad option values included
(click's usage message naming the option and the choices), 1 for bad input."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    ("args", "option", "choices"),
    [
        (["simulate", "PREFIX", "--comm", "replya"], "--comm", ["model", "replay"]),
        (["simulate", "PREFIX", "--congestion", "awar"], "--congestion", ["aware", "unaware"]),
        (["simulate", "PREFIX", "--missing-deps", "dorp"], "--missing-deps", ["error", "drop"]),
        (["whatif", "PREFIX", "--recipe", "nope"], "--recipe", ["amp", "data-parallel", "drop-comm"]),
        (["whatif", "PREFIX", "--recipe", "amp", "--comm", "x"], "--comm", ["model", "replay"]),
        (["export", "astra-sim", "PREFIX", "-o", "X", "--backend", "awre"], "--backend", ["aware", "unaware"]),
        (["export", "astra-sim", "PREFIX", "-o", "X", "--missing-deps", "x"], "--missing-deps", ["error", "drop"]),
        (["visualize", "T.et", "-o", "x.pdf", "--edges", "dta"], "--edges", ["all", "data", "ctrl"]),
        (["interpolate", "PREFIX", "--scale", "2", "--nodes", "comp"], "--nodes", ["compute", "all"]),
        (["generate", "mlp", "--mode", "dpmp", "-o", "X"], "--mode", ["mp", "dp-mp", "mp-dp"]),
    ],
)
def test_bad_option_value_is_a_usage_error(run_cli, args, option, choices):
    res = run_cli(*args)
    assert res.exit_code == 2, res.stderr
    assert "Usage: " in res.stderr and f"Invalid value for '{option}'" in res.stderr
    for word in choices:
        assert repr(word) in res.stderr
    assert res.stdout == ""


def test_every_recipe_is_a_choice():
    from chakra.commands.whatif import Recipe
    from chakra.whatif.recipes import RECIPES

    assert [r.value for r in Recipe] == list(RECIPES)


def test_good_choice_runs_and_bad_input_is_1(run_cli, samples_dir, tmp_path):
    prefix = str(samples_dir / "astrasim" / "all_reduce_8npus_1MB" / "all_reduce")
    res = run_cli("simulate", prefix, "--congestion", "unaware", "--comm", "model", "--json", "-q")
    assert res.exit_code == 0, res.stderr
    res = run_cli("simulate", str(tmp_path / "nothing"), "--comm", "replay")
    assert res.exit_code == 1 and res.stderr.startswith("error: ")

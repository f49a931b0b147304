"""What a command says means the same everywhere: warnings only about what the user asked for,
help that reads as sentences at 80 columns, figures labelled with what they add up.

The GPU run is the real one-GPU recording of tests/data/gpu/fp32 (tools/pytorch_gpu.py on an H200).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from chakra.cli import COMMANDS
from chakra.cli_group import reflow
from chakra.converters import PLUGINS

REPO = Path(__file__).resolve().parent.parent.parent
FP32 = REPO / "tests" / "data" / "gpu" / "fp32"


def _ok(res):
    assert res.exit_code == 0, res.stderr
    return res


@pytest.fixture(scope="module")
def one_gpu(tmp_path_factory) -> Path:
    from typer.testing import CliRunner

    from chakra.cli import app

    out = tmp_path_factory.mktemp("gpu") / "fp32"
    args = ["convert", "pytorch", str(FP32 / "et.json.gz"), "-k", str(FP32 / "kineto.json.gz"), "-o", str(out), "-q"]
    res = CliRunner().invoke(app, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return out


# ---------------------------------------------------------------------------------------------
# Warnings only about what was asked


def test_replaying_a_one_gpu_run_warns_of_nothing(one_gpu, run_cli):
    """A replay of the user's own run named no network and asked nothing about ASTRA-sim."""
    res = _ok(run_cli("simulate", str(one_gpu), "--comm", "replay"))
    assert "warning" not in res.stderr.lower() and "ASTRA-sim" not in res.stderr, res.stderr
    # The model of a network nobody named is ours: no word on how ASTRA-sim takes a 1-NPU network.
    model = _ok(run_cli("simulate", str(one_gpu)))
    assert "1-NPU network" not in model.stderr


def test_a_named_one_npu_network_is_still_warned_about(one_gpu, run_cli, tmp_path):
    """The user's own network config, in the mode that runs it: ASTRA-sim refuses it (its real
    binary exits 255 on npus_count 1: docs/astra-sim-parity.md)."""
    net = tmp_path / "net.yml"
    net.write_text("topology: [ Ring ]\nnpus_count: [ 1 ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n")
    model = _ok(run_cli("simulate", str(one_gpu), "--network", str(net)))
    assert "a 1-NPU network: ASTRA-sim rejects it" in model.stderr
    replay = _ok(run_cli("simulate", str(one_gpu), "--network", str(net), "--comm", "replay"))
    assert "1-NPU network" not in replay.stderr  # a replay sends nothing over it


def test_the_backend_option_has_one_meaning_and_both_names(one_gpu, run_cli, tmp_path):
    """simulate and calibrate said --congestion, export and validate --backend, and the messages
    of each pointed at the other's word: every one takes both."""
    one = json.loads(_ok(run_cli("simulate", str(one_gpu), "--backend", "unaware", "--json", "-q")).stdout)
    other = json.loads(_ok(run_cli("simulate", str(one_gpu), "--congestion", "unaware", "--json", "-q")).stdout)
    assert one["settings"]["congestion"] == other["settings"]["congestion"] == "unaware"
    assert one["finish_ns"] == other["finish_ns"]
    res = _ok(run_cli("export", "astra-sim", str(one_gpu), "--congestion", "unaware", "-o", str(tmp_path / "exp")))
    assert "AstraSim_Analytical_Congestion_Unaware" in res.stdout  # the command line it prints
    for cmd in (["validate", "--for", "astra-sim"], ["calibrate"]):
        res = run_cli(*cmd, str(one_gpu), "--backend", "bogus")
        assert res.exit_code == 2 and "No such option" not in res.stderr, res.stderr


def _commands() -> dict[str, object]:
    """Every leaf command, by its full name (`convert pytorch`, `generate spec`, ...)."""
    import click
    import typer

    from chakra.cli import app

    group = typer.main.get_group(app)
    ctx = click.Context(group)
    out: dict[str, object] = {}

    def walk(cmd, name):
        if hasattr(cmd, "list_commands"):
            for sub in cmd.list_commands(ctx):
                walk(cmd.get_command(ctx, sub), f"{name} {sub}".strip())
        else:
            out[name] = cmd

    walk(group, "")
    return out


def test_an_option_name_means_one_thing_in_every_command():
    """-n/--network, -s/--system, -m/--memory, -o/--output, -q/--quiet, --json: one spelling, one
    meaning; every command prints --json for scripts except `report`, whose output is a page."""
    shorts: dict[str, set[str]] = {}
    for name, cmd in _commands().items():
        opts = {}
        for p in cmd.params:
            if type(p).__name__.endswith("Option"):
                for o in p.opts:
                    opts[o] = p.opts[0]
        for short, long in (("-s", "--system"), ("-m", "--memory"), ("-o", "--output"), ("-q", "--quiet")):
            if short in opts:
                shorts.setdefault(short, set()).add(opts[short])
            if long in opts:
                assert opts.get(short) == opts[long], f"{name}: {long} without {short}"
        if "--network" in opts:
            assert opts.get("-n") == "--network", f"{name}: -n is {opts.get('-n')}, not --network"
        assert "-q" in opts, name
        if name != "report":
            assert "--json" in opts, f"{name} has no --json"
    assert all(len(v) == 1 for v in shorts.values()), shorts


def test_json_for_the_trace_writers_too(one_gpu, run_cli, tmp_path):
    out = json.loads(_ok(run_cli("jsonize", str(one_gpu), "-o", str(tmp_path / "j"), "--json")).stdout)
    assert out == {"written": [str(tmp_path / "j.0.json")], "nodes": [11326]}
    back = json.loads(_ok(run_cli("dejsonize", str(tmp_path / "j"), "-o", str(tmp_path / "e"), "--json")).stdout)
    assert back["nodes"] == [11326] and (tmp_path / "e.0.et").read_bytes() == Path(f"{one_gpu}.0.et").read_bytes()
    same = json.loads(_ok(run_cli("convert", "json", str(tmp_path), "-o", str(tmp_path / "c"), "--json")).stdout)
    assert same["nodes"] == [11326]


# ---------------------------------------------------------------------------------------------
# Help reflows


def test_reflow_joins_source_lines_and_keeps_examples():
    text = """First sentence goes on
    onto a second line.

    Examples:

      chakra stats out/run
      chakra stats out/run --json

    A list:
    - one item
    - another item
    """
    assert reflow(text) == (
        "First sentence goes on onto a second line.\n\nExamples:\n\n  chakra stats out/run\n"
        "  chakra stats out/run --json\n\nA list:\n- one item\n- another item"
    )


def _helps(run_cli) -> dict[str, str]:
    pages = {name: run_cli(name, "--help").stdout for name in COMMANDS}
    pages |= {f"convert {fmt}": run_cli("convert", fmt, "--help").stdout for fmt in [*PLUGINS, "auto"]}
    return pages


_OWN = re.compile(r"(\s|[-*•] |chakra |\$ |[{}])")


def test_help_reads_as_sentences_at_80_columns(run_cli, monkeypatch):
    """Piped help is 80 columns: a line of prose ends only where the next word would not fit
    (never where the source's docstring happened to break)."""
    monkeypatch.delenv("COLUMNS", raising=False)
    short = []
    for name, page in _helps(run_cli).items():
        assert page.strip(), name
        body = page.split("╭", 1)[0]  # the help text, before the option panels
        lines = [line[1:].rstrip() for line in body.splitlines()]  # rich pads with one space
        width = max(len(line) for line in lines)
        assert width <= 79, (name, width)
        for line, after in zip(lines, lines[1:]):
            if not line or not after or _OWN.match(line) or _OWN.match(after) or line.startswith("Usage:"):
                continue
            if len(line) + 1 + len(after.split()[0]) <= 78:
                short.append(f"{name}: {line!r} / {after!r}")
    assert not short, "\n".join(short)


def test_simulate_help_keeps_its_sentence_together(run_cli, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    page = run_cli("simulate", "--help").stdout
    assert re.search(r"so existing ones\s+work unchanged; the 1 MiB", page), page


# ---------------------------------------------------------------------------------------------
# Figures say what they sum


def test_stats_labels_compute_as_summed_cpu_and_gpu_time(one_gpu, run_cli):
    data = json.loads(_ok(run_cli("stats", str(one_gpu), "--json")).stdout)
    rank, summary = data["ranks"]["0"], data["summary"]
    assert rank["cpu_compute_us"] + rank["gpu_compute_us"] == rank["compute_us"]
    # A GPU step: CPU and GPU time overlap, so their sum exceeds the step's critical path.
    assert rank["compute_us"] > rank["critical_path_us"] > rank["cpu_compute_us"] > rank["gpu_compute_us"] > 0
    assert (summary["cpu_compute_us"], summary["gpu_compute_us"]) == (rank["cpu_compute_us"], rank["gpu_compute_us"])
    table = " ".join(_ok(run_cli("stats", str(one_gpu))).stdout.split())
    assert "CPU compute (sum)" in table and "GPU compute (sum)" in table and "critical path" in table
    assert "node durations added up" in table and "overlap in time" in table
    assert f"CPU compute {rank['cpu_compute_us']:,} µs, GPU compute {rank['gpu_compute_us']:,} µs" in table
    assert "compute 120," not in table  # never one unlabelled sum of both


def test_simulate_says_its_compute_is_busy_time(one_gpu, run_cli):
    table = " ".join(_ok(run_cli("simulate", str(one_gpu), "--comm", "replay")).stdout.split())
    assert "compute, comm: time busy with them" in table


def test_diff_and_memory_say_what_their_totals_are(one_gpu, run_cli, tmp_path):
    _ok(run_cli("interpolate", str(one_gpu), "--scale", "0.5", "-o", str(tmp_path / "half"), "-q"))
    text = " ".join(_ok(run_cli("diff", str(one_gpu), str(tmp_path / "half"))).stdout.split())
    assert f"A = {one_gpu}, B = {tmp_path / 'half'}" in text
    assert "added up over every rank (work, not a step time)" in text and "durations summed over every node" in text
    mem = " ".join(_ok(run_cli("memory", str(one_gpu))).stdout.split())
    assert "peak = resident + step peak" in mem

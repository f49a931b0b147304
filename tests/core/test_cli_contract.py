"""The output side of the bad-input contract, end to end through the CLI.

For every command that writes: an output that cannot be written where asked (missing directory, a
file used as a directory, /proc), that would replace an input, or whose path is a symlink, a FIFO
or a device gives one `error:` line, exit 1, and nothing is written or replaced. Multi-rank
outputs are all or nothing. Outputs a user can share: modes follow the umask, `-o` is used as
given.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SAMPLES = Path(os.environ.get("CHAKRA_SAMPLES") or REPO / "tests" / "data" / "samples")

ALL_REDUCE = SAMPLES / "astrasim" / "all_reduce_8npus_1MB" / "all_reduce"
MLP_TEXT = SAMPLES / "astrasim" / "text_workloads" / "MLP_ModelParallel.txt"
SPEC = REPO / "examples" / "two_stage_pipeline.yaml"


def _two_ranks(tmp: Path) -> Path:
    """A 2-rank copy of ASTRA-sim's all-reduce sample in `tmp` (prefix `tmp/ar`)."""
    for r in range(2):
        shutil.copy(f"{ALL_REDUCE}.{r}.et", tmp / f"ar.{r}.et")
    return tmp / "ar"


def _text_input(tmp: Path) -> str:
    """ASTRA-sim's MLP text workload, copied under a name a rank file could have."""
    return str(shutil.copy(MLP_TEXT, tmp / "w.0.et"))


def _sim_log(tmp: Path, run_cli) -> Path:
    prefix = _two_ranks(tmp)
    log = tmp / "sim.csv"
    assert run_cli("simulate", str(prefix), "--log", str(log), "-q").exit_code == 0
    return log


@dataclass
class Command:
    """`argv(tmp, out)` runs the command writing `out`; `first(out)` is the first file it writes."""

    name: str
    argv: Callable[[Path, str, object], list[str]]
    first: Callable[[str], str]
    same_as_input: Callable[[Path, object], str] | None = None


def _single(out: str) -> str:
    return out


def _rank0(out: str) -> str:
    return f"{out}.0.et"


COMMANDS = [
    Command(
        "convert text",
        lambda tmp, out, cli: ["convert", "text", _text_input(tmp), "--npus", "4", "-o", out],
        _rank0,
        lambda tmp, cli: str(tmp / "w"),  # PREFIX w writes w.0.et, the input's name
    ),
    Command(
        "jsonize",
        lambda tmp, out, cli: ["jsonize", f"{_two_ranks(tmp)}.0.et", "-o", out],
        lambda out: f"{out}.0.json",  # without a .json suffix, -o is a PREFIX
        None,
    ),
    Command(
        "dejsonize",
        lambda tmp, out, cli: ["dejsonize", str(SAMPLES / "et" / "official_small_chakra.0.json"), "-o", out],
        lambda out: f"{out}.0.et",
        None,
    ),
    Command(
        "visualize",
        lambda tmp, out, cli: ["visualize", f"{_two_ranks(tmp)}.0.et", "--dot", "-o", out],
        _single,
        lambda tmp, cli: f"{_two_ranks(tmp)}.0.et",
    ),
    Command(
        "timeline",
        lambda tmp, out, cli: ["timeline", str(_sim_log(tmp, cli)), "-o", out],
        _single,
        lambda tmp, cli: str(_sim_log(tmp, cli)),
    ),
    Command(
        "simulate --log",
        lambda tmp, out, cli: ["simulate", str(_two_ranks(tmp)), "--log", out],
        _single,
        lambda tmp, cli: f"{_two_ranks(tmp)}.1.et",
    ),
    Command(
        "simulate --timeline",
        lambda tmp, out, cli: ["simulate", str(_two_ranks(tmp)), "--timeline", out],
        _single,
        lambda tmp, cli: f"{_two_ranks(tmp)}.0.et",
    ),
    Command("generate", lambda tmp, out, cli: ["generate", "spec", str(SPEC), "-o", out], _rank0, None),
    Command(
        "generate moe",
        lambda tmp, out, cli: ["generate", "moe", "--tokens", "64", "--layers", "1", "-o", out],
        _rank0,
        None,
    ),
    Command(
        "synthesize",
        lambda tmp, out, cli: ["synthesize", str(_two_ranks(tmp)), "--ranks", "2", "--seed", "1", "-o", out],
        _rank0,
        lambda tmp, cli: str(_two_ranks(tmp)),
    ),
    Command(
        "whatif",
        lambda tmp, out, cli: ["whatif", str(_two_ranks(tmp)), "--recipe", "network-bandwidth", "-f", "2", "-o", out],
        _rank0,
        lambda tmp, cli: str(_two_ranks(tmp)),
    ),
    Command(
        "interpolate",
        lambda tmp, out, cli: ["interpolate", str(_two_ranks(tmp)), "--scale", "0.5", "-o", out],
        _rank0,
        lambda tmp, cli: str(_two_ranks(tmp)),
    ),
]
IDS = [c.name for c in COMMANDS]


def _snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under `root` with its kind, link target, size and mtime: what 'nothing changed' means."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            link = os.readlink(p) if stat.S_ISLNK(st.st_mode) else None
            out[str(p)] = (stat.S_IFMT(st.st_mode), link, st.st_size, st.st_mtime_ns)
    return out


def _assert_refused(result, *needles: str) -> None:
    assert result.exit_code == 1, (result.exit_code, result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and result.stderr.rstrip().endswith(lines[0]), result.stderr
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def _bad_target(kind: str, tmp: Path) -> tuple[str, Callable[[str], None]]:
    """An output location of `kind`, and a function that creates the obstacle at the first output."""
    if kind == "missing-dir":
        return str(tmp / "no" / "such" / "dir" / "out"), lambda first: None
    if kind == "file-as-dir":
        (tmp / "afile").write_text("x")
        return str(tmp / "afile" / "out"), lambda first: None
    if kind == "proc":
        return "/proc/chakra-contract-test/out", lambda first: None
    if kind == "symlink":
        victim = tmp / "victim.txt"
        victim.write_text("keep me")
        return str(tmp / "out"), lambda first: os.symlink(victim, first)
    if kind == "fifo":
        return str(tmp / "out"), lambda first: os.mkfifo(first)
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["missing-dir", "file-as-dir", "proc", "symlink", "fifo"])
@pytest.mark.parametrize("cmd", COMMANDS, ids=IDS)
def test_unwritable_or_special_output_is_refused(run_cli, tmp_path, cmd, kind):
    out, make_obstacle = _bad_target(kind, tmp_path)
    argv = cmd.argv(tmp_path, out, run_cli)
    make_obstacle(cmd.first(out))
    before = _snapshot(tmp_path)
    result = run_cli(*argv)
    _assert_refused(result)
    assert _snapshot(tmp_path) == before  # nothing written, nothing replaced, no temp files left


@pytest.mark.parametrize("device", ["/dev/null", "/dev/full"])
@pytest.mark.parametrize("cmd", [c for c in COMMANDS if c.first is _single], ids=lambda c: c.name)
def test_device_output_is_refused(run_cli, tmp_path, cmd, device):
    before = os.stat(device)
    result = run_cli(*cmd.argv(tmp_path, device, run_cli))
    _assert_refused(result, device, "not a regular file")
    after = os.stat(device)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev


@pytest.mark.parametrize("cmd", [c for c in COMMANDS if c.same_as_input], ids=lambda c: c.name)
def test_output_equal_to_an_input_is_refused(run_cli, tmp_path, cmd):
    out = cmd.same_as_input(tmp_path, run_cli)
    argv = cmd.argv(tmp_path, out, run_cli)
    before = _snapshot(tmp_path)
    result = run_cli(*argv)
    _assert_refused(result, "input")
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("cmd", [c for c in COMMANDS if c.first is _rank0], ids=lambda c: c.name)
def test_multi_rank_output_is_all_or_nothing(run_cli, tmp_path, cmd):
    # Rank 1 cannot be written (a FIFO is in the way): rank 0, written before it, must not appear.
    out = tmp_path / "multi"
    argv = cmd.argv(tmp_path, str(out), run_cli)
    os.mkfifo(f"{out}.1.et")
    before = _snapshot(tmp_path)
    result = run_cli(*argv)
    _assert_refused(result, "multi.1.et")
    assert _snapshot(tmp_path) == before
    assert not Path(f"{out}.0.et").exists()


def test_outputs_follow_the_umask(run_cli, tmp_path):
    old = os.umask(0o022)
    try:
        assert (
            run_cli("convert", "text", str(MLP_TEXT), "--npus", "2", "-o", str(tmp_path / "mlp"), "-q").exit_code == 0
        )
        os.umask(0o077)
        assert run_cli("jsonize", str(tmp_path / "mlp.0.et"), "-o", str(tmp_path / "p.json"), "-q").exit_code == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "mlp.0.et").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "mlp.1.et").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "p.json").stat().st_mode) == 0o600


def test_visualize_writes_exactly_the_output_given(run_cli, tmp_path):
    prefix = _two_ranks(tmp_path)
    assert run_cli("visualize", f"{prefix}.0.et", "--dot", "-o", str(tmp_path / "g"), "-q").exit_code == 0
    assert (tmp_path / "g").read_text().startswith("digraph")
    assert not (tmp_path / "g.dot").exists()
    result = run_cli("visualize", f"{prefix}.0.et", "--dot", "-o", str(tmp_path / "g.svg"))
    _assert_refused(result, "g.svg", "svg", "dot")
    assert not (tmp_path / "g.svg").exists()


def test_error_lines_quote_only_an_excerpt_of_a_huge_value(run_cli, tmp_path):
    # A JSON trace whose format field is 100 KB long: the error names it without printing it all.
    bad = tmp_path / "huge.0.json"
    bad.write_text('{"format": "' + "x" * 100_000 + '", "nodes": []}')
    result = run_cli("dejsonize", str(bad), "-o", str(tmp_path / "out.0.et"))
    _assert_refused(result, "huge.0.json", "xxx...")
    assert len(result.stderr) < 400
    assert not (tmp_path / "out.0.et").exists()

"""Every command in README.md's code blocks runs as written, in order, in a fresh folder.

The folder holds the checkout's top-level files (linked, so nothing is copied) and nothing else, as
a fresh clone would; `out/` starts empty. `chakra` is the venv's console script, as after
`make setup` or `pip install .`. Where the README states a result (117,780 ns, the measured step,
valid timeline JSON, a self-contained HTML page), the output is checked for it; every command must
exit 0 without a traceback, and the README's own outputs must land under `out/`.

A few commands are the CI itself or need machines we do not have; `NOT_RUN` names them with the
reason, and each entry must still match a README line (so a renamed command cannot hide here).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"

#: command as written -> why this test does not run it (it is checked elsewhere or needs a cluster).
NOT_RUN = {
    "make demo": "tests/core/test_bare_clone.py runs `make demo` in a bare clone of HEAD",
    "make test": "this test is part of `make test`",
    "make check": "tests/core/test_bare_clone.py runs it (tools/bare_clone_check.sh)",
    ".venv/bin/pytest tests/core": "part of `make test` already",
    "make fuzz N=2000 FORMAT=et": "tests/fuzz runs the same fuzzer on fewer cases",
    "chakra convert pytorch /shared/traces/ --scheduler tcp://head:8786 -o /shared/out/job": "needs a cluster; "
    "tests/distributed/test_multihost.py runs a scheduler and workers on this host",
    "chakra sweep /shared/out/job --grid grid.yaml -o /shared/sweep --scheduler tcp://head:8786": "needs a cluster",
}


#: command as written -> the exit code the README says it gives (every other command exits 0).
EXIT_CODES = {
    # ddp2 was recorded on CPUs: its CPU operators would stop ASTRA-sim, which the check reports
    "chakra validate --for astra-sim out/ddp2": 1,
}


@dataclass
class Command:
    text: str  # as a shell runs it (continuation lines joined)
    block: int
    setup: list[str] = field(default_factory=list)  # variable assignments seen before it


def code_blocks(markdown: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced code block."""
    return re.findall(r"^```(\w*)\n(.*?)^```", markdown, flags=re.M | re.S)


def strip_comment(line: str) -> str:
    """The line without a trailing `# ...` comment (a `#` outside quotes, after a space)."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def bash_commands(markdown: str) -> list[Command]:
    out: list[Command] = []
    setup: list[str] = []  # one shell session, as a reader pasting the blocks in order
    for index, (lang, body) in enumerate(code_blocks(markdown)):
        if lang not in ("bash", "sh", "shell", "console"):
            continue
        pending = ""
        for raw in body.splitlines():
            line = strip_comment(raw) if not pending else raw.rstrip()
            if pending:
                line = strip_comment(line)
            if not line.strip():
                continue
            if line.endswith("\\"):
                pending += line[:-1].rstrip() + " "
                continue
            text = " ".join((pending + line).split())
            pending = ""
            if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=\S+", text):
                setup.append(text)
                continue
            out.append(Command(text, index, list(setup)))
    return out


def python_blocks(markdown: str) -> list[str]:
    return [body for lang, body in code_blocks(markdown) if lang == "python"]


def fresh_folder(tmp: Path) -> Path:
    """`tmp/clone`: the checkout's tracked top-level entries, linked, and no outputs."""
    listed = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    tops = {line.split("/", 1)[0] for line in listed.splitlines() if line}
    clone = tmp / "clone"
    clone.mkdir()
    for name in sorted(tops):
        (clone / name).symlink_to(REPO / name)
    venv = Path(sys.prefix)
    (clone / ".venv").symlink_to(venv)  # the development block calls .venv/bin/...
    return clone


# --------------------------------------------------------------------------- what the README promises


def _finish_all_ranks(ns: int) -> Callable[[subprocess.CompletedProcess, Path], None]:
    def check(proc: subprocess.CompletedProcess, clone: Path) -> None:
        assert f"finish: {ns:,} ns" in proc.stdout, proc.stdout
        rows = [line for line in proc.stdout.splitlines() if re.match(r"^\W*\d+\W", line)]
        assert sum(f"{ns:,}" in row for row in rows) == 8, proc.stdout

    return check


def _replay_matches_measured_step(proc: subprocess.CompletedProcess, clone: Path) -> None:
    # The profiled step: the ProfilerStep spans recorded in the PyTorch ET, per rank. The replay
    # of a default conversion is the untraced step (the profiler's cost removed), shorter than it
    # and printed beside it; the recorded durations (--profiled) replay the profiled step itself.
    subprocess.run(
        ["chakra", "convert", "pytorch", *[f"tests/data/samples/pytorch/ddp2/{k}.{r}.json" for k in ("et", "kineto")
                                           for r in (0, 1)], "-o", "out/ddp2_profiled", "--profiled", "-q"],
        cwd=clone, capture_output=True, text=True, env=_env(clone), check=True,
    )  # fmt: skip
    default = subprocess.run(
        ["chakra", "simulate", "out/ddp2", "--comm", "replay", "--json", "-q"],
        cwd=clone, capture_output=True, text=True, env=_env(clone), check=True,
    )  # fmt: skip
    step = json.loads(default.stdout)["step"]
    assert step["times"] == "untraced" and step["step_ns"] < step["profiled_recorded_step_ns"]
    stats = subprocess.run(
        ["chakra", "simulate", "out/ddp2_profiled", "--comm", "replay", "--json", "-q"],
        cwd=clone,
        capture_output=True,
        text=True,
        env=_env(clone),
        check=True,
    )
    finish = json.loads(stats.stdout)["finish_ns"]
    steps = []
    for rank in (0, 1):
        et = json.loads((clone / f"tests/data/samples/pytorch/ddp2/kineto.{rank}.json").read_text())
        spans = [e["dur"] for e in et["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")]
        steps.append(sum(spans) * 1000)
    measured = max(steps)
    assert abs(finish - measured) / measured < 0.003, (finish, measured)


def _valid_timeline(proc: subprocess.CompletedProcess, clone: Path) -> None:
    doc = json.loads((clone / "out/ddp2.timeline.json").read_text())
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    assert {e.get("ph") for e in events} >= {"X"}, "no complete events in the timeline"


def _self_contained(path: str) -> Callable[[subprocess.CompletedProcess, Path], None]:
    def check(proc: subprocess.CompletedProcess, clone: Path) -> None:
        html = (clone / path).read_text()
        assert html.lstrip().lower().startswith("<!doctype html") or html.lstrip().startswith("<html"), path
        assert not re.search(r"<script[^>]+src=[\"']https?:", html), f"{path} loads a script from the network"

    return check


def _exports_command_line(proc: subprocess.CompletedProcess, clone: Path) -> None:
    assert "AstraSim_Analytical" in proc.stdout, proc.stdout


def _stats_json(proc: subprocess.CompletedProcess, clone: Path) -> None:
    doc = json.loads(proc.stdout)
    assert doc, "empty JSON"


def _cupti_records(proc: subprocess.CompletedProcess, clone: Path) -> None:
    bundled = clone / "tests/data/samples/cupti/testcuda_nsys2026.1_report2.cupti.jsonl"
    assert (clone / "out/records.jsonl").read_bytes() == bundled.read_bytes()


def _converted_table_whole(proc: subprocess.CompletedProcess, clone: Path) -> None:
    # The real report's span, uncut although stdout is a pipe (80 columns would cut it).
    assert "1351.358" in proc.stdout and "…" not in proc.stdout, proc.stdout


def _no_warning(proc: subprocess.CompletedProcess, clone: Path) -> None:
    assert "warning" not in proc.stderr.lower(), proc.stderr


def _traffic_tables(proc: subprocess.CompletedProcess, clone: Path) -> None:
    assert "traffic per dimension" in proc.stdout and "heaviest links" in proc.stdout, proc.stdout


def _calibrated_step(proc: subprocess.CompletedProcess, clone: Path) -> None:
    doc = json.loads((clone / "out/ddp2_fit.calibration.json").read_text())
    assert abs(doc["step"]["error_after"]) <= 0.05, doc["step"]


def _memory_vs_allocator(proc: subprocess.CompletedProcess, clone: Path) -> None:
    # the README says how far the estimate is from the allocator's peak, on both ranks
    assert proc.stdout.count("-2.4%") == 2, proc.stdout


#: a fragment of a README command -> what its output must show (beyond exit 0, no traceback).
CHECKS: dict[str, list[Callable[[subprocess.CompletedProcess, Path], None]]] = {
    "all_reduce_8npus_1MB/all_reduce": [_finish_all_ranks(117_780), _no_warning],
    "simulate out/ddp2 --comm replay": [_replay_matches_measured_step, _no_warning],
    "chakra stats out/ddp2 --json": [_stats_json],
    "--cupti-records out/records.jsonl": [_cupti_records],
    "convert cupti $S/cupti/": [_converted_table_whole, _no_warning],
    "convert nsys $S/nsys/testcuda_nsys2026.1_report2.sqlite -o out/nsys": [_converted_table_whole],
    "export astra-sim out/ddp2 -o": [_exports_command_line],
    "chakra timeline out/ddp2.log.csv": [_valid_timeline],
    "report out/gpt64_sweep -o out/gpt64_sweep.html": [_self_contained("out/gpt64_sweep.html")],
    "--html out/ddp2_analysis.html": [_self_contained("out/ddp2_analysis.html")],
    "--html out/gpt64_amp.html": [_self_contained("out/gpt64_amp.html")],
    "--traffic --html out/ddp2.traffic.html": [_traffic_tables, _self_contained("out/ddp2.traffic.html")],
    "calibrate out/ddp2 -o out/ddp2_fit": [_calibrated_step, _self_contained("out/ddp2_fit.html")],
    "chakra memory out/ddp2mem -k": [_memory_vs_allocator, _no_warning],
}


def _env(clone: Path) -> dict[str, str]:
    """A shell where `chakra` is installed but the venv is not active (no `python` of the venv on
    PATH), output is not a terminal and COLUMNS is unset, as in CI."""
    bindir = clone.parent / "bin"
    if not bindir.exists():
        bindir.mkdir()
        (bindir / "chakra").symlink_to(Path(sys.executable).parent / "chakra")
    venv_bin = str(Path(sys.executable).parent)
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != venv_bin]
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join([str(bindir), *path])
    return env


# --------------------------------------------------------------------------- tests


def test_readme_parses_into_the_commands_a_reader_sees():
    commands = [c.text for c in bash_commands(README.read_text())]
    assert len(commands) >= 40
    assert "chakra validate out/ddp2" in commands
    joined = [c for c in commands if c.startswith("chakra convert pytorch $S/pytorch/ddp2/et.0.json")]
    assert joined and "-o out/ddp2" in joined[0], "continuation lines are joined into one command"
    for skipped in NOT_RUN:
        assert skipped in commands, f"NOT_RUN lists {skipped!r}, which the README no longer has"
    for fragment in CHECKS:
        assert any(fragment in c for c in commands), f"CHECKS names {fragment!r}, which no README command has"


@pytest.mark.slow
def test_every_readme_command_runs_as_written(tmp_path):
    markdown = README.read_text()
    clone = fresh_folder(tmp_path)
    before = {p.name for p in clone.iterdir()}
    env = _env(clone)
    ran = 0
    for command in bash_commands(markdown):
        if command.text in NOT_RUN:
            continue
        script = "set -e\n" + "\n".join(command.setup + [command.text])
        proc = subprocess.run(["bash", "-c", script], cwd=clone, capture_output=True, text=True, env=env, timeout=600)
        where = f"README command `{command.text}`"
        expected = EXIT_CODES.get(command.text, 0)
        assert proc.returncode == expected, f"{where} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
        assert "Traceback" not in proc.stderr, f"{where}:\n{proc.stderr[-3000:]}"
        for fragment, checks in CHECKS.items():
            if fragment in command.text:
                for check in checks:
                    check(proc, clone)
        ran += 1
    for body in python_blocks(markdown):
        proc = subprocess.run([sys.executable, "-c", body], cwd=clone, capture_output=True, text=True, env=env)
        assert proc.returncode == 0, f"README Python example:\n{proc.stderr[-3000:]}"
        # It prints each rank with its collectives, then whether validation passed.
        assert proc.stdout.splitlines()[-1] == "True", proc.stdout
        assert re.search(r"^0 \[.*\('ALL_REDUCE', \d+\)", proc.stdout, flags=re.M), proc.stdout
        written = subprocess.run(["chakra", "stats", "out/mine.0.et", "--json", "-q"], cwd=clone, env=env, text=True,
                                 capture_output=True)  # fmt: skip
        assert written.returncode == 0 and "ALL_REDUCE" in written.stdout, written.stderr
    assert ran >= 40
    # Everything the README writes goes under out/: nothing new at the top of the clone.
    assert {p.name for p in clone.iterdir()} - before == {"out"}

"""FIFOs, devices and folders given where a file is read: one line naming the path, before any read.

A FIFO blocks the first read until someone writes (a command that opens one never returns); a
device such as /dev/zero or /dev/urandom never ends (a command reading it whole takes the
machine's memory). Every reader is asked with each; FIFOs run as separate processes, so a
regression fails on the time bound instead of hanging the suite.
"""

from __future__ import annotations

import os

import pytest

from .faultlib import ALL_REDUCE, CONFIGS, DDP2, assert_one_line, chakra

# (command words, where the input goes); INPUT is replaced by the special file.
READERS = {
    "convert kineto": ["convert", "kineto", "INPUT", "-o", "OUT"],
    "convert auto": ["convert", "auto", "INPUT", "-o", "OUT"],
    "convert pytorch --kineto": ["convert", "pytorch", DDP2 / "et.0.json", "--kineto", "INPUT", "-o", "OUT"],
    "simulate --network": ["simulate", ALL_REDUCE, "--network", "INPUT", "-q"],
    "simulate --system": ["simulate", ALL_REDUCE, "--system", "INPUT", "-q"],
    "simulate --memory": ["simulate", ALL_REDUCE, "--memory", "INPUT", "-q"],
    "export --network": ["export", "astra-sim", ALL_REDUCE, "-o", "OUT", "--network", "INPUT"],
    "sweep --grid": ["sweep", ALL_REDUCE, "--grid", "INPUT", "-o", "OUT", "--workers", "1"],
    "validate": ["validate", "INPUT"],
    "stats": ["stats", "INPUT"],
    "analyze": ["analyze", "INPUT"],
    "dejsonize": ["dejsonize", "INPUT", "-o", "OUT"],
    "jsonize": ["jsonize", "INPUT", "-o", "OUT"],
    "timeline": ["timeline", "INPUT", "-o", "OUT.json"],
    "visualize": ["visualize", "INPUT", "-o", "OUT.dot"],
    "generate spec": ["generate", "spec", "INPUT", "-o", "OUT"],
}


def _args(words: list, special: str, tmp_path) -> list[str]:
    return [special if w == "INPUT" else str(tmp_path / "out") if w == "OUT" else
            str(tmp_path / "out.json") if w == "OUT.json" else str(tmp_path / "out.dot") if w == "OUT.dot" else str(w)
            for w in words]  # fmt: skip


def _nothing_written(tmp_path, keep: set[str]) -> None:
    assert sorted(p.name for p in tmp_path.iterdir() if p.name not in keep) == []


# The commands seen hanging on a FIFO, and the readers that said "no such file" for one.
FIFO_READERS = ["convert kineto", "convert auto", "simulate --network", "simulate --system", "sweep --grid",
                "validate", "dejsonize", "timeline"]  # fmt: skip


@pytest.mark.parametrize("command", FIFO_READERS)
def test_fifo_is_refused_at_once(command, tmp_path):
    fifo = tmp_path / "input.json"
    os.mkfifo(fifo)
    run = chakra(*_args(READERS[command], str(fifo), tmp_path), timeout=30)
    line = assert_one_line(run, mentions=(str(fifo), "FIFO"), seconds=20)
    assert "regular file" in line
    _nothing_written(tmp_path, {"input.json"})


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
@pytest.mark.parametrize("command", sorted(READERS))
def test_device_is_refused_before_reading(command, device, tmp_path, run_cli):
    if not os.path.exists(device):
        pytest.skip(f"no {device} here")
    res = run_cli(*_args(READERS[command], device, tmp_path))
    lines = [x for x in res.stderr.splitlines() if x.strip()]
    assert res.exit_code == 1 and len(lines) == 1, res.stderr
    assert device in lines[0] and "device" in lines[0]
    _nothing_written(tmp_path, set())


@pytest.mark.parametrize("command", ["simulate --network", "simulate --system", "sweep --grid", "convert kineto"])
def test_directory_is_refused(command, tmp_path, run_cli):
    folder = tmp_path / "cfg"
    folder.mkdir()
    res = run_cli(*_args(READERS[command], str(folder), tmp_path))
    lines = [x for x in res.stderr.splitlines() if x.strip()]
    assert res.exit_code == 1 and len(lines) == 1, res.stderr
    assert str(folder) in lines[0] and "directory" in lines[0]


def test_devices_cost_no_memory():
    """The original failure: reading /dev/zero until the machine's limit. Time and peak memory of
    the whole process stay what starting the program costs."""
    run = chakra("simulate", ALL_REDUCE, "--network", "/dev/zero", timeout=30)
    assert_one_line(run, mentions=("/dev/zero",), seconds=20)
    assert 0 < run.max_rss_mb < 400, run.max_rss_mb  # measured, and what starting the program costs


def test_oversized_config_is_refused(tmp_path):
    """A regular file can still be the wrong one: configs are read with a bound."""
    big = tmp_path / "net.yml"
    with open(big, "wb") as f:
        f.truncate(17 << 20)  # sparse: 17 MiB of zeros, no disk
    run = chakra("simulate", ALL_REDUCE, "--network", big, "-q", timeout=30)
    assert_one_line(run, mentions=(str(big), "MiB"))
    assert 0 < run.max_rss_mb < 400, run.max_rss_mb  # measured, and what starting the program costs


def test_a_sane_config_still_works(tmp_path):
    """Not refusing everything: a regular file behind a symlink is read."""
    link = tmp_path / "net.yml"
    link.symlink_to(CONFIGS / "network_ring8.yml")
    run = chakra("simulate", ALL_REDUCE, "--network", link, "-q", "--json", timeout=60)
    assert run.rc == 0, run.stderr


def test_stdin_is_taken_where_asked_for(run_cli):
    """`-` deliberately names standard input for a config; it is read with the same bound."""
    text = (CONFIGS / "network_ring8.yml").read_text()
    res = run_cli("simulate", str(ALL_REDUCE), "--network", "-", "-q", "--json", input=text)
    assert res.exit_code == 0, res.stderr
    res = run_cli("simulate", str(ALL_REDUCE), "--network", "-", "-q", input="npus_count: [")
    assert res.exit_code == 1 and "error: - (line 1): not valid YAML" in res.stderr

"""Full disks and read-only folders, on real file systems: a small tmpfs (as root; skipped
otherwise). Each writer says one line naming its output (never a temporary file) and, for a full
disk, the disk; nothing is left behind, and a set of files (ranks, export's configs) appears
whole or not at all."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from .faultlib import ALL_REDUCE, DDP2, assert_one_line, chakra


def _mount(where: Path, options: str) -> Path:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    where.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.decode(errors='replace').strip()}")
    return where


@pytest.fixture
def full_disk(tmp_path):
    """A 256 KiB tmpfs filled to its last byte."""
    disk = _mount(tmp_path / "full", "size=256k")
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=False)


@pytest.fixture
def read_only(tmp_path):
    disk = _mount(tmp_path / "ro", "size=64k,ro")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=False)


WRITERS = {
    "convert pytorch": (["convert", "pytorch", DDP2 / "et.0.json", DDP2 / "et.1.json", "--kineto",
                         DDP2 / "kineto.0.json", "--kineto", DDP2 / "kineto.1.json", "-o", "OUT/ddp2"], "ddp2.0.et"),
    "export astra-sim": (["export", "astra-sim", ALL_REDUCE, "-o", "OUT/exp"], "exp."),
    "jsonize": (["jsonize", ALL_REDUCE, "-o", "OUT/j"], "j."),
    "visualize": (["visualize", f"{ALL_REDUCE}.0.et", "-o", "OUT/v.pdf"], "v.pdf"),
    "simulate --log": (["simulate", ALL_REDUCE, "--log", "OUT/s.csv", "-q"], "s.csv"),
    "generate": (["generate", "microbench", "--ranks", "4", "-o", "OUT/g", "-q"], "g."),
}  # fmt: skip


def _args(words, out: Path) -> list[str]:
    return [str(w).replace("OUT/", f"{out}/") for w in words]


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_full_disk(name, full_disk):
    words, output = WRITERS[name]
    run = chakra(*_args(words, full_disk))
    line = assert_one_line(run, mentions=(str(full_disk / output), "No space left on device", f"disk at {full_disk}"))
    assert ".tmp" not in line and ".part" not in line
    assert sorted(p.name for p in full_disk.iterdir()) == ["filler"]  # the whole set or nothing


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_read_only_folder(name, read_only):
    words, output = WRITERS[name]
    run = chakra(*_args(words, read_only))
    line = assert_one_line(run, mentions=(str(read_only / output), "read-only"))
    assert ".tmp" not in line and ".part" not in line
    assert list(read_only.iterdir()) == []

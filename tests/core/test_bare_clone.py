"""The committed repository stands alone: cloned into an empty folder, `make demo` works.

Runs tools/bare_clone_check.sh --reuse (the same script as `make check`): a fresh clone with
nothing beside it (no ../shared), a venv that borrows this interpreter's installed dependencies
(never the machine's own site-packages or setuptools: the clone builds in an isolated environment)
and holds only the clone, and the clone's own `make demo`. It tests what is committed, not the working tree.
Deselect with `-m 'not bare_clone'`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.bare_clone
def test_bare_clone_runs_make_demo(tmp_path):
    if not (REPO / ".git").exists() or shutil.which("git") is None or shutil.which("make") is None:
        pytest.skip("needs a git checkout, git and make")
    proc = subprocess.run(
        ["bash", str(REPO / "tools" / "bare_clone_check.sh"), "--reuse"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "TMPDIR": str(tmp_path), "REUSE_PYTHON": sys.executable},
        check=False,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "bare clone check: ok" in out
    assert "traces:" in out and "timeline:" in out
    assert not any(tmp_path.iterdir())  # the clone cleans up after itself

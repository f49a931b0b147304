"""Shared fixtures: where the real samples live, and an in-process CLI runner."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# The ASTRA-sim truth-case specs (tools/truthcases.py) are test and tool support, not part of the
# installed package: the tests import them as `tools.truthcases` from the repository root.
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def find_samples() -> Path:
    """The bundled real sample traces (tests/data/samples; CHAKRA_SAMPLES points elsewhere)."""
    env = os.environ.get("CHAKRA_SAMPLES")
    if env:
        return Path(env)
    return REPO / "tests" / "data" / "samples"


SAMPLES = find_samples()


@pytest.fixture(scope="session")
def samples_dir() -> Path:
    if not SAMPLES.is_dir():
        pytest.fail(f"sample traces not found at {SAMPLES} (set CHAKRA_SAMPLES)")
    return SAMPLES


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str


@pytest.fixture
def run_cli():
    """Run `chakra ARGS...` in-process; returns exit code, stdout and stderr separately."""
    from typer.testing import CliRunner

    from chakra.cli import app

    def run(*args: str, input: str | None = None) -> CliResult:
        try:
            runner = CliRunner(mix_stderr=False)
        except TypeError:  # click >= 8.2 always separates the streams
            runner = CliRunner()
        result = runner.invoke(app, list(args), input=input, catch_exceptions=False)
        return CliResult(result.exit_code, result.stdout, result.stderr)

    return run

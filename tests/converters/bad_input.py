"""What every bad-input regression test checks: one `error:` line, exit 1, nothing written."""

from __future__ import annotations

from pathlib import Path

FUZZ = Path(__file__).resolve().parents[1] / "data" / "fuzz"


def assert_clean_error(result, out_dir: Path, *expected: str) -> str:
    """The CLI `result` failed cleanly: exit 1, a single `error:` line holding every `expected`
    text, no traceback, and no file under `out_dir`. Returns the error line."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    assert result.exit_code == 1, (result.exit_code, result.stderr[-2000:])
    assert len(errors) == 1, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    message = " ".join(errors[0].split())  # rich may wrap nothing, but spaces are normalised
    for text in expected:
        assert text in message, (text, message)
    assert not any(out_dir.iterdir()), sorted(p.name for p in out_dir.iterdir())
    return message

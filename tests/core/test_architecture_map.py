"""docs/architecture.md names every package there is, and quotes the layers the tool checks.

The import contracts themselves run in `make lint` (tools/lint_imports.py); here the map is held
against the code: a new package, a renamed one or a changed floor fails until the page says so.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "architecture.md"


def _lint_imports():
    spec = importlib.util.spec_from_file_location("lint_imports", REPO / "tools" / "lint_imports.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _folder(package: str) -> str:
    """chakra.converters.nsys -> converters/nsys/ (the folder it is installed from, setup.py)."""
    lint = _lint_imports()
    for root, folder in sorted(lint.ROOTS.items(), key=lambda kv: -len(kv[0])):
        if package == root or package.startswith(root + "."):
            rest = package[len(root) :].lstrip(".").replace(".", "/")
            return f"{folder}/{rest}/" if rest else f"{folder}/"
    raise AssertionError(package)


def test_every_package_is_on_the_map():
    text = DOC.read_text()
    missing = [f"{p} ({_folder(p)})" for p in sorted(_lint_imports().packages()) if f"`{_folder(p)}" not in text]
    assert not missing, f"docs/architecture.md does not name these packages: {missing}"


def test_every_top_level_module_is_on_the_map():
    text = DOC.read_text()
    lint = _lint_imports()
    top = [name for name, path in lint.modules().items() if name.count(".") == 1 and path.name != "__init__.py"]
    top = [name for name in top if name.split(".")[1] not in ("converters", "visualizers", "feeder")]
    missing = [name for name in sorted(top) if f"chakra/{name.split('.')[1]}.py" not in text]
    assert not missing, f"docs/architecture.md does not name these modules: {missing}"


def test_the_map_quotes_the_checked_layers():
    tomllib = pytest.importorskip("tomllib")
    with open(REPO / "pyproject.toml", "rb") as f:
        contracts = tomllib.load(f)["tool"]["importlinter"]["contracts"]
    (layers,) = [c["layers"] for c in contracts if c["type"] == "layers"]
    quoted = re.search(r"<!-- layers:.*?-->\s*```\n(.*?)```", DOC.read_text(), re.S)
    assert quoted is not None, "the layers block is missing from docs/architecture.md"
    assert quoted.group(1).splitlines() == layers


@pytest.mark.skipif(importlib.util.find_spec("importlinter") is None, reason="import-linter (dev extra) not installed")
def test_import_contracts_hold():
    run = subprocess.run([sys.executable, str(REPO / "tools" / "lint_imports.py")], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 broken" in run.stdout

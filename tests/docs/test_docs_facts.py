"""What the docs say about the code is what the code does: the converter plugin contract, where
things live, and which `--help` imports converters."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"

#: What tests/converters/test_registry.py::test_every_plugin_declares_the_contract requires.
CONTRACT = ("NAME", "DESCRIPTION", "EXTENSIONS", "accept(", "convert(", "add_cli(")


def test_architecture_gives_the_plugin_contract_the_registry_checks():
    text = (DOCS / "architecture.md").read_text()
    for name in CONTRACT:
        assert f"`{name}" in text, f"docs/architecture.md does not name {name} of the plugin contract"
    assert "sniff(path)" not in text and "convert_paths(" not in text


def test_converters_guide_cites_files_that_exist():
    text = (DOCS / "converters.md").read_text()
    cited = set(re.findall(r"`((?:chakra|converters|tests|docs)/[\w/.-]+\.(?:py|md|json))`", text))
    assert cited, "no file paths found: the pattern is stale"
    missing = sorted(p for p in cited if not (REPO / p).exists() and "myformat" not in p)  # the worked example
    assert not missing, f"docs/converters.md cites files that do not exist: {missing}"
    # The command table it sends a new command to is where it says.
    assert "`COMMANDS` in `chakra/cli.py`" in text
    assert re.search(r"^COMMANDS\b", (REPO / "chakra/cli.py").read_text(), flags=re.M)
    assert "COMMANDS" not in (REPO / "chakra/cli_group.py").read_text().split('"""', 2)[2]


PROBE = r"""
import sys
from chakra.cli import app
from chakra import converters
try:
    app(sys.argv[1:], standalone_mode=False)
except SystemExit:
    pass
loaded = [name for name, module in converters.PLUGINS.items() if module in sys.modules]
print("LOADED:" + ",".join(loaded))
"""


def _plugins_imported_by(*args: str) -> set[str]:
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return set(filter(None, proc.stdout.rsplit("LOADED:", 1)[1].strip().split(",")))


def test_which_help_imports_converters_as_the_guide_says():
    from chakra.converters import PLUGINS

    text = " ".join((DOCS / "converters.md").read_text().split())
    assert "the `--help` of every command but `convert` import no converter" in text
    assert "`chakra convert --help` is the one help that imports every plugin module" in text
    assert "imports every plugin module" in text and "`chakra SUBCOMMAND --help` import no converter" not in text
    assert _plugins_imported_by("validate", "--help") == set()
    assert _plugins_imported_by("simulate", "--help") == set()
    assert _plugins_imported_by("convert", "--help") == set(PLUGINS)
    assert _plugins_imported_by("convert", "nsys", "--help") == {"nsys"}

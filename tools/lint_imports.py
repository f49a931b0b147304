"""Check the import contracts in pyproject.toml ([tool.importlinter]) with import-linter.

chakra installs from four folders (chakra/, converters/, visualizers/, feeder/ become chakra,
chakra.converters, chakra.visualizers, chakra.feeder; see setup.py), and import-linter's own
graph builder only walks the folder of the root package. So this script builds the import graph
itself, from the source files of all four folders (every import, at module level or inside a
function), and hands it to import-linter, which checks the contracts and prints its report.

    python tools/lint_imports.py          # exit 0 when every contract is kept (`make lint` runs it)
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: Import name -> the folder it is installed from (setup.py's ROOTS).
ROOTS = {"chakra": "chakra", "chakra.converters": "converters", "chakra.visualizers": "visualizers",
         "chakra.feeder": "feeder"}  # fmt: skip


def modules(repo: Path = REPO) -> dict[str, Path]:
    """Every module of the installed package: dotted name -> source file."""
    found = {}
    for root, folder in ROOTS.items():
        for path in sorted((repo / folder).rglob("*.py")):
            parts = list(path.relative_to(repo / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([root, *parts])] = path
    return found


def packages(repo: Path = REPO) -> set[str]:
    """Every package (a folder with an __init__.py) of the installed package."""
    return {name for name, path in modules(repo).items() if path.name == "__init__.py"}


def _target(name: str, known: dict[str, Path]) -> str:
    """The module an imported name lives in: itself, or its nearest enclosing module."""
    while name not in known and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def imports(repo: Path = REPO) -> Iterator[tuple[str, str, int, str]]:
    """(importer, imported, line, text) for every import; outside modules as their top-level name."""
    known = modules(repo)
    for importer, path in known.items():
        source = path.read_text()
        lines = source.splitlines()
        package = importer if path.name == "__init__.py" else importer.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                subs = [f"{base}.{alias.name}" for alias in node.names]
                # `from pkg import submodule` imports the submodule, `from mod import name` the module
                names = subs if all(s in known for s in subs) else [base, *(s for s in subs if s in known)]
            else:
                continue
            for name in names:
                if name == "chakra" or name.startswith("chakra."):
                    imported = _target(name, known)
                else:
                    imported = name.split(".")[0]
                if imported != importer:
                    yield importer, imported, node.lineno, lines[node.lineno - 1].strip()


def graph(repo: Path = REPO):
    import grimp

    g = grimp.ImportGraph()
    for name in modules(repo):
        g.add_module(name)
    for importer, imported, line, text in imports(repo):
        if not imported.startswith("chakra") and imported not in g.modules:
            g.add_module(imported, is_squashed=True)
        g.add_import(importer=importer, imported=imported, line_number=line, line_contents=text)
    return g


class _Builder:
    def build(self, root_package_names, cache_dir=None, include_external_packages=False, **_):
        return graph()


def main() -> int:
    from importlinter.application.app_config import settings
    from importlinter.application.use_cases import lint_imports
    from importlinter.configuration import configure

    configure()
    settings.configure(GRAPH_BUILDER=_Builder())
    return 0 if lint_imports(str(REPO / "pyproject.toml"), cache_dir=None, no_logo=True) else 1


if __name__ == "__main__":
    sys.exit(main())

"""Make fuzzlib importable: pytest runs with --import-mode=importlib, which adds no test folder
to sys.path, and fuzzlib is also a script (`make fuzz`), so it is not a package module."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

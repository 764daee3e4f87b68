"""Tests of the benchmark scripts (``benchmarks/``), which import their sibling scripts by name, as when run."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load(name: str) -> ModuleType:
    """The script ``benchmarks/<name>.py`` as a module (``benchmarks/`` on the path only while it imports)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.pop(0)

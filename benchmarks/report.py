"""How every benchmark hands in its result: one JSON report on stdout, and a copy at ``--output``.

The reports under ``benchmarks/results/`` are these files; the README there indexes them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def emit(report: dict[str, Any], output: Path | None = None, indent: int = 2) -> None:
    """Writes ``report`` as JSON to stdout and, if given, to ``output`` (values JSON cannot hold,
    such as paths, as their strings)."""
    text = json.dumps(report, indent=indent, default=str) + "\n"
    if output is not None:
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        Path(output).write_text(text, encoding="utf-8")
    sys.stdout.write(text)

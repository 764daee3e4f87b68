"""Running a command that prints one JSON report (a benchmark module, a tool), as a user runs it:
in a process of its own, from the checkout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(REPO)}


def run_json(*argv, cwd=REPO, timeout=600, env: dict[str, str] | None = None):
    """The JSON report of ``python *argv`` (e.g. ``"-m", "benchmarks.speed.bench_adam_update", ...``);
    the test fails with the command's stderr if it exits other than 0."""
    done = subprocess.run([sys.executable, *map(str, argv)], cwd=cwd, env={**ENV, **(env or {})}, capture_output=True,
                          text=True, timeout=timeout, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    # The JSON is the last thing printed; a library may have printed lines before it.
    lines = done.stdout.splitlines()
    start = max(i for i, line in enumerate(lines) if line in ("{", "[") or line.startswith(("{", "[")))
    return json.loads("\n".join(lines[start:]))

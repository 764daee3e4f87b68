"""Running a command that prints one JSON report (a benchmark module, a tool), as a user runs it:
in a process of its own, from the checkout."""

from __future__ import annotations

import contextlib
import io
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
    return last_json(done.stdout)


def main_json(main, *argv):
    """The JSON report of a command's ``main(argv)`` run in this process: for a command on a model the
    test already holds, where a process start of its own (seconds of TensorFlow's imports) would test
    nothing more; the test fails with what it wrote on stderr if it exits other than 0."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(arg) for arg in argv])
        except SystemExit as done:
            code = done.code
    assert code in (0, None), err.getvalue()[-4000:]
    return last_json(out.getvalue())


def last_json(stdout: str):
    """The JSON a command printed last; a library may have printed lines before it."""
    lines = stdout.splitlines()
    start = max(i for i, line in enumerate(lines) if line in ("{", "[") or line.startswith(("{", "[")))
    return json.loads("\n".join(lines[start:]))

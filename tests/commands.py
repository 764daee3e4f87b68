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


def run_main(main, *argv, stdin: str = "") -> tuple[int, str, str]:
    """A command's ``main(argv)`` run in this process, reading ``stdin``: its exit code, stdout and stderr.
    For a command on a model the test already holds, where a process start of its own (seconds of
    TensorFlow's imports) would test nothing more: each command is started once elsewhere as a user starts it."""
    out, err, before = io.StringIO(), io.StringIO(), sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([str(arg) for arg in argv])
            except SystemExit as done:
                code = done.code
    finally:
        sys.stdin = before
    return (0 if code is None else code), out.getvalue(), err.getvalue()


def main_json(main, *argv):
    """The JSON report of :func:`run_main`; the test fails with what the command wrote on stderr if it exits
    other than 0."""
    code, out, err = run_main(main, *argv)
    assert code == 0, err[-4000:]
    return last_json(out)


def last_json(stdout: str):
    """The JSON a command printed last; a library may have printed lines before it."""
    lines = stdout.splitlines()
    start = max(i for i, line in enumerate(lines) if line in ("{", "[") or line.startswith(("{", "[")))
    return json.loads("\n".join(lines[start:]))

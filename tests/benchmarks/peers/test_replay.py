"""``python -m benchmarks.peers.replay``: a module run with its training budgets counted in steps."""

from __future__ import annotations

import subprocess
import sys

from benchmarks import ROOT

PROBE = """import sys
from pipelines.training.budget import replayed_seconds_per_step
print(replayed_seconds_per_step(), sys.argv[1:])
sys.exit(3)
"""


def test_the_module_runs_inside_the_replay_with_its_arguments_and_exit_status(tmp_path):
    (tmp_path / "replay_probe.py").write_text(PROBE, "utf-8")
    env_path = f"{tmp_path}:{ROOT}"
    command = [sys.executable, "-m", "benchmarks.peers.replay", "0.25", "-m", "replay_probe", "--config", "x"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env={"PYTHONPATH": env_path, "PATH": ""},
                          timeout=120)
    assert done.returncode == 3, done.stderr
    assert done.stdout.strip() == "0.25 ['--config', 'x']"


def test_a_step_time_that_is_not_positive_is_refused(tmp_path):
    done = subprocess.run([sys.executable, "-m", "benchmarks.peers.replay", "0", "-m", "flows.translation"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2 and "seconds_per_step must be positive" in done.stderr

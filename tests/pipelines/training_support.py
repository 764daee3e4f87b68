"""What the training tests share: jobs written as YAML, Python run in a subprocess, and how to
compare weights after a few Adam steps."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import yaml

from tests.pipelines.conftest import TINY_MODEL

REPO = Path(__file__).resolve().parents[2]
#: Environment of subprocesses: quiet TF, and no thread oversubscription on the shared CPU.
SUBPROCESS_ENV = {
    **os.environ,
    "TF_CPP_MIN_LOG_LEVEL": "2",
    "TF_NUM_INTEROP_THREADS": "1",
    "TF_NUM_INTRAOP_THREADS": "1",
    "PYTHONPATH": str(REPO),
}
#: Seconds before a subprocess counts as hung: a safety net, not a limit on a busy machine's speed.
HUNG = 1800


def write_job(path: Path, data: dict, **train_settings) -> Path:
    train_section = {
        "preset": "demo", "model": dict(TINY_MODEL), "warmup_steps": 20, "learning_rate_scale": 1.0,
        "decay_fraction": 0, "train_minutes": 0,
        "tokens_per_step": 300, "checkpoint_every_minutes": None, "progress_bar": False,
        "log_every": 1, **train_settings,
    }
    path.write_text(yaml.safe_dump({"train": train_section, "data": data}), encoding="utf-8")
    return path


def run_python(code: str, *args: str, timeout: float = HUNG, env=None) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args], cwd=REPO, env=env or SUBPROCESS_ENV,
        capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"subprocess failed:\n{result.stdout}\n{result.stderr[-6000:]}"
    return result


def weights_of(model) -> list[np.ndarray]:
    return [np.array(w.numpy()) for w in model.weights]


def comparable(model) -> list[bool]:
    """Weights whose update is determined by the data: not the attention key biases.

    A key bias adds the same term to every score of a query, which the softmax cancels: its
    gradient is zero up to rounding, and Adam's first step (about lr * g / (|g| + eps))
    turns that rounding noise into an arbitrary update.
    """
    return [not w.path.endswith("/key/bias") for w in model.weights]


def assert_same_updates(actual, desired, atol=2e-4):
    """Weights after a few Adam steps agree up to the summation order of their gradients.

    Per-element Adam updates are ~lr = 0.01-0.03 in these tests. Where a gradient component
    nearly cancels (a rarely seen token), Adam's normalisation turns the rounding of the
    multi-threaded sums into a visible update, up to 2 lr per step when the rounding flips its
    sign (7.5e-3 seen once in a clean-clone run, one element in 1024): no bound on the largest
    difference holds. A wrong normalisation or a lost batch moves most elements by ~4e-3, which
    the count of elements off by more than ``atol`` catches.
    """
    off = np.abs(np.asarray(actual) - np.asarray(desired))
    outliers = int(np.sum(off > atol))
    assert outliers <= max(1, off.size // 200), f"{outliers} of {off.size} differ by > {atol}"

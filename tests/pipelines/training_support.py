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


def largest_adam_change(steps: int = 3, d_model: int = 32, warmup_steps: int = 20) -> float:
    """The most one weight can move in ``steps`` steps of these tests' Adam (``transformer_adam(32,
    20)``, whatever the gradients): each step moves it by at most lr * |m_hat| / sqrt(v_hat), and
    that ratio is below 1.003 in the first 3 steps of beta_1 = 0.9, beta_2 = 0.98 (Cauchy-Schwarz on
    the bias-corrected moments; exactly 1 in the first)."""
    rates = [d_model ** -0.5 * min(n ** -0.5, n * warmup_steps ** -1.5) for n in range(1, steps + 1)]
    return 1.003 * sum(rates)


#: No weight of two such runs differs by more: opposite updates at every one of 3 steps.
LARGEST_SAME_UPDATE_DIFFERENCE = 2 * largest_adam_change()


def assert_same_updates(actual, desired, atol=2e-4, largest=LARGEST_SAME_UPDATE_DIFFERENCE):
    """Weights after a few Adam steps from the same weights agree up to the summation order of their
    gradients.

    Per-element Adam updates are about the learning rate, 0.002-0.006 in these tests' first 3
    steps. Where a gradient component nearly cancels (a rarely seen token), Adam's normalisation
    turns the rounding of the multi-threaded sums into a visible update, up to 2 lr per step when
    the rounding flips its sign (7.5e-3 seen once in a clean-clone run, one element in 1024). Two
    checks, each of which such rounding passes:

    - at most 1 element in 200 differs by more than ``atol``: a wrong normalisation or a lost batch
      moves most elements by ~4e-3;
    - none differs by more than ``largest``, by default what opposite updates at every one of 3
      steps could make (:data:`LARGEST_SAME_UPDATE_DIFFERENCE`, 0.024): a difference no summation
      order can give (other starting weights, a rate several times too large, NaN or inf) fails
      however few elements have it.
    """
    actual, desired = np.asarray(actual, dtype=np.float64), np.asarray(desired, dtype=np.float64)
    assert actual.shape == desired.shape, f"shapes {actual.shape} and {desired.shape}"
    off = np.abs(actual - desired)
    off[~np.isfinite(off)] = np.inf  # NaN compares false against any bound
    outliers = int(np.sum(off > atol))
    assert outliers <= max(1, off.size // 200), f"{outliers} of {off.size} differ by > {atol}"
    worst = int(np.argmax(off))
    where = tuple(int(i) for i in np.unravel_index(worst, off.shape))
    assert off.flat[worst] <= largest, (f"element {where} differs by "
                                        f"{off.flat[worst]:.3g} > {largest:.3g}: "
                                        f"{actual.flat[worst]:.6g} vs {desired.flat[worst]:.6g}")

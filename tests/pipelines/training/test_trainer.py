"""The loop alone, its parts replaced by scripted ones: what it saves, logs, raises and skips.

The compiled step and the checkpoint are fakes that record what the loop asks of them; the budget,
loss scale, workers and step log are the real ones (they need no model).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from pipelines.training import TrainingBudget, TrainingDivergedError
from pipelines.training.checkpointing import Resume
from pipelines.training.loss_scale import LossScale
from pipelines.training.step_log import StepLog
from pipelines.training.trainer import Trainer
from pipelines.training.workers import Workers
from tests.pipelines.conftest import tiny_config

BATCHES_PER_STEP = 2


class ScriptedSteps:
    """Each step's totals (loss sum, tokens, correct, non-finite, sentences) from a script."""

    def __init__(self, optimizer, script):
        self.optimizer, self.script = optimizer, list(script)
        self.applied, self.resets = [], 0

    def accumulate_step(self, batches):
        return np.array(self.script.pop(0), dtype=np.float64), BATCHES_PER_STEP

    def apply(self, tokens):
        self.applied.append(tokens)
        self.optimizer.iterations.assign_add(1)

    def reset(self):
        self.resets += 1


class RecordingCheckpoint:
    def __init__(self, directory):
        self.directory, self.saves = directory, []
        self.train_seconds = tf.Variable(0.0, dtype=tf.float64)

    def save(self, step, consumed_batches, train_seconds):
        self.saves.append((step, consumed_batches, train_seconds))
        self.train_seconds.assign(train_seconds)

    @property
    def latest(self):
        return f"ckpt-{self.saves[-1][0]}" if self.saves else None

    @property
    def kept(self):
        return [f"ckpt-{step}" for step, _, _ in self.saves]


class Optimizer:
    def __init__(self):
        self.learning_rate = tf.Variable(0.01)
        self.iterations = tf.Variable(0, dtype=tf.int64)


GOOD = (30.0, 10.0, 4.0, 0.0, 3.0)  # loss 3.0 per token
FRESH = Resume()


def make_trainer(tmp_path, script, resume=FRESH, loss_scale=None, budget=None, **settings):
    config = tiny_config(tmp_path, **settings)
    plan = config.resolved()
    strategy = tf.distribute.get_strategy()
    optimizer = Optimizer()
    budget = budget or TrainingBudget(plan.train_steps, None, 3, 0.1, start_step=resume.step)
    (tmp_path / "run").mkdir(parents=True, exist_ok=True)
    seen = []
    trainer = Trainer(config, plan, model=None, optimizer=optimizer, steps=ScriptedSteps(optimizer, script),
                      checkpoint=RecordingCheckpoint(tmp_path / "run"),
                      loss_scale=loss_scale or LossScale(strategy), budget=budget, workers=Workers(strategy),
                      log=StepLog(tmp_path / "run", resume.step, True, budget, plan.train_steps, False, None),
                      on_step=lambda step, record: seen.append(step))
    return trainer, seen


def test_steps_to_the_cap_saving_every_n_steps_and_at_the_end(tmp_path):
    trainer, seen = make_trainer(tmp_path, [GOOD] * 5, train_steps=5, checkpoint_every_steps=2)
    result = trainer.run(iter(()), Resume())
    assert result.final_step == 5 and result.start_step == 0 and result.optimizer_steps == 5
    assert [(step, consumed) for step, consumed, _ in trainer.checkpoint.saves] == [(2, 4), (4, 8), (5, 10)]
    assert result.checkpoints == ["ckpt-2", "ckpt-4", "ckpt-5"]
    assert seen == [1, 2, 3, 4, 5] and trainer.steps.applied == [10.0] * 5
    record = result.history[0]
    assert (record["step"], record["loss"], record["token_accuracy"]) == (1, 3.0, 0.4)
    assert (record["tokens"], record["sentences"], record["batches"]) == (10, 3, BATCHES_PER_STEP)


def test_a_non_finite_loss_stops_before_the_update_naming_the_last_checkpoint(tmp_path):
    nan = (float("nan"), 10.0, 4.0, 0.0, 3.0)
    trainer, _ = make_trainer(tmp_path, [GOOD, GOOD, nan], train_steps=5, checkpoint_every_steps=1)
    with pytest.raises(TrainingDivergedError, match="diverged at step 3: the loss is nan") as caught:
        trainer.run(iter(()), Resume())
    assert caught.value.last_checkpoint == "ckpt-2"
    assert len(trainer.steps.applied) == 2 and [s for s, _, _ in trainer.checkpoint.saves] == [1, 2]


def test_a_float16_overflow_skips_the_update_halves_the_scale_and_retries_the_step(tmp_path):
    overflow = (30.0, 10.0, 4.0, 1.0, 3.0)
    scale = LossScale(tf.distribute.get_strategy(), initial=8.0, growth_steps=100)
    trainer, seen = make_trainer(tmp_path, [overflow, GOOD, GOOD], loss_scale=scale, train_steps=2)
    result = trainer.run(iter(()), Resume())
    assert trainer.steps.resets == 1 and len(trainer.steps.applied) == 2 and seen == [1, 2]
    assert [r["loss_scale"] for r in result.history] == [4.0, 4.0]
    # The overflowed batches were consumed: a resume must not replay them.
    assert trainer.checkpoint.saves[-1][:2] == (2, 3 * BATCHES_PER_STEP)


def test_without_loss_scaling_a_non_finite_gradient_is_divergence(tmp_path):
    trainer, _ = make_trainer(tmp_path, [(30.0, 10.0, 4.0, 1.0, 3.0)], train_steps=2)
    with pytest.raises(TrainingDivergedError, match="a gradient is NaN or infinite"):
        trainer.run(iter(()), Resume())
    assert trainer.steps.applied == []


def test_a_budget_in_steps_saves_its_averaging_marks_and_ends_the_run(tmp_path):
    # One minute at 20 s a step: 3 steps; the last 3 checkpoints spread over the second half.
    budget = TrainingBudget(1000, 1.0, 3, 0.5, seconds_per_step=20.0)
    trainer, _ = make_trainer(tmp_path, [GOOD] * 10, budget=budget, train_steps=1000,
                              checkpoint_every_steps=None)
    result = trainer.run(iter(()), Resume())
    assert result.final_step == 3 and result.train_seconds == 60.0
    assert trainer.checkpoint.saves == [(2, 4, 40.0), (3, 6, 60.0)]


def test_a_run_resumed_at_its_end_trains_and_saves_nothing(tmp_path):
    trainer, seen = make_trainer(tmp_path, [], resume=Resume(4, 8, 3.0), train_steps=4)
    result = trainer.run(iter(()), Resume(4, 8, 3.0))
    assert (result.start_step, result.final_step) == (4, 4)
    assert trainer.checkpoint.saves == [] and seen == [] and trainer.steps.applied == []

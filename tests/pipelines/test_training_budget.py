"""Training under a wall-clock budget: it stops, checkpoints the final stretch for averaging, and
a resumed run spends only what is left of the same budget."""

from __future__ import annotations

import functools
import importlib
from pathlib import Path

import pytest
import tensorflow as tf

from keras_transformer.training.schedules import LinearDecayTail, TransformerSchedule
from pipelines.config import ConfigError, from_dict
from pipelines.training import TrainConfig, train
from pipelines.training.budget import TrainingBudget, replayed_seconds_per_step, replaying_steps
from tests.pipelines.conftest import TINY_MODEL, tiny_config


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_budget_counts_time_and_not_pauses():
    clock = FakeClock()
    budget = TrainingBudget(1000, 1.0, 3, 0.5, clock=clock)
    clock.now += 20
    with budget.pause():
        clock.now += 300
    assert budget.spent() == pytest.approx(20)
    assert not budget.out_of_time()
    clock.now += 40
    assert budget.out_of_time() and budget.remaining_minutes() == 0


def test_budget_marks_spread_over_the_window_and_fire_once():
    clock = FakeClock()
    budget = TrainingBudget(1000, 1.0, 5, 0.2, clock=clock)
    assert budget.marks == pytest.approx([0.8, 0.85, 0.9, 0.95])
    clock.now += 47.0                                   # 0.78 of the budget
    assert not budget.averaging_checkpoint_due(step=10) and not budget.in_window(step=10)
    clock.now += 1.0                                    # 0.80
    assert budget.in_window(step=11)
    assert budget.averaging_checkpoint_due(step=11)
    assert not budget.averaging_checkpoint_due(step=12)
    clock.now += 7.0                                    # 0.917: two marks at once, one save
    assert budget.averaging_checkpoint_due(step=13)
    assert budget.marks == pytest.approx([0.95])
    # Steps count as progress too: a step cap reached first still fills the window.
    assert budget.averaging_checkpoint_due(step=990)
    assert budget.marks == []


def test_resumed_budget_keeps_spent_time_and_skips_passed_marks():
    budget = TrainingBudget(1000, 1.0, 3, 0.5, spent_seconds=40.0, clock=FakeClock())
    assert budget.spent() == pytest.approx(40) and budget.remaining_minutes() == pytest.approx(1 / 3)
    assert budget.marks == pytest.approx([0.75])        # 0.5 already passed before the restart
    assert TrainingBudget(1000, None, 5, 0.1).marks == []


def test_budget_counted_in_steps_ignores_the_clock():
    clock = FakeClock()
    budget = TrainingBudget(1000, 1.0, 3, 0.5, spent_seconds=6.0, clock=clock, seconds_per_step=2.0)
    clock.now += 500                                    # a busy machine: the wall clock runs on
    assert budget.spent() == pytest.approx(6.0) and not budget.out_of_time()
    for _ in range(12):
        budget.step_done()
    assert budget.spent() == pytest.approx(30.0)        # 6 + 12 steps of 2 s: half the budget
    assert budget.averaging_checkpoint_due(step=12) and budget.marks == pytest.approx([0.75])
    for _ in range(15):
        budget.step_done()
    assert budget.out_of_time()


def test_budget_settings_are_checked():
    with pytest.raises(ConfigError, match="train_minutes"):
        TrainConfig(train_minutes=-1)
    with pytest.raises(ConfigError, match="train_minutes"):
        TrainConfig(train_minutes="ten")
    with pytest.raises(ConfigError, match="average_window"):
        TrainConfig(average_window=0)
    for bad in (0, -1.0, "fast", True):
        with pytest.raises(ValueError, match="seconds_per_step"), replaying_steps(bad):
            pass
    with pytest.raises(ConfigError, match="seconds_per_step was removed"):
        from_dict(TrainConfig, {"seconds_per_step": 0.5}, source="t.yaml")
    assert TrainConfig(train_minutes=0).resolved().train_minutes is None
    assert TrainConfig(train_minutes=2.5).resolved().train_minutes == 2.5


def test_linear_decay_tail_follows_the_progress_it_is_given():
    base = TransformerSchedule(64, warmup_steps=10)
    schedule = LinearDecayTail(base, 0.25)
    for progress, factor in ((0.0, 1.0), (0.75, 1.0), (0.875, 0.5), (1.0, 0.0), (1.3, 0.0)):
        schedule.progress.assign(progress)
        assert float(schedule(40)) == pytest.approx(factor * float(base(40)))
    restored = LinearDecayTail.from_config(schedule.get_config())
    assert restored.fraction == 0.25 and restored.schedule.get_config() == base.get_config()
    with pytest.raises(ConfigError, match="decay_fraction"):
        TrainConfig(decay_fraction=1.5)


def checkpoint_seconds(path: str) -> float:
    return float(tf.train.load_checkpoint(path).get_tensor("train_seconds/.ATTRIBUTES/VARIABLE_VALUE"))


@pytest.fixture
def step_clock(monkeypatch) -> FakeClock:
    """The clock of every budget ``train()`` makes: a wall clock on which each step takes 1 s.

    It moves when the step's update is counted (``step_done``), before the step's save decisions,
    as the real clock has moved by the time they are made. The budget's clock path (started,
    spent, carried over a restart) is the real one; only the clock's speed is fixed, so the
    outcome is exact, whatever this machine's speed or load.
    """
    clock = FakeClock()

    class OneSecondSteps(TrainingBudget):
        def step_done(self) -> None:
            super().step_done()
            clock.now += 1.0

    runner = importlib.import_module("pipelines.training.runner")
    monkeypatch.setattr(runner, "TrainingBudget", functools.partial(OneSecondSteps, clock=clock))
    return clock


@pytest.mark.slow
def test_training_stops_at_the_budget_with_the_window_checkpointed(tmp_path, train_dataset_fn,
                                                                   tokenizer, step_clock):
    budget = 15.0                                       # seconds of the step clock: 15 steps
    config = tiny_config(tmp_path, train_steps=1_000_000, train_minutes=budget / 60,
                         average_window=0.5, checkpoint_every_steps=3, decay_fraction=0.5)
    result = train(config, train_dataset_fn(), tokenizer.vocab_size)
    # The budget is looked at after every step: the run ends with the step that spends it.
    assert result.final_step == 15 and result.train_seconds == pytest.approx(budget)
    assert result.latest_checkpoint.endswith("ckpt-15")
    # demo averages 3 checkpoints: marks at 50% and 75% of the budget, the last at its end.
    # The marks' checkpoints, not the every-3-steps ones, which stop in the window (ckpt-9).
    assert [Path(c).name for c in result.checkpoints[-3:]] == ["ckpt-8", "ckpt-12", "ckpt-15"]
    assert [checkpoint_seconds(c) for c in result.checkpoints[-3:]] == pytest.approx([8.0, 12.0, 15.0])
    # The rate fell linearly to zero over the last half of the budget: step k trains at the
    # progress of the k - 1 seconds spent before it.
    plan = config.resolved()
    factors = [record["learning_rate"] / float(TransformerSchedule(
        TINY_MODEL["d_model"], plan.warmup_steps, plan.learning_rate_scale)(record["step"] - 1))
        for record in result.history]
    expected = [min(1.0, (1 - (step - 1) / budget) / 0.5) for step in range(1, 16)]
    assert factors == pytest.approx(expected, rel=1e-4, abs=1e-6)
    # Steps under the budget are not limited by train_steps: the history is all there.
    assert [r["step"] for r in result.history] == list(range(1, result.final_step + 1))


@pytest.mark.slow
def test_a_budget_counted_in_steps_trains_the_same_steps_and_resumes_them(tmp_path, train_dataset_fn, tokenizer):
    # 0.6 s a step, 9 s: 15 steps, whatever this machine's speed; averaging marks at 50% and 75%.
    settings = dict(train_steps=1_000_000, train_minutes=9 / 60, average_window=0.5, checkpoint_every_steps=None)
    with replaying_steps(0.6):
        first = train(tiny_config(tmp_path / "a", **settings), train_dataset_fn(), tokenizer.vocab_size)
    assert first.final_step == 15 and first.train_seconds == pytest.approx(9.0)
    assert [checkpoint_seconds(c) for c in first.checkpoints[-3:]] == pytest.approx([4.8, 7.2, 9.0])
    assert replayed_seconds_per_step() is None  # the replay ends with its block
    # Stopped after 4 steps by the step cap, then resumed: the same 15 steps in all.
    with replaying_steps(0.6):
        part = train(tiny_config(tmp_path / "b", **{**settings, "train_steps": 4}), train_dataset_fn(),
                     tokenizer.vocab_size)
    assert part.final_step == 4 and part.train_seconds == pytest.approx(2.4)
    with replaying_steps(0.6):
        rest = train(tiny_config(tmp_path / "b", **settings), train_dataset_fn(), tokenizer.vocab_size)
    assert rest.start_step == 4 and rest.final_step == 15 and rest.train_seconds == pytest.approx(9.0)
    assert [r["loss"] for r in rest.history] == pytest.approx([r["loss"] for r in first.history], rel=1e-4)


@pytest.mark.slow
def test_a_resumed_run_spends_only_the_rest_of_its_budget(tmp_path, train_dataset_fn, tokenizer, step_clock):
    budget = 15.0                                       # seconds of the step clock: 15 steps
    minutes = budget / 60
    first = train(tiny_config(tmp_path, train_steps=2, train_minutes=minutes),
                  train_dataset_fn(), tokenizer.vocab_size)
    assert first.final_step == 2 and first.train_seconds == pytest.approx(2.0)
    step_clock.now += 1000.0                            # the time between the runs does not count
    second = train(tiny_config(tmp_path, train_steps=1_000_000, train_minutes=minutes),
                   train_dataset_fn(), tokenizer.vocab_size)
    # The clock went on from the first run's 2 s: 13 more steps, not 15 (or none, had the pause
    # between the runs counted).
    assert second.start_step == 2 and second.final_step == 15
    assert second.train_seconds == pytest.approx(budget)
    assert [r["step"] for r in second.history] == list(range(1, 16))
    # Once spent, a rerun trains nothing and keeps the final checkpoint.
    third = train(tiny_config(tmp_path, train_steps=1_000_000, train_minutes=minutes),
                  train_dataset_fn(), tokenizer.vocab_size)
    assert third.start_step == third.final_step == second.final_step
    assert third.latest_checkpoint == second.latest_checkpoint

"""The step lines a reader of a run's log sees: where the run stands against what will end it."""

from __future__ import annotations

import logging

from pipelines.training import TrainingBudget
from pipelines.training.step_log import StepLog

RECORD = {"loss": 3.25, "token_accuracy": 0.4, "learning_rate": 1e-3, "tokens": 1000, "batches": 2,
          "tokens_per_second": 500.0}


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def step_lines(tmp_path, caplog, minutes, train_steps, steps_and_seconds):
    clock = Clock()
    budget = TrainingBudget(train_steps, minutes, 1, 0.0, clock=clock)
    log = StepLog(tmp_path, 0, True, budget, train_steps, False, 1)
    caplog.set_level(logging.INFO, logger="pipelines.training.step_log")
    try:
        for step, seconds in steps_and_seconds:
            clock.now = seconds
            log.show({"step": step, **RECORD})
    finally:
        log.close()
    return [r.getMessage() for r in caplog.records]


def test_under_a_time_budget_the_line_gives_its_minutes_not_a_step_cap_it_will_not_reach(tmp_path, caplog):
    # The demo's case: a 5-minute budget under a preset's cap of 100,000 steps.
    lines = step_lines(tmp_path, caplog, 5, 100_000, [(800, 72.0), (1600, 150.0)])
    assert [line.split(" loss")[0] for line in lines] == ["step 800, 1.2 of 5.0 min", "step 1600, 2.5 of 5.0 min"]
    assert "100000" not in " ".join(lines)
    assert lines[0].endswith("loss 3.2500 acc 0.400 lr 1.000e-03 tokens 1000 (2 batches) 500 tok/s")


def test_a_step_cap_the_budget_reaches_first_is_shown_with_the_minutes(tmp_path, caplog):
    # 100 steps in 6 s: at that pace the 500-step cap ends the run long before 5 minutes.
    lines = step_lines(tmp_path, caplog, 5, 500, [(100, 6.0)])
    assert lines[0].startswith("step 100/500, 0.1 of 5.0 min loss")


def test_without_a_budget_the_line_counts_steps(tmp_path, caplog):
    lines = step_lines(tmp_path, caplog, None, 1000, [(10, 3.0)])
    assert lines[0].startswith("step 10/1000 loss")

"""The training loop (section 5): steps until the step cap or the time budget, saving and logging.

A :class:`Trainer` owns its parts, each built once by :func:`pipelines.training.runner.train` and
each with one job, as OpenNMT-tf's trainer holds its model, optimizer and checkpoint: the compiled
step (:class:`StepFunctions`), the run's checkpoint (:class:`RunCheckpoint`), the loss scale
(:class:`LossScale`), the budget (:class:`TrainingBudget`), the validation (:class:`Validation`),
the workers' agreements (:class:`Workers`) and the step log (:class:`StepLog`). The loop is what
is left: the order of things within a step and when to save.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import keras

from keras_transformer.models.presets import TrainingRecipe
from pipelines.training.budget import TrainingBudget
from pipelines.training.checkpointing import Resume, RunCheckpoint
from pipelines.training.config import TrainConfig, TrainingDivergedError, TrainResult
from pipelines.training.loss_scale import LossScale
from pipelines.training.step_log import StepLog
from pipelines.training.steps import StepFunctions
from pipelines.training.validation import Validation
from pipelines.training.workers import Workers


@dataclass
class Trainer:
    """One training run over its parts; :meth:`run` trains from ``resume`` and returns the result."""

    config: TrainConfig
    plan: TrainingRecipe
    model: keras.Model
    optimizer: keras.optimizers.Optimizer
    steps: StepFunctions
    checkpoint: RunCheckpoint
    loss_scale: LossScale
    budget: TrainingBudget
    workers: Workers
    log: StepLog
    #: The chief's; ``None`` without validation data.
    validation: Validation | None = None
    #: Called on the chief after every step with ``(step, record)``.
    on_step: Callable[[int, dict[str, Any]], None] | None = None
    #: A progress (a fraction of the budget) at which this call stops, saved, to go on with other data.
    stop_at: float | None = None

    def run(self, batches: Iterator, resume: Resume) -> TrainResult:
        """Trains until ``plan.train_steps`` or the budget, from the state ``resume`` was restored to."""
        step, consumed = resume.step, resume.consumed_batches
        train_steps = self.plan.train_steps
        last_saved = step if step else None
        last_save_time = time.monotonic()
        validation = None
        out_of_time = self.workers.any(self.budget.out_of_time() or self._stop_due(step))
        try:
            while step < train_steps and not out_of_time:
                tick = time.perf_counter()
                totals, count = self.steps.accumulate_step(batches)
                consumed += count
                record = self._update(step + 1, totals, count, tick)
                if record is None:  # a float16 overflow: no update, the step is retried
                    continue
                step += 1
                if self.validation is not None and self.validation.due(step, train_steps):
                    with self.budget.pause():
                        validation = self.validation(step)
                    record.update({f"val_{k}": v for k, v in validation.items()})
                self.log.record(record)
                due, out_of_time = self._save_due(step, last_save_time)
                if due or step == train_steps or out_of_time:
                    self._save(step, consumed)
                    last_saved, last_save_time = step, time.monotonic()
                self.log.show(record)
                if self.workers.is_chief and self.on_step is not None:
                    self.on_step(step, dict(record))
            if last_saved != step:
                # A run that was already finished (or resumed at its end) still leaves its final
                # state in a checkpoint.
                self._save(step, consumed)
        finally:
            self.log.close()
        if self.validation is not None and not self._stop_due(step):
            validation = self.validation(step)
            self.log.add_final_validation(step, validation)
        return TrainResult(
            final_step=step,
            start_step=resume.step,
            optimizer_steps=int(self.optimizer.iterations.numpy()),
            checkpoint_dir=self.checkpoint.directory,
            checkpoints=self.checkpoint.kept,
            history=self.log.history,
            validation=validation,
            model=self.model,
            train_seconds=float(self.checkpoint.train_seconds.numpy()),
        )

    def _update(self, step: int, totals, batches: int, tick: float) -> dict[str, Any] | None:
        """Applies step ``step``'s accumulated gradients (begun at ``tick``); its record, or None if
        float16 overflowed.

        Nothing is applied (and so nothing bad is saved) when the loss or a gradient is not finite.
        """
        loss_sum, tokens, correct, nonfinite, sentences = (float(x) for x in totals)
        loss = loss_sum / tokens if tokens else float("nan")
        if not math.isfinite(loss):
            raise TrainingDivergedError(step, f"the loss is {loss}", self.checkpoint.latest)
        if nonfinite:
            if not self.loss_scale.dynamic:
                raise TrainingDivergedError(step, "a gradient is NaN or infinite", self.checkpoint.latest)
            if not self.loss_scale.shrink(step):
                raise TrainingDivergedError(step, "gradients stay non-finite even without loss scaling",
                                            self.checkpoint.latest)
            self.steps.reset()
            return None
        if self.plan.decay_fraction:
            self._set_progress(self.budget.progress(step - 1))
        # The rate this update uses: the schedule at the iterations done so far.
        learning_rate = float(self.optimizer.learning_rate.numpy())
        self.steps.apply(tokens)
        self.budget.step_done()
        self.loss_scale.grow()
        seconds = time.perf_counter() - tick
        record = {"step": step, "loss": loss, "token_accuracy": correct / tokens, "learning_rate": learning_rate,
                  "tokens": int(tokens), "sentences": int(sentences), "batches": batches, "step_seconds": seconds,
                  "tokens_per_second": tokens / seconds if seconds > 0 else 0.0}
        if self.loss_scale.dynamic:
            record["loss_scale"] = self.loss_scale.value()
        return record

    def _set_progress(self, progress: float) -> None:
        """How far the run is, for the rate's fall to zero (``LinearDecayTail``)."""
        # Workers' clocks differ; the rate must not: every worker takes the mean. Keras keeps
        # the schedule of an optimizer only in this attribute.
        self.optimizer._learning_rate.progress.assign(self.workers.mean(progress))

    def _save_due(self, step: int, last_save_time: float) -> tuple[bool, bool]:
        """Whether step ``step`` saves a checkpoint, and whether the budget is spent (all workers agree)."""
        every, minutes = self.config.checkpoint_every_steps, self.config.checkpoint_every_minutes
        due = bool(every and step % every == 0)
        if minutes:
            due = due or self.workers.any(time.monotonic() - last_save_time >= minutes * 60)
        if not self.budget.seconds:
            return due, self.workers.any(self._stop_due(step))
        # In the averaging window only its marks save: the newest k checkpoints are then evenly spread over it.
        in_window = self.workers.any(self.budget.in_window(step))
        due = self.workers.any(self.budget.averaging_checkpoint_due(step)) or (due and not in_window)
        return due, self.workers.any(self.budget.out_of_time() or self._stop_due(step))

    def _stop_due(self, step: int) -> bool:
        return self.stop_at is not None and self.budget.progress(step) >= self.stop_at

    def _save(self, step: int, consumed: int) -> None:
        self.checkpoint.save(step, consumed, self.budget.spent())

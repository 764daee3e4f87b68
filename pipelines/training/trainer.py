"""The training loop: builds model, optimizer and checkpoints in the strategy's scope and runs the steps."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from keras_transformer.config import TransformerConfig
from keras_transformer.presets import get_preset
from keras_transformer.transformer import Transformer
from pipelines.distribution import strategy_cluster_info
from pipelines.training.budget import TrainingBudget
from pipelines.training.checkpointing import build_checkpoint, check_model_config, latest, restore, save
from pipelines.training.config import DEFAULT_CHECKPOINT_DIR, TrainConfig, TrainingDivergedError, TrainResult
from pipelines.training.data import distributed_dataset
from pipelines.training.loss_scale import grow_loss_scale, shrink_loss_scale
from pipelines.training.state import seed_initialisation
from pipelines.training.step_log import StepLog
from pipelines.training.steps import build_step_functions
from pipelines.training.strategy import build_configured_strategy
from pipelines.training.validation import validation_loss

logger = logging.getLogger(__name__)


class _Trainer:
    """One training run: builds everything in the strategy's scope and runs the loop."""

    def __init__(self, config, train_data, vocab_size, validation_data, vocabulary, strategy,
                 on_step, model_fn):
        self.model_fn = model_fn
        self.config = config
        self.plan = config.resolved()
        self.train_data = train_data
        self.validation_data = validation_data
        self.on_step = on_step
        self.strategy = strategy or build_configured_strategy(config)
        self.cluster = strategy_cluster_info(self.strategy)
        self.is_chief = self.cluster.is_chief
        self.directory = Path(config.checkpoint_dir or DEFAULT_CHECKPOINT_DIR)
        if isinstance(vocab_size, (tuple, list)):
            source_vocab, target_vocab = vocab_size
            sizes = {"source_vocab_size": int(source_vocab), "target_vocab_size": int(target_vocab)}
        else:
            sizes = {"vocab_size": int(vocab_size)}
        self.model_config = get_preset(config.preset).model_config(**{**config.model, **sizes})
        self.vocabulary = vocabulary
        # Per-step gradients are scaled by 1/tokens_per_step inside the replicas (and by the
        # exact global count at the update): the sums stay O(1) whatever the batch size, which
        # matters for float16's range.
        self.norm = float(self.plan.tokens_per_batch)
        self.float16 = config.mixed_precision == "mixed_float16"

    # ---------------------------------------------------------------- construction

    def build(self) -> None:
        config = self.config
        policy = None if config.mixed_precision == "none" else config.mixed_precision
        seed_initialisation(config.seed)
        with self.strategy.scope():
            if self.model_fn is not None:
                self.model = self.model_fn(self.model_config, policy)
            else:
                kwargs = {} if policy is None else {"dtype": policy}
                self.model = Transformer(**self.model_config.to_dict(), **kwargs)
            # The recipe this run trains with, so that a saved model compiles with it again.
            self.model.training_recipe = self.plan
            self.model.build()
            self.optimizer = self.plan.optimizer(self.model_config.d_model, decay_fraction=self.plan.decay_fraction)
            self.trainable = list(self.model.trainable_variables)
            self.optimizer.build(self.trainable)
            # Gradient accumulators: one local copy per replica (ON_READ), summed only through
            # the optimizer's all-reduce at the update.
            self.accumulators = [
                tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False,
                            synchronization=tf.VariableSynchronization.ON_READ,
                            aggregation=tf.VariableAggregation.SUM,
                            name=f"accumulator_{i}")
                for i, v in enumerate(self.trainable)
            ]
            counter = dict(trainable=False, aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
            self.step_var = tf.Variable(0, dtype=tf.int64, name="step", **counter)
            self.consumed_var = tf.Variable(0, dtype=tf.int64, name="consumed_batches", **counter)
            self.loss_scale = tf.Variable(
                config.initial_loss_scale if self.float16 else 1.0, dtype=tf.float32,
                name="loss_scale", **counter)
            self.good_steps = tf.Variable(0, dtype=tf.int64, name="loss_scale_good_steps",
                                          **counter)
            # Seconds of the time budget spent up to the checkpoint (see TrainConfig).
            self.seconds_var = tf.Variable(0.0, dtype=tf.float64, name="train_seconds", **counter)
        build_checkpoint(self)

    def make_step_functions(self, element_spec) -> None:
        build_step_functions(self, element_spec)

    # ---------------------------------------------------------------- the loop

    def step_complete(self, batches: int, tokens: float) -> bool:
        if self.config.accumulation_batches:
            return batches >= self.config.accumulation_batches
        if tokens <= 0:
            return False
        # Stop unless one more batch of this step's average size would bring the count nearer
        # to tokens_per_step (the batches' real token counts vary with padding and bucketing).
        return tokens >= self.plan.tokens_per_batch - 0.5 * tokens / batches

    def any_worker_raised(self, flag: bool) -> bool:
        """Whether any worker raised ``flag``: time-based decisions must be taken by all."""
        if self.cluster.num_workers == 1:
            return flag
        return float(self.any_worker(tf.constant(1.0 if flag else 0.0))) > 0

    def run(self) -> TrainResult:
        config, plan = self.config, self.plan
        started = time.monotonic()
        self.build()
        check_model_config(self)
        start_step = restore(self)
        train_steps = plan.train_steps
        budget = TrainingBudget(train_steps, plan.train_minutes, plan.checkpoints_to_average, config.average_window,
                                float(self.seconds_var.numpy()), start_step, seconds_per_step=config.seconds_per_step)
        if budget.seconds:
            logger.info("time budget: %.1f of %.1f minutes left", budget.remaining_minutes(), budget.seconds / 60)
        log = StepLog(self.directory, start_step, self.is_chief, budget, train_steps, config.progress_bar,
                      config.log_every)
        dist_dataset = distributed_dataset(self)
        self.make_step_functions(dist_dataset.element_spec)
        iterator = iter(dist_dataset)
        step = start_step
        consumed = int(self.consumed_var.numpy())
        last_saved_step = start_step if start_step else None
        self.last_save_time = time.monotonic()
        validation = None
        out_of_time = self.any_worker_raised(budget.out_of_time())
        try:
            while step < train_steps and not out_of_time:
                tick = time.perf_counter()
                totals, batches = self._accumulate_step(iterator)
                consumed += batches
                loss_sum, tokens, correct, nonfinite, sentences = (float(x) for x in totals)
                next_step = step + 1
                loss = loss_sum / tokens if tokens else float("nan")
                if not math.isfinite(loss):
                    raise TrainingDivergedError(next_step, f"the loss is {loss}", latest(self))
                if nonfinite:
                    if not self.float16:
                        raise TrainingDivergedError(next_step, "a gradient is NaN or infinite", latest(self))
                    shrink_loss_scale(self, next_step)
                    self.reset()
                    continue
                if plan.decay_fraction:
                    self._set_progress(budget.progress(step))
                # The rate this update uses: the schedule at the iterations done so far.
                learning_rate = float(self.optimizer.learning_rate.numpy())
                self.apply(tf.constant(tokens, tf.float32))
                budget.step_done()
                step = next_step
                self.step_var.assign(step)
                self.consumed_var.assign(consumed)
                if self.float16:
                    grow_loss_scale(self)
                seconds = time.perf_counter() - tick
                record = {"step": step, "loss": loss, "token_accuracy": correct / tokens,
                          "learning_rate": learning_rate, "tokens": int(tokens), "sentences": int(sentences),
                          "batches": batches, "step_seconds": seconds,
                          "tokens_per_second": tokens / seconds if seconds > 0 else 0.0}
                if self.float16:
                    record["loss_scale"] = float(self.loss_scale.numpy())
                if (self.validation_data is not None and config.validate_every_steps
                        and step % config.validate_every_steps == 0 and step < train_steps and self.is_chief):
                    with budget.pause():
                        validation = self._validate()
                    record.update({f"val_{k}": v for k, v in validation.items()})
                log.record(record)
                due, out_of_time = self._save_due(step, budget)
                if due or step == train_steps or out_of_time:
                    self._save(step, budget)
                    last_saved_step = step
                log.show(record)
                if self.is_chief and self.on_step is not None:
                    self.on_step(step, dict(record))
            if last_saved_step != step:
                # A run that was already finished (or resumed at its end) still leaves its
                # final state in a checkpoint.
                self._save(step, budget)
        finally:
            log.close()
        if self.validation_data is not None and self.is_chief:
            validation = self._validate()
            log.add_final_validation(step, validation)
        checkpoints = list(self.manager.checkpoints) if self.is_chief else []
        return TrainResult(
            final_step=step,
            start_step=start_step,
            optimizer_steps=int(self.optimizer.iterations.numpy()),
            checkpoint_dir=self.directory,
            checkpoints=checkpoints,
            history=log.history,
            validation=validation,
            model=self.model,
            elapsed_seconds=time.monotonic() - started,
            train_seconds=float(self.seconds_var.numpy()),
        )

    def _accumulate_step(self, iterator) -> tuple[np.ndarray, int]:
        """Runs batches until the step's token budget is reached: the global sums and the batch count."""
        totals = np.zeros(5, dtype=np.float64)
        batches = 0
        while True:
            totals += self.accumulate(next(iterator)).numpy()
            batches += 1
            if self.step_complete(batches, totals[1]):
                return totals, batches
            if batches > 10_000:
                raise RuntimeError("10000 batches without reaching tokens_per_step: are the batches empty?")

    def _save_due(self, step: int, budget: TrainingBudget) -> tuple[bool, bool]:
        """Whether step ``step`` saves a checkpoint, and whether the budget is spent (all workers agree)."""
        config = self.config
        due = bool(config.checkpoint_every_steps and step % config.checkpoint_every_steps == 0)
        if config.checkpoint_every_minutes:
            late = time.monotonic() - self.last_save_time >= config.checkpoint_every_minutes * 60
            due = due or self.any_worker_raised(late)
        if not budget.seconds:
            return due, False
        # In the averaging window only its marks save: the newest k checkpoints are then evenly spread over it.
        in_window = self.any_worker_raised(budget.in_window(step))
        due = self.any_worker_raised(budget.averaging_checkpoint_due(step)) or (due and not in_window)
        return due, self.any_worker_raised(budget.out_of_time())

    def _save(self, step: int, budget: TrainingBudget) -> None:
        self.seconds_var.assign(budget.spent())
        save(self, step)
        self.last_save_time = time.monotonic()

    # ---------------------------------------------------------------- helpers

    def _set_progress(self, progress: float) -> None:
        # Workers' clocks differ; the rate must not: every worker takes the mean.
        if self.cluster.num_workers > 1:
            progress = float(self.mean_over_workers(tf.constant(progress, tf.float32)))
        # Keras keeps the schedule of an optimizer only in this attribute.
        self.optimizer._learning_rate.progress.assign(progress)

    def _validate(self) -> dict[str, float]:
        result = validation_loss(self.model, self.validation_data, self.plan.label_smoothing,
                          self.config.validation_max_batches)
        logger.info("validation at step %d: loss %.4f nll %.4f perplexity %.2f accuracy %.3f",
                    int(self.step_var.numpy()), result["loss"], result["nll"],
                    result["perplexity"], result["token_accuracy"])
        return result

def train(
    config: TrainConfig,
    train_data: tf.data.Dataset | Callable[[tf.distribute.InputContext], tf.data.Dataset],
    vocab_size: int | tuple[int, int],
    *,
    validation_data: tf.data.Dataset | None = None,
    vocabulary: dict[str, Any] | None = None,
    strategy: tf.distribute.Strategy | None = None,
    on_step: Callable[[int, dict[str, Any]], None] | None = None,
    model_fn: Callable[[TransformerConfig, str | None], Transformer] | None = None,
) -> TrainResult:
    """Trains (or resumes training of) a Transformer with the paper's recipe.

    Args:
        config: the stage settings.
        train_data: batches ``((source_ids, target_input_ids), target_output_ids)`` padded with
            0 (``pipelines.input_pipeline.make_dataset``), or a function of a
            ``tf.distribute.InputContext`` returning them for one input pipeline (a dataset is
            sharded across workers automatically). Each replica takes whole batches; a finite
            dataset is repeated.
        vocab_size: the shared vocabulary size, or ``(source, target)`` sizes.
        validation_data: optional batches for the periodic and final validation.
        vocabulary: identifies the vocabulary in ``model_config.json`` (e.g.
            ``{"fingerprint": tokenizer.fingerprint, "size": tokenizer.vocab_size}``) so that
            averaging and resuming refuse checkpoints of another vocabulary.
        strategy: a strategy to use instead of ``build_strategy(config.strategy, ...)``.
            ``MultiWorkerMirroredStrategy`` must exist before TensorFlow runs anything, so a
            multi-worker caller builds it first and passes it here.
        on_step: called on the chief after every step with ``(step, metrics)``: ``loss``,
            ``token_accuracy``, ``learning_rate``, ``tokens``, ``sentences``, ``batches``,
            ``step_seconds``, ``tokens_per_second`` (and ``val_*`` after a validation).
        model_fn: builds the model inside the strategy's scope from the resolved
            ``TransformerConfig`` and the dtype policy (``None`` or ``"mixed_..."``); default
            ``Transformer(**config.to_dict(), dtype=policy)``.

    Raises:
        TrainingDivergedError: a loss or gradient became NaN or infinite (names the step).
        ConfigError: the checkpoint directory belongs to another model.
    """
    return _Trainer(config, train_data, vocab_size, validation_data, vocabulary, strategy,
                    on_step, model_fn).run()

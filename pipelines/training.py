"""Training stage: the paper's recipe (section 5) in a tf.distribute custom loop.

* Section 5.2, hardware and schedule: synchronous data parallelism through a tf.distribute
  strategy (:mod:`pipelines.distribution`): every replica processes its own token-bucketed batch,
  gradients are summed across replicas (and machines) before each update.
* Section 5.1, batching: "each training batch contained ... approximately 25000 source tokens
  and 25000 target tokens". ``tokens_per_step`` is that budget per optimizer step; when the
  replicas' batches hold fewer tokens, gradients are accumulated over several batches until the
  budget is reached. The loss of a step is the sum of the per-token losses over every
  non-padding target token of every replica and accumulated batch, divided by their global
  number (not a mean of per-replica or per-sentence means), so the update does not depend on how
  the tokens were spread over replicas and batches.
* Section 5.3, optimizer: Adam(0.9, 0.98, 1e-9) on the warm-up / inverse-square-root schedule.
* Section 5.4, regularisation: dropout (the preset's P_drop) and label smoothing.

Checkpoints (``tf.train.CheckpointManager``) hold the model's weights, the state of its dropout
random generators, the optimizer (moments and iteration count, hence the learning-rate
schedule's position), the step counter, the number of batches consumed (a restart skips them,
so the data stream continues where it stopped) and the loss scale. A run resumes from the
newest checkpoint of its directory automatically; checkpoint files and the state file are
written to temporary names and renamed, so killing the process at any moment leaves the
previous checkpoint intact. A non-finite loss or gradient
raises :class:`TrainingDivergedError` before the update is applied, so no bad state is saved.

Run from Python with :func:`train`, or from the command line::

    python -m pipelines.training --config train.yaml

with a YAML file holding a ``train:`` section (:class:`TrainConfig`) and a ``data:`` section
(:class:`TrainDataConfig`).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import math
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf
from tqdm import tqdm

from keras_transformer.checkpoint_averaging import (
    config_differences,
    model_config_dict,
    model_weights_trackable,
    read_model_config,
    write_model_config,
)
from keras_transformer.config import TransformerConfig
from keras_transformer.losses import label_smoothed_nll
from keras_transformer.presets import get_preset
from keras_transformer.schedules import transformer_adam
from keras_transformer.transformer import Transformer
from pipelines.config import ConfigError, from_dict, load_config, to_dict
from pipelines.distribution import (
    STRATEGY_KINDS,
    build_strategy,
    describe_strategy,
    has_cluster,
    split_cpu,
    strategy_cluster_info,
)
from pipelines.training_budget import TrainingBudget

logger = logging.getLogger(__name__)

MIXED_PRECISION = ("none", "mixed_float16", "mixed_bfloat16")
DATA_RESUME = ("skip", "restart")
METRICS_FILE = "metrics.jsonl"
TRAIN_CONFIG_FILE = "train_config.json"
CHECKPOINT_NAME = "ckpt"
DEFAULT_CHECKPOINT_DIR = "runs/train"


class TrainingDivergedError(RuntimeError):
    """The loss or the gradients became NaN or infinite; the update was not applied.

    ``step`` is the optimizer step (1-based) that diverged; ``last_checkpoint`` is the newest
    checkpoint on disk, written before the divergence.
    """

    def __init__(self, step: int, reason: str, last_checkpoint: str | None):
        self.step = step
        self.reason = reason
        self.last_checkpoint = last_checkpoint
        where = (
            f"the last good checkpoint is {last_checkpoint}"
            if last_checkpoint
            else "no checkpoint was written yet"
        )
        super().__init__(
            f"training diverged at step {step}: {reason}. The update was not applied and "
            f"nothing was saved; {where}. Lower the learning rate (learning_rate_scale), "
            "lengthen the warm-up or check the data."
        )


@dataclass
class TrainConfig:
    """Settings of the training stage; ``None`` means "the preset's value".

    Model: ``preset`` (see ``keras_transformer.preset_names()``) with ``model`` overrides of
    its architecture (e.g. ``{num_layers: 1, dropout: 0.0}``); the vocabulary size comes from the
    tokenizer, not from here.

    Recipe (section 5): ``train_steps``, ``warmup_steps``, ``label_smoothing`` and
    ``learning_rate_scale`` (a factor on the schedule of equation (3)) default to the preset.
    ``train_minutes`` (default: the preset's; 0 for none) is a wall-clock budget for the training
    loop: training stops at whichever of ``train_steps`` and ``train_minutes`` comes first. The
    budget counts steps and checkpoint writes, not validation; the seconds spent are checkpointed,
    so a resumed run spends only what is left of the same budget. Equation (3) depends on the step
    alone, so the schedule needs no knowledge of where the budget will end. Under a budget the
    checkpoints to average (section 6.1) are spread evenly over the last ``average_window`` of
    the run (by time or steps, whichever is further along), the last one at its end: the paper's
    "last 5 checkpoints, written at 10-minute intervals" cover the final 7% of its 12 hours.
    ``decay_fraction`` (default: the preset's; not in the paper) lets the rate fall linearly to
    zero over that last fraction of the run, measured the same way.
    ``tokens_per_step`` (default: the preset's ``tokens_per_batch``) is the number of target
    tokens per optimizer step, reached by accumulating batches: a step ends as soon as the
    global (all replicas) count is within half an average batch of the budget, so a step holds
    the budget to about half a batch either way (a single batch when it holds half of it). ``accumulation_batches``
    instead fixes the number of batches per replica and step.

    Checkpoints: every ``checkpoint_every_steps`` steps and/or ``checkpoint_every_minutes``
    minutes (the paper: 10 minutes), keeping the newest ``keep_checkpoints`` (at least the
    preset's ``checkpoints_to_average``). ``data_resume``: ``skip`` replays the data stream to
    where the checkpoint was taken (exact continuation for a deterministic pipeline), ``restart``
    starts it over.

    Devices: ``strategy`` (``auto``/``mirrored``/``multi_worker``/``one_device``) over
    ``devices``; ``cpu_devices`` splits the CPU into that many logical devices (honoured by the
    CLI, which applies it before TensorFlow starts; mirrored over unless ``devices`` is given).
    GPU settings: ``mixed_precision``
    (``mixed_float16`` with dynamic loss scaling, or ``mixed_bfloat16``; logits, softmax and loss
    stay float32) and ``jit_compile`` (XLA for the forward and backward pass).

    Validation: every ``validate_every_steps`` steps and at the end, on at most
    ``validation_max_batches`` batches.
    """

    preset: str = "demo"
    model: dict[str, Any] = field(default_factory=dict)
    train_steps: int | None = None
    train_minutes: float | None = None
    average_window: float = 0.1
    decay_fraction: float | None = None
    warmup_steps: int | None = None
    label_smoothing: float | None = None
    learning_rate_scale: float | None = None
    tokens_per_step: int | None = None
    accumulation_batches: int | None = None
    #: ``None``: ``runs/train`` for the stage alone; the pipeline flow gives each run its own.
    checkpoint_dir: str | None = None
    checkpoint_every_steps: int | None = 100
    checkpoint_every_minutes: float | None = 10.0
    keep_checkpoints: int | None = None
    data_resume: str = "skip"
    strategy: str = "auto"
    devices: list[str] | None = None
    cpu_devices: int | None = None
    mixed_precision: str = "none"
    jit_compile: bool = False
    initial_loss_scale: float = 2.0**15
    loss_scale_growth_steps: int = 2000
    seed: int = 0
    log_every: int = 50
    progress_bar: bool = True
    validate_every_steps: int | None = None
    validation_max_batches: int | None = None

    def __post_init__(self) -> None:
        def fail(name: str, why: str) -> None:
            raise ConfigError(f"TrainConfig.{name}={getattr(self, name)!r}: {why}")

        try:
            preset = get_preset(self.preset)
        except ValueError as err:
            raise ConfigError(f"TrainConfig.preset: {err}") from err
        self.model = dict(self.model or {})
        unknown = sorted(set(self.model) - TransformerConfig.field_names())
        if unknown:
            fail("model", f"unknown model setting(s) {unknown}; known are "
                 f"{sorted(TransformerConfig.field_names())}")
        for name in ("train_steps", "warmup_steps", "tokens_per_step", "accumulation_batches",
                     "checkpoint_every_steps", "keep_checkpoints", "cpu_devices",
                     "validate_every_steps", "validation_max_batches", "log_every",
                     "loss_scale_growth_steps"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                      or value < 1):
                fail(name, "must be a positive integer")
        if self.train_minutes is not None and (isinstance(self.train_minutes, bool) or not isinstance(
                self.train_minutes, (int, float)) or self.train_minutes < 0):
            fail("train_minutes", "must be a number of minutes >= 0 (0: no time budget)")
        if isinstance(self.average_window, bool) or not isinstance(self.average_window, (int, float)) \
                or not 0 < self.average_window <= 1:
            fail("average_window", "must be a fraction of the run in (0, 1]")
        if self.decay_fraction is not None and (isinstance(self.decay_fraction, bool) or not isinstance(
                self.decay_fraction, (int, float)) or not 0 <= self.decay_fraction <= 1):
            fail("decay_fraction", "must be a fraction of the run in [0, 1] (0: no decay to zero)")
        if self.checkpoint_every_minutes is not None and self.checkpoint_every_minutes <= 0:
            fail("checkpoint_every_minutes", "must be positive (or null to disable)")
        if self.label_smoothing is not None and not 0.0 <= self.label_smoothing < 1.0:
            fail("label_smoothing", "must be in [0, 1)")
        if self.learning_rate_scale is not None and self.learning_rate_scale <= 0:
            fail("learning_rate_scale", "must be positive")
        if self.initial_loss_scale < 1:
            fail("initial_loss_scale", "must be >= 1")
        needed = preset.decoding.checkpoints_to_average
        if self.keep_checkpoints is not None and self.keep_checkpoints < needed:
            fail("keep_checkpoints", f"preset '{self.preset}' averages the last {needed} "
                 "checkpoints (section 6.1), so at least that many must be kept")
        if self.strategy not in STRATEGY_KINDS:
            fail("strategy", f"use one of {STRATEGY_KINDS}")
        if self.mixed_precision not in MIXED_PRECISION:
            fail("mixed_precision", f"use one of {MIXED_PRECISION}")
        if self.data_resume not in DATA_RESUME:
            fail("data_resume", f"use one of {DATA_RESUME}")

    # Resolved values: the preset fills what the config leaves unset.

    def resolved(self) -> dict[str, Any]:
        preset = get_preset(self.preset)
        recipe = preset.training
        minutes = recipe.train_minutes if self.train_minutes is None else self.train_minutes
        return {
            "train_steps": self.train_steps or recipe.train_steps,
            "train_minutes": float(minutes) if minutes else None,
            "decay_fraction": (recipe.decay_fraction if self.decay_fraction is None
                               else self.decay_fraction) or None,
            "warmup_steps": self.warmup_steps or recipe.warmup_steps,
            "label_smoothing": (recipe.label_smoothing if self.label_smoothing is None
                                else self.label_smoothing),
            "tokens_per_step": self.tokens_per_step or recipe.tokens_per_batch,
            "keep_checkpoints": self.keep_checkpoints or max(
                preset.decoding.checkpoints_to_average, 5),
            "adam_beta_1": recipe.adam_beta_1,
            "adam_beta_2": recipe.adam_beta_2,
            "adam_epsilon": recipe.adam_epsilon,
            "learning_rate_scale": (recipe.learning_rate_scale if self.learning_rate_scale is None
                                    else self.learning_rate_scale),
            "checkpoints_to_average": preset.decoding.checkpoints_to_average,
        }


@dataclass
class TrainResult:
    """What :func:`train` returns. On a non-chief worker ``history`` and ``checkpoints`` are
    empty and ``validation`` is ``None``: the chief alone writes and validates."""

    final_step: int
    start_step: int
    optimizer_steps: int
    checkpoint_dir: Path
    checkpoints: list[str]
    history: list[dict[str, Any]]
    validation: dict[str, float] | None
    model: Transformer = field(repr=False)
    elapsed_seconds: float = 0.0
    #: Seconds of the training loop over all runs of this directory (what a budget counts).
    train_seconds: float = 0.0

    @property
    def latest_checkpoint(self) -> str | None:
        return self.checkpoints[-1] if self.checkpoints else None


# --------------------------------------------------------------------------- evaluation


def validation_loss(
    model: Transformer,
    dataset: tf.data.Dataset,
    label_smoothing: float = 0.0,
    max_batches: int | None = None,
) -> dict[str, float]:
    """Token-level loss of ``model`` on ``dataset`` (no dropout).

    Returns ``loss`` (label-smoothed, as trained), ``nll`` (cross-entropy per target token),
    ``perplexity`` = exp(nll), ``token_accuracy`` and ``tokens`` (non-padding target tokens).
    """
    pad_id = model.config.pad_id

    ids = tf.TensorSpec([None, None], tf.int32)

    # One trace for every batch shape (bucketed batches vary in both dimensions).
    @tf.function(input_signature=[ids, ids, ids])
    def batch_sums(source, target_in, target_out):
        logits = model((source, target_in), training=False)
        smoothed, mask = label_smoothed_nll(target_out, logits, label_smoothing, pad_id)
        nll, _ = label_smoothed_nll(target_out, logits, 0.0, pad_id)
        correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32),
                                   tf.cast(target_out, tf.int32)), tf.float32) * mask
        return tf.stack([tf.reduce_sum(smoothed), tf.reduce_sum(nll), tf.reduce_sum(correct),
                         tf.reduce_sum(mask)])

    totals = np.zeros(4, dtype=np.float64)
    data = dataset if max_batches is None else dataset.take(max_batches)
    for (source, target_in), target_out in data:
        totals += batch_sums(tf.cast(source, tf.int32), tf.cast(target_in, tf.int32),
                             tf.cast(target_out, tf.int32)).numpy()
    tokens = totals[3]
    if tokens == 0:
        raise ValueError("validation_loss: the dataset holds no target token")
    nll = totals[1] / tokens
    return {
        "loss": float(totals[0] / tokens),
        "nll": float(nll),
        "perplexity": float(math.exp(min(nll, 700.0))),
        "token_accuracy": float(totals[2] / tokens),
        "tokens": int(tokens),
    }


# --------------------------------------------------------------------------- the trainer


def dropout_rng_trackable(model) -> tf.Module:
    """The state of the model's Keras seed generators (its dropout masks), for the checkpoint.

    Restoring it makes a resumed run draw the dropout masks the uninterrupted run would have
    drawn. Keyed by position in ``model.variables``, not by path: Keras numbers seed generators
    per process (``seed_generator_7``), so paths differ between two processes building one model.
    """
    weights = {id(v) for v in model.weights}
    root = tf.Module()
    states = [v for v in model.variables
              if id(v) not in weights and v.path.endswith("seed_generator_state")]
    for i, state in enumerate(states):
        setattr(root, f"seed_generator_{i}", getattr(state, "value", state))
    return root


def seed_initialisation(seed: int) -> None:
    """Makes the model's initial weights and dropout seeds a function of ``seed``.

    Keras draws the seeds of initializers and dropout layers from Python's ``random``. Not
    ``keras.utils.set_random_seed``: its ``tf.random.set_seed`` clears TensorFlow's kernel
    cache, which destroys the resources of ops already created, such as the SentencePiece
    model inside ``tensorflow_text`` tokenizers of the input pipeline.
    """
    random.seed(seed)
    np.random.seed(seed)


def _atomic_write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, sort_keys=True, default=str)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def read_metrics(checkpoint_dir: str | Path, up_to_step: int | None = None) -> list[dict]:
    """The per-step records of ``metrics.jsonl`` (a torn last line, from a kill, is skipped).

    With ``up_to_step``, records of later steps (computed after the checkpoint a run resumed
    from, then lost with the process) are dropped; a step that appears twice keeps its last
    record.
    """
    path = Path(checkpoint_dir) / METRICS_FILE
    records: dict[int, dict] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    for line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        step = record.get("step")
        if isinstance(step, int) and (up_to_step is None or step <= up_to_step):
            records[step] = record
    return [records[s] for s in sorted(records)]


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
        self.norm = float(self.plan["tokens_per_step"])
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
            self.model.training_recipe = dataclasses.replace(
                get_preset(config.preset).training,
                **{k: self.plan[k] for k in ("warmup_steps", "label_smoothing", "learning_rate_scale")})
            self.model.build()
            self.optimizer = transformer_adam(
                self.model_config.d_model,
                self.plan["warmup_steps"],
                self.plan["adam_beta_1"],
                self.plan["adam_beta_2"],
                self.plan["adam_epsilon"],
                scale=self.plan["learning_rate_scale"],
                decay_fraction=self.plan["decay_fraction"],
            )
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
        self.checkpoint = tf.train.Checkpoint(
            model=model_weights_trackable(self.model),
            dropout_rng=dropout_rng_trackable(self.model),
            optimizer=self.optimizer,
            step=self.step_var,
            consumed_batches=self.consumed_var,
            loss_scale=self.loss_scale,
            loss_scale_good_steps=self.good_steps,
            train_seconds=self.seconds_var,
        )
        keep = self.plan["keep_checkpoints"]
        # Non-chief workers get a throw-away manager per save (see save()).
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, str(self.directory), max_to_keep=keep,
            checkpoint_name=CHECKPOINT_NAME) if self.is_chief else None

    def check_model_config(self) -> None:
        """Refuses to resume a directory written for another model; records this one."""
        info = model_config_dict(self.model, preset=self.config.preset,
                                 vocabulary=self.vocabulary)
        existing = read_model_config(self.directory)
        if existing is not None:
            diffs = config_differences(existing, info)
            if diffs:
                raise ConfigError(
                    f"{self.directory} holds checkpoints of a different model ("
                    + "; ".join(diffs) + "); use another checkpoint_dir or the same settings")
        if self.is_chief:
            self.directory.mkdir(parents=True, exist_ok=True)
            write_model_config(self.directory, info)
            _atomic_write_json(self.directory / TRAIN_CONFIG_FILE, {
                "train_config": to_dict(self.config),
                "resolved": self.plan,
                "strategy": describe_strategy(self.strategy),
                "mixed_precision": self.config.mixed_precision,
            })

    def restore(self) -> int:
        latest = tf.train.latest_checkpoint(str(self.directory))
        if latest is None:
            logger.info("no checkpoint in %s: starting from step 0", self.directory)
            return 0
        self.checkpoint.restore(latest).assert_existing_objects_matched()
        step = int(self.step_var.numpy())
        logger.info("resumed from %s at step %d (optimizer iterations %d, %d batches consumed)",
                    latest, step, int(self.optimizer.iterations.numpy()),
                    int(self.consumed_var.numpy()))
        return step

    # ---------------------------------------------------------------- data

    def distributed_dataset(self):
        skip = 0
        strategy = self.strategy
        if self.config.data_resume == "skip":
            replicas_per_pipeline = strategy.num_replicas_in_sync // self.cluster.num_workers
            skip = int(self.consumed_var.numpy()) * max(replicas_per_pipeline, 1)
        source = self.train_data

        def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
            if callable(source) and not isinstance(source, tf.data.Dataset):
                dataset = source(context)
            else:
                dataset = source
                if context.num_input_pipelines > 1:
                    dataset = dataset.shard(context.num_input_pipelines,
                                            context.input_pipeline_id)
            if dataset.cardinality() != tf.data.INFINITE_CARDINALITY:
                # Epochs are invisible to the step-based schedule of the paper.
                dataset = dataset.repeat()
            if skip:
                dataset = dataset.skip(skip)
            return dataset

        if skip:
            logger.info("skipping %d batches per input pipeline to continue the data stream",
                        skip)
        return strategy.distribute_datasets_from_function(dataset_fn)

    # ---------------------------------------------------------------- step functions

    def make_step_functions(self, element_spec) -> None:
        model, strategy = self.model, self.strategy
        trainable, accumulators = self.trainable, self.accumulators
        eps = float(self.plan["label_smoothing"])
        pad_id = self.model_config.pad_id
        norm = self.norm
        loss_scale = self.loss_scale

        def forward_backward(source, target_in, target_out, scale):
            with tf.GradientTape() as tape:
                logits = model((source, target_in), training=True)
                losses, mask = label_smoothed_nll(target_out, logits, eps, pad_id)
                loss_sum = tf.reduce_sum(losses)
                scaled = loss_sum * (scale / norm)
            grads = tape.gradient(scaled, trainable)
            grads = [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
                     for g, v in zip(grads, trainable)]
            finite = tf.reduce_all(tf.stack([tf.reduce_all(tf.math.is_finite(g))
                                             for g in grads]))
            predictions = tf.argmax(logits, -1, output_type=tf.int32)
            correct = tf.reduce_sum(
                tf.cast(tf.equal(predictions, tf.cast(target_out, tf.int32)), tf.float32) * mask)
            return loss_sum, tf.reduce_sum(mask), correct, finite, grads

        if self.config.jit_compile:
            forward_backward = tf.function(forward_backward, jit_compile=True,
                                           reduce_retracing=True)

        def replica_accumulate(batch):
            (source, target_in), target_out = batch
            loss_sum, tokens, correct, finite, grads = forward_backward(
                source, target_in, target_out, loss_scale.read_value())
            for accumulator, grad in zip(accumulators, grads):
                accumulator.assign_add(grad)
            sentences = tf.cast(tf.shape(target_out)[0], tf.float32)
            nonfinite = 1.0 - tf.cast(finite, tf.float32)
            return tf.stack([loss_sum, tokens, correct, nonfinite, sentences])

        # input_signature with the dataset's None dimensions: one trace for every batch shape.
        @tf.function(input_signature=[element_spec])
        def accumulate(batch):
            per_replica = strategy.run(replica_accumulate, args=(batch,))
            # A cross-replica (and cross-worker) sum: every worker sees the same totals and so
            # takes the same decisions (end of step, divergence, loss scale).
            return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

        self.accumulate = accumulate

        def replica_apply(global_tokens):
            factor = norm / (global_tokens * loss_scale.read_value())
            grads = [accumulator.read_value() * factor for accumulator in accumulators]
            # Keras' optimizer sums the replicas' gradients before the update, so the global
            # loss is sum(per-token losses) / global_tokens exactly.
            self.optimizer.apply(grads, trainable)
            replica_reset()

        def replica_reset():
            for accumulator in accumulators:
                accumulator.assign(tf.zeros_like(accumulator))

        # No tensor-dependent Python control flow below: AutoGraph has nothing to convert.
        @tf.function(input_signature=[tf.TensorSpec((), tf.float32)], autograph=False)
        def apply(global_tokens):
            strategy.run(replica_apply, args=(global_tokens,))

        @tf.function(autograph=False)
        def reset():
            strategy.run(replica_reset)

        self.apply, self.reset = apply, reset

        @tf.function(autograph=False)
        def weights_finite():
            return tf.reduce_all(tf.stack([tf.reduce_all(tf.math.is_finite(v))
                                           for v in model.weights]))

        self.weights_finite = weights_finite

        @tf.function(input_signature=[tf.TensorSpec((), tf.float32)], autograph=False)
        def any_worker(flag):
            per_replica = strategy.run(tf.identity, args=(flag,))
            return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

        self.any_worker = any_worker

        @tf.function(input_signature=[tf.TensorSpec((), tf.float32)], autograph=False)
        def mean_over_workers(value):
            per_replica = strategy.run(tf.identity, args=(value,))
            return strategy.reduce(tf.distribute.ReduceOp.MEAN, per_replica, axis=None)

        self.mean_over_workers = mean_over_workers

    # ---------------------------------------------------------------- the loop

    def step_complete(self, batches: int, tokens: float) -> bool:
        if self.config.accumulation_batches:
            return batches >= self.config.accumulation_batches
        if tokens <= 0:
            return False
        # Stop unless one more batch of this step's average size would bring the count nearer
        # to tokens_per_step (the batches' real token counts vary with padding and bucketing).
        return tokens >= self.plan["tokens_per_step"] - 0.5 * tokens / batches

    def any_worker_raised(self, flag: bool) -> bool:
        """Whether any worker raised ``flag``: time-based decisions must be taken by all."""
        if self.cluster.num_workers == 1:
            return flag
        return float(self.any_worker(tf.constant(1.0 if flag else 0.0))) > 0

    def save(self, step: int) -> str | None:
        if not bool(self.weights_finite()):
            raise TrainingDivergedError(step, "a model weight is NaN or infinite",
                                        self._latest())
        if not self.is_chief:
            # Every worker saves (the documented MultiWorkerMirroredStrategy pattern: saving
            # may need collectives), the non-chief ones into a private directory deleted at once.
            worker_dir = tempfile.mkdtemp(prefix=f"worker-{self.cluster.task_id}-")
            try:
                tf.train.CheckpointManager(self.checkpoint, worker_dir, max_to_keep=1).save(
                    checkpoint_number=step)
            finally:
                shutil.rmtree(worker_dir, ignore_errors=True)
            return None
        path = self.manager.save(checkpoint_number=step)
        logger.info("saved checkpoint %s", path)
        return path

    def run(self) -> TrainResult:
        config, plan = self.config, self.plan
        started = time.monotonic()
        self.build()
        self.check_model_config()
        start_step = self.restore()
        train_steps = plan["train_steps"]
        budget = TrainingBudget(train_steps, plan["train_minutes"], plan["checkpoints_to_average"],
                                config.average_window, float(self.seconds_var.numpy()), start_step)
        if budget.seconds:
            logger.info("time budget: %.1f of %.1f minutes left", budget.remaining_minutes(),
                        budget.seconds / 60)
        history = read_metrics(self.directory, start_step) if self.is_chief else []
        if self.is_chief:
            # Drop records of steps after the checkpoint: they are recomputed below.
            self._rewrite_metrics(history)
        dist_dataset = self.distributed_dataset()
        self.make_step_functions(dist_dataset.element_spec)
        iterator = iter(dist_dataset)
        step = start_step
        consumed = int(self.consumed_var.numpy())
        last_saved_step = start_step if start_step else None
        last_save_time = time.monotonic()
        validation = None
        metrics_file = (self.directory / METRICS_FILE).open("a", encoding="utf-8") \
            if self.is_chief else None
        # Under a time budget the bar counts minutes: the number of steps is not known.
        bar = tqdm(total=round(budget.seconds / 60, 1) if budget.seconds else train_steps,
                   initial=round(budget.spent() / 60, 1) if budget.seconds else step,
                   unit="min" if budget.seconds else "step", desc="train",
                   disable=not (config.progress_bar and self.is_chief), dynamic_ncols=True)
        out_of_time = self.any_worker_raised(budget.out_of_time())
        try:
            while step < train_steps and not out_of_time:
                tick = time.perf_counter()
                totals = np.zeros(5, dtype=np.float64)
                batches = 0
                while True:
                    totals += self.accumulate(next(iterator)).numpy()
                    batches += 1
                    if self.step_complete(batches, totals[1]):
                        break
                    if batches > 10_000:
                        raise RuntimeError("10000 batches without reaching tokens_per_step: "
                                           "are the batches empty?")
                consumed += batches
                loss_sum, tokens, correct, nonfinite, sentences = (float(x) for x in totals)
                next_step = step + 1
                loss = loss_sum / tokens if tokens else float("nan")
                if not math.isfinite(loss):
                    raise TrainingDivergedError(next_step, f"the loss is {loss}",
                                                self._latest())
                if nonfinite:
                    if not self.float16:
                        raise TrainingDivergedError(next_step, "a gradient is NaN or infinite",
                                                    self._latest())
                    self._shrink_loss_scale(next_step)
                    self.reset()
                    continue
                if self.plan["decay_fraction"]:
                    self._set_progress(budget.progress(step))
                # The rate this update uses: the schedule at the iterations done so far.
                learning_rate = float(self.optimizer.learning_rate.numpy())
                self.apply(tf.constant(tokens, tf.float32))
                step = next_step
                self.step_var.assign(step)
                self.consumed_var.assign(consumed)
                if self.float16:
                    self._grow_loss_scale()
                seconds = time.perf_counter() - tick
                record = {
                    "step": step,
                    "loss": loss,
                    "token_accuracy": correct / tokens,
                    "learning_rate": learning_rate,
                    "tokens": int(tokens),
                    "sentences": int(sentences),
                    "batches": batches,
                    "step_seconds": seconds,
                    "tokens_per_second": tokens / seconds if seconds > 0 else 0.0,
                }
                if self.float16:
                    record["loss_scale"] = float(self.loss_scale.numpy())
                if (self.validation_data is not None and config.validate_every_steps
                        and step % config.validate_every_steps == 0 and step < train_steps
                        and self.is_chief):
                    with budget.pause():
                        validation = self._validate()
                    record.update({f"val_{k}": v for k, v in validation.items()})
                if self.is_chief:
                    # Before the checkpoint: a kill in between leaves a record newer than the
                    # newest checkpoint, which the resumed run drops and recomputes.
                    history.append(record)
                    metrics_file.write(json.dumps(record) + "\n")
                    metrics_file.flush()
                due = bool(config.checkpoint_every_steps
                           and step % config.checkpoint_every_steps == 0)
                if config.checkpoint_every_minutes:
                    late = (time.monotonic() - last_save_time
                            >= config.checkpoint_every_minutes * 60)
                    due = due or self.any_worker_raised(late)
                if budget.seconds:
                    # In the averaging window only its marks save: the newest k checkpoints are
                    # then evenly spread over it.
                    in_window = self.any_worker_raised(budget.in_window(step))
                    due = self.any_worker_raised(budget.averaging_checkpoint_due(step)) or (due and not in_window)
                    out_of_time = self.any_worker_raised(budget.out_of_time())
                if due or step == train_steps or out_of_time:
                    self.seconds_var.assign(budget.spent())
                    self.save(step)
                    last_saved_step, last_save_time = step, time.monotonic()
                if self.is_chief:
                    bar.set_postfix({"loss": f"{loss:.3f}",
                                     "tok/s": f"{record['tokens_per_second']:.0f}",
                                     "lr": f"{record['learning_rate']:.2e}"}, refresh=False)
                    if budget.seconds:
                        bar.n = min(round(budget.spent() / 60, 1), bar.total)  # no float drift
                        bar.set_description(f"train step {step}", refresh=False)
                    bar.update(0 if budget.seconds else 1)
                    if config.log_every and step % config.log_every == 0:
                        logger.info("step %d/%d loss %.4f acc %.3f lr %.3e tokens %d "
                                    "(%d batches) %.0f tok/s", step, train_steps, loss,
                                    record["token_accuracy"], record["learning_rate"],
                                    record["tokens"], batches, record["tokens_per_second"])
                    if self.on_step is not None:
                        self.on_step(step, dict(record))
            if last_saved_step != step:
                # A run that was already finished (or resumed at its end) still leaves its
                # final state in a checkpoint.
                self.seconds_var.assign(budget.spent())
                self.save(step)
        finally:
            bar.close()
            if metrics_file is not None:
                metrics_file.close()
        if self.validation_data is not None and self.is_chief:
            validation = self._validate()
            if history and history[-1]["step"] == step:
                history[-1].update({f"val_{k}": v for k, v in validation.items()})
                self._rewrite_metrics(history)
        checkpoints = list(self.manager.checkpoints) if self.is_chief else []
        return TrainResult(
            final_step=step,
            start_step=start_step,
            optimizer_steps=int(self.optimizer.iterations.numpy()),
            checkpoint_dir=self.directory,
            checkpoints=checkpoints,
            history=history,
            validation=validation,
            model=self.model,
            elapsed_seconds=time.monotonic() - started,
            train_seconds=float(self.seconds_var.numpy()),
        )

    # ---------------------------------------------------------------- helpers

    def _set_progress(self, progress: float) -> None:
        # Workers' clocks differ; the rate must not: every worker takes the mean.
        if self.cluster.num_workers > 1:
            progress = float(self.mean_over_workers(tf.constant(progress, tf.float32)))
        # Keras keeps the schedule of an optimizer only in this attribute.
        self.optimizer._learning_rate.progress.assign(progress)

    def _latest(self) -> str | None:
        return self.manager.latest_checkpoint if self.is_chief else None

    def _validate(self) -> dict[str, float]:
        result = validation_loss(self.model, self.validation_data, self.plan["label_smoothing"],
                          self.config.validation_max_batches)
        logger.info("validation at step %d: loss %.4f nll %.4f perplexity %.2f accuracy %.3f",
                    int(self.step_var.numpy()), result["loss"], result["nll"],
                    result["perplexity"], result["token_accuracy"])
        return result

    def _shrink_loss_scale(self, step: int) -> None:
        # Dynamic loss scaling (Micikevicius et al., 2018): an overflow skips the update and
        # halves the scale; the step is retried on the next batches.
        scale = float(self.loss_scale.numpy()) / 2.0
        if scale < 1.0:
            raise TrainingDivergedError(
                step, "gradients stay non-finite even without loss scaling", self._latest())
        self.loss_scale.assign(scale)
        self.good_steps.assign(0)
        logger.info("step %d: gradient overflow in float16, loss scale lowered to %g",
                    step, scale)

    def _grow_loss_scale(self) -> None:
        good = int(self.good_steps.numpy()) + 1
        if good >= self.config.loss_scale_growth_steps:
            self.loss_scale.assign(float(self.loss_scale.numpy()) * 2.0)
            good = 0
        self.good_steps.assign(good)

    def _rewrite_metrics(self, history: list[dict]) -> None:
        path = self.directory / METRICS_FILE
        self.directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=f".{METRICS_FILE}.",
                                   suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                for record in history:
                    f.write(json.dumps(record) + "\n")
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise


def build_configured_strategy(config: TrainConfig) -> tf.distribute.Strategy:
    """The strategy of ``config``; with ``cpu_devices`` the CPU is split and mirrored over.

    Splitting only works before TensorFlow initialises its devices (else a clear
    ``DistributionError``), which the CLI guarantees by calling this first.
    """
    kind = config.strategy
    if kind == "auto":
        kind = "multi_worker" if has_cluster() else "mirrored"
    devices = config.devices
    if config.cpu_devices:
        names = split_cpu(config.cpu_devices)
        if devices is None and kind == "mirrored":
            devices = names
    return build_strategy(kind, devices)


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


# --------------------------------------------------------------------------- CLI


@dataclass
class TrainDataConfig:
    """Where the CLI gets its batches: a prepared corpus, its tokenizer(s), input settings.

    ``tokenizer`` is the SentencePiece model (or ``[source, target]`` models);
    ``input`` holds ``pipelines.input_pipeline.InputConfig`` settings.
    """

    corpus_dir: str = ""
    tokenizer: str | list[str] = ""
    input: dict[str, Any] = field(default_factory=dict)
    validation_split: str | None = "validation"
    verify_corpus: bool = True

    def __post_init__(self) -> None:
        if not self.corpus_dir:
            raise ConfigError("TrainDataConfig.corpus_dir: required")
        if not self.tokenizer:
            raise ConfigError("TrainDataConfig.tokenizer: required (a SentencePiece .model)")


@dataclass
class TrainingJobConfig:
    """The CLI's YAML file: ``train:`` and ``data:`` sections."""

    train: TrainConfig = field(default_factory=TrainConfig)
    data: TrainDataConfig | None = None


def run_from_config(
    path: str | Path,
    *,
    on_step: Callable[[int, dict[str, Any]], None] | None = None,
    overrides: dict[str, Any] | None = None,
) -> TrainResult:
    """Runs the job of a YAML file (``train:`` + ``data:``), as the CLI does.

    ``overrides`` replace ``train:`` settings (e.g. ``{"train_steps": 10}``).
    """
    job = load_config(TrainingJobConfig, path)
    config = job.train
    if overrides:
        config = from_dict(TrainConfig, {**dataclasses.asdict(config), **overrides},
                           source=f"{path} + overrides")
    if job.data is None:
        raise ConfigError(f"{path}: the CLI needs a 'data:' section (corpus_dir, tokenizer)")
    # Device layout and collective ops are fixed by TensorFlow's first operation: before any
    # dataset or tensor exists.
    strategy = build_configured_strategy(config)

    from pipelines.corpus import Corpus
    from pipelines.input_pipeline import InputConfig, make_dataset
    from pipelines.tokenization import load_tokenizers

    data = job.data
    corpus = Corpus.load(data.corpus_dir, verify=data.verify_corpus)
    tokenizer_paths = data.tokenizer if isinstance(data.tokenizer, str) else tuple(data.tokenizer)
    tokenizers = load_tokenizers(tokenizer_paths)
    input_config = from_dict(InputConfig, data.input, source=f"{path}:data.input")
    source_tok, target_tok = tokenizers
    shared = source_tok is target_tok
    vocab_size = (source_tok.vocab_size if shared
                  else (source_tok.vocab_size, target_tok.vocab_size))
    vocabulary = {
        "fingerprint": source_tok.fingerprint if shared
        else [source_tok.fingerprint, target_tok.fingerprint],
        "size": vocab_size if shared else list(vocab_size),
    }
    pair = tokenizers[0] if shared else tokenizers

    def train_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        dataset = make_dataset(corpus, "train", pair, input_config, training=True)
        if context.num_input_pipelines > 1:
            dataset = dataset.shard(context.num_input_pipelines, context.input_pipeline_id)
        return dataset

    validation = None
    if data.validation_split:
        validation = make_dataset(corpus, data.validation_split, pair, input_config,
                                  training=False)
    return train(config, train_fn, vocab_size, validation_data=validation,
                 vocabulary=vocabulary, strategy=strategy, on_step=on_step)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pipelines.training",
        description="Train a Transformer (resumes from the newest checkpoint of checkpoint_dir).")
    parser.add_argument("--config", required=True,
                        help="YAML file with 'train:' (TrainConfig) and 'data:' sections")
    parser.add_argument("--train-steps", type=int, help="override train.train_steps")
    parser.add_argument("--checkpoint-dir", help="override train.checkpoint_dir")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    overrides = {}
    if args.train_steps is not None:
        overrides["train_steps"] = args.train_steps
    if args.checkpoint_dir is not None:
        overrides["checkpoint_dir"] = args.checkpoint_dir
    try:
        result = run_from_config(args.config, overrides=overrides)
    except TrainingDivergedError as err:
        logger.error("%s", err)
        return 3
    except ConfigError as err:
        logger.error("%s", err)
        return 2
    logger.info("training finished at step %d (%d optimizer steps); checkpoints: %s; "
                "validation: %s", result.final_step, result.optimizer_steps,
                result.checkpoints, result.validation)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Builds a training run's parts once, in order, and runs its :class:`Trainer`.

The order is what resuming needs: the model, optimizer and state variables in the strategy's
scope; the checkpoint over them, which refuses a directory of another model and restores the
newest state; the data stream set to the position that checkpoint saved (or, one saved without a
position, replayed past the batches it consumed); the steps compiled for the stream's batches; the
budget and the log continuing from the restored step and seconds.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import keras
import tensorflow as tf

from keras_transformer.checkpoints.model_checkpoint import model_config_dict
from keras_transformer.models.architectures import build_model as build_architecture
from keras_transformer.models.config import TransformerConfig
from keras_transformer.models.presets import get_preset
from keras_transformer.models.transformer import Transformer
from keras_transformer.training.objectives import objective_for
from pipelines.config import to_dict
from pipelines.distribution import describe_strategy
from pipelines.training.budget import TrainingBudget, replayed_seconds_per_step
from pipelines.training.checkpointing import DataPositionLost, Resume, RunCheckpoint
from pipelines.training.config import DEFAULT_CHECKPOINT_DIR, TrainConfig, TrainResult
from pipelines.training.data import Source, TrainingStream, training_stream
from pipelines.training.loss_scale import LossScale
from pipelines.training.state import seeded_initialisation
from pipelines.training.step_log import StepLog
from pipelines.training.steps import StepFunctions
from pipelines.training.strategy import build_configured_strategy
from pipelines.training.trainer import Trainer
from pipelines.training.validation import Validation
from pipelines.training.workers import Workers
from pipelines.vocabulary import Vocabulary, as_vocabulary

logger = logging.getLogger(__name__)

ModelFn = Callable[[TransformerConfig, "str | None"], Transformer]


def build_model(config: TrainConfig, vocab_sizes: Vocabulary[int], strategy: tf.distribute.Strategy,
                model_fn: ModelFn | None = None) -> tuple[Transformer, keras.optimizers.Optimizer]:
    """The model (seeded by ``config.seed``) and its optimizer, built in ``strategy``'s scope."""
    plan = config.resolved()
    model_config = config.model_config(vocab_sizes)
    policy = None if config.mixed_precision == "none" else config.mixed_precision
    with seeded_initialisation(config.seed), strategy.scope():
        if model_fn is not None:
            model = model_fn(model_config, policy)
        else:
            model = build_architecture(get_preset(config.preset).architecture, model_config, dtype=policy)
        # The recipe this run trains with, so that a saved model compiles with it again; the
        # preset's decoding, so that it translates as the preset does.
        model.training_recipe = plan
        if hasattr(model, "decoding"):
            model.decoding = get_preset(config.preset).decoding
        model.build()
        optimizer = plan.optimizer(model_config.d_model, decay_fraction=plan.decay_fraction)
        optimizer.build(model.trainable_variables)
    return model, optimizer


def train(
    config: TrainConfig,
    train_data: tf.data.Dataset | Callable[[tf.distribute.InputContext], tf.data.Dataset],
    vocab_size: int | Vocabulary[int],
    *,
    validation_data: tf.data.Dataset | None = None,
    vocabulary: dict[str, Any] | None = None,
    strategy: tf.distribute.Strategy | None = None,
    on_step: Callable[[int, dict[str, Any]], None] | None = None,
    model_fn: ModelFn | None = None,
    target_pieces: Sequence[str] | None = None,
    stop_at: float | None = None,
    stream_start: int = 0,
) -> TrainResult:
    """Trains (or resumes training of) a Transformer with the paper's recipe.

    Args:
        config: the stage settings.
        train_data: batches ``((source_ids, target_input_ids), target_output_ids)`` padded with
            0 (``pipelines.input_pipeline.make_dataset``), or a function of a
            ``tf.distribute.InputContext`` returning them for one input pipeline (a dataset is
            sharded across workers automatically). Each replica takes whole batches; a finite
            dataset is repeated.
        vocab_size: the shared vocabulary's size, or ``Vocabulary(source size, target size)``.
        validation_data: optional batches for the periodic and final validation.
        vocabulary: identifies the vocabulary in ``model_config.json``
            (``pipelines.tokenization.vocabulary_record``) so that averaging and resuming refuse
            checkpoints of another vocabulary.
        strategy: a strategy to use instead of ``build_configured_strategy(config)``.
            ``MultiWorkerMirroredStrategy`` must exist before TensorFlow runs anything, so a
            multi-worker caller builds it first and passes it here.
        on_step: called on the chief after every step with ``(step, metrics)``: ``loss``,
            ``token_accuracy``, ``learning_rate``, ``tokens``, ``sentences``, ``batches``,
            ``step_seconds``, ``tokens_per_second`` (and ``val_*`` after a validation).
        model_fn: builds the model inside the strategy's scope from the resolved
            ``TransformerConfig`` and the dtype policy (``None`` or ``"mixed_..."``); default
            the preset's architecture (``Transformer(**config.to_dict(), dtype=policy)``).
        target_pieces: the target vocabulary's pieces by id, which a span parser's objective
            reads its gold trees with (``keras_transformer.training.objectives``).
        stop_at: a progress (the fraction of the step cap or budget done) at which to save and return
            before the end, so that the run goes on from there with other data (:func:`train_on_corpus`'s
            ``finish_on``); its final validation is left to the call that ends the run.
        stream_start: the batches the run had consumed when ``train_data``'s stream began (a run that
            finishes on another corpus), which a replay to the checkpoint's position does not skip.

    Raises:
        TrainingDivergedError: a loss or gradient became NaN or infinite (names the step).
        ConfigError: the checkpoint directory belongs to another model.
    """
    started = time.monotonic()
    plan = config.resolved()
    strategy = strategy or build_configured_strategy(config)
    workers = Workers(strategy)
    model, optimizer = build_model(config, as_vocabulary(vocab_size), strategy, model_fn)
    float16 = config.mixed_precision == "mixed_float16"
    loss_scale = LossScale(strategy, config.initial_loss_scale if float16 else None, config.loss_scale_growth_steps)
    checkpoint = RunCheckpoint(Path(config.checkpoint_dir or DEFAULT_CHECKPOINT_DIR), strategy, workers, model,
                               optimizer, loss_scale, keep=config.checkpoints_kept())
    described = describe_strategy(strategy)
    checkpoint.claim(model_config_dict(model, preset=config.preset, vocabulary=vocabulary), {
        "train_config": to_dict(config), "resolved": dataclasses.asdict(plan),
        "strategy": described, "mixed_precision": config.mixed_precision})
    resume = checkpoint.restore()
    stream = resumed_stream(config, strategy, workers, checkpoint, resume, train_data, stream_start)
    objective = objective_for(model, plan.label_smoothing, target_pieces)
    steps = StepFunctions(strategy, model, optimizer, stream.element_spec, objective=objective,
                          tokens_per_step=plan.tokens_per_batch, accumulation_batches=config.accumulation_batches,
                          loss_scale=loss_scale, jit_compile=config.jit_compile, distribute=stream.distribute)
    budget = TrainingBudget(plan.train_steps, plan.train_minutes, plan.checkpoints_to_average, config.average_window,
                            resume.train_seconds, resume.step, seconds_per_step=replayed_seconds_per_step())
    if budget.seconds:
        logger.info("time budget: %.1f of %.1f minutes left", budget.remaining_minutes(), budget.seconds / 60)
    log = StepLog(checkpoint.directory, resume.step, workers.is_chief, budget, plan.train_steps,
                  config.progress_bar, config.log_every)
    validation = None
    if validation_data is not None and workers.is_chief:
        validation = Validation(model, validation_data, plan.label_smoothing, config.validate_every_steps,
                                config.validation_max_batches, objective)
    trainer = Trainer(config, plan, model, optimizer, steps, checkpoint, loss_scale, budget, workers, log,
                      validation, on_step, stop_at)
    result = trainer.run(stream.batches, resume)
    precision = "float32" if config.mixed_precision == "none" else config.mixed_precision
    distribution = {"strategy": described["kind"], "replicas": described["replicas"],
                    "workers": described["workers"], "precision": precision}
    return dataclasses.replace(result, elapsed_seconds=time.monotonic() - started, distribution=distribution)


def resumed_stream(config: TrainConfig, strategy: tf.distribute.Strategy, workers: Workers, checkpoint: RunCheckpoint,
                   resume: Resume, source: Source, stream_start: int = 0) -> TrainingStream:
    """The training stream where ``resume`` left it, as ``config.data_resume`` asks, tracked by ``checkpoint``.

    ``skip`` restores the position the checkpoint saved (a restart then costs the same at any
    step), or replays the stream past the batches it consumed when it saved none (a checkpoint of
    several workers, or of a run before positions were saved); ``replay`` always replays and saves
    no position; ``restart`` starts the stream over. A position reading a file that moved with its
    run_dir is replayed to instead. Either way a one-worker stream's position is
    saved with every checkpoint from now on, unless ``replay``. A replay skips the batches consumed
    since ``stream_start``, where this source's stream began.
    """
    restore = config.data_resume == "skip" and resume.data_position and workers.count == 1
    # Each replica takes whole batches of its worker's pipeline.
    consumed = (resume.consumed_batches - stream_start) * workers.replicas_per_worker
    skip = consumed if config.data_resume in ("skip", "replay") and not restore else 0
    stream = training_stream(strategy, source, workers.count, skip)
    if stream.position is not None and config.data_resume != "replay":
        try:
            checkpoint.track_data(stream.position, restore=restore)
        except DataPositionLost as lost:
            # Exact still, only slower: the run_dir was moved since the position was saved.
            logger.warning("%s; replaying the stream to where the checkpoint left it instead", lost)
            stream = training_stream(strategy, source, workers.count, consumed)
            checkpoint.track_data(stream.position, restore=False)
    return stream

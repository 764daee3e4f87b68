"""A training run's checkpoints: what they hold, checking a directory is this model's, restore, save.

The checkpoint holds the model weights, dropout's random state, the optimizer (with its step
counter, on which equation (3)'s schedule depends), the step, the batches consumed, the loss
scale and the seconds of the time budget spent, so a resumed run continues exactly.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import tempfile

import tensorflow as tf

from keras_transformer.checkpoints import (
    config_differences,
    model_config_dict,
    model_weights_trackable,
    read_model_config,
    write_model_config,
)
from pipelines.config import ConfigError, to_dict
from pipelines.distribution import describe_strategy
from pipelines.training.config import CHECKPOINT_NAME, TRAIN_CONFIG_FILE, TrainingDivergedError
from pipelines.training.state import dropout_rng_trackable, write_json

logger = logging.getLogger(__name__)


def build_checkpoint(trainer) -> None:
    """``trainer.checkpoint`` over everything a resume needs, and the chief's manager."""
    trainer.checkpoint = tf.train.Checkpoint(
        model=model_weights_trackable(trainer.model),
        dropout_rng=dropout_rng_trackable(trainer.model),
        optimizer=trainer.optimizer,
        step=trainer.step_var,
        consumed_batches=trainer.consumed_var,
        loss_scale=trainer.loss_scale,
        loss_scale_good_steps=trainer.good_steps,
        train_seconds=trainer.seconds_var,
    )
    keep = trainer.config.checkpoints_kept()
    # Non-chief workers get a throw-away manager per save (see save()).
    trainer.manager = tf.train.CheckpointManager(
        trainer.checkpoint, str(trainer.directory), max_to_keep=keep,
        checkpoint_name=CHECKPOINT_NAME) if trainer.is_chief else None


def check_model_config(trainer) -> None:
    """Refuses to resume a directory written for another model; records this one."""
    info = model_config_dict(trainer.model, preset=trainer.config.preset,
                             vocabulary=trainer.vocabulary)
    existing = read_model_config(trainer.directory)
    if existing is not None:
        diffs = config_differences(existing, info)
        if diffs:
            raise ConfigError(
                f"{trainer.directory} holds checkpoints of a different model ("
                + "; ".join(diffs) + "); use another checkpoint_dir or the same settings")
    if trainer.is_chief:
        trainer.directory.mkdir(parents=True, exist_ok=True)
        write_model_config(trainer.directory, info)
        write_json(trainer.directory / TRAIN_CONFIG_FILE, {
            "train_config": to_dict(trainer.config),
            "resolved": dataclasses.asdict(trainer.plan),
            "strategy": describe_strategy(trainer.strategy),
            "mixed_precision": trainer.config.mixed_precision,
        })


def restore(trainer) -> int:
    """Restores the newest checkpoint of the run's directory; returns its step (0: none)."""
    newest = tf.train.latest_checkpoint(str(trainer.directory))
    if newest is None:
        logger.info("no checkpoint in %s: starting from step 0", trainer.directory)
        return 0
    trainer.checkpoint.restore(newest).assert_existing_objects_matched()
    step = int(trainer.step_var.numpy())
    logger.info("resumed from %s at step %d (optimizer iterations %d, %d batches consumed)",
                newest, step, int(trainer.optimizer.iterations.numpy()),
                int(trainer.consumed_var.numpy()))
    return step


def save(trainer, step: int) -> str | None:
    """Saves checkpoint ``step`` (refusing non-finite weights); the chief's path, None elsewhere."""
    if not bool(trainer.weights_finite()):
        raise TrainingDivergedError(step, "a model weight is NaN or infinite",
                                    latest(trainer))
    if not trainer.is_chief:
        # Every worker saves (the documented MultiWorkerMirroredStrategy pattern: saving
        # may need collectives), the non-chief ones into a private directory deleted at once.
        worker_dir = tempfile.mkdtemp(prefix=f"worker-{trainer.cluster.task_id}-")
        try:
            tf.train.CheckpointManager(trainer.checkpoint, worker_dir, max_to_keep=1).save(
                checkpoint_number=step)
        finally:
            shutil.rmtree(worker_dir, ignore_errors=True)
        return None
    path = trainer.manager.save(checkpoint_number=step)
    logger.info("saved checkpoint %s", path)
    return path


def latest(trainer) -> str | None:
    """The newest checkpoint's path, for error messages (chief only)."""
    return trainer.manager.latest_checkpoint if trainer.is_chief else None

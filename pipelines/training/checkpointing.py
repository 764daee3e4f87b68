"""A training run's checkpoint: what it holds, the directory it owns, restore and save.

The checkpoint holds the model weights, dropout's random state, the optimizer (with its step
counter, on which equation (3)'s schedule depends), the step, the batches consumed, the loss
scale and the seconds of the time budget spent, so a resumed run continues exactly; and, once
:meth:`RunCheckpoint.track_data` gave it the training stream's iterator, the stream's position
(``data_iterator``: its buffers and file offsets, ``tf.data``'s iterator checkpointing), so that a
resumed run continues the stream without replaying it. The keys are those of every checkpoint
written so far: runs started before stay resumable (without a position they replay the stream).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import keras
import tensorflow as tf

from keras_transformer.checkpoints.model_checkpoint import (
    config_differences,
    model_weights_trackable,
    read_model_config,
    write_model_config,
)
from pipelines.config import ConfigError
from pipelines.training.config import CHECKPOINT_NAME, TRAIN_CONFIG_FILE, TrainingDivergedError
from pipelines.training.loss_scale import LossScale
from pipelines.training.state import dropout_rng_trackable, write_json
from pipelines.training.workers import Workers

logger = logging.getLogger(__name__)

#: The checkpoint's name of the training stream's iterator (its position in the data stream).
DATA_KEY = "data_iterator"


class DataPositionLost(Exception):
    """The checkpoint's data position reads a file that is no longer where it was saved (a run_dir
    copied or moved: ``tf.data`` keeps the absolute path of the file it was reading)."""


@dataclass(frozen=True)
class Resume:
    """Where a run continues: its step, the batches it consumed, the budget seconds it spent, and
    whether its checkpoint holds the data stream's position."""

    step: int = 0
    consumed_batches: int = 0
    train_seconds: float = 0.0
    data_position: bool = False


class RunCheckpoint:
    """The run's checkpoint and directory: refuses another model's, restores the newest, saves.

    The chief keeps the newest ``keep`` checkpoints in ``directory``; other workers save too (saving
    may need collectives) into a private directory deleted at once.
    """

    def __init__(self, directory: str | Path, strategy: tf.distribute.Strategy, workers: Workers,
                 model: keras.Model, optimizer: keras.optimizers.Optimizer, loss_scale: LossScale, keep: int):
        self.directory = Path(directory)
        self.workers = workers
        self.model = model
        self.optimizer = optimizer
        counter = dict(trainable=False, aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        with strategy.scope():
            self.step = tf.Variable(0, dtype=tf.int64, name="step", **counter)
            self.consumed_batches = tf.Variable(0, dtype=tf.int64, name="consumed_batches", **counter)
            self.train_seconds = tf.Variable(0.0, dtype=tf.float64, name="train_seconds", **counter)
        self.state = dict(
            model=model_weights_trackable(model),
            dropout_rng=dropout_rng_trackable(model),
            optimizer=optimizer,
            step=self.step,
            consumed_batches=self.consumed_batches,
            loss_scale=loss_scale.scale,
            loss_scale_good_steps=loss_scale.good_steps,
            train_seconds=self.train_seconds,
        )
        self.checkpoint = tf.train.Checkpoint(**self.state)
        #: The checkpoint :meth:`restore` restored (``None``: a fresh run).
        self.restored: str | None = None
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, str(self.directory), max_to_keep=keep,
            checkpoint_name=CHECKPOINT_NAME) if workers.is_chief else None

    def claim(self, model_record: dict[str, Any], run_record: dict[str, Any]) -> None:
        """Refuses a directory written for another model; records this one (``model_config.json``)
        and the run's settings (``train_config.json``)."""
        existing = read_model_config(self.directory)
        if existing is not None:
            diffs = config_differences(existing, model_record)
            if diffs:
                raise ConfigError(
                    f"{self.directory} holds checkpoints of a different model ("
                    + "; ".join(diffs) + "); use another checkpoint_dir or the same settings")
        if self.workers.is_chief:
            self.directory.mkdir(parents=True, exist_ok=True)
            write_model_config(self.directory, model_record)
            write_json(self.directory / TRAIN_CONFIG_FILE, run_record)

    def restore(self) -> Resume:
        """Restores the newest checkpoint of the directory (a fresh run: ``Resume()``)."""
        newest = tf.train.latest_checkpoint(str(self.directory))
        if newest is None:
            logger.info("no checkpoint in %s: starting from step 0", self.directory)
            return Resume()
        # Through a root of its own: the saving root then has no pending restore, which would
        # restore the stream's position into an iterator attached later whatever data_resume says.
        status = tf.train.Checkpoint(**self.state).restore(newest)
        status.assert_existing_objects_matched()
        status.expect_partial()  # the position, restored (or not) by track_data
        self.restored = newest
        position = any(name.startswith(f"{DATA_KEY}/") for name, _ in tf.train.list_variables(newest))
        resume = Resume(int(self.step.numpy()), int(self.consumed_batches.numpy()),
                        float(self.train_seconds.numpy()), position)
        logger.info("resumed from %s at step %d (optimizer iterations %d, %d batches consumed%s)",
                    newest, resume.step, int(self.optimizer.iterations.numpy()), resume.consumed_batches,
                    ", the data position saved" if position else "")
        return resume

    def track_data(self, iterator: tf.data.Iterator, restore: bool) -> None:
        """Saves ``iterator``'s position with every checkpoint from now on; with ``restore``, first
        sets it to the position of the checkpoint :meth:`restore` restored.

        Raises:
            DataPositionLost: the saved position reads a file that is gone (the run_dir was moved);
                ``iterator`` is spent.
            ConfigError: the saved position does not fit ``iterator``'s pipeline (the input
                settings changed since it was saved), naming ``train.data_resume``.
        """
        if restore:
            tick = time.perf_counter()
            try:
                status = tf.train.Checkpoint(**{DATA_KEY: iterator}).read(self.restored)
                status.assert_existing_objects_matched()
                status.expect_partial()
            except (tf.errors.OpError, ValueError, AssertionError) as err:
                if isinstance(err, tf.errors.NotFoundError) and "No such file or directory" in str(err):
                    raise DataPositionLost(f"{self.restored}: the data position saved in it reads a file that is "
                                           f"gone ({_first_line(err)})") from err
                raise ConfigError(
                    f"{self.restored}: the data position saved in it does not fit this run's input pipeline "
                    f"({_first_line(err)}); were the input settings "
                    "changed? Set train.data_resume: replay to replay the stream to it instead, or restart to "
                    "start the stream over") from err
            logger.info("restored the data position of %s in %.1f s", self.restored, time.perf_counter() - tick)
        setattr(self.checkpoint, DATA_KEY, iterator)

    def save(self, step: int, consumed_batches: int, train_seconds: float) -> str | None:
        """Saves checkpoint ``step`` (refusing non-finite weights); the chief's path, None elsewhere."""
        if not self.weights_finite():
            raise TrainingDivergedError(step, "a model weight is NaN or infinite", self.latest)
        self.step.assign(step)
        self.consumed_batches.assign(consumed_batches)
        self.train_seconds.assign(train_seconds)
        if not self.workers.is_chief:
            worker_dir = tempfile.mkdtemp(prefix=f"worker-{self.workers.task_id}-")
            try:
                tf.train.CheckpointManager(self.checkpoint, worker_dir, max_to_keep=1).save(checkpoint_number=step)
            finally:
                shutil.rmtree(worker_dir, ignore_errors=True)
            return None
        path = self.manager.save(checkpoint_number=step)
        logger.info("saved checkpoint %s", path)
        return path

    def weights_finite(self) -> bool:
        return bool(tf.reduce_all([tf.reduce_all(tf.math.is_finite(v)) for v in self.model.weights]))

    @property
    def latest(self) -> str | None:
        """The newest checkpoint's path, for error messages (chief only)."""
        return self.manager.latest_checkpoint if self.workers.is_chief else None

    @property
    def kept(self) -> list[str]:
        """The checkpoints kept, oldest first (chief only)."""
        return list(self.manager.checkpoints) if self.workers.is_chief else []


def _first_line(err: Exception) -> str:
    return str(err).splitlines()[0] if str(err) else type(err).__name__


def consumed_batches(checkpoint: str | Path) -> int:
    """The batches the run had consumed when ``checkpoint`` (a path as ``tf.train.latest_checkpoint``
    gives it) was saved."""
    return int(tf.train.load_checkpoint(str(checkpoint)).get_tensor("consumed_batches/.ATTRIBUTES/VARIABLE_VALUE"))

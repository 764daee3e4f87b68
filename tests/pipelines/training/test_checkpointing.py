"""The run's checkpoint alone: the directory it claims, the state it saves and restores, bad weights."""

import json
import shutil

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.checkpoints.model_checkpoint import model_config_dict
from pipelines.config import ConfigError
from pipelines.training import TrainingDivergedError
from pipelines.training.checkpointing import DataPositionLost, Resume, RunCheckpoint
from pipelines.training.loss_scale import LossScale
from pipelines.training.workers import Workers
from tests.pipelines.training.conftest import tiny_model


def run_checkpoint(directory, strategy, seed=0, keep=2):
    model, optimizer = tiny_model(seed)
    loss_scale = LossScale(strategy, 2.0**15)
    return RunCheckpoint(directory, strategy, Workers(strategy), model, optimizer, loss_scale, keep), loss_scale


def test_a_restored_run_continues_with_the_saved_state(tmp_path, strategy):
    checkpoint, loss_scale = run_checkpoint(tmp_path, strategy)
    assert checkpoint.restore() == Resume(0, 0, 0.0)
    loss_scale.shrink(step=1)
    loss_scale.grow()
    checkpoint.optimizer.iterations.assign(9)
    for step in (3, 6, 9):
        checkpoint.save(step, consumed_batches=2 * step, train_seconds=step / 2)
    assert [p.rsplit("/", 1)[1] for p in checkpoint.kept] == ["ckpt-6", "ckpt-9"]  # keep=2
    assert checkpoint.latest.endswith("ckpt-9")
    # Another process: other initial weights, all replaced by the newest checkpoint's.
    other, other_scale = run_checkpoint(tmp_path, strategy, seed=1)
    assert other.restore() == Resume(step=9, consumed_batches=18, train_seconds=4.5)
    for a, b in zip(checkpoint.model.weights, other.model.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert int(other.optimizer.iterations.numpy()) == 9
    assert other_scale.value() == 2.0**14 and int(other_scale.good_steps.numpy()) == 1


def test_a_directory_of_another_model_is_refused(tmp_path, strategy):
    checkpoint, _ = run_checkpoint(tmp_path, strategy)
    record = model_config_dict(checkpoint.model, preset="demo")
    checkpoint.claim(record, {"train_config": {"seed": 0}})
    assert json.loads((tmp_path / "train_config.json").read_text()) == {"train_config": {"seed": 0}}
    checkpoint.claim(record, {})  # the same model: resumable
    other = {**record, "config": {**record["config"], "d_ff": 64}}
    with pytest.raises(ConfigError, match=r"different model \(d_ff 32 != 64"):
        checkpoint.claim(other, {})


def test_non_finite_weights_are_never_saved(tmp_path, strategy):
    checkpoint, _ = run_checkpoint(tmp_path, strategy)
    checkpoint.save(1, 1, 0.5)
    kernel = checkpoint.model.trainable_variables[0]
    kernel.assign(tf.fill(kernel.shape, float("nan")))
    with pytest.raises(TrainingDivergedError, match="diverged at step 2") as caught:
        checkpoint.save(2, 2, 1.0)
    assert caught.value.last_checkpoint.endswith("ckpt-1")
    assert not list(tmp_path.glob("ckpt-2*"))


def test_the_data_position_is_saved_and_restored_only_when_asked(tmp_path, strategy):
    checkpoint, _ = run_checkpoint(tmp_path, strategy)
    assert not checkpoint.restore().data_position
    stream = iter(tf.data.Dataset.range(100).repeat())
    checkpoint.track_data(stream, restore=False)
    assert [int(next(stream)) for _ in range(5)] == [0, 1, 2, 3, 4]
    checkpoint.save(1, consumed_batches=5, train_seconds=0.5)

    other, _ = run_checkpoint(tmp_path, strategy, seed=1)
    assert other.restore() == Resume(step=1, consumed_batches=5, train_seconds=0.5, data_position=True)
    continued = iter(tf.data.Dataset.range(100).repeat())
    other.track_data(continued, restore=True)
    assert int(next(continued)) == 5
    # Not asked to (data_resume: restart): the checkpoint's position is not restored behind the caller's back.
    third, _ = run_checkpoint(tmp_path, strategy, seed=1)
    assert third.restore().data_position
    fresh = iter(tf.data.Dataset.range(100).repeat())
    third.track_data(fresh, restore=False)
    assert int(next(fresh)) == 0


def test_a_checkpoint_without_a_position_resumes_without_one(tmp_path, strategy):
    # As every checkpoint written before positions were saved: the runner then replays the stream.
    checkpoint, _ = run_checkpoint(tmp_path, strategy)
    checkpoint.save(2, consumed_batches=7, train_seconds=1.0)
    assert not any(name.startswith("data_iterator") for name, _ in tf.train.list_variables(checkpoint.latest))
    other, _ = run_checkpoint(tmp_path, strategy)
    assert other.restore() == Resume(step=2, consumed_batches=7, train_seconds=1.0, data_position=False)


def test_a_position_that_does_not_fit_the_pipeline_names_the_setting(tmp_path, strategy):
    checkpoint, _ = run_checkpoint(tmp_path, strategy)
    checkpoint.track_data(iter(tf.data.Dataset.range(10).shuffle(4, seed=1).repeat()), restore=False)
    checkpoint.save(1, consumed_batches=1, train_seconds=0.5)
    other, _ = run_checkpoint(tmp_path, strategy)
    other.restore()
    with pytest.raises(ConfigError, match=r"ckpt-1: the data position saved in it does not fit .*train\.data_resume"):
        other.track_data(iter(tf.data.Dataset.range(10).batch(2).repeat()), restore=True)


def test_a_position_reading_a_file_that_moved_says_so(tmp_path, strategy):
    # tf.data's saved position names the absolute path of the file it was reading; the runner
    # catches this and replays a new stream instead (tests/flows/test_run_dir_relocation.py).
    (tmp_path / "a").mkdir()
    with tf.io.TFRecordWriter(str(tmp_path / "a" / "cache.tfrecord")) as writer:
        for i in range(10):
            writer.write(str(i).encode())
    checkpoint, _ = run_checkpoint(tmp_path / "ckpt", strategy)
    stream = iter(tf.data.TFRecordDataset(str(tmp_path / "a" / "cache.tfrecord")).repeat())
    checkpoint.track_data(stream, restore=False)
    next(stream)
    checkpoint.save(1, consumed_batches=1, train_seconds=0.5)
    shutil.move(tmp_path / "a", tmp_path / "b")
    other, _ = run_checkpoint(tmp_path / "ckpt", strategy)
    other.restore()
    moved = iter(tf.data.TFRecordDataset(str(tmp_path / "b" / "cache.tfrecord")).repeat())
    with pytest.raises(DataPositionLost, match=r"ckpt-1: the data position saved in it reads a file that is gone"):
        other.track_data(moved, restore=True)

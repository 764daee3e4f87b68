"""Checkpoint averaging (section 6.1) against the element-wise mean of the checkpoint files."""

from __future__ import annotations

import random

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import Transformer, transformer_adam
from keras_transformer.checkpoints.averaging import average_checkpoints
from keras_transformer.checkpoints.model_checkpoint import (
    CheckpointMismatchError,
    checkpoint_key,
    load_model_from_checkpoint,
    model_config_dict,
    model_keys,
    model_weight_paths,
    model_weights_trackable,
    resolve_checkpoints,
    write_model_config,
)
from keras_transformer.models.presets import get_preset

SMALL = {"vocab_size": 60, "num_layers": 1, "d_model": 16, "num_heads": 2, "d_ff": 32}


def write_run(directory, count, seed=0, preset="demo", vocabulary=None, **overrides):
    """``count`` checkpoints of a training-like run: distinct weights and real Adam state."""
    # Not keras.utils.set_random_seed: its tf.random.set_seed clears TensorFlow's kernel cache,
    # destroying the SentencePiece resources of tokenizers other tests of the session hold.
    random.seed(seed)
    model = Transformer.from_preset("demo", **{**SMALL, **overrides})
    model.build()
    optimizer = transformer_adam(model.config.d_model, 10)
    optimizer.build(model.trainable_variables)
    step = tf.Variable(0, dtype=tf.int64)
    checkpoint = tf.train.Checkpoint(model=model_weights_trackable(model), optimizer=optimizer,
                                     step=step)
    manager = tf.train.CheckpointManager(checkpoint, str(directory), max_to_keep=None,
                                         checkpoint_name="ckpt")
    write_model_config(directory, model_config_dict(model, preset=preset, vocabulary=vocabulary))
    rng = np.random.default_rng(seed)
    paths = []
    for i in range(count):
        grads = [tf.constant(rng.normal(size=v.shape), tf.float32)
                 for v in model.trainable_variables]
        optimizer.apply(grads, model.trainable_variables)
        step.assign(i + 1)
        paths.append(manager.save(checkpoint_number=i + 1))
    return model, paths


def test_checkpoints_hold_every_weight_under_its_keras_path(tmp_path):
    model, (path,) = write_run(tmp_path / "run", 1)
    keys = model_keys(path)
    assert len(keys) == len(model.weights)
    assert checkpoint_key("encoder_layer_0/self_attention/query/kernel") in keys
    # A plain tf.train.Checkpoint(model=...) would miss the layers Keras keeps in lists.
    plain = tf.train.Checkpoint(model=model).write(str(tmp_path / "plain" / "ckpt"))
    assert len(model_keys(plain)) < len(model.weights)
    restored = load_model_from_checkpoint(path)
    for a, b in zip(restored.weights, model.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_average_equals_the_mean_of_the_checkpoint_files(tmp_path):
    model, paths = write_run(tmp_path / "run", 5)
    result = average_checkpoints(tmp_path / "run", last_n=3, output=tmp_path / "averaged")
    assert result.sources == paths[-3:]
    readers = [tf.train.load_checkpoint(p) for p in paths[-3:]]
    averaged = tf.train.load_checkpoint(result.checkpoint)
    keys = model_keys(readers[0])
    assert set(model_keys(averaged)) == set(keys)
    for key in keys:
        by_hand = np.mean([r.get_tensor(key) for r in readers], axis=0)
        np.testing.assert_allclose(averaged.get_tensor(key), by_hand, rtol=1e-6, atol=1e-7)
    # Model weights only: no optimizer moments, no step counters.
    stored = averaged.get_variable_to_shape_map()
    assert not any(k.startswith("optimizer/") or k.startswith("step/") for k in stored)
    assert tf.train.latest_checkpoint(str(tmp_path / "averaged")) == result.checkpoint
    # The .keras model and a model rebuilt from the averaged checkpoint hold the same values.
    loaded = keras.saving.load_model(result.keras_model)
    from_checkpoint = load_model_from_checkpoint(tmp_path / "averaged")
    paths_ = model_weight_paths(loaded)
    for path, variable in model_weight_paths(from_checkpoint).items():
        expected = averaged.get_tensor(checkpoint_key(path))
        np.testing.assert_array_equal(variable.numpy(), expected)
        np.testing.assert_array_equal(paths_[path].numpy(), expected)
    assert result.model_config["averaged_from"] == [str(p) for p in paths[-3:]]
    # The averaged model decodes as its run's preset does (sentence by sentence), not as the paper's defaults.
    assert loaded.decoding == get_preset("demo").decoding and loaded.decoding.split_sentences


def test_average_of_explicit_paths_and_float32_accumulation(tmp_path):
    _, paths = write_run(tmp_path / "run", 2)
    result = average_checkpoints([paths[0], paths[1]], output=tmp_path / "out", save_keras=False)
    assert result.keras_model is None
    key = checkpoint_key("source_embedding/embeddings")
    a, b = (tf.train.load_checkpoint(p).get_tensor(key) for p in paths)
    out = tf.train.load_checkpoint(result.checkpoint).get_tensor(key)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, (a.astype(np.float64) + b) / 2, rtol=1e-6, atol=1e-7)


def test_refuses_to_write_into_the_training_directory(tmp_path):
    write_run(tmp_path / "run", 2)
    for output in (tmp_path / "run", tmp_path / "run" / "averaged"):
        with pytest.raises(ValueError, match="inside the training directory"):
            average_checkpoints(tmp_path / "run", last_n=2, output=output)


def test_too_few_checkpoints_is_an_error(tmp_path):
    write_run(tmp_path / "run", 2)
    with pytest.raises(ValueError, match="last 3 checkpoints but only 2 exist"):
        resolve_checkpoints(tmp_path / "run", last_n=3)


def test_refuses_checkpoints_of_another_model(tmp_path):
    _, base = write_run(tmp_path / "base", 1)
    # Same shapes, another vocabulary: only the config JSON tells them apart.
    _, other_vocab = write_run(tmp_path / "vocab", 1, vocabulary={"fingerprint": "abc"})
    with pytest.raises(CheckpointMismatchError, match=r"base and .*vocab hold different models"
                                                      r".*vocabulary"):
        average_checkpoints(base + other_vocab, output=tmp_path / "out")
    # Another preset name with the same architecture.
    _, other_preset = write_run(tmp_path / "preset", 1, preset="cpu-small")
    with pytest.raises(CheckpointMismatchError, match="preset 'demo' != 'cpu-small'"):
        average_checkpoints(base + other_preset, output=tmp_path / "out")
    # Different shapes, and no config JSON to rely on: the variables themselves differ.
    _, wide = write_run(tmp_path / "wide", 1, d_ff=48)
    for directory in ("base", "wide"):
        (tmp_path / directory / "model_config.json").unlink()
    with pytest.raises(CheckpointMismatchError, match=r"ckpt-1 and .*wide/ckpt-1 hold different "
                                                      r"model variables.*different shapes"):
        average_checkpoints(base + wide, output=tmp_path / "out", model=None)


def test_relative_training_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_run("run", 3)
    result = average_checkpoints("run", last_n=2, output="averaged", save_keras=False)
    assert [p.rsplit("/", 1)[-1] for p in result.sources] == ["ckpt-2", "ckpt-3"]
    assert tf.train.latest_checkpoint("averaged") is not None

"""Training stage in process: token-normalised accumulation, resume, the NaN guard, mixed precision
and XLA (the multi-replica, multi-worker and kill -9 tests are in ``test_training_processes.py``).

The model is the ``demo`` preset shrunk to one layer of width 32; the data are real DDTP
sentence pairs through the real input pipeline (``ddtp_corpus`` and ``tokenizer`` fixtures).
"""


from __future__ import annotations

import dataclasses
import json
import logging
import math
import re
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import (
    Transformer,
    get_preset,
    label_smoothed_nll,
    transformer_adam,
)
from keras_transformer.checkpoints.model_checkpoint import (
    model_config_dict,
    model_keys,
    write_model_config,
)
from pipelines.config import ConfigError, load_config
from pipelines.input_pipeline import (
    make_dataset,
    make_fixed_length_dataset,
)
from pipelines.training import (
    TrainConfig,
    TrainingDivergedError,
    TrainingJobConfig,
    read_metrics,
    seeded_initialisation,
    train,
)
from tests.pipelines.conftest import INPUT, TINY_MODEL, tiny_config
from tests.pipelines.training_support import (
    assert_same_updates,
    comparable,
    weights_of,
)


@pytest.fixture(scope="session")
def ordered_dataset_fn(ddtp_corpus, tokenizer, input_config, train_dataset_fn):
    """Training batches in corpus order (no shuffle): the same batches in every iteration."""
    return lambda: make_dataset(ddtp_corpus, "train", tokenizer, input_config, training=False)


@pytest.fixture(scope="session")
def validation_dataset(ddtp_corpus, tokenizer, input_config):
    return make_dataset(ddtp_corpus, "validation", tokenizer, input_config, training=False)


# --------------------------------------------------------------------------- configuration


def test_config_defaults_from_preset_and_validation(tmp_path):
    config = TrainConfig(preset="base")
    resolved = config.resolved()
    recipe = get_preset("base").training
    # The plan is the preset's recipe, typed and frozen, with the stage's settings applied.
    assert resolved == recipe
    with pytest.raises(dataclasses.FrozenInstanceError):
        resolved.warmup_steps = 1
    assert resolved.train_steps == 100000 and resolved.tokens_per_batch == 25000
    assert resolved.label_smoothing == 0.1 and resolved.warmup_steps == 4000
    assert (resolved.adam_beta_1, resolved.adam_beta_2, resolved.adam_epsilon) == (0.9, 0.98, 1e-9)
    assert config.checkpoints_kept() >= recipe.checkpoints_to_average
    assert resolved.learning_rate_scale == 1.0
    assert TrainConfig(preset="cpu-small").resolved().learning_rate_scale == 0.960
    changed = TrainConfig(preset="cpu-small", learning_rate_scale=0.5, tokens_per_step=512, warmup_steps=7).resolved()
    assert (changed.learning_rate_scale, changed.tokens_per_batch, changed.warmup_steps) == (0.5, 512, 7)
    with pytest.raises(ConfigError, match="keep_checkpoints.*averages the last 20"):
        TrainConfig(preset="big", keep_checkpoints=5)
    # Model values are checked with the config, not when the model is built after the data stages.
    with pytest.raises(ConfigError, match="TrainConfig.model.*num_heads.*positive integer"):
        TrainConfig(preset="cpu-small", model={"num_heads": "four"})
    with pytest.raises(ConfigError, match="TrainConfig.model.*d_model=256 is not divisible by num_heads=3"):
        TrainConfig(preset="cpu-small", model={"num_heads": 3})
    with pytest.raises(ConfigError, match="unknown model setting"):
        TrainConfig(model={"d_modle": 3})
    with pytest.raises(ConfigError, match="mixed_precision"):
        TrainConfig(mixed_precision="float8")
    path = tmp_path / "job.yaml"
    path.write_text("train:\n  preset: demo\n  keep_checkpoints: 2\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="keep_checkpoints"):
        load_config(TrainingJobConfig, path)
    path.write_text("train:\n  preset: demo\n  jit_compile: true\n  chekpoint_dir: x\n")
    with pytest.raises(ConfigError, match="chekpoint_dir"):
        load_config(TrainingJobConfig, path)


# --------------------------------------------------------------------------- in-process training


def test_accumulates_to_token_budget_and_resumes_schedule_and_optimizer(
        tmp_path, train_dataset_fn, validation_dataset):
    budget = 900  # about three batches of the 384-token input budget
    config = tiny_config(tmp_path, tokens_per_step=budget, train_steps=4,
                         validation_max_batches=4)
    seen = []
    first = train(config, train_dataset_fn(), 2000, validation_data=validation_dataset,
                  on_step=lambda step, metrics: seen.append((step, metrics)))
    assert first.final_step == 4 and first.optimizer_steps == 4 and first.start_step == 0
    assert [s for s, _ in seen] == [1, 2, 3, 4]
    for record in first.history:
        per_batch = record["tokens"] / record["batches"]
        assert record["batches"] >= 2
        # The step ended once within half an average batch of the budget, not before, and
        # overshot by less than one batch (a batch holds at most 384 tokens).
        assert record["tokens"] >= budget - per_batch / 2
        assert record["tokens"] < budget + INPUT["tokens_per_batch"]
        assert math.isfinite(record["loss"]) and record["tokens_per_second"] > 0
    assert math.isfinite(first.validation["loss"]) and first.validation["tokens"] > 0
    assert [Path(p).name for p in first.checkpoints] == ["ckpt-2", "ckpt-4"]
    info = json.loads((tmp_path / "run" / "model_config.json").read_text())
    assert info["preset"] == "demo" and info["config"]["d_model"] == 32
    adam_before = {k: v for k, v in tf.train.list_variables(first.checkpoints[-1])
                   if k.startswith("optimizer/")}
    assert adam_before

    # Resume in a new "process" (new model and optimizer objects) and continue to step 6.
    resumed = train(tiny_config(tmp_path, tokens_per_step=budget, train_steps=6),
                    train_dataset_fn(), 2000)
    assert resumed.start_step == 4 and resumed.final_step == 6 and resumed.optimizer_steps == 6
    # The schedule continued: the learning rate of step 5 is equation (3) at step_num 5.
    d_model, warmup = 32, 20
    expected = d_model**-0.5 * min(5**-0.5, 5 * warmup**-1.5)
    step5 = [r for r in resumed.history if r["step"] == 5][0]
    assert step5["learning_rate"] == pytest.approx(expected, rel=1e-5)
    assert [r["step"] for r in resumed.history] == [1, 2, 3, 4, 5, 6]
    assert resumed.history[:4] == read_metrics(tmp_path / "run")[:4]


def test_a_resume_continues_the_stream_from_its_position_or_replays_a_checkpoint_without_one(
        tmp_path, train_dataset_fn, caplog):
    def run(directory: str, steps: int, data_resume: str = "skip"):
        config = tiny_config(tmp_path, checkpoint_dir=str(tmp_path / directory), train_steps=steps,
                             checkpoint_every_steps=3, data_resume=data_resume)
        return train(config, train_dataset_fn(), 2000)

    reference = [r["loss"] for r in run("reference", 6).history]
    caplog.set_level(logging.INFO, logger="pipelines.training")
    # The checkpoint holds the stream's position: the resumed run restores it, nothing is replayed.
    run("position", 3)
    caplog.clear()
    run("position", 6)
    assert "restored the data position" in caplog.text and "skipping" not in caplog.text
    assert [r["loss"] for r in read_metrics(tmp_path / "position")] == pytest.approx(reference, rel=1e-5)
    # data_resume: replay saves none, as no checkpoint written before positions were saved has one:
    # such a checkpoint still resumes exactly, by replaying the stream.
    run("replayed", 3, data_resume="replay")
    newest = tf.train.latest_checkpoint(str(tmp_path / "replayed"))
    assert not any(name.startswith("data_iterator") for name, _ in tf.train.list_variables(newest))
    caplog.clear()
    run("replayed", 6)
    assert re.search(r"skipping \d+ batches", caplog.text) and "restored the data position" not in caplog.text
    assert [r["loss"] for r in read_metrics(tmp_path / "replayed")] == pytest.approx(reference, rel=1e-5)


def test_loss_is_normalised_by_the_global_token_count(tmp_path, ordered_dataset_fn):
    """One step over two accumulated batches equals, by hand, Adam on sum(losses) / tokens."""
    # A small and a large batch: their weights in the loss differ between normalisations.
    ((source, target_in), target_out), b2 = list(ordered_dataset_fn().take(2))
    b1 = ((source[:2], target_in[:2]), target_out[:2])
    tokens = [int(tf.reduce_sum(tf.cast(b[1] != 0, tf.int32))) for b in (b1, b2)]
    assert tokens[1] > 2 * tokens[0]
    data = tf.data.Dataset.from_tensors(b1).concatenate(tf.data.Dataset.from_tensors(b2))
    config = tiny_config(tmp_path, train_steps=1, accumulation_batches=2)
    result = train(config, data, 2000)
    assert result.history[0]["tokens"] == sum(tokens)

    def by_hand(normalisation):
        with seeded_initialisation(config.seed):
            model = Transformer.from_preset("demo", vocab_size=2000, **TINY_MODEL)
            model.build()
        with tf.GradientTape() as tape:
            sums, counts = [], []
            for (source, target_in), target_out in (b1, b2):
                logits = model((source, target_in), training=True)
                losses, mask = label_smoothed_nll(target_out, logits, 0.1)
                sums.append(tf.reduce_sum(losses))
                counts.append(tf.reduce_sum(mask))
            if normalisation == "global":
                loss = tf.add_n(sums) / tf.add_n(counts)
            else:  # the mean of per-batch (per-replica) means
                loss = (sums[0] / counts[0] + sums[1] / counts[1]) / 2
        # Dense, as the trainer accumulates them: Keras' Adam squares an untied embedding's
        # IndexedSlices slice by slice (a token seen twice: the sum of squares, not the square).
        grads = [tf.convert_to_tensor(g) for g in tape.gradient(loss, model.trainable_variables)]
        transformer_adam(32, 20).apply(grads, model.trainable_variables)
        return float(loss), weights_of(model)

    loss, expected = by_hand("global")
    other_loss, other = by_hand("per_batch")
    assert result.history[0]["loss"] == pytest.approx(loss, rel=1e-5)
    # Adam's first step is close to lr * sign(gradient) (lr ~ 0.01 here): components with a
    # tiny gradient differ by float rounding (5.02e-5 seen once, from the order of multi-threaded
    # sums); the other normalisation moves weights by ~4e-3 (checked below).
    atol = 2e-4
    for mine, reference, check in zip(weights_of(result.model), expected,
                                      comparable(result.model)):
        if check:
            assert_same_updates(mine, reference, atol)
    assert other_loss != pytest.approx(loss, rel=1e-5)
    assert max(np.abs(a - b).max() for a, b in zip(weights_of(result.model), other)) > 10 * atol
    # ... and assert_same_updates, which bounds only how many elements are off, tells it apart.
    with pytest.raises(AssertionError, match="differ by"):
        for mine, theirs, check in zip(weights_of(result.model), other, comparable(result.model)):
            if check:
                assert_same_updates(mine, theirs, atol)


def test_nan_guard_names_the_step_and_keeps_the_last_good_checkpoint(tmp_path, train_dataset_fn):
    models = []

    def model_fn(model_config, dtype):
        models.append(Transformer(**model_config.to_dict()))
        return models[-1]

    def inject_nan(step, metrics):
        if step == 3:
            # A real NaN in a real weight: the next forward pass produces a NaN loss.
            kernel = models[0].encoder_layers[0].feed_forward.weights[0]
            kernel.assign(tf.fill(kernel.shape, float("nan")))

    config = tiny_config(tmp_path, train_steps=6, checkpoint_every_steps=1)
    with pytest.raises(TrainingDivergedError, match="diverged at step 4") as caught:
        train(config, train_dataset_fn(), 2000, on_step=inject_nan, model_fn=model_fn)
    assert caught.value.step == 4
    assert caught.value.last_checkpoint.endswith("ckpt-3")
    assert "ckpt-3" in str(caught.value)
    run = tmp_path / "run"
    assert tf.train.latest_checkpoint(str(run)).endswith("ckpt-3")
    assert not list(run.glob("ckpt-4*"))
    reader = tf.train.load_checkpoint(str(run / "ckpt-3"))
    for key in model_keys(reader):
        assert np.all(np.isfinite(reader.get_tensor(key))), key
    assert [r["step"] for r in read_metrics(run)] == [1, 2, 3]


def test_mixed_bfloat16_loss_is_finite_and_close_to_float32(tmp_path, train_dataset_fn):
    losses = {}
    for precision in ("none", "mixed_bfloat16"):
        config = tiny_config(tmp_path / precision, train_steps=3, mixed_precision=precision,
                             checkpoint_every_steps=None)
        result = train(config, train_dataset_fn(), 2000)
        losses[precision] = [r["loss"] for r in result.history]
        if precision == "mixed_bfloat16":
            assert result.model.compute_dtype == "bfloat16"
            assert all(w.dtype == "float32" for w in result.model.weights)
            (source, target_in), _ = next(iter(train_dataset_fn()))
            assert result.model((source, target_in)).dtype == tf.float32
    assert all(math.isfinite(x) for x in losses["mixed_bfloat16"])
    np.testing.assert_allclose(losses["mixed_bfloat16"], losses["none"], rtol=0.02)


def test_mixed_float16_uses_dynamic_loss_scaling(tmp_path, train_dataset_fn):
    config = tiny_config(tmp_path, train_steps=3, mixed_precision="mixed_float16",
                         loss_scale_growth_steps=2, checkpoint_every_steps=None)
    result = train(config, train_dataset_fn(), 2000)
    assert result.model.compute_dtype == "float16"
    assert all(math.isfinite(r["loss"]) for r in result.history)
    # Grown once after two finite steps (or halved by an overflow, then the step retried).
    scales = [r["loss_scale"] for r in result.history]
    assert scales[0] in (2.0**15, 2.0**14) and max(scales) >= 2.0**15
    reader = tf.train.load_checkpoint(result.latest_checkpoint)
    assert reader.get_tensor("loss_scale/.ATTRIBUTES/VARIABLE_VALUE") == scales[-1]


def test_jit_compile_matches_the_graph_step(tmp_path, ddtp_corpus, tokenizer, input_config):
    # Fixed-length batches: XLA compiles once per shape.
    def data():
        return make_fixed_length_dataset(ddtp_corpus, "validation", tokenizer, input_config)

    config = tiny_config(tmp_path, train_steps=2, jit_compile=True, accumulation_batches=1,
                         checkpoint_every_steps=None)
    history = train(config, data(), 2000).history
    # Step 1's loss is the initial model's loss on the first batch: computed here without XLA.
    (source, target_in), target_out = next(iter(data()))
    with seeded_initialisation(config.seed):
        model = Transformer.from_preset("demo", vocab_size=2000, **TINY_MODEL)
        model.build()
    losses, mask = label_smoothed_nll(target_out, model((source, target_in)), 0.1)
    expected = float(tf.reduce_sum(losses) / tf.reduce_sum(mask))
    assert history[0]["loss"] == pytest.approx(expected, rel=1e-4)
    assert math.isfinite(history[1]["loss"]) and history[1]["loss"] != history[0]["loss"]


def test_resuming_a_directory_of_another_model_is_refused(tmp_path, train_dataset_fn):
    # The directory of a run of the same preset with d_ff 64 ...
    previous = Transformer.from_preset("demo", vocab_size=2000, **TINY_MODEL)
    write_model_config(tmp_path / "run", model_config_dict(previous, preset="demo"))
    # ... is not resumed with d_ff 128.
    other = tiny_config(tmp_path, train_steps=2, model={**TINY_MODEL, "d_ff": 128})
    with pytest.raises(ConfigError, match=r"different model \(d_ff 64 != 128"):
        train(other, train_dataset_fn(), 2000)

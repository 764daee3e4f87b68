"""The averaging stage on a real (tiny) training run: the averaged model still translates."""

from __future__ import annotations

import math

import keras
import pytest

from keras_transformer.checkpoints.model_checkpoint import load_model_from_checkpoint
from pipelines.averaging import AveragingConfig, checkpoints_to_average, run_averaging
from pipelines.config import ConfigError, load_config
from pipelines.input_pipeline import InputConfig, make_dataset
from pipelines.training import TrainConfig, train, validation_loss

TINY_MODEL = {"num_layers": 1, "d_model": 32, "num_heads": 2, "d_ff": 64, "dropout": 0.0}
INPUT = InputConfig(tokens_per_batch=384, max_length=24, shuffle_buffer=256, seed=0)


def test_averaged_model_is_no_worse_than_the_worst_checkpoint(tmp_path, ddtp_corpus, tokenizer):
    config = TrainConfig(preset="demo", model=TINY_MODEL, train_steps=8, warmup_steps=20,
                         tokens_per_step=300, checkpoint_dir=str(tmp_path / "run"),
                         checkpoint_every_steps=2, checkpoint_every_minutes=None,
                         progress_bar=False)
    train(config, make_dataset(ddtp_corpus, "train", tokenizer, INPUT, training=True),
          tokenizer.vocab_size)
    stage = AveragingConfig(checkpoint_dir=str(tmp_path / "run"),
                            output_dir=str(tmp_path / "averaged"))
    # The demo preset averages its last 3 checkpoints (the paper's base model: 5).
    assert checkpoints_to_average(stage) == 3
    result = run_averaging(stage)
    assert [p.rsplit("-", 1)[1] for p in result.sources] == ["4", "6", "8"]

    validation = make_dataset(ddtp_corpus, "validation", tokenizer, INPUT, training=False)
    losses = [validation_loss(load_model_from_checkpoint(p), validation, max_batches=8)["nll"]
              for p in result.sources]
    averaged = validation_loss(keras.saving.load_model(result.keras_model), validation,
                        max_batches=8)["nll"]
    assert math.isfinite(averaged)
    assert averaged <= max(losses) + 1e-6


def test_averaging_config_from_yaml(tmp_path):
    path = tmp_path / "stage.yaml"
    path.write_text("averaging:\n  checkpoint_dir: runs/x\n  output_dir: runs/y\n  last_n: 5\n")
    config = load_config(AveragingConfig, path, section="averaging")
    assert (config.checkpoint_dir, config.output_dir, config.last_n) == ("runs/x", "runs/y", 5)
    assert checkpoints_to_average(config) == 5
    with pytest.raises(ConfigError, match="records no preset"):
        checkpoints_to_average(AveragingConfig(checkpoint_dir=str(tmp_path)))
    with pytest.raises(ConfigError, match="last_n"):
        AveragingConfig(last_n=0)

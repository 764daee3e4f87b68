"""Fixtures of the training tests: a tiny model on real DDTP pairs through the real input pipeline."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.input_pipeline import InputConfig, make_dataset
from pipelines.training import TrainConfig

TINY_MODEL = {"num_layers": 1, "d_model": 32, "num_heads": 2, "d_ff": 64, "dropout": 0.0}
INPUT = {"tokens_per_batch": 384, "max_length": 24, "shuffle_buffer": 256, "seed": 0}


def tiny_config(tmp_path: Path, **overrides) -> TrainConfig:
    settings = dict(
        preset="demo",
        model=dict(TINY_MODEL),
        train_steps=4,
        warmup_steps=20,
        tokens_per_step=300,
        # The paper's schedule, by steps: the demo preset's search-chosen recipe is not under test.
        learning_rate_scale=1.0,
        decay_fraction=0,
        train_minutes=0,
        checkpoint_dir=str(tmp_path / "run"),
        checkpoint_every_steps=2,
        checkpoint_every_minutes=None,
        progress_bar=False,
        log_every=1,
    )
    settings.update(overrides)
    return TrainConfig(**settings)



@pytest.fixture(scope="session")
def input_config() -> InputConfig:
    return InputConfig(**INPUT)


@pytest.fixture(scope="session")
def train_dataset_fn(ddtp_corpus, tokenizer, input_config):
    """A fresh training dataset per call (each starts the same seeded shuffle)."""
    # Build the id cache once, before any subprocess needs it.
    make_dataset(ddtp_corpus, "train", tokenizer, input_config, training=True)
    return lambda: make_dataset(ddtp_corpus, "train", tokenizer, input_config, training=True)

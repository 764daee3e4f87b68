"""A tiny model, its optimizer and synthetic batches: each part of the trainer tested alone."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import Transformer, transformer_adam
from pipelines.training import seeded_initialisation

VOCAB = 40
TINY = {"num_layers": 1, "d_model": 16, "num_heads": 2, "d_ff": 32, "dropout": 0.0}


def tiny_model(seed: int = 0) -> tuple[Transformer, object]:
    """A built model (weights a function of ``seed``) and its built Adam, as the runner makes them."""
    with seeded_initialisation(seed):
        model = Transformer.from_preset("demo", vocab_size=VOCAB, **TINY)
        model.build()
    optimizer = transformer_adam(TINY["d_model"], 20)
    optimizer.build(model.trainable_variables)
    return model, optimizer


def batch(sentences: int, length: int, seed: int):
    """``((source, target_in), target_out)`` of random ids, each row padded (0) after a random length."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(4, VOCAB, size=(3, sentences, length))
    lengths = rng.integers(1, length + 1, size=(3, sentences, 1))
    ids = np.where(np.arange(length) < lengths, ids, 0).astype(np.int32)
    return (tf.constant(ids[0]), tf.constant(ids[1])), tf.constant(ids[2])


@pytest.fixture
def strategy():
    return tf.distribute.get_strategy()

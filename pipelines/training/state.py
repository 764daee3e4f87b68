"""What a training run keeps besides its weights: dropout generator state, seeding, JSON records
(the metrics file: :mod:`pipelines.training.metrics_file`)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from keras_transformer.files import atomic_write_bytes


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


def write_json(path: Path, data: Any) -> None:
    """``data`` as indented JSON, atomically (a kill leaves the old file or the new one)."""
    atomic_write_bytes(path, (json.dumps(data, indent=2, sort_keys=True, default=str) + "\n").encode())

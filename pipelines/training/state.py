"""What a training run keeps besides its weights: dropout generator state, seeding, JSON records
(the metrics file: :mod:`pipelines.training.metrics_file`)."""

from __future__ import annotations

import contextlib
import json
import random
from collections.abc import Iterator
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


@contextlib.contextmanager
def seeded_initialisation(seed: int) -> Iterator[None]:
    """Within: the initial weights and dropout seeds of the models built are a function of ``seed``.

    Keras draws the seed of every initializer and dropout layer made without one from Python's
    module-level ``random``, when the layer is made or built. Any other thread of the process (Prefect's
    and MLflow's clients) may draw from it too, between a ``random.seed`` and the model's
    construction, and so change the model: Keras's draws come from a generator of their own here.
    Python's and NumPy's global generators are seeded too, for what else reads them. Not
    ``keras.utils.set_random_seed``: its ``tf.random.set_seed`` clears TensorFlow's kernel cache,
    which destroys the resources of ops already created, such as the SentencePiece model inside
    ``tensorflow_text`` tokenizers of the input pipeline.
    """
    from keras.src.random import seed_generator

    random.seed(seed)
    np.random.seed(seed)
    shared = seed_generator.python_random
    seed_generator.python_random = random.Random(seed)
    try:
        yield
    finally:
        seed_generator.python_random = shared


def write_json(path: Path, data: Any) -> None:
    """``data`` as indented JSON, atomically (a kill leaves the old file or the new one)."""
    atomic_write_bytes(path, (json.dumps(data, indent=2, sort_keys=True, default=str) + "\n").encode())

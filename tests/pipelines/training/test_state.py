"""Seeding (``pipelines.training.state``): a model's initial weights are a function of the seed alone, whatever
other threads of the process (Prefect's and MLflow's clients in a flow) draw from Python's ``random``."""

import random
import threading

import numpy as np

from keras_transformer import Transformer
from pipelines.training import seeded_initialisation
from tests.pipelines.training.conftest import TINY, VOCAB


def weights_of(seed: int, hold: threading.Event | None = None) -> list[np.ndarray]:
    with seeded_initialisation(seed):
        if hold is not None:
            hold.wait(2)  # another thread draws from `random` between the seeding and the construction
        model = Transformer.from_preset("demo", vocab_size=VOCAB, **{**TINY, "dropout": 0.1})
        model.build()
    return [np.array(v) for v in model.variables]  # the weights and the dropout generators' states


def test_the_initial_model_is_the_seed_s_while_another_thread_draws_from_random():
    alone = weights_of(3)
    stop, drawn = threading.Event(), threading.Event()

    def draw():
        while not stop.is_set():
            random.random()
            drawn.set()

    thread = threading.Thread(target=draw, daemon=True)
    thread.start()
    try:
        beside = weights_of(3, hold=drawn)
    finally:
        stop.set()
        thread.join()
    assert len(beside) == len(alone)
    for a, b in zip(alone, beside, strict=True):
        np.testing.assert_array_equal(a, b)
    other = weights_of(4)
    assert any(not np.array_equal(a, b) for a, b in zip(alone, other, strict=True))  # the seed decides

"""``wiring-check``. The translation check's own training loop (flows/tools/wiring/translation.py), used when the
recipe changes the loss (``train.unlikelihood``): it trains on the training stage's objective."""

import random

import keras
import numpy as np
import tensorflow as tf

from flows.tools.wiring import translation as wiring
from keras_transformer import Transformer
from keras_transformer.training.objectives import TranslationObjective
from pipelines.training.config import TrainConfig


def test_the_objective_steps_learn_the_pairs_with_the_unlikelihood_term():
    # Not keras.utils.set_random_seed: it resets the SentencePiece state of the session's tokenizers.
    random.seed(0)
    model = Transformer.from_preset("demo", vocab_size=30, num_layers=1, d_model=16, num_heads=2, d_ff=32, dropout=0.0)
    model.build()
    source = np.array([[5, 6, 7, 3], [8, 9, 3, 0]], np.int32)
    target_in = np.array([[1, 10, 11, 10, 12], [1, 13, 13, 3, 0]], np.int32)
    target_out = np.array([[10, 11, 10, 12, 3], [13, 13, 3, 0, 0]], np.int32)
    adam = keras.optimizers.Adam(1e-2)
    assert wiring._objective_steps(model, adam, TrainConfig(), source, target_in, target_out) is None
    train = TrainConfig(unlikelihood=1.0, unlikelihood_window=2)
    objective = TranslationObjective(model, 0.0, 1.0, 2)

    def total():
        sums = objective(tf.constant(source), tf.constant(target_in), tf.constant(target_out), training=True)
        return float(sums.total / sums.count)

    before = total()
    wiring._objective_steps(model, keras.optimizers.Adam(1e-2), train, source, target_in, target_out)(60)
    assert total() < 0.2 * before


def test_with_subword_dropout_each_step_gets_its_own_segmentation_in_one_shape(tokenizer):
    pairs = [("This package contains the development files.", "Dieses Paket enthält die Entwicklungsdateien.")] * 3
    config = Transformer.from_preset("demo", vocab_size=tokenizer.vocab_size).config
    steps = [wiring._sampled(pairs, tokenizer, tokenizer, config, 0.1, 64) for _ in range(8)]
    assert {inputs[0].shape + inputs[1].shape + target.shape for inputs, target in steps} == {(3, 64) * 3}
    sources = {tuple(row) for (source, _), _ in steps for row in source}
    assert len(sources) > 3
    spelt = {tokenizer.detokenize(row).numpy() for (_, _), target in steps for row in target}
    assert spelt == {pairs[0][1].encode()}

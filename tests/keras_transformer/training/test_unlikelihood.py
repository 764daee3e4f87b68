"""Token-level unlikelihood (keras_transformer/training/unlikelihood.py) and the objective that adds it."""

import random

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import Transformer
from keras_transformer.training.objectives import TranslationObjective, objective_for
from keras_transformer.training.unlikelihood import (
    previous_token_candidates,
    recent_token_candidates,
    unlikelihood_sum,
)


def candidates_at(target_out, window=0):
    target_out = tf.constant(target_out)
    ids, mask = recent_token_candidates(target_out, window) if window else previous_token_candidates(target_out)
    ids, mask = ids.numpy(), mask.numpy()
    return [[sorted(int(i) for i in ids[b, t][mask[b, t]]) for t in range(ids.shape[1])] for b in range(ids.shape[0])]


def test_candidates_are_the_distinct_earlier_tokens_other_than_the_gold():
    assert candidates_at([[5, 6, 5, 7, 3, 0], [9, 9, 9, 3, 0, 0]]) == [
        # 5 again at t=2 is the gold there, and counted once at t=3 and t=4; padding never counts.
        [[], [5], [6], [5, 6], [5, 6, 7], [3, 5, 6, 7]],
        # A reference that repeats a token is never pushed away from it.
        [[], [], [], [9], [3, 9], [3, 9]],
    ]


def test_a_window_takes_the_distinct_recent_tokens_other_than_the_gold():
    rows = [[5, 6, 5, 7, 3, 0], [9, 9, 9, 3, 0, 0], [4, 5, 4, 5, 6, 7]]
    assert candidates_at(rows, window=2) == [
        # At t=4 the last two are 5 (t=2) and 7; 6 is out of the window.
        [[], [5], [6], [5, 6], [5, 7], [3, 7]],
        [[], [], [], [9], [3, 9], [3]],
        # 4 5 4 5: the nearer 4 or 5 is the same candidate as the farther, counted once.
        [[], [4], [5], [4], [4, 5], [5, 6]],
    ]
    # A window as long as the sentence finds what the whole prefix does.
    assert candidates_at(rows, window=6) == candidates_at(rows)


def test_the_sum_is_minus_log_one_minus_p_of_each_candidate():
    logits = tf.constant([[2.0, 0.5, -1.0, 0.0], [0.0, 3.0, 1.0, -2.0]])
    ids = tf.constant([[1, 2, 0], [0, 1, 3]])
    mask = tf.constant([[True, True, False], [False, True, False]])
    p = tf.nn.softmax(logits).numpy()
    expected = -(np.log(1 - p[0, 1]) + np.log(1 - p[0, 2]) + np.log(1 - p[1, 1]))
    np.testing.assert_allclose(float(unlikelihood_sum(logits, ids, mask)), expected, rtol=1e-5)
    # A certain candidate costs a large but finite amount.
    certain = unlikelihood_sum(tf.constant([[100.0, 0.0]]), tf.constant([[0]]), tf.constant([[True]]))
    assert 10 < float(certain) < 20


def test_its_gradient_lowers_the_candidates_probability_only():
    logits = tf.Variable([[1.0, 1.0, 1.0, 1.0]])
    with tf.GradientTape() as tape:
        loss = unlikelihood_sum(logits, tf.constant([[2]]), tf.constant([[True]]))
    grad = tape.gradient(loss, logits).numpy()[0]
    assert grad[2] > 0 and all(g < 0 for g in np.delete(grad, 2))


@pytest.fixture(scope="module")
def transformer():
    # Not keras.utils.set_random_seed: it resets the SentencePiece state of the session's tokenizers.
    random.seed(0)
    model = Transformer.from_preset("demo", vocab_size=40, num_layers=1, d_model=16, num_heads=2, d_ff=32,
                                    dropout=0.0)
    model.build()
    return model


def test_the_objective_adds_the_weighted_unlikelihood_while_training(transformer):
    source = tf.constant([[5, 6, 7, 3], [8, 9, 3, 0]])
    target_in = tf.constant([[1, 10, 11, 10, 12], [1, 13, 13, 0, 0]])
    target_out = tf.constant([[10, 11, 10, 12, 3], [13, 13, 3, 0, 0]])
    plain = TranslationObjective(transformer, 0.1)(source, target_in, target_out, training=True)
    weighted = TranslationObjective(transformer, 0.1, unlikelihood=0.5)(source, target_in, target_out, training=True)
    logits = transformer((source, target_in), training=True)
    ids, mask = previous_token_candidates(target_out)
    real = tf.not_equal(target_out, 0)
    extra = unlikelihood_sum(tf.boolean_mask(logits, real), tf.boolean_mask(ids, real), tf.boolean_mask(mask, real))
    assert float(extra) > 0
    np.testing.assert_allclose(float(weighted.total), float(plain.total) + 0.5 * float(extra), rtol=1e-5)
    # The reported loss and the unit stay the cross-entropy's, and validation does not add it.
    assert float(weighted.loss) == pytest.approx(float(plain.loss)) and float(weighted.count) == 8
    held_out = TranslationObjective(transformer, 0.1, unlikelihood=0.5)(source, target_in, target_out, training=False)
    assert float(held_out.total) == pytest.approx(float(held_out.loss))
    assert isinstance(objective_for(transformer, 0.1, unlikelihood=0.5), TranslationObjective)


def test_the_objective_takes_the_window_s_candidates(transformer):
    source = tf.constant([[5, 6, 7, 3]])
    target_in = tf.constant([[1, 10, 11, 12, 10]])
    target_out = tf.constant([[10, 11, 12, 10, 3]])
    plain = TranslationObjective(transformer, 0.0)(source, target_in, target_out, training=True)
    windowed = objective_for(transformer, 0.0, unlikelihood=1.0, unlikelihood_window=1)(
        source, target_in, target_out, training=True)
    logits = tf.reshape(transformer((source, target_in), training=True), [5, -1])
    ids, mask = recent_token_candidates(target_out, 1)
    extra = unlikelihood_sum(logits, ids[0], mask[0])
    np.testing.assert_allclose(float(windowed.total), float(plain.total) + float(extra), rtol=1e-5)
    whole = TranslationObjective(transformer, 0.0, 1.0)(source, target_in, target_out, training=True)
    # The whole prefix has more candidates (10 and 11 before the last 3): a larger term.
    assert float(whole.total) > float(windowed.total)

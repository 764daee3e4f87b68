"""The compiled step alone: token sums, when a step is complete, the update normalised by the tokens."""

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import Transformer, label_smoothed_nll, transformer_adam
from keras_transformer.training.objectives import TranslationObjective
from pipelines.training import seeded_initialisation
from pipelines.training.loss_scale import LossScale
from pipelines.training.steps import TOTALS, StepFunctions
from tests.pipelines.training.conftest import TINY, VOCAB, batch, tiny_model

SPEC = ((tf.TensorSpec([None, None], tf.int32),) * 2, tf.TensorSpec([None, None], tf.int32))


def step_functions(strategy, model, optimizer, **settings):
    settings = {"label_smoothing": 0.1, "tokens_per_step": 20, **settings}
    objective = TranslationObjective(model, settings.pop("label_smoothing"))
    return StepFunctions(strategy, model, optimizer, SPEC, objective=objective, **settings)


def weights(model) -> list[np.ndarray]:
    return [w.numpy().copy() for w in model.trainable_variables]


def test_a_step_ends_near_its_token_budget_or_after_a_number_of_batches(strategy):
    model, optimizer = tiny_model()
    by_tokens = step_functions(strategy, model, optimizer, tokens_per_step=100)
    # Another batch of this step's average size would overshoot more than stopping undershoots.
    assert not by_tokens.step_complete(1, 60) and by_tokens.step_complete(2, 80)
    assert not by_tokens.step_complete(3, 0)
    by_batches = step_functions(strategy, model, optimizer, accumulation_batches=3)
    assert not by_batches.step_complete(2, 10_000) and by_batches.step_complete(3, 0)


def test_accumulate_returns_the_global_sums_of_the_loss_over_real_target_tokens(strategy):
    model, optimizer = tiny_model()
    steps = step_functions(strategy, model, optimizer, accumulation_batches=2)
    data = [batch(3, 6, seed) for seed in (1, 2)]
    totals, count = steps.accumulate_step(iter(data))
    assert count == 2
    sums = dict(zip(TOTALS, totals))
    losses = [label_smoothed_nll(y, model((s, t)), 0.1) for (s, t), y in data]  # dropout is 0
    assert sums["tokens"] == sum(int(tf.math.count_nonzero(y)) for _, y in data)
    assert sums["loss_sum"] == pytest.approx(sum(float(tf.reduce_sum(loss)) for loss, _ in losses), rel=1e-5)
    assert sums["sentences"] == 6 and sums["nonfinite"] == 0
    assert 0 <= sums["correct"] <= sums["tokens"]


def test_apply_updates_with_the_accumulated_gradients_and_reset_discards_them(strategy):
    model, optimizer = tiny_model()
    steps = step_functions(strategy, model, optimizer, accumulation_batches=1)
    before = weights(model)
    steps.accumulate_step(iter([batch(3, 6, 1)]))
    steps.reset()
    # Adam's first update of a zero gradient is zero: nothing was left in the accumulators.
    steps.apply(10.0)
    assert all(np.array_equal(a, b) for a, b in zip(before, weights(model)))
    totals, _ = steps.accumulate_step(iter([batch(3, 6, 1)]))
    steps.apply(totals[1])
    assert int(optimizer.iterations.numpy()) == 2
    assert any(not np.array_equal(a, b) for a, b in zip(before, weights(model)))


def test_the_update_is_the_gradient_of_the_mean_loss_per_token_whatever_the_loss_scale(strategy):
    data = [batch(2, 5, 1), batch(4, 7, 2)]
    updated = []
    for scale in (None, 1024.0):
        model, optimizer = tiny_model()
        steps = step_functions(strategy, model, optimizer, accumulation_batches=2,
                               loss_scale=LossScale(strategy, scale))
        totals, _ = steps.accumulate_step(iter(data))
        steps.apply(totals[1])
        updated.append(weights(model))
    # By hand: one Adam step on sum(losses) / tokens of both batches.
    model, optimizer = tiny_model()
    with tf.GradientTape() as tape:
        losses = [label_smoothed_nll(y, model((s, t), training=True), 0.1) for (s, t), y in data]
        loss = tf.add_n([tf.reduce_sum(x) for x, _ in losses]) / tf.add_n([tf.reduce_sum(m) for _, m in losses])
    # Dense gradients, as the trainer's accumulators hold them: Keras' Adam squares an embedding's
    # IndexedSlices slice by slice, so a token seen twice would get the sum of squares, not the square.
    grads = [tf.convert_to_tensor(g) for g in tape.gradient(loss, model.trainable_variables)]
    optimizer.apply(grads, model.trainable_variables)
    for variable, unscaled, scaled, expected in zip(model.trainable_variables, *updated, weights(model)):
        # A key bias adds the same score to every key of a query, which the softmax cancels: its
        # gradient is rounding noise, which Adam's first step turns into an arbitrary update.
        if not variable.path.endswith("/key/bias"):
            np.testing.assert_allclose(scaled, unscaled, atol=1e-5)
            np.testing.assert_allclose(unscaled, expected, atol=1e-5, err_msg=variable.path)


def test_the_word_taggers_loss_trains_it_and_stays_out_of_the_reported_loss(strategy):
    """``tagger=fused``: the tagger's own loss is minimised with the decoder's, and the reported loss
    stays the decoder's."""
    with seeded_initialisation(0):
        model = Transformer.from_preset("demo", vocab_size=VOCAB, **TINY, word_alignment=True, tagger="fused",
                                        word_start_ids=list(range(4, 25)), slot_ids=list(range(25, VOCAB)))
    optimizer = transformer_adam(TINY["d_model"], 20)
    optimizer.build(model.trainable_variables)
    steps = step_functions(strategy, model, optimizer, accumulation_batches=1)
    tagger = model.word_alignment.tag_projection.kernel
    before = tagger.numpy().copy()
    data = batch(3, 6, 1)
    totals, _ = steps.accumulate_step(iter([data]))
    (source, target_in), target_out = data
    decoder_loss = label_smoothed_nll(target_out, model((source, target_in)), 0.1)[0]
    assert dict(zip(TOTALS, totals))["loss_sum"] == pytest.approx(float(tf.reduce_sum(decoder_loss)), rel=1e-5)
    steps.apply(totals[1])
    assert not np.array_equal(before, tagger.numpy())

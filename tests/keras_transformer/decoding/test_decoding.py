"""Incremental decoding with a real Transformer: cache correctness, greedy/beam agreement."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import keras_transformer as kt
from keras_transformer.decoding.beam import beam_search_decode, compiled_beam_search
from keras_transformer.decoding.greedy import (
    compiled_greedy_decode,
    greedy_decode,
    max_output_lengths,
    source_lengths,
)
from tests.keras_transformer.tiny_models import numpy_init

VOCAB = 16
PAD, BOS, EOS = 0, 2, 3


def reversal_batch(rng, n, min_len=1, max_len=6, width=14):
    """Sources ``w1 .. wn EOS``; targets the words reversed, then EOS (a task learnt in seconds)."""
    lengths = rng.integers(min_len, max_len + 1, size=n)
    source = np.zeros((n, width), np.int32)
    decoder_in = np.zeros((n, width), np.int32)
    decoder_out = np.zeros((n, width), np.int32)
    for i, length in enumerate(lengths):
        words = rng.integers(4, VOCAB, size=length)
        source[i, :length], source[i, length] = words, EOS
        decoder_in[i, 0], decoder_in[i, 1 : length + 1] = BOS, words[::-1]
        decoder_out[i, :length], decoder_out[i, length] = words[::-1], EOS
    return source, decoder_in, decoder_out


@pytest.fixture(scope="module")
def trained_model():
    """A one-layer model briefly trained on word reversal (about 100 steps): it emits EOS,
    outputs of different lengths, and is still unsure on longer inputs."""
    rng = np.random.default_rng(0)
    source, decoder_in, decoder_out = reversal_batch(rng, 64 * 120)
    model = kt.Transformer(vocab_size=VOCAB, num_layers=1, d_model=32, num_heads=2, d_ff=64, dropout=0.0)
    numpy_init(model, 0)
    model.compile(warmup_steps=100)
    # The examples are random already; no shuffling keeps the run free of TF's random state.
    model.fit((source, decoder_in), decoder_out, batch_size=64, epochs=1, verbose=0, shuffle=False)
    return model


def test_source_and_output_lengths():
    source = tf.constant([[5, 6, 7, EOS, PAD], [5, EOS, PAD, PAD, PAD]])
    np.testing.assert_array_equal(source_lengths(source, PAD), [4, 2])
    np.testing.assert_array_equal(max_output_lengths(source, 50, PAD), [54, 52])
    np.testing.assert_array_equal(max_output_lengths(source, 50, PAD, limit=53), [53, 52])


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"positional_encoding": "learned", "max_length": 32},
        {"d_k": 8, "d_v": 12, "num_decoder_layers": 3},
        {"norm_first": True},
    ],
    ids=["sinusoidal", "learned-positions", "dk-dv-3-decoder-layers", "pre-norm"],
)
def test_cached_step_logits_equal_full_decoder(settings):
    """Decoding one position at a time through the cache gives the logits the full decoder
    computes on the whole prefix at every position (padded sources included)."""
    model = kt.Transformer(
        vocab_size=40, num_layers=2, d_model=32, num_heads=4, d_ff=64, dropout=0.0, **settings
    )
    numpy_init(model, 1)
    rng = np.random.default_rng(1)
    source = rng.integers(4, 40, size=(3, 9)).astype(np.int32)
    source[1, 5:] = PAD
    source[2, 2:] = PAD
    target = rng.integers(4, 40, size=(3, 12)).astype(np.int32)
    target[:, 0] = BOS
    source, target = tf.constant(source), tf.constant(target)

    encoder_outputs = model.encode(source, training=False)
    mask = model.padding_mask(source)
    full = model.decode(target, encoder_outputs, mask, training=False).logits.numpy()

    cache = model.init_cache(encoder_outputs)
    for t in range(target.shape[1]):
        logits, cache, _ = model.decode(
            target[:, t : t + 1], encoder_outputs, mask, cache=cache, cache_index=t, training=False
        )
        np.testing.assert_allclose(logits.numpy()[:, 0], full[:, t], atol=1e-4, rtol=1e-4)


def test_greedy_cached_equals_uncached(trained_model):
    rng = np.random.default_rng(2)
    source, _, _ = reversal_batch(rng, 12, max_len=10)
    source = tf.constant(source)
    cached = compiled_greedy_decode(trained_model)(source, tf.constant(5))
    uncached = compiled_greedy_decode(trained_model, use_cache=False)(source, tf.constant(5))
    np.testing.assert_array_equal(cached.ids.numpy(), uncached.ids.numpy())
    np.testing.assert_array_equal(cached.lengths.numpy(), uncached.lengths.numpy())
    np.testing.assert_allclose(cached.log_probs.numpy(), uncached.log_probs.numpy(), atol=1e-4)


def test_greedy_decodes_the_learnt_task_and_respects_max_length(trained_model):
    rng = np.random.default_rng(3)
    source, _, expected = reversal_batch(rng, 16, max_len=5)
    offset = 3
    out = compiled_greedy_decode(trained_model)(tf.constant(source), tf.constant(offset))
    ids, lengths = out.ids.numpy(), out.lengths.numpy()
    limits = (source != PAD).sum(1) + offset
    correct = 0
    for i in range(len(source)):
        hypothesis = ids[i, : lengths[i]]
        assert lengths[i] <= limits[i]
        if EOS not in hypothesis:
            assert lengths[i] == limits[i], "a hypothesis without EOS must run to input length + offset"
        assert np.all(ids[i, lengths[i] :] == PAD)
        reference = expected[i, : list(expected[i]).index(EOS) + 1]
        correct += hypothesis.tolist() == reference.tolist()
    # Sanity of the fixture: the model learnt the task, so greedy output ends with EOS mostly.
    assert correct >= 8


def test_beam_size_one_equals_greedy_on_trained_model(trained_model):
    """With alpha = 0 (the score is the log-probability alone) beam 1 is greedy decoding.

    With alpha > 0 beam 1 may rightly continue past greedy's EOS: a live hypothesis can still
    reach a better length-normalised score, and the search only stops when none can.
    """
    rng = np.random.default_rng(4)
    source, _, _ = reversal_batch(rng, 16, min_len=1, max_len=12)
    source = tf.constant(source)
    greedy = compiled_greedy_decode(trained_model)(source, tf.constant(6))
    beam = compiled_beam_search(trained_model, 1)(source, tf.constant(0.0), tf.constant(6))
    width = greedy.ids.shape[1]
    np.testing.assert_array_equal(beam.ids.numpy()[:, 0, :width], greedy.ids.numpy())
    np.testing.assert_array_equal(beam.lengths.numpy()[:, 0], greedy.lengths.numpy())
    np.testing.assert_allclose(beam.log_probs.numpy()[:, 0], greedy.log_probs.numpy(), atol=1e-4)
    # Guard: outputs of several lengths, ended by EOS and cut off.
    assert len(set(greedy.lengths.numpy().tolist())) >= 3


def test_eager_and_compiled_beam_search_agree(trained_model):
    rng = np.random.default_rng(6)
    source, _, _ = reversal_batch(rng, 4, max_len=6)
    source = tf.constant(source)
    eager = beam_search_decode(trained_model, source, beam_size=3, alpha=0.6, max_length_offset=4)
    graph = compiled_beam_search(trained_model, 3)(source, tf.constant(0.6), tf.constant(4))
    np.testing.assert_array_equal(eager.ids.numpy()[:, 0], graph.ids.numpy()[:, 0])
    np.testing.assert_allclose(eager.scores.numpy()[:, 0], graph.scores.numpy()[:, 0], atol=1e-5)
    scores = graph.scores.numpy()
    assert np.all(np.diff(np.where(np.isfinite(scores), scores, -1e30), axis=1) <= 1e-6)
    assert np.all(graph.lengths.numpy()[:, 0] <= source_lengths(source).numpy() + 4)
    eager_greedy = greedy_decode(trained_model, source, 4)
    graph_greedy = compiled_greedy_decode(trained_model)(source, tf.constant(4))
    np.testing.assert_array_equal(eager_greedy.ids.numpy(), graph_greedy.ids.numpy())

"""Beam search (section 6.1) against distributions the test controls exactly.

The score function looks the next-token log-probabilities up in a table indexed by (sentence,
prefix), so exhaustive search over all short outputs gives the true best length-penalised
hypothesis to compare with.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.decoding.beam import beam_search, length_penalty
from keras_transformer.decoding.greedy import greedy_search, tile_nest

PAD, BOS, EOS = 0, 1, 2
VOCAB = 6  # pad, bos, eos and three ordinary tokens 3, 4, 5
WORDS = (3, 4, 5)
MAX_LEN = 4
ROWS = VOCAB ** (MAX_LEN + 1)  # prefix codes: h = h * VOCAB + token, starting from 0 before BOS


def prefix_code(prefix) -> int:
    h = 0
    for token in prefix:
        h = h * VOCAB + token
    return h


class TableDistribution:
    """``log_probs[sentence, prefix_code(prefix)]``: a next-token distribution per prefix.

    The state is ``(sentence index, prefix code)`` per row; the beam search must reorder it
    with the surviving hypotheses, or the lookups go to the wrong prefixes.
    """

    def __init__(self, table: np.ndarray):
        self.table = table.astype(np.float32)  # [sentences, ROWS, VOCAB]
        self._flat = tf.constant(self.table.reshape(-1, VOCAB))

    def initial_state(self):
        sentences = self.table.shape[0]
        return (tf.range(sentences, dtype=tf.int32), tf.zeros([sentences], tf.int32))

    def score_fn(self, ids, step, state):
        sentence, code = state
        code = code * VOCAB + ids[:, step]
        return tf.gather(self._flat, sentence * ROWS + code), (sentence, code)

    def log_prob(self, sentence, prefix, token) -> float:
        return float(self.table[sentence, prefix_code(prefix), token])


def random_table(rng, sentences, eos_bias=0.0, temperature=1.5) -> np.ndarray:
    logits = rng.normal(size=(sentences, ROWS, VOCAB)) * temperature
    logits[..., EOS] += eos_bias
    logits[..., PAD] = -np.inf
    logits[..., BOS] = -np.inf
    shifted = logits - logits.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def hypotheses(max_length):
    """Every complete output: words then EOS, or exactly ``max_length`` words (cut off)."""
    for n in range(max_length):
        for words in itertools.product(WORDS, repeat=n):
            yield words + (EOS,)
    yield from itertools.product(WORDS, repeat=max_length)


def exact_log_prob(dist, sentence, output) -> float:
    prefix = (BOS,)
    total = 0.0
    for token in output:
        total += dist.log_prob(sentence, prefix, token)
        prefix += (token,)
    return total


def exact_score(dist, sentence, output, alpha) -> float:
    return exact_log_prob(dist, sentence, output) / ((5 + len(output)) / 6) ** alpha


def exhaustive_best(dist, sentence, max_length, alpha):
    return max(
        ((exact_score(dist, sentence, h, alpha), h) for h in hypotheses(max_length)),
        key=lambda pair: pair[0],
    )


def run_beam(dist, max_lengths, beam_size, alpha):
    state = tile_nest(dist.initial_state(), beam_size)
    return beam_search(
        dist.score_fn,
        state,
        tf.constant(max_lengths, tf.int32),
        beam_size=beam_size,
        alpha=alpha,
        bos_id=BOS,
        eos_id=EOS,
        pad_id=PAD,
    )


def output_tokens(ids_row, length):
    return tuple(int(t) for t in ids_row[:length])


def test_length_penalty_is_gnmt_form():
    for length, alpha in [(1, 0.6), (7, 0.6), (30, 1.0), (5, 0.0)]:
        expected = ((5 + length) / 6) ** alpha
        assert float(length_penalty(length, alpha)) == pytest.approx(expected, rel=1e-6)


def exhaustive_test_data():
    """16 sentences with maximum output lengths 1-4 and their own random distributions."""
    max_lengths = [1, 2, 3, 4, 4, 3, 4, 2] * 2
    rng = np.random.default_rng(3)
    return max_lengths, TableDistribution(random_table(rng, len(max_lengths), eos_bias=-1.0))


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0])
def test_beam_search_finds_exhaustive_optimum(alpha):
    """With a beam wide enough to hold every prefix, beam search is exact: it must return the
    output with the best length-penalised score among all outputs up to each sentence's maximum
    length (per-sentence maximum lengths, early termination and state reordering included)."""
    max_lengths, dist = exhaustive_test_data()
    # 3^3 live prefixes of length 3 times 4 real continuations = 108 candidates at most.
    out = run_beam(dist, max_lengths, beam_size=128, alpha=alpha)
    ids, scores, lengths = out.ids.numpy(), out.scores.numpy(), out.lengths.numpy()
    for b, max_length in enumerate(max_lengths):
        best_score, best = exhaustive_best(dist, b, max_length, alpha)
        found = output_tokens(ids[b, 0], lengths[b, 0])
        # The reported score is the output's true score, and it is the best one.
        assert scores[b, 0] == pytest.approx(exact_score(dist, b, found, alpha), abs=1e-4)
        assert exact_score(dist, b, found, alpha) == pytest.approx(best_score, abs=1e-5), (
            f"sentence {b}: beam {found} vs exhaustive {best}"
        )
        # Every kept finished hypothesis carries its own true score (the state, here the
        # prefix, followed each hypothesis), and they are sorted best first.
        kept = np.isfinite(scores[b])
        valid = set(hypotheses(max_length))
        for i in np.flatnonzero(kept):
            output = output_tokens(ids[b, i], lengths[b, i])
            assert output in valid and np.all(ids[b, i, lengths[b, i]:] == PAD)
            assert scores[b, i] == pytest.approx(exact_score(dist, b, output, alpha), abs=1e-4)
        assert np.all(np.diff(scores[b][kept]) <= 1e-6)


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_a_length_floor_gives_the_exhaustive_optimum_among_long_enough_outputs(alpha):
    """No hypothesis ends in EOS below its sentence's floor; among those that may end, beam search
    is still exact, and the floor changes answers the model would have cut short."""
    max_lengths, dist = exhaustive_test_data()
    floors = [min(f, m) for f, m in zip([1, 2, 3, 2, 3, 1, 4, 0] * 2, max_lengths)]
    out = beam_search(dist.score_fn, tile_nest(dist.initial_state(), 128), tf.constant(max_lengths, tf.int32),
                      beam_size=128, alpha=alpha, bos_id=BOS, eos_id=EOS, pad_id=PAD,
                      min_lengths=tf.constant(floors, tf.int32))
    ids, lengths = out.ids.numpy(), out.lengths.numpy()
    changed = 0
    for b, (max_length, floor) in enumerate(zip(max_lengths, floors)):
        allowed = [h for h in hypotheses(max_length) if len(h) - (h[-1] == EOS) >= floor]
        best = max(allowed, key=lambda h: exact_score(dist, b, h, alpha))
        found = output_tokens(ids[b, 0], lengths[b, 0])
        assert found in allowed
        assert exact_score(dist, b, found, alpha) == pytest.approx(exact_score(dist, b, best, alpha), abs=1e-5)
        changed += exhaustive_best(dist, b, max_length, alpha)[1] != found
    assert changed >= 3


def test_test_data_makes_length_penalty_matter():
    """Guards the test above: for some sentences the length-penalised optimum is not the
    most probable output, so a beam search ignoring the penalty would fail it."""
    max_lengths, dist = exhaustive_test_data()
    for low, high in [(0.0, 0.6), (0.6, 1.0)]:
        differs = [
            exhaustive_best(dist, b, n, low)[1] != exhaustive_best(dist, b, n, high)[1]
            for b, n in enumerate(max_lengths)
        ]
        assert any(differs), (low, high)


def crafted_distribution(fn) -> TableDistribution:
    """One sentence whose next-token probabilities are ``fn(prefix without BOS)``."""
    table = np.full((1, ROWS, VOCAB), -np.inf)
    for n in range(MAX_LEN):
        for prefix in itertools.product(WORDS, repeat=n):
            probs = fn(prefix)
            row = np.full(VOCAB, -np.inf)
            for token, p in probs.items():
                row[token] = math.log(p)
            table[0, prefix_code((BOS,) + prefix)] = row
    return TableDistribution(table)


def test_finished_hypothesis_never_dropped_for_worse_live_ones():
    """EOS right away has probability 0.25, normalised score log 0.25 = -1.39. Two live
    continuations "3 3" and "3 4" (p = 0.35 each) have higher log-probabilities and even higher
    normalised scores at step 2, so a beam that let finished and live hypotheses compete for
    the same slots would push the finished one out, but every way they can end scores worse
    (at best log(0.35 * 0.25) / lp(3) = -2.05). The finished set must keep and return [EOS]."""

    def fn(prefix):
        if prefix == ():
            return {3: 0.70, EOS: 0.25, 4: 0.05}
        if prefix == (3,):
            return {3: 0.5, 4: 0.5}
        return {3: 0.25, 4: 0.25, 5: 0.25, EOS: 0.25}

    dist = crafted_distribution(fn)
    alpha = 0.6
    # The premise: live hypotheses beat the finished one in raw and normalised score at step 2.
    live = math.log(0.35)
    assert live > math.log(0.25) and live / ((5 + 2) / 6) ** alpha > math.log(0.25)
    out = run_beam(dist, [3], beam_size=2, alpha=alpha)
    found = output_tokens(out.ids.numpy()[0, 0], out.lengths.numpy()[0, 0])
    assert found == (EOS,)
    assert out.scores.numpy()[0, 0] == pytest.approx(math.log(0.25), abs=1e-5)
    assert exhaustive_best(dist, 0, 3, alpha)[1] == (EOS,)


def test_finished_set_keeps_best_across_steps_and_terminates_early():
    """An early EOS hypothesis that no live one can beat any more stops the search long before
    the maximum length; the answer is that hypothesis, not the last one seen."""

    def fn(prefix):
        if prefix == ():
            return {EOS: 0.6, 3: 0.2, 4: 0.2}
        return {3: 0.1, 4: 0.1, 5: 0.1, EOS: 0.7}

    dist = crafted_distribution(fn)
    out = run_beam(dist, [4], beam_size=2, alpha=0.6)
    assert output_tokens(out.ids.numpy()[0, 0], out.lengths.numpy()[0, 0]) == (EOS,)
    # After step 1 the best live log-prob is log 0.2; even with the maximum length's penalty,
    # log(0.2) / lp(4) = -1.07 < log(0.6) = -0.51: the loop must stop right there.
    assert int(out.steps) == 1


def test_search_continues_while_a_live_hypothesis_can_still_win():
    """Early termination must not be premature: EOS at step 1 is likely, yet a longer output
    wins after the length penalty."""

    def fn(prefix):
        if prefix == ():
            return {EOS: 0.45, 3: 0.55}
        return {3: 0.02, EOS: 0.98}

    dist = crafted_distribution(fn)
    alpha = 1.0
    # log(0.45) / 1 = -0.80 vs log(0.55 * 0.98) / (7 / 6) = -0.53: the longer one wins.
    out = run_beam(dist, [4], beam_size=2, alpha=alpha)
    assert output_tokens(out.ids.numpy()[0, 0], out.lengths.numpy()[0, 0]) == (3, EOS)
    assert exhaustive_best(dist, 0, 4, alpha)[1] == (3, EOS)


def test_beam_size_one_equals_greedy_on_random_distributions():
    rng = np.random.default_rng(3)
    max_lengths = [4, 3, 4, 2, 4, 1, 4, 4, 3, 4]
    dist = TableDistribution(random_table(rng, len(max_lengths), eos_bias=0.3))
    lengths = tf.constant(max_lengths, tf.int32)
    greedy = greedy_search(dist.score_fn, dist.initial_state(), lengths, bos_id=BOS, eos_id=EOS)
    beam = run_beam(dist, max_lengths, beam_size=1, alpha=0.0)
    np.testing.assert_array_equal(beam.ids.numpy()[:, 0], greedy.ids.numpy())
    np.testing.assert_array_equal(beam.lengths.numpy()[:, 0], greedy.lengths.numpy())
    np.testing.assert_allclose(beam.log_probs.numpy()[:, 0], greedy.log_probs.numpy(), atol=1e-5)
    # Guard: the data has both EOS-terminated and cut-off outputs of several lengths.
    assert len(set(greedy.lengths.numpy().tolist())) > 2
    assert (greedy.ids.numpy() == EOS).any()


def test_a_beam_of_one_outlives_greedy_under_a_length_penalty():
    # Why beam_search_decode hands beam_size=1 to greedy decoding (as tensor2tensor does): the
    # bare search keeps its one live hypothesis past the argmax EOS, and with alpha > 0 the
    # longer output can win. Greedy: (EOS,), -0.65 / 1. The beam of one: (3, EOS),
    # log(0.48 * 0.99) / (7/6)^2 = -0.55.
    def fn(prefix):
        if prefix == ():
            return {EOS: 0.52, 3: 0.48}
        return {EOS: 0.99, 3: 0.01}

    dist = crafted_distribution(fn)
    greedy = greedy_search(dist.score_fn, dist.initial_state(), tf.constant([4]), bos_id=BOS,
                           eos_id=EOS)
    beam = run_beam(dist, [4], beam_size=1, alpha=2.0)
    assert output_tokens(greedy.ids.numpy()[0], greedy.lengths.numpy()[0]) == (EOS,)
    assert output_tokens(beam.ids.numpy()[0, 0], beam.lengths.numpy()[0, 0]) == (3, EOS)


def test_greedy_is_argmax_path():
    rng = np.random.default_rng(5)
    dist = TableDistribution(random_table(rng, 3, eos_bias=0.3))
    out = greedy_search(
        dist.score_fn, dist.initial_state(), tf.constant([4, 4, 2]), bos_id=BOS, eos_id=EOS
    )
    for b, max_length in enumerate([4, 4, 2]):
        prefix, expected = (BOS,), []
        while len(expected) < max_length:
            token = int(np.argmax(dist.table[b, prefix_code(prefix)]))
            expected.append(token)
            prefix += (token,)
            if token == EOS:
                break
        assert output_tokens(out.ids.numpy()[b], out.lengths.numpy()[b]) == tuple(expected)


def test_compiled_beam_search_has_no_python_loop_per_token():
    """The search is one tf.while_loop: tracing it calls the score function once, whatever
    the output length."""
    rng = np.random.default_rng(0)
    dist = TableDistribution(random_table(rng, 2))
    calls = []

    def counting_score_fn(ids, step, state):
        calls.append(1)
        return dist.score_fn(ids, step, state)

    @tf.function
    def search(max_lengths):
        return beam_search(
            counting_score_fn,
            tile_nest(dist.initial_state(), 3),
            max_lengths,
            beam_size=3,
            alpha=0.6,
            bos_id=BOS,
            eos_id=EOS,
        )

    out = search(tf.constant([4, 4]))
    assert len(calls) == 1
    assert out.ids.shape[:2] == (2, 3)


def test_rejects_negative_alpha_and_bad_beam():
    dist = TableDistribution(random_table(np.random.default_rng(0), 1))
    with pytest.raises(ValueError, match="alpha"):
        run_beam(dist, [2], beam_size=2, alpha=-0.5)
    with pytest.raises(ValueError, match="beam_size"):
        run_beam(dist, [2], beam_size=0, alpha=0.6)

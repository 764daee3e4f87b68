"""CKY over span scores and the linearised tree it writes (keras_transformer/decoding/chart.py)."""

import numpy as np
import pytest

from keras_transformer.models.span_parser.chart import EMPTY, cky, decode_chart


def test_cky_takes_the_better_of_two_crossing_spans():
    # Three words: (0, 2) scores 1 and (1, 3) scores 3; they cross, so only the better is taken.
    scores = np.zeros([4, 4])
    scores[0, 2], scores[1, 3] = 1.0, 3.0
    assert cky(scores) == (3.0, {(0, 3): 1, (1, 3): 2})
    scores[0, 2] = 4.0
    assert cky(scores) == (4.0, {(0, 3): 2, (0, 2): 1})


def test_cky_matches_exhaustive_search_on_random_charts():
    def best(scores, i, j):
        if j - i == 1:
            return scores[i, j]
        return scores[i, j] + max(best(scores, i, k) + best(scores, k, j) for k in range(i + 1, j))

    rng = np.random.default_rng(0)
    for n in range(1, 7):
        scores = rng.normal(size=[n + 1, n + 1])
        assert cky(scores)[0] == pytest.approx(best(scores, 0, n))


def _chart(n, labels, chosen, empty=0.9):
    probs = np.full([n + 1, n + 1, len(labels)], (1 - empty) / (len(labels) - 1))
    probs[..., 0] = empty
    for span, label in chosen.items():
        probs[span] = 0.02
        probs[span + (labels.index(label),)] = 1 - 0.02 * (len(labels) - 1)
    return np.log(probs)


LABELS = [EMPTY, "NP", "S", "S+VP", "VP"]


def test_decode_chart_writes_the_tree_in_section_6_3_form():
    # (S (NP DT NN) (VP VBD)) with a unary chain over one word: (S+VP VB) .
    chart = _chart(3, LABELS, {(0, 2): "NP", (2, 3): "VP", (0, 3): "S"})
    assert decode_chart(chart, ["DT", "NN", "VBD"], LABELS) == "(S (NP DT NN )NP (VP VBD )VP )S".split()
    chart = _chart(2, LABELS, {(0, 1): "S+VP"})
    assert decode_chart(chart, ["VB", "."], LABELS) == "(S (VP VB )VP )S .".split()


def test_the_bias_decides_spans_near_even_odds():
    # p(no constituent) = 0.6 at (0, 2): no bracket at bias 0, one from a bias of log(1.5) on.
    chart = _chart(3, LABELS, {})
    chart[0, 2] = np.log([0.6, 0.4, 1e-9, 1e-9, 1e-9])
    assert decode_chart(chart, ["DT", "NN", "VBD"], LABELS) == ["DT", "NN", "VBD"]
    assert decode_chart(chart, ["DT", "NN", "VBD"], LABELS, bias=0.5) == "(NP DT NN )NP VBD".split()


def test_decode_chart_checks_its_inputs():
    with pytest.raises(ValueError, match="empty sentence"):
        decode_chart(np.zeros([1, 1, 2]), [], [EMPTY, "NP"])
    for labels in (["NP", EMPTY], [EMPTY]):
        with pytest.raises(ValueError, match="the empty label and at least one other"):
            decode_chart(np.zeros([2, 2, len(labels)]), ["NN"], labels)

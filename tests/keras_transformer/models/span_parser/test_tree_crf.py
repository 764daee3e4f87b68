import functools
import itertools
import math

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.models.span_parser.targets import IGNORE
from keras_transformer.models.span_parser.tree_crf import span_marginals, tree_crf_losses, tree_log_partition


@functools.cache
def binary_trees(i: int, j: int) -> tuple[frozenset, ...]:
    """Every binary bracketing of words i .. j-1, as its set of spans."""
    if j - i == 1:
        return (frozenset({(i, j)}),)
    return tuple(frozenset({(i, j)}) | left | right for k in range(i + 1, j)
                 for left in binary_trees(i, k) for right in binary_trees(k, j))


def brute_log_partition(potentials: np.ndarray, n: int) -> float:
    return float(np.logaddexp.reduce([sum(potentials[s] for s in tree) for tree in binary_trees(0, n)]))


def test_inside_algorithm_sums_over_every_binary_tree():
    rng = np.random.default_rng(0)
    lengths = [5, 1, 3, 4]
    potentials = rng.normal(size=(len(lengths), 6, 6)).astype(np.float32)
    got = tree_log_partition(tf.constant(potentials), tf.constant(lengths)).numpy()
    want = [brute_log_partition(p.astype(np.float64), n) for p, n in zip(potentials, lengths)]
    assert got == pytest.approx(want, abs=1e-4)
    # With all potentials 0 the partition counts the trees: the Catalan numbers.
    zeros = tree_log_partition(tf.zeros([4, 6, 6]), tf.constant([1, 2, 4, 5])).numpy()
    assert np.exp(zeros) == pytest.approx([1, 1, 5, 14], rel=1e-5)


def test_span_marginals_are_each_spans_probability_of_being_in_the_tree():
    rng = np.random.default_rng(1)
    lengths = [5, 2, 4]
    potentials = rng.normal(size=(len(lengths), 6, 6)).astype(np.float32)
    marginals = span_marginals(tf.constant(potentials), tf.constant(lengths)).numpy()
    for row, n in enumerate(lengths):
        trees = binary_trees(0, n)
        weights = np.exp([sum(float(potentials[row][s]) for s in tree) for tree in trees])
        weights /= weights.sum()
        want = np.zeros((6, 6))
        for tree, weight in zip(trees, weights):
            for span in tree:
                want[span] += weight
        assert marginals[row] == pytest.approx(want, abs=1e-4)
        # A binary tree of n words has 2n - 1 spans; the sentence and every word are in all of them.
        assert marginals[row].sum() == pytest.approx(2 * n - 1, abs=1e-4)
        assert marginals[row, 0, n] == pytest.approx(1.0) and np.diag(marginals[row], 1)[:n] == pytest.approx(1.0)


def test_a_batch_of_empty_sentences_has_a_partition_and_marginals():
    """A chart of no words (a batch holding only empty sentences, n = 0) still runs, in the graph too."""
    empty = tf.zeros([2, 1, 1])
    assert tree_log_partition(empty, tf.constant([1, 1])).numpy() == pytest.approx([0.0, 0.0])
    marginals = tf.function(span_marginals)(empty, tf.constant([1, 1])).numpy()
    assert marginals.shape == (2, 1, 1) and np.all(marginals == 0.0)


def test_tree_crf_loss_is_the_gold_trees_negative_log_probability():
    # Two words, labels ("", "NP", "S"): the gold tree (S (NP w0) w1); every other labelling of the
    # three spans of the one binary tree is a rival.
    rng = np.random.default_rng(2)
    logits = rng.normal(size=(1, 3, 3, 3)).astype(np.float32)
    labels = np.full((1, 3, 3), IGNORE, np.int32)
    labels[0, 0, 1], labels[0, 1, 2], labels[0, 0, 2] = 1, 0, 2
    loss = float(tree_crf_losses(tf.constant(logits), tf.constant(labels))[0])
    spans = [(0, 1), (1, 2), (0, 2)]
    score = {assign: sum(logits[0][s][lab] - logits[0][s][0] for s, lab in zip(spans, assign))
             for assign in itertools.product(range(3), repeat=3)}
    want = float(np.logaddexp.reduce(list(score.values()))) - score[(1, 0, 2)]
    assert loss == pytest.approx(want, abs=1e-4) and loss > 0
    # A second, padded sentence of one word changes nothing for the first.
    padded = np.concatenate([labels, np.full((1, 3, 3), IGNORE, np.int32)])
    padded[1, 0, 1] = 0
    both = tree_crf_losses(tf.constant(np.concatenate([logits, logits])), tf.constant(padded)).numpy()
    assert both[0] == pytest.approx(loss, abs=1e-5)
    assert both[1] == pytest.approx(math.log(np.exp(logits[0, 0, 1] - logits[0, 0, 1, 0]).sum()), abs=1e-5)

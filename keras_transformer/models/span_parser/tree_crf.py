"""A tree CRF over a span parser's chart: the probability of a tree, normalised over all trees.

Rather than scoring every span on its own, most of them empty, a tree CRF (Finkel et al. 2008;
Zhang, Zhou & Li 2020, "Fast and Accurate Neural CRF Constituency Parsing", supar's parser) trains
the span parser's scores the chart search uses as a whole (``span_parser_loss``): a
labelled binary tree ``T`` over ``n`` words scores ``sum over (i, j) in T of s_l(i, j) - s_0(i, j)``
(``l`` its label, label 0 "no constituent", so a span outside the tree costs nothing), and

    loss = log sum over T of exp(score(T)) - score(gold)

The partition sums over every binary bracketing and every labelling of its spans (the inside
algorithm, :func:`tree_log_partition`, with span potentials ``log sum_l exp(s_l - s_0)``). A gold
tree with n-ary nodes stands for all its binarisations, their extra spans labelled empty (potential
0): they add the same constant (the log of their number) to every tree's term, so the gold term is
the sum of its constituents' ``s_l - s_0``. Chart decoding (``decoding.chart.decode_chart``) adds
up the log-odds of each span's probability of being in the tree (:func:`span_marginals`), the
gradient of the partition (minimum Bayes risk decoding).
"""

from __future__ import annotations

import tensorflow as tf

from keras_transformer.models.span_parser.targets import IGNORE


def tree_log_partition(potentials: tf.Tensor, lengths: tf.Tensor) -> tf.Tensor:
    """``log sum over binary trees T of exp(sum over (i, j) in T of potentials[b, i, j])``, per sentence.

    ``potentials``: ``[batch, n + 1, n + 1]`` (span ``(i, j)`` covers words ``i .. j-1``; only
    ``i < j <= lengths[b]`` are read); ``lengths``: ``[batch]`` words, at least 1. Returns ``[batch]``.
    The inside algorithm, one span width at a time, all starts at once: ``inside(i, i + w)`` is kept
    twice, by start (``by_start[:, w, i]``) and by end (``by_end[:, w, i + w]``), so that the splits
    ``inside(i, i + k) + inside(i + k, i + w)`` of every span of width ``w`` are two slices.
    """
    potentials = tf.convert_to_tensor(potentials, tf.float32)
    # A batch of empty sentences (n = 0) is read as one word of potential 0: no chart is empty.
    short = tf.maximum(2 - tf.shape(potentials)[1], 0)
    potentials = tf.pad(potentials, [[0, 0], [0, short], [0, short]])
    n = tf.shape(potentials)[1] - 1
    rows = tf.range(n + 1)

    def put(chart, width, values, front):
        # Row ``width`` of an all-zero row: values shifted right by ``front``, zero-padded to n + 1.
        row = tf.pad(values, [[0, 0], [front, n + 1 - front - tf.shape(values)[1]]])
        return chart + tf.cast(tf.equal(rows, width), chart.dtype)[None, :, None] * row[:, None, :]

    zeros = tf.zeros_like(potentials)
    words = tf.linalg.diag_part(potentials, k=1)                     # inside(i, i + 1), i = 0 .. n - 1
    by_start, by_end = put(zeros, 1, words, 0), put(zeros, 1, words, 1)

    def body(width, by_start, by_end):
        left = by_start[:, 1:width, : n + 1 - width]                      # inside(i, i + k), k = 1 .. w - 1
        right = tf.reverse(by_end[:, 1:width, width:], axis=[1])         # inside(i + k, i + w), same k
        inside = tf.linalg.diag_part(potentials, k=width) + tf.reduce_logsumexp(left + right, axis=1)
        return width + 1, put(by_start, width, inside, 0), put(by_end, width, inside, width)

    _, _, by_end = tf.while_loop(lambda width, *_: width <= n, body, [tf.constant(2), by_start, by_end])
    lengths = tf.cast(lengths, tf.int32)
    return tf.gather_nd(by_end, tf.stack([tf.range(tf.shape(lengths)[0]), lengths, lengths], axis=1))


def tree_crf_losses(span_logits: tf.Tensor, span_labels: tf.Tensor) -> tf.Tensor:
    """``[batch]`` negative log-likelihoods of the gold trees (up to their binarisations' constant).

    ``span_logits``: ``[batch, n + 1, n + 1, labels]``, label 0 the empty one; ``span_labels``:
    ``[batch, n + 1, n + 1]`` gold label ids, :data:`IGNORE` where there is no span (``i >= j``, or
    past the sentence); a sentence's length is read off them.
    """
    span_logits = tf.cast(span_logits, tf.float32)
    span_labels = tf.cast(span_labels, tf.int32)
    log_odds = span_logits - span_logits[..., :1]                       # s_l - s_0; 0 for the empty label
    real = tf.not_equal(span_labels, IGNORE)
    lengths = tf.reduce_sum(tf.cast(real[:, 0, :], tf.int32), axis=1)    # spans (0, j), j = 1 .. n
    potentials = tf.where(real, tf.reduce_logsumexp(log_odds, axis=-1), 0.0)
    gold = tf.gather(log_odds, tf.maximum(span_labels, 0), axis=-1, batch_dims=3)
    gold = tf.reduce_sum(tf.where(span_labels > 0, gold, 0.0), axis=[1, 2])
    return tree_log_partition(potentials, tf.maximum(lengths, 1)) - gold


def span_marginals(potentials: tf.Tensor, lengths: tf.Tensor) -> tf.Tensor:
    """``[batch, n + 1, n + 1]``: the probability that span ``(i, j)`` is in the binary tree, summed
    over all trees weighted by :func:`tree_log_partition`'s potentials (0 where ``j > lengths[b]``).

    The gradient of the log-partition by the span potentials (the outside pass, done by autodiff):
    every tree holds ``2n - 1`` spans, the whole sentence and each word with probability 1.
    """
    potentials = tf.convert_to_tensor(potentials, tf.float32)
    with tf.GradientTape() as tape:
        tape.watch(potentials)
        log_partition = tf.reduce_sum(tree_log_partition(potentials, lengths))
    return tape.gradient(log_partition, potentials)

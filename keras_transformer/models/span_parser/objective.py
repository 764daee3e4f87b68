"""The span parser's training objective (Kitaev & Klein 2018): tree CRF loss (Zhang, Zhou & Li 2020)
and tag cross-entropy, per word, as sums that add up over batches and replicas
(:mod:`keras_transformer.training.objectives`)."""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from keras_transformer.models.span_parser.targets import IGNORE, SpanTargets
from keras_transformer.models.span_parser.tree_crf import tree_crf_losses
from keras_transformer.training.objectives import ObjectiveSums


class SpanObjective:
    """The span parser's: the gold trees' negative log-probabilities under the tree CRF plus the
    tags' cross-entropy, summed over a batch's words.

    The unit is a word, so a step's objective is the word-weighted mean of its batches' (what
    ``span_parser_loss`` gives for one batch). The gold chart and tags are read off the
    linearised target ids (:class:`~keras_transformer.models.span_parser.targets.SpanTargets`); label
    smoothing does not apply. ``correct`` counts rightly tagged words.
    """

    #: ``nll`` is a loss per word over spans and tags (a tree's, with the CRF), not a token's
    #: cross-entropy: its exp is no perplexity.
    per_token_cross_entropy = False

    def __init__(self, model, target_pieces: Sequence[str]):
        self.model = model
        self.targets = SpanTargets(target_pieces, model.labels, model.tags)

    def __call__(self, source, target_in, target_out, training: bool) -> ObjectiveSums:
        outputs = self.model(source, training=training)
        spans, tags = self.targets(target_out)
        # The model counts words by their first pieces, the targets by their tags: the same for
        # every tree whose words the tokenizer splits as training did; the common part otherwise.
        n = tf.minimum(tf.shape(outputs["tags"])[1], tf.shape(tags)[1])
        span_logits, tag_logits = outputs["spans"][:, : n + 1, : n + 1], outputs["tags"][:, :n]
        spans, tags = spans[:, : n + 1, : n + 1], tags[:, :n]

        keep = tf.not_equal(tags, IGNORE)
        tag_losses = tf.nn.sparse_softmax_cross_entropy_with_logits(tf.maximum(tags, 0), tag_logits)
        words = tf.reduce_sum(tf.cast(keep, tf.float32))
        total = tf.reduce_sum(tree_crf_losses(span_logits, spans)) + tf.reduce_sum(tf.where(keep, tag_losses, 0.0))
        right = tf.equal(tf.argmax(tag_logits, axis=-1, output_type=tf.int32), tags) & keep
        return ObjectiveSums(total, total, total, tf.reduce_sum(tf.cast(right, tf.float32)), words)

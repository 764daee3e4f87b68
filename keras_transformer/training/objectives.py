"""What a training step minimises, per model: sums that add up over batches and replicas.

A step accumulates the gradients of several batches on several replicas and divides by the
global count of the objective's unit (section 5.1's token batching), so each objective returns
sums and its count, never means. :class:`TranslationObjective` is section 5.4's label-smoothed
cross-entropy per target token (plus the word tagger's, for a parser with one);
:class:`SpanObjective` is the span parser's (Kitaev & Klein 2018) tree CRF loss (Zhang, Zhou & Li
2020) and tag cross-entropy, per word. Both read the same batches ``((source, target_in), target_out)``.
:func:`objective_for` picks the model's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import tensorflow as tf

from keras_transformer.training.losses import correct_tokens, label_smoothed_nll


class ObjectiveSums(NamedTuple):
    """A batch's sums: ``total`` (what the gradient minimises), ``loss`` (reported, as trained),
    ``nll`` (unsmoothed cross-entropy; only when not training, else ``loss``), ``correct``
    (right predictions) and ``count`` (the unit the others are divided by)."""

    total: tf.Tensor
    loss: tf.Tensor
    nll: tf.Tensor
    correct: tf.Tensor
    count: tf.Tensor


class TranslationObjective:
    """Section 5.4: label-smoothed cross-entropy over the real target tokens; the unit is a target token.

    A model with a word tagger (``config.tagger``) also learns it from the slots of the target;
    its loss is added to ``total``, not to the reported ``loss``, which stays the decoder's.
    """

    #: ``nll`` is a cross-entropy per target token: its exp is a perplexity.
    per_token_cross_entropy = True

    def __init__(self, model, label_smoothing: float):
        self.model, self.label_smoothing = model, float(label_smoothing)
        self.tagged = getattr(model.config, "tagger", "none") != "none"

    def __call__(self, source, target_in, target_out, training: bool) -> ObjectiveSums:
        from keras_transformer.layers.word_alignment import tagging_loss

        model, pad_id = self.model, self.model.config.pad_id
        # Logits at the real target tokens only: padding needs no projection onto the vocabulary.
        real = tf.not_equal(target_out, pad_id)
        encoded = model.encode(source, training=training)
        word_states = model.word_states(source, encoded)
        logits = model.decode(target_in, encoded, model.padding_mask(source), training=training,
                              logits_mask=real, word_states=word_states).logits
        labels = tf.boolean_mask(target_out, real)
        losses, mask = label_smoothed_nll(labels, logits, self.label_smoothing, pad_id)
        loss = tf.reduce_sum(losses)
        total = loss
        if self.tagged:
            total += tagging_loss(model.word_alignment, word_states, target_in, target_out, self.label_smoothing,
                                  pad_id)
        nll = loss if training or not self.label_smoothing else tf.reduce_sum(
            label_smoothed_nll(labels, logits, 0.0, pad_id)[0])
        return ObjectiveSums(total, loss, nll, tf.reduce_sum(correct_tokens(labels, logits, mask)),
                             tf.reduce_sum(mask))


class SpanObjective:
    """The span parser's: the gold trees' negative log-probabilities under the tree CRF plus the
    tags' cross-entropy, summed over a batch's words.

    The unit is a word, so a step's objective is the word-weighted mean of its batches' (what
    ``span_parser_loss`` gives for one batch). The gold chart and tags are read off the
    linearised target ids (:class:`~keras_transformer.models.span_targets.SpanTargets`); label
    smoothing does not apply. ``correct`` counts rightly tagged words.
    """

    #: ``nll`` is a loss per word over spans and tags (a tree's, with the CRF), not a token's
    #: cross-entropy: its exp is no perplexity.
    per_token_cross_entropy = False

    def __init__(self, model, target_pieces: Sequence[str]):
        from keras_transformer.models.span_targets import SpanTargets

        self.model = model
        self.targets = SpanTargets(target_pieces, model.labels, model.tags)

    def __call__(self, source, target_in, target_out, training: bool) -> ObjectiveSums:
        from keras_transformer.models.span_parser import IGNORE
        from keras_transformer.training.tree_crf import tree_crf_losses

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


def objective_for(model, label_smoothing: float = 0.0, target_pieces: Sequence[str] | None = None):
    """The training objective of ``model``: a span parser's needs the target vocabulary's pieces."""
    from keras_transformer.models.span_parser import SpanParser

    if isinstance(model, SpanParser):
        if target_pieces is None:
            raise ValueError("a span parser learns from linearised trees: give the target vocabulary's pieces")
        return SpanObjective(model, target_pieces)
    return TranslationObjective(model, label_smoothing)

"""What a training step minimises, per model: sums that add up over batches and replicas.

A step accumulates the gradients of several batches on several replicas and divides by the
global count of the objective's unit (section 5.1's token batching), so each objective returns
sums and its count, never means. :class:`TranslationObjective` is section 5.4's label-smoothed
cross-entropy per target token (plus the word tagger's, for a parser with one); the span parser's
lives with it (:mod:`keras_transformer.models.span_parser.objective`). Every objective reads the
same batches ``((source, target_in), target_out)``; a model names its own (``model.objective``).
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


def objective_for(model, label_smoothing: float = 0.0, target_pieces: Sequence[str] | None = None):
    """The training objective of ``model``, as the model says (``model.objective``)."""
    return model.objective(label_smoothing, target_pieces)

"""Label-smoothed cross-entropy over non-padding tokens (section 5.4, "Label Smoothing")."""

from __future__ import annotations

import keras
from keras import ops


def label_smoothed_nll(labels, logits, label_smoothing=0.1, pad_id=0):
    """Per-token smoothed cross-entropy and the non-padding mask.

    The target distribution puts ``1 - label_smoothing`` on the reference token and spreads
    ``label_smoothing`` uniformly over the other ``V - 1`` tokens (epsilon_ls of section 5.4).

    Args:
        labels: int ``[batch, length]`` reference ids, ``pad_id`` where there is no token.
        logits: ``[batch, length, vocab]``, any float dtype (computed in float32).

    Returns:
        ``(losses [batch, length] float32 with zeros at padding, mask [batch, length] float32)``.
    """
    logits = ops.cast(logits, "float32")
    labels = ops.cast(labels, "int32")
    vocab_size = ops.shape(logits)[-1]
    # The fused sparse cross-entropy: its gradient is softmax - one_hot, computed in place. Taking
    # the reference entry out of log_softmax instead scatters a dense [tokens, vocab] gradient.
    nll = ops.sparse_categorical_crossentropy(labels, logits, from_logits=True)
    if label_smoothing:
        off_value = label_smoothing / ops.cast(vocab_size - 1, "float32")
        # -sum_j log p_j = V * logsumexp(logits) - sum_j logits_j, without a [.., vocab] log_softmax.
        total = ops.cast(vocab_size, "float32") * ops.logsumexp(logits, axis=-1) - ops.sum(logits, axis=-1)
        nll = (1.0 - label_smoothing) * nll + off_value * (total - nll)
    mask = ops.cast(ops.not_equal(labels, pad_id), "float32")
    return nll * mask, mask


def correct_tokens(labels, logits, mask):
    """1.0 where the arg-max prediction is the reference token, times ``mask`` (token accuracy's numerator)."""
    predictions = ops.cast(ops.argmax(logits, axis=-1), "int32")
    return ops.cast(ops.equal(predictions, ops.cast(labels, "int32")), "float32") * mask


@keras.saving.register_keras_serializable(package="keras_transformer")
class LabelSmoothedCrossEntropy(keras.losses.Loss):
    """Mean label-smoothed cross-entropy per non-padding target token.

    The sum over all non-padding tokens of the batch is divided by their number, not by the
    number of sentences or of padded positions: long and short sentences weigh per token, as in
    the paper's token-based batches. ``y_pred`` are logits.
    """

    def __init__(self, label_smoothing=0.1, pad_id=0, name="label_smoothed_cross_entropy", **kwargs):
        super().__init__(name=name, **kwargs)
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"`label_smoothing` must be in [0, 1), received {label_smoothing!r}")
        self.label_smoothing = label_smoothing
        self.pad_id = pad_id

    def call(self, y_true, y_pred):
        losses, mask = label_smoothed_nll(y_true, y_pred, self.label_smoothing, self.pad_id)
        # Already a per-token mean: the Loss base class' reduction of a scalar leaves it as is.
        return ops.sum(losses) / ops.maximum(ops.sum(mask), 1.0)

    def get_config(self):
        config = super().get_config()
        config.update({"label_smoothing": self.label_smoothing, "pad_id": self.pad_id})
        return config

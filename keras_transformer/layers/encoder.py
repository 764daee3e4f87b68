"""One encoder layer: self-attention and feed-forward sublayers (section 3.1, Figure 1 left)."""

from __future__ import annotations

import keras
from keras import ops

from keras_transformer.layers.layer_base import TransformerLayerBase


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerEncoderLayer(TransformerLayerBase):
    """Multi-head self-attention then a position-wise FFN, each wrapped in ``PostNormResidual``.

    Call arguments:
        inputs: ``[batch, length, d_model]``.
        padding_mask: boolean ``[batch, length]``, ``True`` at real tokens; padded keys get no
            attention, so padding cannot change the outputs at real positions.
        mask: the Keras mask of ``inputs`` (``Embedding(mask_zero=True)``), which Keras passes
            here by itself: a padding mask like ``padding_mask`` (given both, a key needs both).
            The output carries it.
        return_attention_scores: also return the self-attention weights
            ``[batch, heads, length, length]`` (for pictures like the paper's Figures 3-5).
    """

    def build(self, input_shape):
        self.self_attention = self._attention("self_attention", input_shape, input_shape)
        self.self_attention_residual = self._residual("self_attention_residual", input_shape)
        self.feed_forward = self._feed_forward(input_shape)
        self.feed_forward_residual = self._residual("feed_forward_residual", input_shape)
        self.built = True

    def call(self, inputs, padding_mask=None, training=None, return_attention_scores=False, mask=None):
        keys = [ops.cast(m, "bool") for m in (padding_mask, mask) if m is not None]
        mask = None if not keys else (keys[0] if len(keys) == 1 else ops.logical_and(*keys))[:, None, None, :]
        h = self.self_attention_residual.normalize(inputs)
        attended, weights = self.self_attention(
            h, h, attention_mask=mask, training=training, return_attention_scores=True
        )
        x = self.self_attention_residual(inputs, attended, training=training)
        h = self.feed_forward(self.feed_forward_residual.normalize(x), training=training)
        x = self.feed_forward_residual(x, h, training=training)
        return (x, weights) if return_attention_scores else x

    def compute_mask(self, inputs, previous_mask=None):
        return previous_mask

"""One decoder layer: masked self-attention, encoder-decoder attention, FFN (3.1, Figure 1 right)."""

from __future__ import annotations

import keras
from keras import ops

from keras_transformer.layers.layer_base import TransformerLayerBase


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerDecoderLayer(TransformerLayerBase):
    """Masked self-attention, attention over the encoder output and the FFN, each residual.

    Call arguments:
        inputs: ``[batch, length, d_model]`` decoder states.
        encoder_outputs: ``[batch, source_length, d_model]`` (unused when ``cross_cache`` holds
            their projections already).
        self_attention_mask: boolean, broadcastable to ``[batch, heads, length, keys]``; the
            causal mask of section 3.2.3, built by the caller (it depends on ``cache_index``).
        encoder_padding_mask: boolean ``[batch, source_length]``, ``True`` at real tokens.
        inputs_mask, encoder_outputs_mask: the Keras masks of ``inputs`` and ``encoder_outputs``,
            which Keras passes here by itself: padded target keys get no self-attention (with the
            causal mask), padded source keys no cross-attention (given both, a source key needs
            ``encoder_padding_mask`` and ``encoder_outputs_mask``). The output carries ``inputs``' mask.
        self_cache, cache_index: incremental decoding (see ``MultiHeadAttention``); the cache
            holds this layer's keys and values of all earlier target positions.
        cross_cache: the projected encoder outputs from ``cross_attention.compute_cache``.
        return_attention_scores: also return ``{"self": weights, "cross": weights}``.

    Returns ``outputs``, then the updated ``self_cache`` if one was given, then the weights.
    """

    def build(self, inputs_shape, encoder_outputs_shape=None):
        encoder_outputs_shape = encoder_outputs_shape or inputs_shape
        self.self_attention = self._attention("self_attention", inputs_shape, inputs_shape)
        self.self_attention_residual = self._residual("self_attention_residual", inputs_shape)
        self.feed_forward = self._feed_forward(inputs_shape)
        self.feed_forward_residual = self._residual("feed_forward_residual", inputs_shape)
        # Made last, as before this layer stopped inheriting from the encoder layer: the same
        # seed gives the same initial weights.
        self.cross_attention = self._attention("cross_attention", inputs_shape, encoder_outputs_shape)
        self.cross_attention_residual = self._residual("cross_attention_residual", inputs_shape)
        self.built = True

    def call(
        self,
        inputs,
        encoder_outputs=None,
        self_attention_mask=None,
        encoder_padding_mask=None,
        self_cache=None,
        cache_index=None,
        cross_cache=None,
        training=None,
        return_attention_scores=False,
        inputs_mask=None,
        encoder_outputs_mask=None,
    ):
        if inputs_mask is not None:
            keys = ops.cast(inputs_mask, "bool")[:, None, None, :]
            self_attention_mask = keys if self_attention_mask is None else ops.logical_and(
                ops.cast(self_attention_mask, "bool"), keys)
        if encoder_outputs_mask is not None:
            encoder_padding_mask = encoder_outputs_mask if encoder_padding_mask is None else ops.logical_and(
                ops.cast(encoder_padding_mask, "bool"), ops.cast(encoder_outputs_mask, "bool"))
        h = self.self_attention_residual.normalize(inputs)
        self_results = self.self_attention(
            h,
            h,
            attention_mask=self_attention_mask,
            cache=self_cache,
            cache_index=cache_index,
            training=training,
            return_attention_scores=True,
        )
        if self_cache is not None:
            attended, self_cache, self_weights = self_results
        else:
            attended, self_weights = self_results
        x = self.self_attention_residual(inputs, attended, training=training)

        cross_mask = None if encoder_padding_mask is None else ops.cast(encoder_padding_mask, "bool")[:, None, None, :]
        attended, cross_weights = self.cross_attention(
            self.cross_attention_residual.normalize(x),
            encoder_outputs,
            attention_mask=cross_mask,
            cache=cross_cache,
            training=training,
            return_attention_scores=True,
        )
        x = self.cross_attention_residual(x, attended, training=training)
        h = self.feed_forward(self.feed_forward_residual.normalize(x), training=training)
        x = self.feed_forward_residual(x, h, training=training)

        results = [x]
        if self_cache is not None:
            results.append(self_cache)
        if return_attention_scores:
            results.append({"self": self_weights, "cross": cross_weights})
        return results[0] if len(results) == 1 else tuple(results)

    def compute_mask(self, inputs, previous_mask=None):
        return previous_mask

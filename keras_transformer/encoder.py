"""One encoder layer: self-attention and feed-forward sublayers (section 3.1, Figure 1 left)."""

from __future__ import annotations

import keras

from keras_transformer.attention import MultiHeadAttention
from keras_transformer.feed_forward import PositionwiseFeedForward
from keras_transformer.residual import PostNormResidual


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerEncoderLayer(keras.layers.Layer):
    """Multi-head self-attention then a position-wise FFN, each wrapped in ``PostNormResidual``.

    Call arguments:
        inputs: ``[batch, length, d_model]``.
        padding_mask: boolean ``[batch, length]``, ``True`` at real tokens; padded keys get no
            attention, so padding cannot change the outputs at real positions.
        return_attention_scores: also return the self-attention weights
            ``[batch, heads, length, length]`` (for pictures like the paper's Figures 3-5).
    """

    def __init__(
        self,
        num_heads,
        d_ff,
        d_k=None,
        d_v=None,
        dropout=0.1,
        attention_dropout=0.0,
        relu_dropout=0.0,
        layer_norm_epsilon=1e-6,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.d_ff = d_ff
        self.d_k = d_k
        self.d_v = d_v
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.relu_dropout = relu_dropout
        self.layer_norm_epsilon = layer_norm_epsilon

    def build(self, input_shape):
        d_model = input_shape[-1]
        if d_model % self.num_heads:
            raise ValueError(
                f"d_model={d_model} is not divisible by num_heads={self.num_heads}"
            )
        d_k = self.d_k or d_model // self.num_heads
        self.self_attention = MultiHeadAttention(
            self.num_heads,
            d_k,
            self.d_v or d_model // self.num_heads,
            dropout=self.attention_dropout,
            dtype=self.dtype_policy,
            name="self_attention",
        )
        self.self_attention.build(input_shape, input_shape)
        self.self_attention_residual = PostNormResidual(
            self.dropout, self.layer_norm_epsilon, dtype=self.dtype_policy, name="self_attention_residual"
        )
        self.self_attention_residual.build(input_shape)
        self.feed_forward = PositionwiseFeedForward(
            self.d_ff, self.relu_dropout, dtype=self.dtype_policy, name="feed_forward"
        )
        self.feed_forward.build(input_shape)
        self.feed_forward_residual = PostNormResidual(
            self.dropout, self.layer_norm_epsilon, dtype=self.dtype_policy, name="feed_forward_residual"
        )
        self.feed_forward_residual.build(input_shape)
        self.built = True

    def call(self, inputs, padding_mask=None, training=None, return_attention_scores=False):
        mask = None if padding_mask is None else padding_mask[:, None, None, :]
        attended, weights = self.self_attention(
            inputs, inputs, attention_mask=mask, training=training, return_attention_scores=True
        )
        x = self.self_attention_residual(inputs, attended, training=training)
        x = self.feed_forward_residual(x, self.feed_forward(x, training=training), training=training)
        return (x, weights) if return_attention_scores else x

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "d_ff": self.d_ff,
                "d_k": self.d_k,
                "d_v": self.d_v,
                "dropout": self.dropout,
                "attention_dropout": self.attention_dropout,
                "relu_dropout": self.relu_dropout,
                "layer_norm_epsilon": self.layer_norm_epsilon,
            }
        )
        return config

"""What the encoder and decoder layers share: hyperparameters and the making of sublayers (3.1).

Each layer of section 3.1 is a stack of sublayers, every one wrapped as
``LayerNorm(x + Dropout(Sublayer(x)))`` (with ``norm_first``: ``x + Dropout(Sublayer(LayerNorm(x)))``).
The encoder layer stacks self-attention and the FFN, the
decoder layer masked self-attention, attention over the encoder output and the FFN; each builds
and calls its own stack, and this base only holds the settings and makes the pieces.
"""

from __future__ import annotations

import keras

from keras_transformer.layers.attention import MultiHeadAttention
from keras_transformer.layers.feed_forward import PositionwiseFeedForward
from keras_transformer.layers.residual import PostNormResidual, PreNormResidual
from keras_transformer.models.config import head_size


class TransformerLayerBase(keras.layers.Layer):
    """Settings of one encoder or decoder layer; ``d_k``/``d_v`` default to d_model / heads;
    ``norm_first`` puts each LayerNorm before its sublayer instead of after the residual sum."""

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
        norm_first=False,
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
        self.norm_first = norm_first

    def _attention(self, name, query_shape, value_shape):
        d_model = query_shape[-1]
        if d_model % self.num_heads:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={self.num_heads}")
        attention = MultiHeadAttention(
            self.num_heads,
            head_size(d_model, self.num_heads, self.d_k),
            head_size(d_model, self.num_heads, self.d_v),
            dropout=self.attention_dropout,
            dtype=self.dtype_policy,
            name=name,
        )
        attention.build(query_shape, value_shape)
        return attention

    def _residual(self, name, input_shape):
        kind = PreNormResidual if self.norm_first else PostNormResidual
        residual = kind(self.dropout, self.layer_norm_epsilon, dtype=self.dtype_policy, name=name)
        residual.build(input_shape)
        return residual

    def _feed_forward(self, input_shape):
        feed_forward = PositionwiseFeedForward(self.d_ff, self.relu_dropout, dtype=self.dtype_policy,
                                               name="feed_forward")
        feed_forward.build(input_shape)
        return feed_forward

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
                "norm_first": self.norm_first,
            }
        )
        return config

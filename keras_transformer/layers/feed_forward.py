"""Position-wise feed-forward network, equation (2) of section 3.3."""

from __future__ import annotations

import keras


@keras.saving.register_keras_serializable(package="keras_transformer")
class PositionwiseFeedForward(keras.layers.Layer):
    """FFN(x) = max(0, x W1 + b1) W2 + b2, applied to each position separately.

    ``relu_dropout`` (0 in the paper) optionally drops the inner activations.
    """

    def __init__(self, d_ff, relu_dropout=0.0, activation="relu", **kwargs):
        super().__init__(**kwargs)
        if not isinstance(d_ff, int) or d_ff <= 0:
            raise ValueError(f"`d_ff` must be a positive integer, received d_ff={d_ff!r}")
        self.d_ff = d_ff
        self.relu_dropout = relu_dropout
        self.activation = activation
        # Position-wise: a padded position stays padded (the output carries the input's mask).
        self.supports_masking = True

    def build(self, input_shape):
        d_model = input_shape[-1]
        self.inner = keras.layers.Dense(
            self.d_ff, activation=self.activation, dtype=self.dtype_policy, name="inner"
        )
        self.inner.build(input_shape)
        self.inner_dropout = keras.layers.Dropout(self.relu_dropout, dtype=self.dtype_policy)
        self.outer = keras.layers.Dense(d_model, dtype=self.dtype_policy, name="outer")
        self.outer.build(tuple(input_shape[:-1]) + (self.d_ff,))
        self.built = True

    def call(self, inputs, training=None):
        hidden = self.inner_dropout(self.inner(inputs), training=training)
        return self.outer(hidden)

    def get_config(self):
        config = super().get_config()
        config.update(
            {"d_ff": self.d_ff, "relu_dropout": self.relu_dropout, "activation": self.activation}
        )
        return config

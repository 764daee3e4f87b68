"""The residual connection around every sublayer (sections 3.1 and 5.4), post-norm or pre-norm."""

from __future__ import annotations

import keras


@keras.saving.register_keras_serializable(package="keras_transformer")
class PostNormResidual(keras.layers.Layer):
    """LayerNorm(x + Dropout(Sublayer(x))).

    "The output of each sub-layer is LayerNorm(x + Sublayer(x))" (3.1), with "dropout to the
    output of each sub-layer, before it is added to the sub-layer input and normalized" (5.4).
    ``call(residual, sublayer_output)`` takes the sublayer's output already computed, so one
    class serves the self-attention, encoder-decoder attention and feed-forward sublayers;
    ``normalize(x)`` is what the sublayer reads: ``x`` itself here.
    """

    def __init__(self, dropout=0.1, epsilon=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.dropout = dropout
        self.epsilon = epsilon

    def build(self, residual_shape, sublayer_output_shape=None):
        self.dropout_layer = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=self.epsilon, dtype=self.dtype_policy, name="layer_norm"
        )
        self.layer_norm.build(residual_shape)
        self.built = True

    def normalize(self, inputs):
        return inputs

    def call(self, residual, sublayer_output, training=None):
        return self.layer_norm(residual + self.dropout_layer(sublayer_output, training=training))

    def get_config(self):
        config = super().get_config()
        config.update({"dropout": self.dropout, "epsilon": self.epsilon})
        return config


@keras.saving.register_keras_serializable(package="keras_transformer")
class PreNormResidual(PostNormResidual):
    """x + Dropout(Sublayer(LayerNorm(x))): the sublayer reads ``normalize(x)``.

    Not the paper's order but tensor2tensor's later default (Xiong et al., 2020, "On Layer
    Normalization in the Transformer Architecture"): the residual stream is never normalized, so
    gradients reach the lower layers unscaled and training tolerates larger rates and shorter
    warm-ups. The stack then ends in one more LayerNorm (``Transformer``'s ``norm_first``).
    """

    def normalize(self, inputs):
        return self.layer_norm(inputs)

    def call(self, residual, sublayer_output, training=None):
        return residual + self.dropout_layer(sublayer_output, training=training)

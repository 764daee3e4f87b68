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
        # Position-wise: a padded position stays padded (the output carries the residual's mask).
        self.supports_masking = True

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

    def compute_output_shape(self, residual_shape, sublayer_output_shape=None):
        # Given, not traced: a traced call adds the residual as it comes (float32 in a symbolic
        # call under mixed precision) to the sublayer output in the compute dtype, and fails.
        return tuple(residual_shape)

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

    The norm is this layer's weight but not part of its ``call``: Keras trains what a model's
    ``call`` reaches, and the norm is reached through the enclosing encoder or decoder layer's
    ``call``, which reads ``normalize(x)`` (the ``LayerNormalization`` runs through its own
    ``__call__``, so autocasting and Keras masks apply). Trained alone through ``call`` this layer's
    norm gets no gradient, as keras-hub's pre-norm ``TransformerEncoder`` keeps its norms outside
    the residual sum. It is kept here rather than moved into the encoder and decoder layers so that
    pre-norm weights keep their paths (``.../self_attention_residual/layer_norm/gamma``) and every
    trained pre-norm model and checkpoint (the ``demo`` and ``cpu-small`` presets) still loads.
    """

    def normalize(self, inputs):
        return self.layer_norm(inputs)

    def call(self, residual, sublayer_output, training=None):
        return residual + self.dropout_layer(sublayer_output, training=training)

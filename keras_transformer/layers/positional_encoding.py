"""Positional encodings: the sinusoids of section 3.5 and the learned alternative (Table 3 (E))."""

from __future__ import annotations

import math

import keras
from keras import ops


def sinusoidal_encoding(positions, d_model, max_wavelength=10000.0, dtype="float32"):
    """PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(...), section 3.5.

    Args:
        positions: 1-D tensor of (float or int) positions.
        d_model: even encoding depth.

    Returns ``[len(positions), d_model]`` with sines at even and cosines at odd indices.
    """
    positions = ops.cast(positions, "float32")
    i = ops.arange(d_model // 2, dtype="float32")
    inv_freq = ops.exp(-(2.0 * i / d_model) * math.log(max_wavelength))
    angles = positions[:, None] * inv_freq[None, :]
    # Interleave so that sin lands on 2i and cos on 2i+1, exactly as the formula states.
    encoding = ops.reshape(ops.stack([ops.sin(angles), ops.cos(angles)], axis=-1), (-1, d_model))
    return ops.cast(encoding, dtype)


@keras.saving.register_keras_serializable(package="keras_transformer")
class SinusoidalPositionalEncoding(keras.layers.Layer):
    """Fixed sinusoidal positions (section 3.5); no weights, any length.

    ``call(inputs, start_index=0)`` returns the encodings of positions ``start_index ...
    start_index + length - 1`` broadcast to the shape of ``inputs [batch, length, d_model]``;
    ``start_index`` is how incremental decoding encodes the position of the next token.
    """

    def __init__(self, max_wavelength=10000.0, **kwargs):
        super().__init__(**kwargs)
        self.max_wavelength = max_wavelength

    def call(self, inputs, start_index=0):
        length, d_model = ops.shape(inputs)[1], inputs.shape[-1]
        positions = ops.arange(length, dtype="float32") + ops.cast(start_index, "float32")
        encoding = sinusoidal_encoding(positions, d_model, self.max_wavelength, self.compute_dtype)
        return ops.broadcast_to(encoding[None], ops.shape(inputs))

    def get_config(self):
        config = super().get_config()
        config["max_wavelength"] = self.max_wavelength
        return config


@keras.saving.register_keras_serializable(package="keras_transformer")
class LearnedPositionalEmbedding(keras.layers.Layer):
    """Learned positional embeddings, Table 3 row (E); at most ``max_length`` positions."""

    def __init__(self, max_length, initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        if not isinstance(max_length, int) or max_length <= 0:
            raise ValueError(f"`max_length` must be a positive integer, received {max_length!r}")
        self.max_length = max_length
        self.initializer = keras.initializers.get(initializer)

    def build(self, input_shape):
        self.position_embeddings = self.add_weight(
            name="embeddings",
            shape=(self.max_length, input_shape[-1]),
            initializer=self.initializer,
        )
        self.built = True

    def call(self, inputs, start_index=0):
        length, d_model = ops.shape(inputs)[1], inputs.shape[-1]
        table = ops.cast(self.position_embeddings, self.compute_dtype)
        encoding = ops.slice(table, (start_index, 0), (length, d_model))
        return ops.broadcast_to(encoding[None], ops.shape(inputs))

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "max_length": self.max_length,
                "initializer": keras.initializers.serialize(self.initializer),
            }
        )
        return config

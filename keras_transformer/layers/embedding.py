"""Token embeddings scaled by sqrt(d_model) and tied to the pre-softmax projection (section 3.4)."""

from __future__ import annotations

import math

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_transformer")
class ScaledEmbedding(keras.layers.Layer):
    """Learned embeddings; "in the embedding layers, we multiply those weights by sqrt(d_model)".

    With a shared vocabulary one instance serves the encoder input, the decoder input and, via
    ``project``, the pre-softmax linear transformation (section 3.4).
    The initial weights have standard deviation d_model^-0.5, so that after the sqrt(d_model)
    scaling the embeddings start at unit scale, comparable to the positional encodings.
    """

    def __init__(self, vocab_size, d_model, scale=True, **kwargs):
        super().__init__(**kwargs)
        for name, value in (("vocab_size", vocab_size), ("d_model", d_model)):
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"`{name}` must be a positive integer, received {name}={value!r}")
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.scale = scale

    def build(self, input_shape=None):
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.vocab_size, self.d_model),
            initializer=keras.initializers.RandomNormal(stddev=self.d_model**-0.5),
        )
        self.built = True

    def call(self, token_ids):
        table = ops.cast(self.embeddings, self.compute_dtype)
        outputs = ops.take(table, ops.cast(token_ids, "int32"), axis=0)
        if self.scale:
            outputs = outputs * ops.cast(math.sqrt(self.d_model), self.compute_dtype)
        return outputs

    def project(self, hidden):
        """Pre-softmax logits ``hidden @ embeddings^T`` with the same weight matrix."""
        table = ops.cast(self.embeddings, self.compute_dtype)
        return ops.matmul(hidden, ops.transpose(table))

    def compute_output_shape(self, input_shape):
        # Built without a shape (the vocabulary is shared by inputs of any length).
        input_shape = (None, None) if input_shape is None else tuple(input_shape)
        return input_shape + (self.d_model,)

    def get_config(self):
        config = super().get_config()
        config.update({"vocab_size": self.vocab_size, "d_model": self.d_model, "scale": self.scale})
        return config

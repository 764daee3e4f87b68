"""Keras 3 layers and models of "Attention Is All You Need" (Vaswani et al., 2017).

The TensorFlow backend is selected unless the user chose another: tf.data, tf.distribute and
tensorflow-text are part of the product.
"""

import os

from keras_transformer.lazy_exports import lazy_exports

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

# Imported on first use (PEP 562): a command that only reads settings or presets must not wait for
# Keras and TensorFlow. Importing a name imports its module, which registers its layers with Keras.
_EXPORTS = {
    'MultiHeadAttention': 'keras_transformer.attention',
    'scaled_dot_product_attention': 'keras_transformer.attention',
    'TransformerConfig': 'keras_transformer.config',
    'TransformerDecoderLayer': 'keras_transformer.decoder',
    'ScaledEmbedding': 'keras_transformer.embedding',
    'TransformerEncoderLayer': 'keras_transformer.encoder',
    'PositionwiseFeedForward': 'keras_transformer.feed_forward',
    'LabelSmoothedCrossEntropy': 'keras_transformer.losses',
    'label_smoothed_nll': 'keras_transformer.losses',
    'MaskedAccuracy': 'keras_transformer.metrics',
    'Perplexity': 'keras_transformer.metrics',
    'LearnedPositionalEmbedding': 'keras_transformer.positional_encoding',
    'SinusoidalPositionalEncoding': 'keras_transformer.positional_encoding',
    'sinusoidal_encoding': 'keras_transformer.positional_encoding',
    'Preset': 'keras_transformer.presets',
    'get_preset': 'keras_transformer.presets',
    'preset_names': 'keras_transformer.presets',
    'PostNormResidual': 'keras_transformer.residual',
    'PreNormResidual': 'keras_transformer.residual',
    'TransformerSchedule': 'keras_transformer.schedules',
    'transformer_adam': 'keras_transformer.schedules',
    'Transformer': 'keras_transformer.transformer',
    'causal_mask': 'keras_transformer.transformer',
}


__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)


__all__ = [
    "LabelSmoothedCrossEntropy",
    "LearnedPositionalEmbedding",
    "MaskedAccuracy",
    "MultiHeadAttention",
    "Perplexity",
    "PositionwiseFeedForward",
    "PostNormResidual",
    "PreNormResidual",
    "Preset",
    "ScaledEmbedding",
    "SinusoidalPositionalEncoding",
    "Transformer",
    "TransformerConfig",
    "TransformerDecoderLayer",
    "TransformerEncoderLayer",
    "TransformerSchedule",
    "causal_mask",
    "get_preset",
    "label_smoothed_nll",
    "preset_names",
    "scaled_dot_product_attention",
    "sinusoidal_encoding",
    "transformer_adam",
]

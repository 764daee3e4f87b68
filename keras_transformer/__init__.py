"""Keras 3 layers and models of "Attention Is All You Need" (Vaswani et al., 2017).

The TensorFlow backend is selected unless the user chose another: tf.data, tf.distribute and
tensorflow-text are part of the product.
"""

import os

from keras_transformer.lazy_exports import lazy_exports

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

# Imported on first use (PEP 562): a command that only reads settings or presets must not wait for
# Keras and TensorFlow. Importing a name imports its module, which registers its layers with Keras.
_MODULES = {
    "keras_transformer.layers.attention": ("MultiHeadAttention", "scaled_dot_product_attention", "causal_mask"),
    "keras_transformer.layers.embedding": ("ScaledEmbedding",),
    "keras_transformer.layers.positional_encoding": ("LearnedPositionalEmbedding", "SinusoidalPositionalEncoding",
                                                     "sinusoidal_encoding"),
    "keras_transformer.layers.feed_forward": ("PositionwiseFeedForward",),
    "keras_transformer.layers.residual": ("PostNormResidual", "PreNormResidual"),
    "keras_transformer.layers.encoder": ("TransformerEncoderLayer",),
    "keras_transformer.layers.decoder": ("TransformerDecoderLayer",),
    "keras_transformer.models.config": ("TransformerConfig", "SpanParserConfig"),
    "keras_transformer.models.transformer": ("Transformer",),
    "keras_transformer.models.span_parser": ("SpanParser",),
    "keras_transformer.models.span_parser.chart_parser": ("ChartParser",),
    "keras_transformer.models.presets": ("Preset", "get_preset", "preset_names"),
    "keras_transformer.decoding.settings": ("DecodingSettings",),
    "keras_transformer.training.losses": ("LabelSmoothedCrossEntropy", "label_smoothed_nll"),
    "keras_transformer.training.metrics": ("MaskedAccuracy", "Perplexity"),
    "keras_transformer.training.schedules": ("TransformerSchedule", "transformer_adam"),
}
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names}


__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)


__all__ = sorted(_EXPORTS)

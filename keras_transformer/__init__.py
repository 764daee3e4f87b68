"""Keras 3 layers and models of "Attention Is All You Need" (Vaswani et al., 2017).

The TensorFlow backend is selected unless the user chose another: tf.data, tf.distribute and
tensorflow-text are part of the product.
"""

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from keras_transformer.attention import MultiHeadAttention, scaled_dot_product_attention
from keras_transformer.config import TransformerConfig
from keras_transformer.decoder import TransformerDecoderLayer
from keras_transformer.embedding import ScaledEmbedding
from keras_transformer.encoder import TransformerEncoderLayer
from keras_transformer.feed_forward import PositionwiseFeedForward
from keras_transformer.losses import LabelSmoothedCrossEntropy, label_smoothed_nll
from keras_transformer.metrics import MaskedAccuracy, Perplexity
from keras_transformer.positional_encoding import (
    LearnedPositionalEmbedding,
    SinusoidalPositionalEncoding,
    sinusoidal_encoding,
)
from keras_transformer.presets import Preset, get_preset, preset_names
from keras_transformer.residual import PostNormResidual, PreNormResidual
from keras_transformer.schedules import TransformerSchedule, transformer_adam
from keras_transformer.transformer import Transformer, causal_mask

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

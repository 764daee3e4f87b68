"""A model saved as a ``.keras`` file, loaded with every model class registered, and the decoder it
calls for: section 6.1's beam search for a Transformer, the chart search for a span parser.

Here rather than beside the :class:`~keras_transformer.decoding.translator.Translator`: loading a file
needs the model classes, and a model makes its own decoder (``model.decoder``), so the decoding
modules do not import the models.
"""

from __future__ import annotations

import logging
from pathlib import Path

import keras

import keras_transformer.models.span_parser  # noqa: F401  (registers the span parser's classes)
import keras_transformer.models.transformer  # noqa: F401  (registers the Transformer's classes)
from keras_transformer.checkpoints.model_checkpoint import read_model_config
from keras_transformer.decoding.settings import DecodingSettings
from keras_transformer.models.presets import get_preset, preset_names
from keras_transformer.tokenizer import SubwordTokenizer

logger = logging.getLogger(__name__)


def load_translator(model_path, tokenizer_path, target_tokenizer_path=None, decoding=None):
    """The decoder a saved model calls for (``model.decoder``): a
    :class:`~keras_transformer.decoding.translator.Translator` for a ``Transformer``, a chart parser
    for a span parser (which reads only the source tokenizer). Both take ``translate(sentences,
    n_best=...)``. ``decoding`` (default: the model's own, else its run preset's,
    :func:`run_preset_decoding`) is how it decodes."""
    model = keras.saving.load_model(model_path, compile=False)
    tokenizer = SubwordTokenizer(tokenizer_path)
    target = SubwordTokenizer(target_tokenizer_path) if target_tokenizer_path else None
    return model.decoder(tokenizer, target, decoding or run_preset_decoding(model, model_path))


def run_preset_decoding(model, model_path) -> DecodingSettings | None:
    """The decoding of a saved model's run preset, for a ``.keras`` file saved before models kept
    their preset's decoding in their config; ``None`` for any other (it decodes as its config says).

    Such a model would otherwise decode with the paper's defaults (whole paragraphs, alpha 0.6),
    not as its run's evaluation did. ``Transformer`` marks it (``decoding_saved``); the
    preset is the one its run's ``model_config.json`` (beside the model, as the training and
    averaging stages write it) names.
    """
    if getattr(model, "decoding_saved", True):
        return None
    path = Path(model_path)
    info = read_model_config(path.parent) or {}
    if info.get("preset") not in preset_names():
        return None
    logger.info("%s predates models keeping their decoding: decoding as its run's preset %r",
                path, info["preset"])
    return get_preset(info["preset"]).decoding

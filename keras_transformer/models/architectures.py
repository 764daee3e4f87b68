"""The model class of each architecture a preset or ``model_config.json`` names.

``transformer``: the encoder-decoder of section 3 (:class:`~keras_transformer.models.transformer.Transformer`);
``span_parser``: section 3.1's encoder with a span classifier for section 6.3's task
(:class:`~keras_transformer.models.span_parser.SpanParser`). Their configs are
:data:`keras_transformer.models.config.ARCHITECTURES`.
"""

from __future__ import annotations

from keras_transformer.models.config import config_class


def model_class(architecture: str):
    """The Keras model class of ``architecture`` (a ``ValueError`` names the known ones)."""
    config_class(architecture)  # checks the name
    if architecture == "span_parser":
        from keras_transformer.models.span_parser import SpanParser

        return SpanParser
    from keras_transformer.models.transformer import Transformer

    return Transformer


def architecture_of(model) -> str:
    """The architecture name of a model instance."""
    return model.architecture


def build_model(architecture: str, config, dtype=None):
    """A new, built model of ``architecture`` from its config (a dataclass or its dict)."""
    settings = config if isinstance(config, dict) else config.to_dict()
    model = model_class(architecture)(**settings, **({} if dtype is None else {"dtype": dtype}))
    model.build()
    return model

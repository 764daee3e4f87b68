"""An evaluation's overrides of the preset's decoding: one partial object, named as in the preset.

A pipeline's ``evaluation.decoding`` section sets any of
:class:`~keras_transformer.decoding.settings.DecodingSettings`' fields (``beam_size``,
``length_penalty``, ...); what it leaves out is the preset's. :class:`DecodingOverrides` is made from
``DecodingSettings`` itself, so a new decoding setting is an override here without a line of code.
A ``Translator`` decodes with the overrides merged once into its settings; an export has its
settings compiled in, so asking it for others is an error rather than a silent difference in the
recorded figures.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from keras_transformer.decoding.settings import REMOVED_SETTINGS, DecodingSettingError, DecodingSettings
from pipelines.config import SettingError


def _check(self) -> None:
    try:
        DecodingSettings().merged(self.to_dict())
    except DecodingSettingError as err:
        raise SettingError(self, err.name, err.why) from None


def _to_dict(self) -> dict[str, Any]:
    """The overrides that are set (``None`` is "the preset's")."""
    return {name: value for name, value in dataclasses.asdict(self).items() if value is not None}


_HINTS = typing.get_type_hints(DecodingSettings)


def overrides_class(name: str, names: tuple[str, ...], doc: str) -> type:
    """``DecodingSettings`` with every field of ``names`` optional: ``None`` (the default) keeps the preset's value."""
    return dataclasses.make_dataclass(
        name,
        [(f.name, _HINTS[f.name] | None, dataclasses.field(default=None))
         for f in dataclasses.fields(DecodingSettings) if f.name in names],
        namespace={"__post_init__": _check, "to_dict": _to_dict,
                   "removed_settings": {name: why for name, (_, why) in REMOVED_SETTINGS.items()},
                   "__doc__": doc, "__module__": __name__},
    )


#: A translation's overrides: any decoding setting.
DecodingOverrides = overrides_class(
    "DecodingOverrides", DecodingSettings.names(),
    "Overrides of the preset's decoding settings, by the preset's names (null: the preset's).")
#: A parse's: a tree repeats brackets, is one sentence and ends where its words do, so the repetition
#: guard, sentence splitting and the length floor stay the parser preset's (off).
PARSE_DECODING = ("beam_size", "length_penalty", "max_length_offset")
ParseDecodingOverrides = overrides_class(
    "ParseDecodingOverrides", PARSE_DECODING,
    "Overrides of the parser preset's beam search (null: the preset's); its other decoding settings are off "
    "for trees.")


#: The settings an evaluation config named one by one before ``decoding`` held them all.
MOVED_TO_DECODING = {name: f"now decoding.{name}" for name in DecodingSettings.names()} | {
    "alpha": "now decoding.length_penalty"} | {name: why for name, (_, why) in REMOVED_SETTINGS.items()}


def decode(translator, sentences: list[str], overrides, batch_size: int, **options) -> tuple[list, dict[str, Any]]:
    """``translator``'s outputs for ``sentences`` decoded with ``overrides`` (a
    :class:`DecodingOverrides`), and the record of how they were decoded, for ``scores.json``."""
    settings = overrides.to_dict()
    record = translator.decoding_record(**settings)  # before decoding: an export refuses at once
    return translator.translate(sentences, batch_size=batch_size, **options, **settings), record

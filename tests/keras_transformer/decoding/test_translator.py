"""Translator: raw strings in, strings out, with the paper's decoding defaults."""

from __future__ import annotations

import pytest

import keras_transformer as kt
from keras_transformer.decoding.translator import Translator
from keras_transformer.models.presets import DecodingSettings, get_preset
from tests.keras_transformer.tiny_models import tiny_transformer

SENTENCES = [
    "Shows the current weather.",
    "",
    "A library for reading and writing PNG images, with tools.",
    "Documentation",
    "This package contains the development files.",
]


@pytest.fixture(scope="module")
def model(tokenizer):
    return tiny_transformer(tokenizer.vocab_size, num_layers=1)


def test_translate_returns_one_string_per_sentence(model, tokenizer):
    translator = Translator(model, tokenizer)
    out = translator.translate(SENTENCES, beam_size=2, max_length_offset=4, batch_size=2)
    assert isinstance(out, list) and len(out) == len(SENTENCES)
    assert all(isinstance(t, str) for t in out)
    assert translator.translate([]) == []


def test_batching_and_sorting_do_not_change_results(model, tokenizer):
    translator = Translator(model, tokenizer)
    one_batch = translator.translate(SENTENCES, beam_size=2, max_length_offset=4, batch_size=len(SENTENCES))
    single = [translator.translate([s], beam_size=2, max_length_offset=4)[0] for s in SENTENCES]
    assert one_batch == single


@pytest.mark.parametrize("alpha", [0.0, 0.6, 2.0])
def test_beam_one_equals_greedy(model, tokenizer, alpha):
    translator = Translator(model, tokenizer)
    beam = translator.translate(SENTENCES, beam_size=1, length_penalty=alpha, max_length_offset=6)
    greedy = translator.translate(SENTENCES, greedy=True, max_length_offset=6)
    assert beam == greedy
    assert any(greedy)  # guard: not all empty


def test_defaults_come_from_decoding_settings(model, tokenizer):
    settings = DecodingSettings(beam_size=3, length_penalty=1.0, max_length_offset=3)
    translator = Translator(model, tokenizer, decoding=settings)
    explicit = translator.translate(SENTENCES, beam_size=3, length_penalty=1.0, max_length_offset=3)
    assert translator.translate(SENTENCES) == explicit
    assert Translator(model, tokenizer).decoding == DecodingSettings()  # the paper's 4 / 0.6 / +50


def test_a_model_of_a_preset_decodes_as_the_preset_by_default(tokenizer):
    model = kt.Transformer.from_preset("demo", vocab_size=tokenizer.vocab_size, num_layers=1, d_model=16,
                                       num_heads=2, d_ff=32)
    translator = Translator(model, tokenizer)
    assert translator.decoding == get_preset("demo").decoding and translator.decoding.split_sentences
    paragraph = ["Shows the weather. Has a tray icon."]
    expected = [" ".join(translator.translate(["Shows the weather.", "Has a tray icon."]))]
    assert translator.translate(paragraph) == expected


def test_rejects_bad_arguments(model, tokenizer):
    translator = Translator(model, tokenizer)
    with pytest.raises(TypeError):
        translator.translate("a single string")
    with pytest.raises(ValueError, match="beam_size"):
        translator.translate(["x"], beam_size=0)
    with pytest.raises(ValueError, match="length_penalty"):
        translator.translate(["x"], length_penalty=-1.0)
    with pytest.raises(ValueError, match="did you mean length_penalty"):
        translator.translate(["x"], length_penalty_alpha=1.0)
    small = kt.Transformer(vocab_size=100, num_layers=1, d_model=16, num_heads=2, d_ff=16)
    with pytest.raises(ValueError, match="vocabulary"):
        Translator(small, tokenizer)


def test_special_ids_must_agree_between_tokenizer_and_model(model, tokenizer):
    config = model.config
    other = kt.Transformer(vocab_size=config.source_vocab_size, num_layers=1, d_model=16, num_heads=2,
                           d_ff=16, bos_id=config.eos_id, eos_id=config.bos_id)
    with pytest.raises(ValueError, match=r"source tokenizer bos_id \d+ != the model's bos_id"):
        Translator(other, tokenizer)

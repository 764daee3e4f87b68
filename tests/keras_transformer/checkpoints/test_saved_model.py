"""A saved ``.keras`` model's decoder, as its run decoded it (keras_transformer/checkpoints/saved_model.py)."""

from __future__ import annotations

import pytest

from keras_transformer.checkpoints.model_checkpoint import model_config_dict, write_model_config
from keras_transformer.checkpoints.saved_model import load_translator
from keras_transformer.decoding.translator import Translator
from keras_transformer.models.presets import DecodingSettings, get_preset
from tests.keras_transformer.tiny_models import save_as_before_decoding_was_kept, tiny_transformer


@pytest.fixture(scope="module")
def model(tokenizer):
    return tiny_transformer(tokenizer.vocab_size, num_layers=1)


def test_a_model_saved_before_it_kept_its_decoding_decodes_as_its_run_preset(model, tokenizer_model, tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    for folder in (old, new):
        folder.mkdir()
        write_model_config(folder, model_config_dict(model, preset="demo"))
    save_as_before_decoding_was_kept(model, old / "model.keras")
    model.save(new / "model.keras")

    demo = get_preset("demo").decoding
    assert demo != DecodingSettings()  # guard: the fallback changes something
    translator = load_translator(old / "model.keras", tokenizer_model)
    assert isinstance(translator, Translator) and translator.decoding == demo
    # A model that keeps its decoding decodes as it says, whatever its run's preset.
    assert load_translator(new / "model.keras", tokenizer_model).decoding == model.decoding
    # Without a model_config.json, or an explicit decoding, the fallback stays out of the way.
    (old / "model_config.json").unlink()
    assert load_translator(old / "model.keras", tokenizer_model).decoding == DecodingSettings()
    write_model_config(old, model_config_dict(model, preset="demo"))
    explicit = DecodingSettings(beam_size=2)
    assert load_translator(old / "model.keras", tokenizer_model, decoding=explicit).decoding == explicit

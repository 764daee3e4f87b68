"""Attention heat maps (paper Figures 3-5): every head of a chosen layer, saved as PNG."""

from __future__ import annotations

import matplotlib.image
import numpy as np
import pytest

import keras_transformer as kt
from keras_transformer.decoding.settings import DecodingSettings
from pipelines.tasks.translation.attention_plots import (
    AttentionPlotConfig,
    attention_maps,
    plot_attention,
)

SENTENCE = "The package provides a command-line tool for images."
HEADS = 4


@pytest.fixture(scope="module")
def model(tokenizer):
    model = kt.Transformer(vocab_size=tokenizer.vocab_size, num_layers=2, d_model=32, num_heads=HEADS,
                           d_ff=64, dropout=0.0)
    model.build()
    return model


def test_maps_cover_every_head_with_token_labels(model, tokenizer):
    config = AttentionPlotConfig(layer=1, kinds=("encoder_self", "encoder_decoder", "decoder_self"),
                                 decoding=DecodingSettings(beam_size=2))
    maps = attention_maps(model, tokenizer, SENTENCE, config=config)
    source_len = len(tokenizer.tokenize(SENTENCE).numpy()) + 1
    assert maps.source_tokens[-1] == "</s>" and len(maps.source_tokens) == source_len
    target_len = len(maps.target_tokens)
    assert maps.weights["encoder_self"].shape == (HEADS, source_len, source_len)
    assert maps.weights["encoder_decoder"].shape == (HEADS, target_len, source_len)
    assert maps.weights["decoder_self"].shape == (HEADS, target_len, target_len)
    for weights in maps.weights.values():
        np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-4)  # softmax rows
    # Decoder self-attention is causal: nothing above the diagonal.
    assert np.all(np.triu(maps.weights["decoder_self"][0], k=1) < 1e-6)


def test_a_verbatim_span_is_labelled_so_that_a_font_can_draw_it(verbatim_tokenizer):
    from keras_transformer.text import VERBATIM

    model = kt.Transformer(vocab_size=verbatim_tokenizer.vocab_size, num_layers=1, d_model=16, num_heads=2,
                           d_ff=32, dropout=0.0)
    model.build()
    maps = attention_maps(model, verbatim_tokenizer, "See https://example.org/docs/ for details.",
                          config=AttentionPlotConfig(layer=0, decoding=DecodingSettings(beam_size=1)))
    assert any("<span>" in token for token in maps.source_tokens)
    assert not any(VERBATIM in token for token in maps.source_tokens + maps.target_tokens)


def test_plot_writes_one_png_per_kind(model, tokenizer, tmp_path):
    config = AttentionPlotConfig(layer=-1, decoding=DecodingSettings(beam_size=2))
    paths = plot_attention(model, tokenizer, SENTENCE, tmp_path, config,
                           target="Das Paket bietet ein Befehlszeilenwerkzeug für Bilder.")
    assert set(paths) == {"encoder_self", "encoder_decoder"}
    for kind, path in paths.items():
        assert path.name == f"{kind}_layer2.png"
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        image = matplotlib.image.imread(path)
        assert image.shape[0] > 200 and image.shape[1] > 400  # a grid of 4 heads, not a stub
        assert image[..., :3].std() > 0.05  # something was drawn


def test_rejects_missing_layer_and_kind(model, tokenizer):
    with pytest.raises(ValueError, match="layer"):
        attention_maps(model, tokenizer, SENTENCE, target="x", config=AttentionPlotConfig(layer=5))
    with pytest.raises(ValueError, match="kinds"):
        AttentionPlotConfig(kinds=("cross",))

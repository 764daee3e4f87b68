"""The exported SavedModel translates raw strings like the Translator, in a fresh process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import tensorflow as tf

from keras_transformer.decoding.export import export_translator, is_exported_translator, load_exported
from keras_transformer.decoding.formats import METADATA_FILE, OUTPUT_NAME, SIGNATURE_KEY
from keras_transformer.decoding.settings import DecodingSettings
from keras_transformer.decoding.translator import Translator
from tests.keras_transformer.decoding import fresh_process
from tests.keras_transformer.tiny_models import tiny_transformer

SENTENCES = [
    "Shows the current weather.",
    "A library for reading and writing PNG images, with tools.",
    "",
    "Überprüfung — „Anführungszeichen“ und Umlaute: äöü ß.",
]
BEAM, ALPHA, OFFSET = 3, 0.6, 5

FRESH_PROCESS = fresh_process.script(
    """
    module = tf.saved_model.load(sys.argv[1])
    sentences = json.loads(sys.argv[2])
    direct = module.translate(tf.constant(sentences, tf.string)).numpy()
    served = module.signatures["serving_default"](sentences=tf.constant(sentences, tf.string))
    sys.setprofile(None)
    print(json.dumps({
        "direct": [t.decode("utf-8") for t in direct],
        "served": [t.decode("utf-8") for t in served["translations"].numpy()],
        {REPORTED}
    }))
    """
)


@pytest.fixture(scope="module")
def model(tokenizer):
    return tiny_transformer(tokenizer.vocab_size, num_layers=2)


@pytest.fixture(scope="module")
def exported(model, tokenizer, tmp_path_factory):
    path = tmp_path_factory.mktemp("export") / "translator"
    return export_translator(model, tokenizer, path, DecodingSettings(BEAM, ALPHA, OFFSET))


def test_export_writes_saved_model_with_settings(exported):
    assert is_exported_translator(exported)
    metadata = json.loads((exported / METADATA_FILE).read_text("utf-8"))
    assert metadata["decoding"] == DecodingSettings(BEAM, ALPHA, OFFSET).to_dict()
    assert metadata["copies_verbatim"] is False


def test_reloaded_in_fresh_process_translates_like_translator(exported, model, tokenizer):
    expected = Translator(model, tokenizer).translate(
        SENTENCES, beam_size=BEAM, length_penalty=ALPHA, max_length_offset=OFFSET, batch_size=len(SENTENCES)
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    result = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS, str(exported), json.dumps(SENTENCES)],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(exported.parent),
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["project_modules"] == []
    assert report["keras_calls"] == [], "loading or running the export executed Keras code"
    assert report["direct"] == expected
    assert report["served"] == expected


def test_load_exported_wrapper(exported, model, tokenizer):
    loaded = load_exported(exported)
    assert loaded.decoding.beam_size == BEAM
    out = loaded.translate(SENTENCES)
    expected = Translator(model, tokenizer).translate(
        SENTENCES, beam_size=BEAM, length_penalty=ALPHA, max_length_offset=OFFSET, batch_size=len(SENTENCES)
    )
    assert out == expected
    served = loaded.module.signatures[SIGNATURE_KEY](sentences=tf.constant(SENTENCES))
    assert served[OUTPUT_NAME].shape == (len(SENTENCES),)
    assert loaded.translate([]) == []


def test_export_and_translator_copy_the_sources_verbatim_spans(verbatim_tokenizer, tmp_path):
    """The URL of a source reaches the translation through the placeholder, in both decoders.

    An untrained model writes no placeholder, so the span is appended (``text.restore``): the
    two decoders must give the same string, and it must hold the source's URL whole."""
    model = tiny_transformer(verbatim_tokenizer.vocab_size, num_layers=1)
    sentences = ["See https://example.org/a56/src/examples/ for more.", "No spans."]
    expected = Translator(model, verbatim_tokenizer).translate(
        sentences, beam_size=BEAM, length_penalty=ALPHA, max_length_offset=OFFSET)
    assert "https://example.org/a56/src/examples/" in expected[0].split()
    assert "://" not in expected[1]
    path = export_translator(model, verbatim_tokenizer, tmp_path / "t", DecodingSettings(BEAM, ALPHA, OFFSET))
    loaded = load_exported(path)
    assert loaded.settings["copies_verbatim"] is True
    assert loaded.translate(sentences) == expected


def eos_first_model(vocab_size):
    """A tiny model that ends every output at once: its last LayerNorm's shift and the (shared)
    EOS embedding agree, so the EOS logit is d_model where the others are a few units."""
    model = tiny_transformer(vocab_size, num_layers=1)

    def weight(suffix):  # the model's name (its path's first part) depends on how many came before
        return next(w for w in model.weights if w.path.endswith(suffix))

    weight("decoder_layer_0/feed_forward_residual/layer_norm/beta").assign(tf.ones([32]))
    embeddings = weight("source_embedding/embeddings")
    embeddings.assign(tf.tensor_scatter_nd_update(embeddings, [[model.config.eos_id]], tf.ones([1, 32])))
    return model


def test_a_length_floor_decodes_alike_in_the_translator_and_the_export(tokenizer, tmp_path):
    """No hypothesis of the floored search ends before half its source's pieces, and the export
    (its floor in the graph and in its settings) gives the Translator's strings."""
    from keras_transformer.decoding.beam import beam_search_decode, length_floor

    model = eos_first_model(tokenizer.vocab_size)
    sentences = [s for s in SENTENCES if s]
    source = tf.ragged.constant(Translator(model, tokenizer).encode(sentences)).to_tensor()
    floors = length_floor(model, source, 0.5).numpy()
    assert floors.min() >= 2
    free = beam_search_decode(model, source, BEAM, ALPHA, OFFSET)
    assert (free.lengths.numpy()[:, 0] == 1).all()  # EOS alone: the floor below has work to do
    found = beam_search_decode(model, source, BEAM, ALPHA, OFFSET, min_length_ratio=0.5)
    eos = model.config.eos_id
    for ids, length, floor in zip(found.ids.numpy()[:, 0], found.lengths.numpy()[:, 0], floors):
        assert length - (ids[length - 1] == eos) >= floor
    translator = Translator(model, tokenizer, decoding=DecodingSettings(BEAM, ALPHA, OFFSET, min_length_ratio=0.5))
    expected = translator.translate(sentences)
    assert all(expected) and not any(Translator(model, tokenizer).translate(sentences, beam_size=BEAM))
    path = export_translator(model, tokenizer, tmp_path / "floored", translator.decoding)
    loaded = load_exported(path)
    assert loaded.decoding.min_length_ratio == 0.5
    assert loaded.translate(sentences) == expected


def test_the_repetition_guard_decodes_alike_in_the_translator_and_the_export(tokenizer, tmp_path):
    """A model that keeps writing one piece: the guard changes its output, in the export (built
    from ``repetition_guard``, recorded in its settings) as in the Translator."""
    import numpy as np

    from keras_transformer import Transformer

    model = Transformer(vocab_size=tokenizer.vocab_size, num_layers=1, d_model=16, num_heads=2, d_ff=32, dropout=0.0)
    model.build()
    rng = np.random.default_rng(0)
    model.set_weights([rng.normal(0.0, 0.05, w.shape).astype(w.dtype) for w in model.get_weights()])
    piece = tokenizer.vocab_size - 1  # an ordinary piece, not a special id
    bias = np.zeros(model.target_embedding.embeddings.shape, np.float32)
    bias[piece] = 3.0
    model.target_embedding.embeddings.assign(model.target_embedding.embeddings + bias)
    sentences = [s for s in SENTENCES if s]
    settings = DecodingSettings(BEAM, ALPHA, OFFSET)
    looping = Translator(model, tokenizer, decoding=settings).translate(sentences)
    expected = Translator(model, tokenizer, decoding=DecodingSettings(BEAM, ALPHA, OFFSET, repetition_guard=2)
                          ).translate(sentences)
    assert expected != looping
    path = export_translator(model, tokenizer, tmp_path / "guarded", DecodingSettings(BEAM, ALPHA, OFFSET,
                                                                                      repetition_guard=2))
    loaded = load_exported(path)
    assert loaded.decoding.repetition_guard == 2
    assert loaded.translate(sentences) == expected

"""The exported SavedModel translates raw strings like the Translator, in a fresh process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import tensorflow as tf

from keras_transformer.decoding.export import (
    METADATA_FILE,
    OUTPUT_NAME,
    SIGNATURE_KEY,
    export_translator,
    is_exported_translator,
    load_exported,
)
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
    return export_translator(model, tokenizer, path, beam_size=BEAM, alpha=ALPHA, max_length_offset=OFFSET)


def test_export_writes_saved_model_with_settings(exported):
    assert is_exported_translator(exported)
    metadata = json.loads((exported / METADATA_FILE).read_text("utf-8"))
    assert metadata["beam_size"] == BEAM and metadata["alpha"] == ALPHA
    assert metadata["max_length_offset"] == OFFSET
    assert metadata["copies_verbatim"] is False


def test_reloaded_in_fresh_process_translates_like_translator(exported, model, tokenizer):
    expected = Translator(model, tokenizer).translate(
        SENTENCES, beam_size=BEAM, alpha=ALPHA, max_length_offset=OFFSET, batch_size=len(SENTENCES)
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
    assert loaded.settings["beam_size"] == BEAM
    out = loaded.translate(SENTENCES)
    expected = Translator(model, tokenizer).translate(
        SENTENCES, beam_size=BEAM, alpha=ALPHA, max_length_offset=OFFSET, batch_size=len(SENTENCES)
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
        sentences, beam_size=BEAM, alpha=ALPHA, max_length_offset=OFFSET)
    assert "https://example.org/a56/src/examples/" in expected[0].split()
    assert "://" not in expected[1]
    path = export_translator(model, verbatim_tokenizer, tmp_path / "t", beam_size=BEAM, alpha=ALPHA,
                             max_length_offset=OFFSET)
    loaded = load_exported(path)
    assert loaded.settings["copies_verbatim"] is True
    assert loaded.translate(sentences) == expected

"""The span parser's SavedModel parses like ChartParser (keras_transformer/decoding/chart_export.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.decoding.export import (
    ExportedTranslator,
    export_translator,
    is_exported_translator,
    load_exported,
)
from keras_transformer.decoding.formats import METADATA_FILE, SIGNATURE_KEY
from keras_transformer.decoding.settings import DecodingSettings
from keras_transformer.models.span_parser import SpanParser
from keras_transformer.models.span_parser.chart_export import ExportedChartParser, export_chart_parser
from keras_transformer.models.span_parser.chart_parser import ChartParser
from tests.keras_transformer.decoding import fresh_process
from tests.keras_transformer.tiny_models import tiny_transformer

LABELS = ["", "NP", "S", "S+VP", "VP"]
TAGS = ["DT", "NN", "VB", "."]
BIAS = 0.5
WORDS = ("the package contains files for the documentation of a library with tools to install and configure "
         "it on a system , which shows the current weather .").split()
# 24 sentences of 1 to 24 words, shuffled so that every batch mixes lengths, then an empty one.
SENTENCES = [" ".join((WORDS * 2)[(3 * k) % 7: (3 * k) % 7 + n]) for k, n in enumerate(
    np.random.default_rng(0).permutation(np.arange(1, 25)))] + [""]

FRESH_PROCESS = fresh_process.script(
    """
    module = tf.saved_model.load(sys.argv[1])
    served = module.signatures["serving_default"](sentences=tf.constant(json.loads(sys.argv[2]), tf.string))
    sys.setprofile(None)
    print(json.dumps({
        "outputs": {name: {"shape": value.shape.as_list(), "dtype": value.dtype.name,
                           **({"values": value.numpy().tolist()} if name == "words" else {})}
                    for name, value in served.items()},
        {REPORTED}
    }))
    """
)


@pytest.fixture(scope="module")
def model(tokenizer):
    pieces = [tokenizer.id_to_piece(i).numpy().decode() for i in range(tokenizer.vocab_size)]
    starts = [i for i, piece in enumerate(pieces) if piece.startswith("\u2581")]
    model = SpanParser(tokenizer.vocab_size, LABELS, TAGS, starts, num_layers=1, d_model=16, num_heads=2, d_ff=32,
                       span_hidden=16, dropout=0.0, bias=BIAS, pad_id=tokenizer.pad_id)
    model.build()
    return model


@pytest.fixture(scope="module")
def exported(model, tokenizer, tmp_path_factory):
    return export_chart_parser(model, tokenizer, tmp_path_factory.mktemp("export") / "chart_parser")


def depth(tree: str) -> int:
    deepest = level = 0
    for token in tree.split():
        level += token.startswith("(") - token.startswith(")")
        deepest = max(deepest, level)
    return deepest


def test_the_export_gives_the_trees_chart_parser_gives(exported, model, tokenizer):
    assert sorted({len(s.split()) for s in SENTENCES}) == list(range(25))
    expected = ChartParser(model, tokenizer).translate(SENTENCES)
    assert ChartParser(model, tokenizer, batch_size=5).translate(SENTENCES) == expected
    parser = ExportedChartParser(exported)
    assert parser.labels == LABELS and parser.tags == TAGS and parser.bias == BIAS
    for batch_size in (1, 3, 7, 32):
        assert parser.translate(SENTENCES, batch_size=batch_size) == expected
    assert parser(SENTENCES, n_best=True) == [[tree] for tree in expected]
    with pytest.raises(ValueError, match="chart search"):  # a beam setting does not apply, and says so
        parser(SENTENCES, beam_size=4)
    # Not vacuous: trees over every word, many with constituents inside constituents.
    assert expected[-1] == "" and all(tree for tree in expected[:-1])
    assert [sum(not t.startswith(("(", ")")) for t in tree.split()) for tree in expected] == [
        len(s.split()) for s in SENTENCES]
    assert sum(depth(tree) >= 2 for tree in expected) >= 5, expected
    # A bias far below zero leaves every span out (whatever the random weights score): the
    # override reaches the decoding.
    flatter = ChartParser(model, tokenizer, bias=-50.0).translate(SENTENCES)
    assert flatter != expected and ExportedChartParser(exported, bias=-50.0).translate(SENTENCES) == flatter
    assert parser.translate([]) == []
    with pytest.raises(TypeError, match="not a single string"):
        parser.translate("a sentence")


def test_the_scores_match_chart_parser(exported, model, tokenizer):
    parser = ExportedChartParser(exported)
    for (spans, tags), (want_spans, want_tags) in zip(parser.scores(SENTENCES, batch_size=4),
                                                      ChartParser(model, tokenizer).scores(SENTENCES)):
        assert spans.shape == want_spans.shape and np.array_equal(tags, want_tags)
        # The tree marginals' log(1 - m) near m = 1 magnifies float32 rounding of the graph against eager.
        np.testing.assert_allclose(spans, want_spans, rtol=1e-4, atol=1e-4)


def test_metadata_and_dispatch(exported, model):
    assert is_exported_translator(exported)
    metadata = json.loads((exported / METADATA_FILE).read_text("utf-8"))
    assert metadata["kind"] == "chart_parser" and metadata["labels"] == LABELS and metadata["tags"] == TAGS
    assert metadata["bias"] == BIAS and metadata["model_config"] == json.loads(json.dumps(model.config.to_dict()))
    assert metadata["signature"] == SIGNATURE_KEY and metadata["input"] == "sentences"
    assert isinstance(load_exported(exported), ExportedChartParser)


def test_the_seq2seq_export_still_loads_as_a_translator(tokenizer, tmp_path):
    path = export_translator(tiny_transformer(tokenizer.vocab_size), tokenizer, tmp_path / "translator",
                             DecodingSettings(beam_size=2, max_length_offset=3))
    assert json.loads((path / METADATA_FILE).read_text("utf-8"))["kind"] == "translator"
    loaded = load_exported(path)
    assert isinstance(loaded, ExportedTranslator) and len(loaded.translate(["install it"])) == 1
    with pytest.raises(ValueError, match="not a chart parser export"):
        ExportedChartParser(path)


def test_the_saved_model_serves_with_tensorflow_alone(exported):
    sentences = ["the package contains files .", "documentation", "", "install it"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    result = subprocess.run([sys.executable, "-c", FRESH_PROCESS, str(exported), json.dumps(sentences)],
                            capture_output=True, text=True, env=env, cwd=str(exported.parent), timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["project_modules"] == [] and report["keras_calls"] == [], "serving the export ran Keras code"
    served = report["outputs"]
    n = max(len(s.split()) for s in sentences)
    assert served["spans"] == {"shape": [4, n + 1, n + 1, len(LABELS)], "dtype": "float32"}
    assert served["tags"] == {"shape": [4, n], "dtype": "int32"}
    assert served["words"] == {"shape": [4], "dtype": "int32", "values": [5, 1, 0, 2]}
    # And in this process, through tf.saved_model.load alone (no wrapper).
    signature = tf.saved_model.load(str(exported)).signatures[SIGNATURE_KEY]
    out = signature(sentences=tf.constant(sentences))
    assert sorted(out) == ["spans", "tags", "words"] and out["spans"].shape == (4, n + 1, n + 1, len(LABELS))


def test_a_parser_that_spells_its_words_exports_the_same_trees(tokenizer, tmp_path):
    """The character CNN (``char_dim``) rebuilds words from piece strings inside the graph: the
    SavedModel must hold that table and scatter, and parse exactly as the Keras model does."""
    pieces = tokenizer.pieces()
    starts = [i for i, piece in enumerate(pieces) if piece.startswith("\u2581")]
    model = SpanParser(tokenizer.vocab_size, LABELS, TAGS, starts, num_layers=1, d_model=16, num_heads=2, d_ff=32,
                       span_hidden=16, dropout=0.0, bias=BIAS, pad_id=tokenizer.pad_id, char_dim=4,
                       source_pieces=pieces)
    model.build()
    expected = ChartParser(model, tokenizer).translate(SENTENCES)
    assert sum(depth(tree) >= 2 for tree in expected) >= 5, expected
    parser = ExportedChartParser(export_chart_parser(model, tokenizer, tmp_path / "spelling"))
    assert parser.translate(SENTENCES, batch_size=5) == expected


def test_a_parser_reading_spans_like_supar_exports_the_same_trees(tokenizer, tmp_path):
    """``word_lstm`` (BiLSTMs over the words, masked past each sentence) runs in the graph: the
    SavedModel must parse sentences of every length exactly as the Keras model."""
    pieces = tokenizer.pieces()
    starts = [i for i, piece in enumerate(pieces) if piece.startswith("\u2581")]
    model = SpanParser(tokenizer.vocab_size, LABELS, TAGS, starts, num_layers=1, d_model=16, num_heads=2, d_ff=32,
                       span_hidden=16, dropout=0.0, bias=BIAS, pad_id=tokenizer.pad_id, word_lstm=1)
    model.build()
    expected = ChartParser(model, tokenizer).translate(SENTENCES)
    assert ChartParser(model, tokenizer, batch_size=3).translate(SENTENCES) == expected
    parser = ExportedChartParser(export_chart_parser(model, tokenizer, tmp_path / "supar"))
    assert parser.translate(SENTENCES, batch_size=5) == expected

"""The sentences table and attention pictures a translation run is read by."""

from __future__ import annotations

import json

import pytest

from keras_transformer.decoding.translator import Translator
from pipelines.tasks.translation.reading import (
    ATTENTION_DIR,
    COLUMNS,
    draw_attention,
    extremes,
    sentence_table,
    write_table,
)
from tests.keras_transformer.tiny_models import tiny_transformer

SOURCES = ["The cat sat.", "A library.", "", "Tools for PNG images."]
REFERENCES = ["Die Katze saß.", "Eine Bibliothek.", "", "Werkzeuge für PNG-Bilder."]
HYPOTHESES = ["Die Katze saß.", "Ein Hund.", "", "Werkzeuge für Bilder."]


def test_every_sentence_with_its_sentence_chrf_and_bleu_worst_chrf_first():
    table = sentence_table(SOURCES, REFERENCES, HYPOTHESES)
    assert table["columns"] == COLUMNS == ["sentence_chrf", "sentence_bleu", "line", "source", "reference",
                                          "translation"]
    assert sorted(row[2] for row in table["data"]) == [1, 2, 3, 4]
    scores = [row[0] for row in table["data"]]
    assert scores == sorted(scores)
    by_line = {row[2]: row for row in table["data"]}
    assert by_line[1][:2] == [100.0, 100.0] and by_line[2][0] < by_line[4][0] < 100.0
    assert by_line[4][3:] == [SOURCES[3], REFERENCES[3], HYPOTHESES[3]]


def test_a_compound_joined_otherwise_is_near_the_top_not_at_the_bottom():
    """Sentence BLEU scores "KDE Bluetooth-Stack" against "KDE-Bluetooth-Stack" 0, as a wrong sentence;
    chrF's character n-grams rank it above a wrong translation."""
    table = sentence_table(["KDE Bluetooth stack", "A library"], ["KDE-Bluetooth-Stack", "Eine Bibliothek"],
                           ["KDE Bluetooth-Stack", "Ein Hund"])
    by_line = {row[2]: row for row in table["data"]}
    assert by_line[1][1] == 0.0 and by_line[1][0] > 60  # BLEU 0, chrF high
    assert [row[2] for row in table["data"]] == [2, 1]  # the wrong translation is the worst


def test_the_extremes_skip_empty_sentences_and_never_overlap():
    table = sentence_table(SOURCES, REFERENCES, HYPOTHESES)
    chosen = extremes(table, 5)
    assert chosen["best"] == [(SOURCES[0], HYPOTHESES[0])]
    assert chosen["worst"] == [(SOURCES[1], HYPOTHESES[1])]


@pytest.fixture(scope="module")
def translator(tokenizer):
    return Translator(tiny_transformer(tokenizer.vocab_size), tokenizer)


def test_attention_pictures_of_the_best_and_worst(translator, tmp_path):
    table = sentence_table(SOURCES, REFERENCES, HYPOTHESES)
    write_table(tmp_path, table)
    assert json.loads((tmp_path / "sentences.json").read_text("utf-8")) == table
    written = draw_attention(translator, table, tmp_path, count=1)
    assert sorted(path.name for path in written) == ["best-1.png", "worst-1.png"]
    assert sorted(p.name for p in (tmp_path / ATTENTION_DIR).iterdir()) == ["best-1.png", "worst-1.png"]
    assert all(path.read_bytes().startswith(b"\x89PNG") for path in written)


def test_no_pictures_without_a_keras_model(tmp_path):
    table = sentence_table(SOURCES, REFERENCES, HYPOTHESES)
    assert draw_attention(object(), table, tmp_path) == []
    assert not (tmp_path / ATTENTION_DIR).exists()

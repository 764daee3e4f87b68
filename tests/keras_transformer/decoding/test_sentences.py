"""Paragraphs split into sentences: where they split, and that the Translator and its export
translate a paragraph as the join of its sentences' translations."""

from __future__ import annotations

import dataclasses
import json

import pytest

from keras_transformer.decoding.export import export_translator, load_exported
from keras_transformer.decoding.formats import METADATA_FILE
from keras_transformer.decoding.sentences import join_sentences, split_bullets, split_sentences
from keras_transformer.decoding.translator import Translator
from keras_transformer.models.presets import DecodingSettings
from tests.keras_transformer.tiny_models import tiny_transformer

SPLITS = [
    ("It does this. And that! Really? Yes.", ["It does this.", "And that!", "Really?", "Yes."]),
    ("AGL (Adobe Glyph List) maps names. AGLFN is a subset.",
     ["AGL (Adobe Glyph List) maps names.", "AGLFN is a subset."]),
    ('He said "stop." Then left.', ['He said "stop."', "Then left."]),
    ("Use it (see below). 3 modes exist.", ["Use it (see below).", "3 modes exist."]),
    # Abbreviations, numbers and file names end no sentence; neither does a lower-case start.
    ("Debian Jr. Simulation Games", ["Debian Jr. Simulation Games"]),
    ("Version 1.5 is out. See e.g. Foo for more.", ["Version 1.5 is out.", "See e.g. Foo for more."]),
    ("Reads foo.c. Bar", ["Reads foo.c. Bar"]),
    ("It works. and then", ["It works. and then"]),
    # Normalised as the tokenizer normalises: no empty or space-padded sentence.
    ("  Two\n lines.  Here  ", ["Two lines.", "Here"]),
    ("", [""]),
    # Inline lists: each item is a part, its bullet with it; "*" not between spaces is no bullet.
    ("Main features: * It is fast * It is small. * Free",
     ["Main features:", "* It is fast", "* It is small.", "* Free"]),
    ("* one * two", ["* one", "* two"]),
    ("Matches *.txt and vim-*-files; 2*3 *", ["Matches *.txt and vim-*-files; 2*3 *"]),
]
PARAGRAPHS = [
    "Shows the current weather. It reads the forecast from the network.",
    "A library for reading and writing PNG images, with tools.",
    "",
    "This package contains the development files. Most users do not need it! Install it to build.",
    "Main features: * reads the network * shows the weather",
]
BEAM, OFFSET = 2, 4


@pytest.mark.parametrize("text,sentences", SPLITS)
def test_split_sentences(text, sentences):
    parts = split_sentences([text])
    assert [s.decode("utf-8") for s in parts.flat_values.numpy()] == sentences
    assert join_sentences(parts.flat_values, parts.row_splits).numpy()[0].decode("utf-8") == " ".join(sentences)


def test_split_bullets():
    bullets, bodies = split_bullets(["* fast", "plain", "*bold", "", "a * b"])
    assert [b.decode() for b in bullets.numpy()] == ["* ", "", "", "", ""]
    assert [b.decode() for b in bodies.numpy()] == ["fast", "plain", "*bold", "", "a * b"]


@pytest.fixture(scope="module")
def model(tokenizer):
    return tiny_transformer(tokenizer.vocab_size, num_layers=1)


@pytest.fixture(scope="module")
def splitting(model, tokenizer):
    settings = DecodingSettings(beam_size=BEAM, max_length_offset=OFFSET, split_sentences=True)
    return Translator(model, tokenizer, decoding=settings)


def test_translator_joins_the_translations_of_the_sentences(splitting):
    whole = Translator(splitting.model, splitting.tokenizer, decoding=dataclasses.replace(
        splitting.decoding, split_sentences=False))
    # Each part translated alone, a list item without its bullet and the bullet put back.
    expected = []
    for row in split_sentences(PARAGRAPHS).to_list():
        bullets, bodies = (list(t.numpy()) for t in split_bullets(row))
        translations = whole.translate([b.decode("utf-8") for b in bodies])
        expected.append(" ".join(b.decode("utf-8") + t for b, t in zip(bullets, translations)))
    assert expected[-1].startswith(whole.translate(["Main features:"])[0] + " * ")
    # Compared word by word: a random model's empty translation of a part leaves one space more or less.
    assert [t.split() for t in splitting.translate(PARAGRAPHS, batch_size=3)] == [t.split() for t in expected]
    assert expected != whole.translate(PARAGRAPHS)  # guard: splitting changes what the model is given
    # An n-best list is per input, as the parser's constrained search needs it.
    assert splitting.translate(PARAGRAPHS, n_best=True) == whole.translate(PARAGRAPHS, n_best=True)


def test_export_splits_as_the_translator(splitting, tmp_path):
    path = export_translator(splitting.model, splitting.tokenizer, tmp_path / "export", splitting.decoding)
    assert json.loads((path / METADATA_FILE).read_text("utf-8"))["decoding"]["split_sentences"] is True
    assert load_exported(path).translate(PARAGRAPHS, batch_size=2) == splitting.translate(PARAGRAPHS)


def test_export_refuses_to_split_for_a_constraint_with_slots(splitting, tmp_path):
    class PerInput:  # slots counted over the whole input, as the parser's bracket constraint's
        takes_slots = True

    with pytest.raises(ValueError, match="split_sentences cannot be combined with PerInput"):
        export_translator(splitting.model, splitting.tokenizer, tmp_path / "export",
                          DecodingSettings(split_sentences=True), constraint=PerInput())

"""The loop rule on hand-made sentences: what loops, what only looks like it, and where a loop is cut."""

import pytest

from keras_transformer.decoding.loops import cut_loops, repeated_ngram


@pytest.mark.parametrize("text, ngram", [
    ("DSPSP-Code-Code-Code für Domänen", "Code"),         # one whitespace token
    ("a b a b a b", "a b"),                                 # a bigram three times
    ("Die Bibliothek der der der Datei", "der"),
    ("Domains.com/Domains.com/Domains.com/", "Domains com"),  # punctuation between words ignored
    ("Code-Code-Code", "Code"),
    ("Werkzeug für die Dateien für die Dateien für die Dateien", "für die Dateien"),
    ("Siehe CodeCodeCode", "Code"),                         # inside one word
    ("x, y, x, y, x, y", "x y"),
    ("Effekte, wie z.B.B.B. und", "B"),                     # one letter stutters inside a word
    ("a-b-b-b", "b"),
])
def test_loops_are_found(text, ngram):
    assert repeated_ngram(text) == ngram


@pytest.mark.parametrize("text", [
    "a b a b",                        # twice is not a loop
    "Code-Code",
    "Dieses Paket enthält die Entwicklungsdateien.",
    "usw...",                         # punctuation repeats
    "Version 0.0.0.0 und 1 1 1",      # numbers repeat
    "Mississippi und Ananas, Anlagegegenstände",   # two-letter pieces inside words are German
    "Programme in C, C++, C# und Java",            # one letter is not a loop
    "Er sagte: ja, ja und nein.",
    "z.B. und u.a. oder d.h. und B.B. King",      # abbreviations: one letter at most twice
    "A.B.C. und x.y.z",
    "",
])
def test_no_loop_is_reported(text):
    assert repeated_ngram(text) is None


def test_longest_ngram_is_bounded():
    # Nine pieces three times is beyond max_n = 8; with max_n = 9 it is found.
    gram = "eins zwei drei vier fünf sechs sieben acht neun"
    text = " ".join([gram] * 3)
    assert repeated_ngram(text, max_n=8) is None
    assert repeated_ngram(text, max_n=9) == gram


@pytest.mark.parametrize("text, cut", [
    ("entmen ent ent, ent read ent for", "entmen ent ent"),   # words loop where pieces differ
    ("DSPSP-Code-Code-Code für Domänen", "DSPSP-Code-Code"),
    ("a b a b a b c", "a b a b"),
    ("Siehe CodeCodeCode x", "Siehe CodeCode"),
    ("Effekte, wie z.B.B.B. und", "Effekte, wie z.B.B."),
    ("ja ja ja ja ja ja ja", "ja ja"),
    ("Dieses Paket enthält die Entwicklungsdateien.", "Dieses Paket enthält die Entwicklungsdateien."),
])
def test_a_loop_is_cut_before_the_copy_that_makes_it(text, cut):
    assert cut_loops(text) == cut
    assert repeated_ngram(cut_loops(text)) is None


def test_cutting_reaches_every_loop():
    # The text ends before the first loop's third copy, so later loops go with it.
    text = "Werkzeug Werkzeug Werkzeug und Code-Code-Code"
    assert cut_loops(text) == "Werkzeug Werkzeug"
    assert cut_loops("x y " * 10) == "x y x y"

"""The loop counter on hand-made sentences: what loops, what only looks like it."""

import pytest

from pipelines.tasks.translation.repetition import loop_counts, repeated_ngram


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


def test_counts_hypotheses_beside_references():
    hypotheses = ["gut", "a b a b a b", "Code-Code-Code", "ok ok"]
    references = ["gut", "a b c", "sehr sehr sehr gut", "ok"]
    counts = loop_counts(hypotheses, references)
    assert (counts["hypotheses"], counts["references"], counts["sentences"]) == (2, 1, 4)
    assert counts["examples"] == [{"line": 2, "ngram": "a b"}, {"line": 3, "ngram": "Code"}]

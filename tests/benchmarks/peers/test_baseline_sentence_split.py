"""The baseline decoded sentence by sentence (benchmarks/peers/baseline_sentence_split.py): its sentence
translations go back to their paragraphs in order, and are scored by the evaluation stage's code."""

from __future__ import annotations

import pytest

from benchmarks.peers import baseline_sentence_split

join_per_paragraph = baseline_sentence_split.join_per_paragraph
score = baseline_sentence_split.score
sentence_lines = baseline_sentence_split.sentence_lines


def test_list_items_go_without_their_bullets_and_come_back():
    lines, bullets, counts = sentence_lines([("Tools. Features: * fast * small", "Werkzeuge."), ("One.", "Eins.")])
    assert lines == ["Tools.\tWerkzeuge.\n", "Features:\tWerkzeuge.\n", "fast\tWerkzeuge.\n",
                     "small\tWerkzeuge.\n", "One.\tEins.\n"]
    assert bullets == ["", "", "* ", "* ", ""] and counts == [4, 1]
    translated = [bullet + line.split("\t")[0].upper() for bullet, line in zip(bullets, lines)]
    assert join_per_paragraph(translated, counts) == ["TOOLS. FEATURES: * FAST * SMALL", "ONE."]


def test_sentences_are_joined_back_into_their_paragraphs():
    assert join_per_paragraph(["A.", "B.", "C", "D!", "E"], [2, 1, 2]) == ["A. B.", "C", "D! E"]
    with pytest.raises(ValueError, match="4 sentence translations for 5 sentences"):
        join_per_paragraph(["A.", "B.", "C", "D!"], [2, 1, 2])


def test_the_joined_paragraphs_are_scored_as_the_evaluation_scores(tmp_path):
    references = ["Das ist ein Haus . Es steht am See .", "Werkzeuge für die Kommandozeile"]
    joined = join_per_paragraph(["Das ist ein Haus .", "Es steht am See .", "Werkzeuge für die Kommandozeile"], [2, 1])
    scores = score(tmp_path / "split", joined, references)
    assert scores["sentences"] == 2 and scores["bleu"] == pytest.approx(100.0)
    assert (tmp_path / "split" / "hypotheses.txt").read_text(encoding="utf-8").splitlines() == references
    looping = score(tmp_path / "looping", ["Haus Haus Haus Haus", "Werkzeuge"], references)
    assert looping["bleu"] < 20 and looping["looping_hypotheses"] == 1

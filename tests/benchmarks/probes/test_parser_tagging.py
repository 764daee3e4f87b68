"""The tagging diagnosis (benchmarks/probes/parser_tagging.py) on hand-written files: known words against
unknown ones, and the most-frequent-tag lookup."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.probes import parser_tagging

main = parser_tagging.main
tagging_report = parser_tagging.tagging_report


def _write(directory: Path, name: str, lines: list[str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text("".join(line + "\n" for line in lines), encoding="utf-8")


@pytest.fixture
def run(tmp_path):
    corpus = tmp_path / "data" / "toy"
    # "saw" is a verb twice and a noun once: the lookup says VBD.
    _write(corpus, "train.en", ["John saw Mary", "Mary saw John", "the saw"])
    _write(corpus, "train.tree", ["(S (NP NNP )NP (VP VBD (NP NNP )NP )VP )S",
                                  "(S (NP NNP )NP (VP VBD (NP NNP )NP )VP )S", "(NP DT NN )NP"])
    evaluation = tmp_path / "runs" / "abc" / "evaluation"
    _write(evaluation, "gold.trees", ["(TOP (S (NP (NNP John)) (VP (VBD saw) (NP (NNP Rex)))))",
                                      "(TOP (NP (DT the) (NN saw)))"])
    _write(evaluation, "predicted.trees", ["(TOP (S (NP (NNP John)) (VP (VBD saw) (NP (NN Rex)))))",
                                           "(TOP (NP (DT the) (VBD saw)))"])
    return tmp_path / "runs" / "abc", corpus


def test_known_and_unknown_words_are_scored_apart(run):
    run_dir, corpus = run
    report = tagging_report(run_dir / "evaluation", corpus)
    # Known: John, saw, the, saw (ours right on 3 of 4; the lookup on 3: "the saw" is NN).
    assert report["known"] == {"words": 4, "ours": 75.0, "most_frequent_tag": 75.0}
    assert report["unknown"] == {"words": 1, "ours": 0.0, "most_frequent_tag": 0.0}
    assert report["all"] == {"words": 5, "ours": 60.0}


def test_the_command_finds_the_corpus_beside_the_run(run, tmp_path, capsys):
    run_dir, _ = run
    assert main([str(run_dir), "--output", str(tmp_path / "report.json")]) == 0
    assert json.loads((tmp_path / "report.json").read_text())["tagging"]["known"]["words"] == 4


def test_a_training_tree_with_the_wrong_number_of_tags_names_its_line(run):
    run_dir, corpus = run
    _write(corpus, "train.tree", ["(S (NP NNP )NP (VP VBD (NP NNP )NP )VP )S", "(S NNP )S", "(NP DT NN )NP"])
    with pytest.raises(ValueError, match="train.tree line 2: 1 tags for 3 words"):
        tagging_report(run_dir / "evaluation", corpus)

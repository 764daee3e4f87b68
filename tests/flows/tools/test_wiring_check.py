"""``wiring-check`` (flows/tools/wiring_check.py): each task's check on a budget it must pass (a check
that passes whatever the model does would let a broken model through)."""

import json

import pytest

from tests.commands import run_json

#: A model small enough to overfit ten pairs in a few hundred steps on one core.
TINY = ["train.model.num_layers=1", "train.model.d_model=32", "train.model.num_heads=2", "train.model.d_ff=64"]


def _stops_at_the_first_pass(history: list[dict], score: str, target: float) -> None:
    # The check trains until its bar is reached, and no further.
    assert history[-1][score] >= target and all(h[score] < target for h in history[:-1])


@pytest.mark.slow
def test_the_translation_check_passes_a_model_that_learns_its_pairs(ddtp_corpus, tokenizer_model, tokenizer,
                                                                   tmp_path):
    settings = ["input.max_length=64", *TINY]
    report = run_json("-m", "flows.tools.wiring_check", "translation", "--corpus-dir", ddtp_corpus.directory,
                      "--tokenizer", tokenizer_model, "--pairs", 10, "--max-steps", 400,
                      *[arg for setting in settings for arg in ("--set", setting)],
                      "--output", tmp_path / "wiring.json", timeout=900)
    assert report["settings"] == settings and report["max_length"] == 64 and report["pairs"] == 10
    # Ten pairs learnt back (BLEU 100 after 200 steps when written), and their translations need the sources.
    assert report["overfit_passed"] and report["overfit"]["bleu"] >= report["target_bleu"] == 90.0
    assert report["source_check_passed"] and report["bleu_source_removed"] <= report["overfit"]["bleu"] / 2
    assert report["nll_source_zeroed"] > report["nll_with_source"]
    _stops_at_the_first_pass(report["history"], "bleu", report["target_bleu"])
    # The pairs are the first training pairs that fit max_length on both sides, as training reads them.
    first = next((s, t) for s, t in ddtp_corpus.pairs("train")
                 if max(len(tokenizer.tokenize(text).numpy()) for text in (s, t)) + 1 <= 64)
    assert (report["overfit"]["example"]["source"], report["overfit"]["example"]["reference"]) == first
    assert json.loads((tmp_path / "wiring.json").read_text()) == report


@pytest.mark.slow
def test_the_parser_check_passes_a_model_that_learns_its_trees(toy_treebank, tmp_path):
    report = run_json("-m", "flows.tools.wiring_check", "parsing", "--treebank", toy_treebank, "--smoke",
                      "--max-steps", 400, "--model", "tagger=fused", "--output", tmp_path / "wiring.json",
                      timeout=900)
    (result,) = report["results"]
    assert report["model_settings"] == {"tagger": "fused"}
    assert result["word_alignment"] is True and result["sentences"] == 10
    # Ten trees parsed back (F1 97 after 100 steps when written), and their loss needs the sentence.
    assert result["overfit_passed"] and result["overfit"]["f1"] >= result["target_f1"] == 95.0
    assert result["source_check_passed"] and result["nll_source_zeroed"] > result["nll_with_source"] + 1.0
    _stops_at_the_first_pass(result["history"], "f1", result["target_f1"])
    assert json.loads((tmp_path / "wiring.json").read_text()) == report


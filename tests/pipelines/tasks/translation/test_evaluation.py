"""Evaluation: the reported scores equal the sacrebleu command line's on the written files."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from keras_transformer.decoding.settings import DecodingSettings
from pipelines.config import load_config
from pipelines.tasks.translation.evaluation import (
    HYPOTHESES_FILE,
    REFERENCES_FILE,
    SCORES_FILE,
    SOURCES_FILE,
    TOKENIZED_HYPOTHESES_FILE,
    EvalConfig,
    ends_in_repetition,
    evaluate,
    paper_tokenize,
    read_lines_like_sacrebleu,
    replace_unicode_punctuation,
    split_compounds,
)

SACREBLEU = str(Path(sys.executable).with_name("sacrebleu"))
METRICS = ("bleu", "chrf", "tokenized_bleu_compound_split")


class ImperfectTranslator:
    """Returns the reference with every fourth word dropped and some noise: a BLEU well
    between 0 and 100, with hyphens, quotes and trailing spaces to exercise the file handling."""

    def __init__(self, pairs):
        self.references = dict(pairs)
        self.calls = []

    def decoding_record(self, **decoding):
        return DecodingSettings().merged(decoding).to_dict()

    def translate(self, sentences, **kwargs):
        self.calls.append(kwargs)
        out = []
        for i, source in enumerate(sentences):
            words = self.references[source].split()
            kept = [w for j, w in enumerate(words) if j % 4 != 3]
            if i % 5 == 0:
                kept.append("„Extra-Wort“ ")  # unicode quotes, a compound and a trailing space
            if i % 7 == 0:
                kept = kept[:1] + ["line\nbreak"] + kept[1:]
            if i % 11 == 10:
                kept.append("Entwicklungs-------")  # an undertrained decoder's stutter
            out.append(" ".join(kept))
        return out


@pytest.fixture(scope="module")
def evaluated(ddtp_corpus, tmp_path_factory):
    output_dir = tmp_path_factory.mktemp("eval")
    pairs = list(ddtp_corpus.pairs("test"))[:300]
    translator = ImperfectTranslator(pairs)
    config = EvalConfig(max_sentences=300, decoding={"beam_size": 2, "length_penalty": 0.6}, extra_splits=[])
    result = evaluate(translator, ddtp_corpus, "test", config, output_dir)
    return result, translator, output_dir


def run_cli(command: str, cwd: Path) -> dict:
    argv = shlex.split(command)
    assert argv[0] == "sacrebleu"
    completed = subprocess.run(
        [SACREBLEU, *argv[1:]], cwd=cwd, capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(completed.stdout)


@pytest.mark.parametrize("metric", METRICS)
def test_reported_scores_equal_sacrebleu_cli(evaluated, metric):
    result, _, output_dir = evaluated
    recorded = json.loads((output_dir / SCORES_FILE).read_text("utf-8"))[metric]
    cli = run_cli(recorded["command"], output_dir)
    width = 4
    assert cli["score"] == round(recorded["score"], width), (metric, cli, recorded)
    assert cli["signature"] == recorded["signature"]
    assert 5.0 < recorded["score"] < 95.0  # a real, non-degenerate number


def test_result_and_files(evaluated, ddtp_corpus):
    result, translator, output_dir = evaluated
    assert result.num_sentences == 300
    for name in (SOURCES_FILE, HYPOTHESES_FILE, REFERENCES_FILE, TOKENIZED_HYPOTHESES_FILE):
        assert len(read_lines_like_sacrebleu(output_dir / name)) == 300
    references = read_lines_like_sacrebleu(output_dir / REFERENCES_FILE)
    assert references == [t for _, t in list(ddtp_corpus.pairs("test"))[:300]]
    scores = json.loads(result.scores_path.read_text("utf-8"))
    assert scores["bleu"]["signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")
    assert "tok:none" in scores["tokenized_bleu_compound_split"]["signature"]
    assert "compound splitting" in scores["tokenized_bleu_compound_split"]["label"]
    assert scores["evaluation"]["decoding"] == DecodingSettings(beam_size=2, length_penalty=0.6).to_dict()
    assert translator.calls == [{"beam_size": 2, "length_penalty": 0.6, "batch_size": 32}]
    assert result.metrics()["bleu"] == scores["bleu"]["score"]
    assert scores["repeated_endings"] == {"count": 27, "lines": list(range(11, 301, 11))}
    assert result.metrics()["repeated_endings"] == 27
    assert result.examples(2) == [
        {"source": s, "reference": r, "translation": h} for s, r, h in zip(
            *(read_lines_like_sacrebleu(output_dir / f)[:2] for f in (SOURCES_FILE, REFERENCES_FILE, HYPOTHESES_FILE)))]
    # The two BLEU variants are different numbers on the same output.
    assert result.tokenized_bleu != pytest.approx(result.bleu)


@pytest.mark.parametrize("text, repeated", [
    ("Dieses Paket enthält die Entwicklungs-------", True), ("die die die die", True),
    ("Datei Datei Datei Datei ", True), ("aaaa", True), ("Version 10000", False),
    ("usw...", False), ("Bibliothek für Bibliothek", False), ("", False)])
def test_ends_in_repetition(text, repeated):
    assert ends_in_repetition(text) is repeated


def test_paper_tokenization():
    assert split_compounds("rich-text format") == "rich ##AT##-##AT## text format"
    # perl s///g is non-overlapping, left to right
    assert split_compounds("a-b-c") == "a ##AT##-##AT## b-c"
    assert split_compounds("- a -") == "- a -"
    assert replace_unicode_punctuation("“Hallo”… ’s") == '"Hallo"... \'s'
    # 13a splits ASCII punctuation off words (“ became " first) but keeps hyphenated words
    # whole; only then are compounds split, as after Moses' tokenizer.perl.
    assert paper_tokenize("Das „Open-Source“-Programm, sagt er.") == (
        'Das „Open ##AT##-##AT## Source " -Programm , sagt er .'
    )


def test_eval_config_from_yaml(tmp_path):
    path = tmp_path / "eval.yaml"
    path.write_text("evaluation:\n  split: validation\n  decoding:\n    beam_size: 4\n    length_penalty: 0.6\n"
                    "  max_sentences: 10\n")
    config = load_config(EvalConfig, path, section="evaluation")
    assert config == EvalConfig(split="validation", decoding={"beam_size": 4, "length_penalty": 0.6}, max_sentences=10)
    with pytest.raises(ValueError):
        EvalConfig(decoding={"beam_size": 0})


def test_evaluate_with_a_real_translator(ddtp_corpus, tokenizer_model, tmp_path):
    """End to end with a (random, tiny) Transformer and the SentencePiece tokenizer."""
    import keras_transformer as kt
    from keras_transformer.tokenizer import SubwordTokenizer

    tokenizer = SubwordTokenizer(tokenizer_model)
    model = kt.Transformer(vocab_size=tokenizer.vocab_size, num_layers=1, d_model=16, num_heads=2, d_ff=32)
    config = EvalConfig(split="validation", max_sentences=4, decoding={"beam_size": 2, "max_length_offset": 3})
    result = evaluate(model, ddtp_corpus, config=config, output_dir=tmp_path, tokenizer=tokenizer)
    assert result.num_sentences == 4
    assert len(read_lines_like_sacrebleu(tmp_path / HYPOTHESES_FILE)) == 4
    assert result.scores["evaluation"]["decoding"] == DecodingSettings(beam_size=2, max_length_offset=3).to_dict()


def test_a_test_evaluation_also_scores_the_unseen_packages(ddtp_corpus, tmp_path):
    """By default ``test`` brings the corpus' ``test_unseen`` along: files in a subdirectory,
    its numbers beside the first split's in the metrics and in ``scores.json``."""
    assert "test_unseen" in ddtp_corpus.splits
    pairs = [*list(ddtp_corpus.pairs("test"))[:40], *list(ddtp_corpus.pairs("test_unseen"))[:40]]
    translator = ImperfectTranslator(pairs)
    result = evaluate(translator, ddtp_corpus, config=EvalConfig(max_sentences=40, decoding={"beam_size": 1}),
                      output_dir=tmp_path)
    assert list(result.others) == ["test_unseen"] and len(translator.calls) == 2
    unseen = result.others["test_unseen"]
    assert read_lines_like_sacrebleu(tmp_path / "test_unseen" / REFERENCES_FILE) == [
        t for _, t in list(ddtp_corpus.pairs("test_unseen"))[:40]]
    metrics = result.metrics()
    assert metrics["test_unseen_bleu"] == unseen.bleu != metrics["bleu"]
    assert {"test_unseen_chrf", "test_unseen_brevity_penalty", "test_unseen_looping_hypotheses",
            "looping_references"} <= set(metrics)
    recorded = json.loads((tmp_path / SCORES_FILE).read_text("utf-8"))
    assert recorded["other_splits"]["test_unseen"]["bleu"] == unseen.bleu
    assert recorded["evaluation"]["split"] == "test"
    # The headline a reader sees first names both splits with their own BLEU.
    first, second = result.headline("test").splitlines()
    assert first.startswith(f"test: BLEU {result.bleu:.2f} ")
    assert second.startswith(f"test_unseen: BLEU {unseen.bleu:.2f} ")
    assert json.loads((tmp_path / "test_unseen" / SCORES_FILE).read_text("utf-8"))["evaluation"]["split"] == \
        "test_unseen"
    # Asked for by name, or not at all.
    only = evaluate(ImperfectTranslator(pairs), ddtp_corpus, "test_unseen",
                    EvalConfig(max_sentences=5, extra_splits=[]), tmp_path / "only")
    assert only.others == {} and only.scores["evaluation"]["split"] == "test_unseen"
    with pytest.raises(ValueError, match="extra_splits=.*'test_unknown' is not one of"):
        EvalConfig(extra_splits=["test_unknown"])


def test_loops_and_brevity_are_recorded(evaluated):
    result, _, _ = evaluated
    loops = result.scores["loops"]
    # "Entwicklungs-------" is punctuation only: a repeated ending, not a loop of words.
    assert loops["sentences"] == 300 and loops["hypotheses"] >= loops["references"]
    assert result.metrics()["looping_hypotheses"] == loops["hypotheses"]
    assert 0 < result.scores["bleu"]["brevity_penalty"] <= 1
    assert result.scores["bleu"]["length_ratio"] < 1  # every fourth word dropped

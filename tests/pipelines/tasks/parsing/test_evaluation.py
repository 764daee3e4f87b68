"""The parsing evaluation stage: decoded sequences become trees, scored with the baselines beside them.

The translator here is an oracle or a source of garbage standing in for a trained model, so that
the scores are known: a model's own numbers are in the flow test and the benchmark report.
"""

import json

import pytest

from pipelines.tasks.parsing.data import TreebankConfig, prepare_treebank
from pipelines.tasks.parsing.evaluation import ParseEvalConfig, evaluate_parser, metrics


class Oracle:
    """Answers with the gold linearisation (or a fixed sequence) for each sentence."""

    def __init__(self, corpus, split, answer=None):
        self.gold = dict(corpus.pairs(split))
        self.answer = answer
        self.calls = []

    def decoding_record(self, **decoding):
        return {"oracle": True, **decoding}

    def translate(self, sentences, n_best=False, **kwargs):
        self.calls.append(kwargs)
        answers = [self.answer if self.answer is not None else self.gold[s] for s in sentences]
        # An n-best list whose first entry is the empty parse a wide beam can rank first.
        return [["", answer] for answer in answers] if n_best else answers


@pytest.fixture(scope="module")
def corpus(toy_treebank, tmp_path_factory):
    from pipelines.corpus import Corpus

    out = tmp_path_factory.mktemp("treebank")
    return Corpus.load(prepare_treebank(TreebankConfig(path=str(toy_treebank), output_dir=str(out),
                                                       max_train_trees=10)))


def test_gold_output_scores_100_and_the_baselines_score_less(corpus, tmp_path):
    config = ParseEvalConfig(split="test", max_sentences=40, decoding={"beam_size": 3})
    oracle = Oracle(corpus, "test")
    record = evaluate_parser(oracle, corpus, config, tmp_path)
    assert oracle.calls[0]["beam_size"] == 3  # the config's decoding reaches the decoder
    assert record["evaluation"]["decoding"] == {"oracle": True, "beam_size": 3}  # and its record
    assert record["all"]["fmeasure"] == 100 and record["all"]["tagging_accuracy"] == 100
    assert record["repaired"] == 0 and record["valid_before_repair"] == 40
    right, frequent = (record["baselines"][k]["all"]["fmeasure"] for k in ("right_branching", "most_frequent_label"))
    assert 0 < right < 60 and 0 < frequent < 100
    assert json.loads((tmp_path / "scores.json").read_text()) == record
    assert len((tmp_path / "predicted.trees").read_text().splitlines()) == 40
    assert len((tmp_path / "per_sentence.jsonl").read_text().splitlines()) == 40
    flat = metrics(record)
    assert flat["f1"] == 100 and flat["baseline_right_branching_f1"] == right


def test_garbage_output_is_repaired_into_trees_over_the_words(corpus, tmp_path):
    record = evaluate_parser(Oracle(corpus, "test", answer=")NP (VP NN NN NN )S )S <unk>"), corpus,
                             ParseEvalConfig(max_sentences=20), tmp_path)
    assert record["repaired"] == 20 and record["all"]["error_sentences"] == 0
    # EVALB proper deletes the punctuation the filler tags hide only from gold: errors, left out.
    assert record["evalb"]["all"]["error_sentences"] > 0
    predicted = (tmp_path / "predicted.trees").read_text().splitlines()
    sources = (tmp_path / "sources.txt").read_text().splitlines()
    from pipelines.tasks.parsing.tree import parse_tree

    for line, sentence in zip(predicted, sources):
        assert parse_tree(line).words() == sentence.split()
    assert 0 <= record["all"]["fmeasure"] < 50


def test_invalid_settings_name_the_setting():
    with pytest.raises(ValueError, match="split=.*: must be one of"):
        ParseEvalConfig(split="dev")
    with pytest.raises(ValueError, match="punctuation"):
        ParseEvalConfig(punctuation="none")
    with pytest.raises(ValueError, match="beam_size=0: must be a positive integer"):
        ParseEvalConfig(decoding={"beam_size": 0})

"""Sentence pairs cut from paragraph pairs: where they replace a paragraph, and the training cache built so."""

import numpy as np
import pytest

from keras_transformer.decoding import sentences
from pipelines.input_pipeline import InputConfig, build_cache, cache_path, lengths_path, token_dataset
from pipelines.input_reports import length_report
from pipelines.sentence_pairs import with_sentence_pairs

PAIRS = [
    ("Tools for foo. This package contains the tools.", "Werkzeuge für foo. Dieses Paket enthält sie."),
    ("One sentence only, e.g. here.", "Nur ein Satz, z. B. hier."),
    # Three English sentences, two German ones: no alignment, the paragraph stays whole.
    ("It reads XML. It writes JSON. It is fast.", "Es liest XML und schreibt JSON. Es ist schnell."),
    # A list: its items are pairs too, without their bullets, as the decoding gives them to the model.
    ("Features: * fast * small", "Merkmale: * schnell * klein"),
]


def test_only_replaces_aligned_paragraphs_and_none_changes_nothing():
    assert list(with_sentence_pairs(PAIRS, "only", chunk_size=2)) == [
        ("Tools for foo.", "Werkzeuge für foo."), ("This package contains the tools.", "Dieses Paket enthält sie."),
        PAIRS[1], PAIRS[2], ("Features:", "Merkmale:"), ("fast", "schnell"), ("small", "klein")]
    assert list(with_sentence_pairs(PAIRS, "none")) == PAIRS


def test_the_setting_is_checked():
    with pytest.raises(ValueError, match="sentence_pairs=.*: must be one of none, only"):
        InputConfig(sentence_pairs="sentences")
    with pytest.raises(ValueError, match="sentence_pairs"):
        list(with_sentence_pairs(PAIRS, "both"))


def test_only_the_training_cache_holds_sentence_pairs(ddtp_corpus, tokenizer, tmp_path, monkeypatch):
    config = InputConfig(tokens_per_batch=2048, max_length=128, cache_dir=str(tmp_path), sentence_pairs="only")
    # The setting's default keeps the caches written before it (their names do not change); a cache of
    # sentence pairs is named by the split that cut them, so a newer split does not read an older cut.
    assert cache_path(ddtp_corpus, "train", tokenizer, config) == cache_path(
        ddtp_corpus, "train", tokenizer, InputConfig(tokens_per_batch=2048, max_length=128, cache_dir=str(tmp_path)))
    with monkeypatch.context() as patch:
        current = cache_path(ddtp_corpus, "train", tokenizer, config, "only")
        patch.setattr(sentences, "SPLIT_VERSION", sentences.SPLIT_VERSION + 1)
        assert cache_path(ddtp_corpus, "train", tokenizer, config, "only") != current
    paragraphs = np.load(lengths_path(build_cache(ddtp_corpus, "train", tokenizer, config)))
    only = np.load(lengths_path(build_cache(ddtp_corpus, "train", tokenizer, config, "only")))
    assert len(paragraphs) == ddtp_corpus.counts["train"]
    assert len(only) > len(paragraphs)
    # The sentences hold their paragraphs' text: "only" keeps the pieces and cuts long pairs short,
    # so fewer pairs are too long for max_length.
    assert abs(only.sum() / paragraphs.sum() - 1) < 0.02
    assert (only.max(1) > 127).sum() < 0.8 * (paragraphs.max(1) > 127).sum()
    training = token_dataset(ddtp_corpus, "train", tokenizer, config, training=True).reduce(0, lambda n, _: n + 1)
    validation = token_dataset(ddtp_corpus, "validation", tokenizer, config, training=False).reduce(
        0, lambda n, _: n + 1)
    assert int(validation) <= ddtp_corpus.counts["validation"]
    assert int(training) > int(token_dataset(ddtp_corpus, "train", tokenizer, InputConfig(
        tokens_per_batch=2048, max_length=128, cache_dir=str(tmp_path)), training=True).reduce(0, lambda n, _: n + 1))


def test_the_length_report_counts_the_pairs_training_reads(ddtp_corpus, tokenizer, tmp_path):
    config = InputConfig(tokens_per_batch=2048, max_length=128, cache_dir=str(tmp_path), sentence_pairs="only")
    paragraphs = length_report(ddtp_corpus, "train", tokenizer, config)
    training = length_report(ddtp_corpus, "train", tokenizer, config, training=True)
    assert paragraphs["pairs"] == ddtp_corpus.counts["train"] < training["pairs"]
    assert training["target_tokens_dropped_share"] < paragraphs["target_tokens_dropped_share"]

"""Reports on the input (pipelines/input_reports.py): padding, and what ``max_length`` drops, on the real corpus."""

import logging

import pytest
import tensorflow as tf

from pipelines.input_pipeline import InputConfig, cache_path, lengths_path
from pipelines.input_reports import length_report, padding_fraction, padding_report

logger = logging.getLogger(__name__)


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    return InputConfig(tokens_per_batch=2048, max_length=128, shuffle_buffer=2000,
                       cache_dir=str(tmp_path_factory.mktemp("cache")))


def test_length_report_counts_what_max_length_drops(ddtp_corpus, tokenizer, config):
    report = length_report(ddtp_corpus, "test", tokenizer, config)
    dropped = tokens = dropped_tokens = 0
    for s, t in ddtp_corpus.pairs("test"):
        n_s, n_t = len(tokenizer.tokenize(s).numpy()), len(tokenizer.tokenize(t).numpy())
        tokens += n_t
        if max(n_s, n_t) + 1 > config.max_length:
            dropped, dropped_tokens = dropped + 1, dropped_tokens + n_t
    assert report["pairs"] == ddtp_corpus.counts["test"] and report["pairs_dropped"] == dropped > 0
    assert report["pairs_dropped_share"] == pytest.approx(dropped / report["pairs"])
    # The dropped pairs are the longest: their share of the tokens exceeds their share of the pairs.
    assert report["target_tokens_dropped_share"] == pytest.approx(dropped_tokens / tokens)
    assert report["target_tokens_dropped_share"] > report["pairs_dropped_share"]
    wide = length_report(ddtp_corpus, "test", tokenizer, InputConfig(tokens_per_batch=4096, max_length=4096,
                                                                     cache_dir=config.cache_dir))
    assert wide["pairs_dropped"] == 0 and wide["target_tokens_dropped_share"] == 0.0
    # The lengths kept beside the cache answer later calls; a cache without them is read once.
    lengths = lengths_path(cache_path(ddtp_corpus, "test", tokenizer, config))
    assert lengths.is_file()
    lengths.unlink()
    assert length_report(ddtp_corpus, "test", tokenizer, config) == report and lengths.is_file()


def test_padding_fraction_bucketed_vs_fixed_length(ddtp_corpus, tokenizer, config):
    """The paper's length bucketing wastes far less compute on padding than fixed lengths."""
    config = InputConfig(tokens_per_batch=4096, max_length=256, cache_dir=config.cache_dir)
    report = padding_report(ddtp_corpus, "train", tokenizer, config)
    bucketed, fixed, unbucketed = (report[k] for k in ("bucketed", "fixed_length", "unbucketed"))
    logger.info("padding fraction, en-de train, 4096 tokens/batch: bucketed %.3f (source %.3f, "
                "target %.3f), unbucketed %.3f, fixed length %.3f", bucketed["total"],
                bucketed["source"], bucketed["target"], unbucketed["total"], fixed["total"])
    assert bucketed["tokens"] == fixed["tokens"] == unbucketed["tokens"]
    assert bucketed["max_batch_tokens"] <= config.tokens_per_batch
    assert bucketed["total"] < 0.5 * unbucketed["total"]
    assert bucketed["total"] < 0.25 < 0.75 < fixed["total"]


def test_padding_fraction_counts_pad_positions():
    batch = ((tf.constant([[5, 6, 3, 0], [7, 3, 0, 0]]), tf.constant([[2, 5, 0], [2, 0, 0]])),
             tf.constant([[5, 3, 0], [3, 0, 0]]))
    stats = padding_fraction(tf.data.Dataset.from_tensors(batch))
    assert stats["source"] == 3 / 8 and stats["target"] == 3 / 6
    assert stats["total"] == 6 / 14 and stats["examples"] == 2 and stats["batches"] == 1

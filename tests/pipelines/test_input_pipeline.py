"""Token-bucketed batches on the real corpus: budget, layout, cache."""

import logging
from collections import Counter

import numpy as np
import pytest
import tensorflow as tf

from pipelines import input_pipeline
from pipelines.config import ConfigError, from_dict
from pipelines.input_pipeline import (
    InputConfig,
    cache_path,
    make_dataset,
    make_fixed_length_dataset,
)
from pipelines.tokenization import TokenizerConfig, load_tokenizers, train_tokenizer

logger = logging.getLogger(__name__)


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    return InputConfig(tokens_per_batch=2048, max_length=128, shuffle_buffer=2000,
                       cache_dir=str(tmp_path_factory.mktemp("cache")))


def _lengths(ids):
    return np.sum(ids != 0, axis=1)


def test_batches_respect_token_budget_and_layout(ddtp_corpus, tokenizer, config):
    dataset = make_dataset(ddtp_corpus, "train", tokenizer, config, training=True)
    examples = batches = 0
    for (source, target_in), target_out in dataset.as_numpy_iterator():
        assert source.dtype == target_in.dtype == target_out.dtype == np.int32
        batch_size = source.shape[0]
        assert batch_size * source.shape[1] <= config.tokens_per_batch
        assert batch_size * target_in.shape[1] <= config.tokens_per_batch
        assert max(source.shape[1], target_in.shape[1]) <= config.max_length
        assert target_in.shape == target_out.shape
        src_len, tgt_len = _lengths(source), _lengths(target_out)
        rows = np.arange(batch_size)
        # source = tokens + [EOS]; target_in = [BOS] + tokens; target_out = tokens + [EOS].
        assert np.all(source[rows, src_len - 1] == tokenizer.eos_id)
        assert np.all(target_in[:, 0] == tokenizer.bos_id)
        assert np.all(target_out[rows, tgt_len - 1] == tokenizer.eos_id)
        assert np.array_equal(target_in[:, 1:], np.where(target_out[:, :-1] == tokenizer.eos_id, 0,
                                                target_out[:, :-1]))
        # Padding only after the content: the mask is a prefix.
        assert np.all(src_len == np.argmin(np.pad(source, ((0, 0), (0, 1))) != 0, axis=1))
        examples += batch_size
        batches += 1
    # One epoch holds every pair that fits max_length (counted without bucketing), and most do.
    fitting = make_fixed_length_dataset(ddtp_corpus, "train", tokenizer, config).reduce(
        0, lambda n, batch: n + tf.shape(batch[1])[0])
    assert examples == int(fitting) > 0.9 * ddtp_corpus.counts["train"]
    assert batches > 100


def test_every_example_once_and_max_length_filter(ddtp_corpus, tokenizer, config):
    """Eval order: the test split comes back complete (up to the length filter), in text."""
    dataset = make_dataset(ddtp_corpus, "test", tokenizer, config, training=False)
    seen = Counter()
    for (source, _), target_out in dataset:
        for s, t in zip(tokenizer.detokenize(source).numpy(),
                        tokenizer.detokenize(target_out).numpy()):
            seen[(s.decode(), t.decode())] += 1
    fits = Counter()
    for s, t in ddtp_corpus.pairs("test"):
        n_s = len(tokenizer.tokenize(s).numpy())
        n_t = len(tokenizer.tokenize(t).numpy())
        if max(n_s, n_t) + 1 <= config.max_length:
            fits[(s, t)] += 1
    assert seen == fits
    assert 0 < sum(fits.values()) < ddtp_corpus.counts["test"]  # the filter did drop some



def test_cache_is_reused_and_keyed_by_tokenizer(ddtp_corpus, tokenizer, config, tmp_path,
                                                monkeypatch):
    path = cache_path(ddtp_corpus, "validation", tokenizer, config)
    input_pipeline.build_cache(ddtp_corpus, "validation", tokenizer, config)
    assert path.is_file()
    mtime = path.stat().st_mtime_ns

    def no_tokenizing(*args, **kwargs):
        raise AssertionError("re-tokenized although the cache is valid")

    monkeypatch.setattr(type(tokenizer), "tokenize", no_tokenizing)
    first = next(iter(make_dataset(ddtp_corpus, "validation", tokenizer, config, training=False)))
    assert path.stat().st_mtime_ns == mtime and first[1].shape[0] > 0
    monkeypatch.undo()
    # Another tokenizer (here: other vocabulary size) gets another cache file.
    other_model = train_tokenizer(ddtp_corpus, TokenizerConfig(vocab_size=500,
                                                               input_sentence_size=2000), tmp_path)
    other, _ = load_tokenizers(other_model)
    assert cache_path(ddtp_corpus, "validation", other, config) != path
    assert cache_path(ddtp_corpus, "test", tokenizer, config) != path


def test_shuffling_is_seeded_and_repeat_is_optional(ddtp_corpus, tokenizer, config):
    def first_batch(seed):
        cfg = InputConfig(**{**config.__dict__, "seed": seed})
        (source, _), _ = next(iter(make_dataset(ddtp_corpus, "validation", tokenizer, cfg,
                                                training=True)))
        return source.numpy()

    assert np.array_equal(first_batch(1), first_batch(1))
    assert not np.array_equal(first_batch(1), first_batch(2))
    one_epoch = sum(1 for _ in make_dataset(ddtp_corpus, "validation", tokenizer, config,
                                            training=True))
    repeated = make_dataset(ddtp_corpus, "validation", tokenizer,
                            InputConfig(**{**config.__dict__, "repeat": True}), training=True)
    assert sum(1 for _ in repeated.take(3 * one_epoch)) == 3 * one_epoch




def test_bucket_settings():
    config = InputConfig(tokens_per_batch=1000, max_length=100, bucket_boundaries=[11, 21, 51])
    assert config.bucket_batch_sizes() == [100, 50, 20, 10]
    auto = InputConfig(max_length=64)
    boundaries = auto.boundaries()
    assert boundaries[0] == 8 and boundaries[-1] < 64 and boundaries == sorted(set(boundaries))
    with pytest.raises(ConfigError, match="strictly increasing"):
        from_dict(InputConfig, {"bucket_boundaries": [10, 10, 20]})
    with pytest.raises(ConfigError, match="must not exceed max_length"):
        from_dict(InputConfig, {"max_length": 64, "bucket_boundaries": [32, 128]})
    with pytest.raises(ConfigError, match="tokens_per_batch"):
        from_dict(InputConfig, {"tokens_per_batch": 100, "max_length": 256})


def test_batches_come_without_tf_data_autotuning(ddtp_corpus, tokenizer, config):
    # Deleting an iterator waits for the autotuner's thread, asleep for up to a minute: the end
    # of a training run stalled so. The options reach every dataset built on the cache's records.
    for training in (True, False):
        dataset = make_dataset(ddtp_corpus, "validation", tokenizer, config, training=training)
        assert dataset.options().autotune.enabled is False
        assert dataset.repeat().skip(1).options().autotune.enabled is False
    fixed = make_fixed_length_dataset(ddtp_corpus, "validation", tokenizer, config)
    assert fixed.options().autotune.enabled is False


def test_records_handled_in_batches_give_the_stream_one_at_a_time_gives(ddtp_corpus, tokenizer, config):
    """The batched parse, filter and special tokens change nothing the shuffle or a saved data
    position sees: the same elements in the same order as the record-by-record pipeline."""
    short = InputConfig(**{**config.__dict__, "max_length": 24})  # leaves some pairs out
    path = input_pipeline.build_cache(ddtp_corpus, "validation", tokenizer, short)

    def one_at_a_time():
        limit = short.max_length - 1
        features = {"source": tf.io.RaggedFeature(tf.int64), "target": tf.io.RaggedFeature(tf.int64)}
        for record in input_pipeline.cache_records(path).as_numpy_iterator():
            pair = tf.io.parse_single_example(record, features)
            source, target = pair["source"].numpy().astype(np.int32), pair["target"].numpy().astype(np.int32)
            if len(source) <= limit and len(target) <= limit:
                yield ((np.append(source, tokenizer.eos_id), np.insert(target, 0, tokenizer.bos_id)),
                       np.append(target, tokenizer.eos_id))

    batched = input_pipeline.token_dataset(ddtp_corpus, "validation", tokenizer, short, training=False)
    assert batched.element_spec[1].shape.as_list() == [None]
    expected, got = list(one_at_a_time()), list(batched.as_numpy_iterator())
    assert 0 < len(got) == len(expected) < ddtp_corpus.counts["validation"]
    for ((s, t_in), t_out), ((es, et_in), et_out) in zip(got, expected):
        assert np.array_equal(s, es) and np.array_equal(t_in, et_in) and np.array_equal(t_out, et_out)


def test_batches_are_tf_datas_buckets(ddtp_corpus, tokenizer, config):
    """The batch-at-a-time padding makes exactly ``bucket_by_sequence_length``'s batches, shuffled
    and repeated as in training."""
    cfg = InputConfig(**{**config.__dict__, "repeat": True})
    elements = input_pipeline.token_dataset(ddtp_corpus, "validation", tokenizer, cfg, training=True)
    reference = elements.map(lambda inputs, target: (inputs, target)).bucket_by_sequence_length(
        lambda inputs, target: tf.maximum(tf.shape(inputs[0])[0], tf.shape(target)[0]),
        cfg.boundaries(), cfg.bucket_batch_sizes(), padding_values=((0, 0), 0))
    got = make_dataset(ddtp_corpus, "validation", tokenizer, cfg, training=True)
    one_epoch = sum(1 for _ in make_dataset(ddtp_corpus, "validation", tokenizer, config, training=True))
    batches = 0
    for ((s, t_in), t_out), ((es, et_in), et_out) in zip(got.take(2 * one_epoch).as_numpy_iterator(),
                                                          reference.as_numpy_iterator()):
        assert s.shape == es.shape and t_in.shape == et_in.shape
        assert np.array_equal(s, es) and np.array_equal(t_in, et_in) and np.array_equal(t_out, et_out)
        batches += 1
    assert batches == 2 * one_epoch > 10
    assert got.element_spec[1].shape.as_list() == [None, None]

"""tf.data input: cached subword ids, batches bucketed by length and filled to a token budget.

Paper Section 5.1: "Sentence pairs were batched together by approximate sequence length. Each
training batch contained a set of sentence pairs containing approximately 25000 source tokens and
25000 target tokens." :func:`make_dataset` groups examples into buckets by length (as
``tensor2tensor`` does) and gives each bucket the batch size ``tokens_per_batch // L``, ``L``
being the longest length the bucket admits, so that every batch satisfies
``batch_size * padded_length <= tokens_per_batch`` on the source and on the target side. A
pair's length is the longer of its two sides.

Each element is ``((source_ids, target_input_ids), target_output_ids)``, int32, padded with the
pad id 0::

    source_ids        = tokens(source) + [EOS]
    target_input_ids  = [BOS] + tokens(target)      # decoder input, shifted right
    target_output_ids = tokens(target) + [EOS]      # what the decoder predicts

Tokenized ids are cached on disk as TFRecord files keyed by a hash of the corpus split and the
tokenizer model(s), so that a restart does not re-tokenize and a changed tokenizer or corpus
invalidates the cache; the pairs' lengths are kept beside it. The cache is written by one process
per core, the same file as one process writes (:mod:`pipelines.token_cache`), to a temporary
renamed into place when complete. ``pipelines.input_reports`` measures the padding of the batches
and what ``max_length`` drops.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from pipelines.config import DROPPED, SettingError
from pipelines.corpus import Corpus
from pipelines.progress import counted
from pipelines.sentence_pairs import MODES as SENTENCE_PAIRS
from pipelines.textfiles import DataError
from pipelines.token_cache import encoded, worker_count
from pipelines.vocabulary import Vocabulary, as_vocabulary

if TYPE_CHECKING:  # imported where used: reading the settings must not import it
    import numpy as np
    import tensorflow as tf

    from keras_transformer.tokenizer import SubwordTokenizer

    #: One shared tokenizer, or the vocabulary's tokenizers (``Vocabulary(source, target)``).
    Tokenizers = SubwordTokenizer | Vocabulary[SubwordTokenizer]

logger = logging.getLogger(__name__)

CACHE_FORMAT_VERSION = 1
#: Sentences tokenized at a time when the cache is written.
TOKENIZE_BATCH = 1024


@dataclasses.dataclass
class InputConfig:
    """Settings of the input pipeline: pairs bucketed by length into batches of a token budget, their ids cached."""

    #: Token budget of a batch, per side (the paper: ~25000 on 8 GPUs; 4096 suits a CPU); a step may accumulate
    #: batches (``train.tokens_per_step``).
    tokens_per_batch: int = 4096
    #: The longest pair trained on, counting the BOS/EOS token; longer pairs are dropped (the training stage logs how
    #: many).
    max_length: int = 256
    #: The buckets' exclusive upper lengths (the last bucket runs up to ``max_length``); null: growing geometrically
    #: from ``min_bucket_length`` by ``bucket_step``, as tensor2tensor's.
    bucket_boundaries: list[int] | None = None
    #: The first bucket boundary when ``bucket_boundaries`` is null.
    min_bucket_length: int = 8
    #: The factor from one bucket boundary to the next when ``bucket_boundaries`` is null (> 1).
    bucket_step: float = 1.1
    #: Training examples shuffled together (with ``seed``).
    shuffle_buffer: int = 10000
    #: Seed of the shuffling.
    seed: int = 0
    #: Where the token ids are cached, in files named by a hash of everything that made them; null:
    #: ``<corpus>/cache``.
    cache_dir: str | None = None
    #: Repeat a training dataset indefinitely (otherwise the caller repeats it).
    repeat: bool = False
    #: ``only``: a training paragraph pair whose two sides split into as many sentences (list items too) trains as
    #: those sentence pairs (``pipelines.sentence_pairs``); ``none``: paragraphs whole. Validation and test stay
    #: whole.
    sentence_pairs: str = "none"

    #: Settings and values taken out of the product: a config naming one fails saying so.
    removed_settings: ClassVar[dict[str, str]] = {
        "subword_dropout": DROPPED,
        "bucket_by": f"batches are bucketed by the longer side; bucket_by: source {DROPPED}",
        "prefetch": "the input pipeline always prepares the next batches while the model trains",
        "tokenize_batch_size": f"the cache is written {TOKENIZE_BATCH} sentences at a time",
    }
    removed_values: ClassVar[dict[str, dict[str, str]]] = {"sentence_pairs": {"add": DROPPED, "only_aligned": DROPPED}}

    def __post_init__(self) -> None:
        # Each out of range fails only later and far from here (TensorFlow's shuffle, an empty cache).
        for name in ("tokens_per_batch", "shuffle_buffer"):
            if getattr(self, name) < 1:
                raise SettingError(self, name, "must be a positive integer")
        if self.max_length < 2:
            raise SettingError(self, "max_length", "must be >= 2")
        if self.min_bucket_length < 2:
            raise SettingError(self, "min_bucket_length", "must be >= 2, as bucket_boundaries")
        if self.tokens_per_batch < self.max_length:
            raise SettingError(self, "tokens_per_batch", f"must be at least max_length ({self.max_length}) "
                               "so every bucket holds one example")
        if self.bucket_boundaries is not None:
            b = list(self.bucket_boundaries)
            if not b or any(x >= y for x, y in zip(b, b[1:])) or b[0] < 2:
                raise SettingError(self, "bucket_boundaries", "must be strictly increasing integers >= 2")
            if b[-1] > self.max_length:
                raise SettingError(self, "bucket_boundaries", f"must not exceed max_length ({self.max_length})")
        if self.bucket_step <= 1.0:
            raise SettingError(self, "bucket_step", "must be > 1")
        if self.sentence_pairs not in SENTENCE_PAIRS:
            raise SettingError(self, "sentence_pairs", f"must be one of {', '.join(SENTENCE_PAIRS)}")

    def boundaries(self) -> list[int]:
        """The bucket boundaries in use (explicit, or the geometric default)."""
        if self.bucket_boundaries is not None:
            return list(self.bucket_boundaries)
        boundaries = []
        x = self.min_bucket_length
        while x < self.max_length:
            boundaries.append(x)
            x = max(x + 1, int(x * self.bucket_step))
        return boundaries

    def bucket_batch_sizes(self) -> list[int]:
        """Batch size per bucket: the budget divided by the longest length the bucket admits."""
        longest = [b - 1 for b in self.boundaries()] + [self.max_length]
        return [max(1, self.tokens_per_batch // n) for n in longest]


def cache_path(corpus: Corpus, split: str, tokenizers: Tokenizers, config: InputConfig,
               sentence_pairs: str = "none") -> Path:
    """The TFRecord file of ``split``'s ids, named by a hash of everything that determines them."""
    source_tok, target_tok = as_vocabulary(tokenizers)
    parts = [str(CACHE_FORMAT_VERSION), corpus.fingerprint(split), source_tok.fingerprint, target_tok.fingerprint]
    if sentence_pairs != "none":  # the caches written before the setting keep their names
        from keras_transformer.decoding.sentences import SPLIT_VERSION

        parts.append(f"sentence_pairs={sentence_pairs},split={SPLIT_VERSION}")
    key = hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]
    cache_dir = Path(config.cache_dir) if config.cache_dir else corpus.directory / "cache"
    return cache_dir / f"{corpus.language_pair}.{split}.{key}.tfrecord"


def build_cache(corpus: Corpus, split: str, tokenizers: Tokenizers, config: InputConfig,
                sentence_pairs: str = "none") -> Path:
    """Tokenizes ``split`` once into its TFRecord cache (atomically); returns the file.

    ``sentence_pairs`` substitutes the paragraphs' sentence pairs
    (:func:`~pipelines.sentence_pairs.with_sentence_pairs`); the training split's cache is built so.

    Each record is a ``tf.train.Example`` with int64 lists ``source`` and ``target`` holding the
    subword ids without BOS/EOS (those are added when reading, so the cache does not depend on
    the special-token layout or on ``max_length``). The pairs' lengths go beside it
    (:func:`lengths_path`), so that :func:`length_report` need not read the whole cache.
    """
    import numpy as np
    import tensorflow as tf

    path = cache_path(corpus, split, tokenizers, config, sentence_pairs)
    if path.is_file():
        return path
    source_tok, target_tok = as_vocabulary(tokenizers)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    total = corpus.counts[split]
    workers = worker_count(total)
    logger.info("tokenizing %s (%s pairs, sentence_pairs=%s) on %d process%s into %s", split, f"{total:,}",
                sentence_pairs, workers, "es" if workers > 1 else "", path)
    n, lengths = 0, []

    def paragraphs():
        nonlocal n
        for pair in counted(corpus.pairs(split), f"tokenize {split}", total):
            n += 1
            yield pair

    target_model = None if target_tok is source_tok else target_tok.serialized_model
    try:
        with tf.io.TFRecordWriter(tmp) as writer:
            for records, chunk_lengths in encoded(paragraphs(), source_tok.serialized_model, target_model,
                                                  sentence_pairs, TOKENIZE_BATCH, workers):
                for record in records:
                    writer.write(record)
                lengths.append(chunk_lengths)
        if n != total:
            raise DataError(f"{corpus.directory}: split '{split}' has {n} pairs, manifest says "
                            f"{total}")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    lengths = np.concatenate(lengths) if lengths else np.zeros([0, 2], np.int32)
    _save_lengths(path, lengths)
    logger.info("cached %d tokenized %s pairs (%s paragraphs, sentence_pairs=%s) in %s", len(lengths), split, n,
                sentence_pairs, path)
    return path


def lengths_path(cache: Path) -> Path:
    """The ``[pairs, 2]`` int32 array of (source, target) lengths beside a cache file."""
    return cache.with_suffix(".lengths.npy")


def _save_lengths(cache: Path, lengths: np.ndarray) -> None:
    import numpy as np

    fd, tmp = tempfile.mkstemp(dir=cache.parent, prefix=f".{cache.name}.", suffix=".npy")
    try:
        with os.fdopen(fd, "wb") as file:
            np.save(file, lengths)
        os.replace(tmp, lengths_path(cache))
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def example_lengths(corpus: Corpus, split: str, tokenizers: Tokenizers, config: InputConfig,
                    training: bool = False) -> np.ndarray:
    """The ``[pairs, 2]`` (source, target) token counts of ``split``'s cache (as ``training`` reads
    it), every pair, before ``max_length``: read from beside the cache, or (a cache written before
    they were kept) counted once and kept."""
    import numpy as np
    import tensorflow as tf

    cache = build_cache(corpus, split, tokenizers, config, config.sentence_pairs if training else "none")
    if lengths_path(cache).is_file():
        return np.load(lengths_path(cache))
    sizes = cache_records(cache).map(
        lambda record: tf.stack([tf.size(part) for part in _parse(record)]), num_parallel_calls=tf.data.AUTOTUNE)
    lengths = np.concatenate([batch for batch in sizes.batch(8192).as_numpy_iterator()] or [np.zeros([0, 2])])
    _save_lengths(cache, lengths.astype(np.int32))
    return lengths.astype(np.int32)


def cache_records(path: Path) -> tf.data.Dataset:
    """The serialized pairs of a cache file, read with tf.data's autotuner off.

    Deleting an iterator waits for the autotuner's thread, which sleeps between its rounds for up
    to a minute once an iterator has lived a few minutes: the end of a 5-minute demo run stalled
    for 53-56 s in 3 of 4 such runs (2026-11-29), and every short-lived validation iterator for up to a
    second. The pipeline does not need it: it makes ~500 batches/s on this 2-core machine with or
    without it, against the model's ~20 updates/s. Options reach every dataset built on this one;
    ``AUTOTUNE`` parallelism then means the machine's core count.
    """
    import tensorflow as tf

    options = tf.data.Options()
    options.autotune.enabled = False
    return tf.data.TFRecordDataset(str(path)).with_options(options)


def _parse(record: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    import tensorflow as tf

    features = tf.io.parse_single_example(record, {
        "source": tf.io.RaggedFeature(tf.int64), "target": tf.io.RaggedFeature(tf.int64)})
    return tf.cast(features["source"], tf.int32), tf.cast(features["target"], tf.int32)


#: Records parsed, filtered and given their special tokens together: a ``map`` call per record costs
#: more than its work (the rates: benchmarks/results/README.md, "1.2M to 4.5M pairs").
PARSE_BATCH = 512


def token_dataset(corpus: Corpus, split: str, tokenizers: Tokenizers, config: InputConfig,
                   training: bool) -> tf.data.Dataset:
    """``((source + EOS, BOS + target), target + EOS)`` from the cache, the pairs longer than
    ``max_length`` left out, shuffled if training.

    The records are handled :data:`PARSE_BATCH` at a time and then unbatched, the same elements
    in the same order as one at a time: the shuffle sees the same stream.
    """
    import tensorflow as tf

    source_tok, target_tok = as_vocabulary(tokenizers)
    path = build_cache(corpus, split, tokenizers, config, config.sentence_pairs if training else "none")
    # +1: EOS on the source and on the target output, BOS on the target input.
    limit = config.max_length - 1
    eos_s, bos_t, eos_t = source_tok.eos_id, target_tok.bos_id, target_tok.eos_id

    def examples(records):
        features = tf.io.parse_example(records, {
            "source": tf.io.RaggedFeature(tf.int64, row_splits_dtype=tf.int32),
            "target": tf.io.RaggedFeature(tf.int64, row_splits_dtype=tf.int32)})
        source, target = (tf.cast(features[key], tf.int32) for key in ("source", "target"))
        fits = tf.logical_and(source.row_lengths() <= limit, target.row_lengths() <= limit)
        source, target = tf.ragged.boolean_mask(source, fits), tf.ragged.boolean_mask(target, fits)

        def column(token):
            return tf.RaggedTensor.from_tensor(tf.fill([source.nrows(), 1], token), row_splits_dtype=tf.int32)

        return ((tf.concat([source, column(eos_s)], 1), tf.concat([column(bos_t), target], 1)),
                tf.concat([target, column(eos_t)], 1))

    dataset = cache_records(path).batch(PARSE_BATCH).map(examples, num_parallel_calls=tf.data.AUTOTUNE).unbatch()
    if training:
        dataset = dataset.shuffle(config.shuffle_buffer, seed=config.seed,
                                  reshuffle_each_iteration=True)
        if config.repeat:
            dataset = dataset.repeat()
    return dataset


def pad_value(tokenizers: Tokenizers) -> int:
    source_tok, target_tok = as_vocabulary(tokenizers)
    if source_tok.pad_id != target_tok.pad_id:
        raise ValueError("source and target tokenizers must share the pad id")
    return source_tok.pad_id


def padded_batches(dataset: tf.data.Dataset, batch_size, pad: int, length: int | None = None) -> tf.data.Dataset:
    """``dataset``'s elements (:func:`token_dataset`'s) in batches of ``batch_size``, each sequence
    padded with ``pad`` to the batch's longest, or to ``length``."""
    def dense(inputs, target_out):
        shape = None if length is None else [None, length]
        return ((inputs[0].to_tensor(pad, shape=shape), inputs[1].to_tensor(pad, shape=shape)),
                target_out.to_tensor(pad, shape=shape))

    return dataset.batch(batch_size).map(dense)


def make_dataset(corpus: Corpus, split: str, tokenizers: Tokenizers, config: InputConfig,
                 training: bool) -> tf.data.Dataset:
    """Batches of ``((source_ids, target_input_ids), target_output_ids)`` bucketed by length.

    ``tokenizers`` is one shared :class:`SubwordTokenizer` or a ``Vocabulary(source, target)``. With
    ``training`` the examples are shuffled (seeded, reshuffled each epoch) and, if
    ``config.repeat``, repeated; otherwise the order is deterministic and every example that
    fits ``max_length`` appears once.

    The buckets are ``tf.data``'s ``bucket_by_sequence_length``'s (a pair in the first bucket whose
    upper boundary exceeds its length, a bucket's batch released when it holds its batch size,
    padded to its longest pair), with the padding done a batch at a time.
    """
    import numpy as np
    import tensorflow as tf

    pad = pad_value(tokenizers)
    boundaries = config.boundaries()
    lower = tf.constant([np.iinfo(np.int32).min, *boundaries], tf.int32)
    upper = tf.constant([*boundaries, np.iinfo(np.int32).max], tf.int32)
    sizes = tf.constant(config.bucket_batch_sizes(), tf.int64)

    def bucket(inputs, target_out):
        length = tf.maximum(tf.shape(inputs[0])[0], tf.shape(target_out)[0])
        return tf.argmax(tf.logical_and(lower <= length, length < upper), output_type=tf.int64)

    dataset = token_dataset(corpus, split, tokenizers, config, training).group_by_window(
        bucket, lambda key, window: padded_batches(window, sizes[key], pad), window_size_func=lambda key: sizes[key])
    return dataset.prefetch(tf.data.AUTOTUNE)


def make_fixed_length_dataset(corpus: Corpus, split: str, tokenizers: Tokenizers, config: InputConfig,
                              training: bool = False) -> tf.data.Dataset:
    """The baseline without bucketing: every sequence padded to ``max_length``.

    Batch size ``tokens_per_batch // max_length``, so the same token budget holds; only for
    comparison (:func:`padding_report`).
    """
    dataset = token_dataset(corpus, split, tokenizers, config, training)
    return padded_batches(dataset, config.tokens_per_batch // config.max_length, pad_value(tokenizers),
                          config.max_length)

"""Writing a split's token-id cache on every core, in the corpus's order.

The cache (:func:`pipelines.input_pipeline.build_cache`) is one TFRecord file of
``tf.train.Example`` records, one per pair. Each chunk of paragraph pairs is cut into sentence
pairs (:func:`~pipelines.sentence_pairs.with_sentence_pairs`), tokenized and serialized on its
own, so chunks can be encoded by separate processes: the parent reads the corpus, hands out
chunks and writes their records back in chunk order. A TFRecord file is its records one after
the other, so the file is byte for byte the one a single process writes, whatever the number of
processes. Processes, not threads: a third of the work (ids to Python lists, protocol buffers)
holds the GIL. Each worker starts its own TensorFlow (a few seconds), so small splits are encoded
in the calling process.
"""

from __future__ import annotations

import collections
import itertools
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

logger = logging.getLogger(__name__)

#: Pairs a worker process must have to encode for one to be started: below, TensorFlow's start-up
#: in the worker costs more than it saves.
MIN_PAIRS_PER_WORKER = 20_000

#: A worker's tokenizers and sentence-pair mode (set once, when it starts).
_STATE: dict[str, Any] = {}


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, as TensorFlow sizes its pools)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def worker_count(pairs: int) -> int:
    """Processes to encode ``pairs`` with: one per usable core (``taskset`` pins a run to fewer),
    at most one per :data:`MIN_PAIRS_PER_WORKER` pairs; 1 means the calling process alone."""
    return max(1, min(usable_cores(), pairs // MIN_PAIRS_PER_WORKER))


def _state(source_model: bytes, target_model: bytes | None, sentence_pairs: str, worker: bool) -> dict[str, Any]:
    if worker:
        from pipelines.quiet_tensorflow import import_quietly

        import_quietly()  # a worker's TensorFlow start-up lines would land in the run's log
        import tensorflow as tf

        # One core each: the workers are as many as the cores.
        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    from keras_transformer.tokenizer import SubwordTokenizer

    source = SubwordTokenizer(source_model)
    target = source if target_model is None else SubwordTokenizer(target_model)
    return {"source": source, "target": target, "sentence_pairs": sentence_pairs}


def _init_worker(source_model: bytes, target_model: bytes | None, sentence_pairs: str) -> None:
    _STATE.update(_state(source_model, target_model, sentence_pairs, worker=True))


def encode_chunk(chunk: list[tuple[str, str]], state: dict[str, Any] | None = None) -> tuple[list[bytes], np.ndarray]:
    """The serialized records of a chunk of paragraph pairs and their ``[n, 2]`` (source, target)
    lengths, as :func:`pipelines.input_pipeline.build_cache` describes them (``state``: the
    tokenizers; a worker's own by default)."""
    import numpy as np
    import tensorflow as tf

    from pipelines.sentence_pairs import with_sentence_pairs

    state = _STATE if state is None else state
    pairs = list(with_sentence_pairs(chunk, state["sentence_pairs"]))
    if not pairs:
        return [], np.zeros([0, 2], np.int32)
    source_ids = state["source"].tokenize([s for s, _ in pairs]).to_list()
    target_ids = state["target"].tokenize([t for _, t in pairs]).to_list()
    records, lengths = [], []
    for s, t in zip(source_ids, target_ids):
        lengths.append((len(s), len(t)))
        feature = {"source": tf.train.Feature(int64_list=tf.train.Int64List(value=s)),
                   "target": tf.train.Feature(int64_list=tf.train.Int64List(value=t))}
        # deterministic: map entries sorted by key (source, target); otherwise their order follows
        # a per-process hash seed, and caches of the same ids differed from one process to the next.
        example = tf.train.Example(features=tf.train.Features(feature=feature))
        records.append(example.SerializeToString(deterministic=True))
    return records, np.asarray(lengths, dtype=np.int32).reshape(-1, 2)


def chunks(pairs: Iterable[tuple[str, str]], size: int) -> Iterator[list[tuple[str, str]]]:
    iterator = iter(pairs)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk


def _ordered(function: Callable, items: Iterable, pool: ProcessPoolExecutor, ahead: int) -> Iterator:
    """``map(function, items)`` on ``pool``, in order, with at most ``ahead`` items in flight
    (``Executor.map`` would read every item first: the whole corpus)."""
    pending: collections.deque[Future] = collections.deque()
    for item in items:
        pending.append(pool.submit(function, item))
        if len(pending) >= ahead:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()


def encoded(pairs: Iterable[tuple[str, str]], source_model: bytes, target_model: bytes | None,
            sentence_pairs: str, chunk_size: int, workers: int) -> Iterator[tuple[list[bytes], np.ndarray]]:
    """:func:`encode_chunk` of each chunk of ``chunk_size`` pairs, in order, on ``workers`` processes
    (1: this one)."""
    if workers <= 1:
        state = _state(source_model, target_model, sentence_pairs, worker=False)
        yield from (encode_chunk(chunk, state) for chunk in chunks(pairs, chunk_size))
        return
    import multiprocessing

    # spawn: a fork of a process that runs TensorFlow's threads may deadlock.
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=_init_worker,
                             initargs=(source_model, target_model, sentence_pairs)) as pool:
        yield from _ordered(encode_chunk, chunks(pairs, chunk_size), pool, ahead=4 * workers)

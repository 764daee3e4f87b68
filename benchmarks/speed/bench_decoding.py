"""Decoding speed on the ``demo`` preset: cached vs uncached greedy decoding, beam-4 throughput.

    python -m benchmarks.speed.bench_decoding [--lengths 100 200] [--batch 8] [--beam-sentences 64]

Prints one JSON object. The model is untrained (random weights): EOS is forbidden in the greedy
runs so every sentence decodes exactly the requested number of tokens, and in the beam run
hypotheses rarely finish early, so every sentence runs to input length + 50, the worst case of
section 6.1's limit. A trained model stops earlier and decodes faster.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf

import keras_transformer as kt
from flows.tools.report import emit
from keras_transformer.decoding.beam import compiled_beam_search
from keras_transformer.decoding.greedy import (
    forbid_tokens,
    greedy_search,
    prepare_decoding,
    special_ids,
)

logger = logging.getLogger("bench_decoding")


def random_sources(rng, batch, min_len, max_len, vocab, eos, pad):
    lengths = rng.integers(min_len, max_len + 1, size=batch)
    source = np.full((batch, max_len + 1), pad, np.int32)
    for i, n in enumerate(lengths):
        source[i, :n] = rng.integers(4, vocab, size=n)
        source[i, n] = eos
    return tf.constant(source), int(lengths.sum() + batch)


def fixed_length_greedy(model, use_cache):
    """Compiled greedy decoding that never emits EOS: exactly source length + offset tokens."""
    eos = model.config.eos_id

    @tf.function(reduce_retracing=True)
    def decode(source_ids, max_length_offset):
        score_fn, state, max_lengths = prepare_decoding(model, source_ids, max_length_offset, 1, use_cache)

        def no_eos(ids, step, state):
            log_probs, state = score_fn(ids, step, state)
            return forbid_tokens(log_probs, (eos,)), state

        return greedy_search(no_eos, state, max_lengths, **special_ids(model))

    return decode


def timed(fn, *args, repeats):
    fn(*args)  # trace and warm up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn(*args)
        tf.nest.map_structure(lambda t: t.numpy(), result)
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="demo")
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--lengths", type=int, nargs="+", default=[100, 200], help="greedy output lengths")
    parser.add_argument("--batch", type=int, default=8, help="sentences per greedy batch")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument("--beam-sentences", type=int, default=64)
    parser.add_argument("--beam-batch", type=int, default=32)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    model = kt.Transformer.from_preset(args.preset, vocab_size=args.vocab_size, dropout=0.0)
    model.build()
    c = model.config
    rng = np.random.default_rng(0)
    report = {
        "preset": args.preset,
        "parameters": int(model.count_params()),
        "vocab_size": args.vocab_size,
        "tensorflow": tf.__version__,
        "cpu_threads": os.cpu_count(),
        "greedy": {},
    }

    # Greedy: one source token + EOS, offset = requested length - 2 -> exactly `length` tokens.
    source = tf.constant([[5, c.eos_id]] * args.batch, tf.int32)
    cached_fn = fixed_length_greedy(model, use_cache=True)
    uncached_fn = fixed_length_greedy(model, use_cache=False)
    for length in args.lengths:
        offset = tf.constant(length - 2, tf.int32)
        logger.info("greedy, %d tokens x %d sentences", length, args.batch)
        cached, out_c = timed(cached_fn, source, offset, repeats=args.repeats)
        uncached, out_u = timed(uncached_fn, source, offset, repeats=args.repeats)
        report["greedy"][str(length)] = {
            "batch": args.batch,
            "tokens_per_sentence": int(out_c.lengths.numpy().max()),
            "cached_seconds": round(cached, 3),
            "uncached_seconds": round(uncached, 3),
            "speedup": round(uncached / cached, 2),
            "cached_ms_per_step": round(1000 * cached / length, 2),
            "same_output": bool(np.array_equal(out_c.ids.numpy(), out_u.ids.numpy())),
        }

    # Beam search throughput over random sources of 10-30 tokens, max length input + 50.
    beam_fn = compiled_beam_search(model, args.beam_size)
    alpha = tf.constant(0.6, tf.float32)
    offset = tf.constant(50, tf.int32)
    batches = [
        random_sources(rng, args.beam_batch, 10, 30, args.vocab_size, c.eos_id, c.pad_id)
        for _ in range(max(1, args.beam_sentences // args.beam_batch))
    ]
    beam_fn(batches[0][0], alpha, offset)  # trace
    logger.info("beam %d over %d sentences", args.beam_size, args.beam_batch * len(batches))
    start = time.perf_counter()
    generated = 0
    for batch, _ in batches:
        result = beam_fn(batch, alpha, offset)
        generated += int(result.lengths.numpy()[:, 0].sum())
    seconds = time.perf_counter() - start
    sentences = args.beam_batch * len(batches)
    report["beam"] = {
        "beam_size": args.beam_size,
        "alpha": 0.6,
        "sentences": sentences,
        "batch": args.beam_batch,
        "seconds": round(seconds, 2),
        "sentences_per_second": round(sentences / seconds, 2),
        "output_tokens_per_second": round(generated / seconds, 1),
        "mean_output_tokens": round(generated / sentences, 1),
    }
    emit(report, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

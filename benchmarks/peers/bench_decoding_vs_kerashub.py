"""Decoding speed beside keras-hub's samplers: greedy and beam search, same model size, same work.

    python -m benchmarks.peers.bench_decoding_vs_kerashub [--sentences 64] [--output-tokens 40] [--beam-size 4]

Both models are cpu-small's shape (3+3 layers, d_model 256) with random weights. End of sequence
is never chosen on either side, so every sentence decodes exactly ``--output-tokens`` tokens and the
two searches do the same number of steps:
  * keras-hub: ``GreedySampler`` / ``BeamSampler`` driving the decoder as the keras.io example and
    the baseline script do (the whole prefix, padded to the output length, through the decoder at
    every step; no cache);
  * ours: ``keras_transformer``'s compiled greedy and beam searches with the incremental cache
    (section 6.1's beam search with length penalty; ``alpha`` does not change the work).
Every variant decodes the same source batches; the variants take turns, batch by batch, so this
machine's drift hits them alike. Prints one JSON object: seconds, output tokens per second and
our speed relative to keras-hub's for each search.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras
import numpy as np
import tensorflow as tf

from benchmarks.peers.kerashub_peer import kerashub_seq2seq
from flows.tools.report import emit
from keras_transformer import Transformer
from keras_transformer.decoding.beam import beam_search
from keras_transformer.decoding.greedy import forbid_tokens, greedy_search, prepare_decoding, special_ids

logger = logging.getLogger("bench_decoding_vs_kerashub")
PAD, BOS, EOS = 0, 2, 3


def random_sources(rng, batch, length, vocab):
    source = rng.integers(4, vocab, size=(batch, length + 1)).astype(np.int32)
    source[:, length] = EOS
    return tf.constant(source)


def ours(model, beam_size):
    """Our cached search (greedy for a beam of one) that never ends a sentence early."""

    @tf.function(reduce_retracing=True)
    def decode(source_ids, max_length_offset):
        score_fn, state, max_lengths = prepare_decoding(model, source_ids, max_length_offset, beam_size)

        def no_eos(ids, step, state):
            log_probs, state = score_fn(ids, step, state)
            return forbid_tokens(log_probs, (EOS,)), state

        if beam_size == 1:
            return greedy_search(no_eos, state, max_lengths, **special_ids(model)).ids
        return beam_search(no_eos, state, max_lengths, beam_size=beam_size, alpha=0.6, **special_ids(model)).ids

    return decode


def kerashub(encoder, decoder, sampler, output_tokens):
    """The baseline's decoding: ``sampler`` over the decoder, which reruns the whole prefix each step."""

    @tf.function(reduce_retracing=True)
    def logits_at(prompt, memory, memory_mask):
        return decoder([prompt, memory, memory_mask], training=False)

    def decode(source_ids, _offset):
        memory_mask = keras.ops.not_equal(source_ids, PAD)
        memory = encoder(source_ids, training=False)
        batch = tf.shape(source_ids)[0]
        prompt = tf.concat([tf.fill([batch, 1], BOS), tf.fill([batch, output_tokens], PAD)], axis=1)

        def next(prompt, cache, index):
            # BeamSampler hands over num_beams times the batch: repeat the memory to match.
            rows = tf.shape(prompt)[0] // batch
            logits = logits_at(prompt, tf.repeat(memory, rows, axis=0),
                               tf.repeat(memory_mask, rows, axis=0))[:, index - 1, :]
            return logits, None, cache

        return sampler(next, prompt, stop_token_ids=None, index=1)

    return decode


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--ffn", type=int, default=1024)
    parser.add_argument("--sentences", type=int, default=64, help="sentences per greedy batch")
    parser.add_argument("--beam-sentences", type=int, default=16, help="sentences per beam batch")
    parser.add_argument("--source-tokens", type=int, default=24)
    parser.add_argument("--output-tokens", type=int, default=40)
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    import keras_hub

    keras.utils.set_random_seed(0)
    vocab, length = args.vocab_size, args.output_tokens
    encoder, decoder, _ = kerashub_seq2seq(vocab, args.d_model, args.heads, args.ffn, args.layers, 0.0,
                                           max(length, args.source_tokens) + 2)
    model = Transformer(vocab_size=vocab, num_layers=args.layers, d_model=args.d_model, num_heads=args.heads,
                        d_ff=args.ffn, dropout=0.0)
    model.build()
    # Ours stops at source length + offset: the offset that gives exactly `length` tokens.
    offset = tf.constant(length - args.source_tokens - 1, tf.int32)
    rng = np.random.default_rng(0)
    searches = {
        "greedy": (args.sentences, {
            "kerashub": kerashub(encoder, decoder, keras_hub.samplers.GreedySampler(), length),
            "ours": ours(model, 1)}),
        f"beam{args.beam_size}": (args.beam_sentences, {
            "kerashub": kerashub(encoder, decoder, keras_hub.samplers.BeamSampler(num_beams=args.beam_size), length),
            "ours": ours(model, args.beam_size)}),
    }
    report = {"setup": vars(args), "keras_hub": keras_hub.__version__, "tensorflow": tf.__version__}
    for search, (batch, variants) in searches.items():
        sources = [random_sources(rng, batch, args.source_tokens, vocab) for _ in range(args.repeats + 1)]
        seconds = {name: [] for name in variants}
        tokens = {}
        for index, source in enumerate(sources):
            for name, decode in variants.items():
                tick = time.perf_counter()
                ids = np.asarray(decode(source, offset))
                if index:  # the first batch traces
                    seconds[name].append(time.perf_counter() - tick)
                # keras-hub keeps the BOS column; ours writes only the output tokens.
                tokens[name] = ids.shape[-1] - (1 if name == "kerashub" else 0)
        logger.info("%s: %s", search, {k: statistics.median(v) for k, v in seconds.items()})
        entry = {"sentences_per_batch": batch, "output_tokens": tokens}
        for name, values in seconds.items():
            median = statistics.median(values)
            entry[name] = {"seconds_per_batch": round(median, 3),
                           "output_tokens_per_second": round(batch * length / median, 1)}
        entry["ours_speedup"] = round(entry["kerashub"]["seconds_per_batch"] / entry["ours"]["seconds_per_batch"], 2)
        report[search] = entry
    emit(report, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

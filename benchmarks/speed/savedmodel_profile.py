"""Where the SavedModel's translation time goes: string ops, the model's steps, the beam's bookkeeping.

    python -m benchmarks.speed.savedmodel_profile --model RUN/averaged/model.keras \\
        --tokenizer RUN_DIR/tokenizer/spm_shared.model --corpus RUN_DIR/data/ddtp-en-de [--split test_unseen]

The export's graph is the ``Translator``'s, so its parts are timed on the Keras model, batch by batch as
the ``Translator`` batches the split's sentences (32, longest first): the string ops (tokenization with
the source EOS, detokenisation with the verbatim spans put back), the beam search as compiled (section
6.1's settings, the model's own), and the model alone for as many steps on the same rows (the source
repeated ``beam`` times, one token a step, no EOS, no top-k, no reordering of the cache). The beam's
bookkeeping is what the search costs beyond the model's steps. Reported in seconds and per decoding step.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from flows.tools.report import emit

logger = logging.getLogger("savedmodel_profile")


def profile(model, tokenizer, sentences: list[str], batch_size: int = 32) -> dict:
    import tensorflow as tf

    from keras_transformer.decoding.beam import compiled_search
    from keras_transformer.decoding.greedy import forbid_tokens, greedy_search, prepare_decoding, special_ids
    from keras_transformer.tokenizer import source_batch

    settings = model.decoding
    eos = model.config.eos_id
    search = compiled_search(model, settings)

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None], tf.int32)])
    def model_steps(source_ids, lengths):
        score_fn, state, _ = prepare_decoding(model, source_ids, 0, 1, True)

        def no_eos(ids, step, state):
            log_probs, state = score_fn(ids, step, state)
            return forbid_tokens(log_probs, (eos,)), state

        return greedy_search(no_eos, state, lengths, **special_ids(model))

    order = sorted(range(len(sentences)), key=lambda i: -len(sentences[i]))
    batches = [[sentences[i] for i in order[k : k + batch_size]] for k in range(0, len(order), batch_size)]
    totals = {"strings": 0.0, "beam_search": 0.0, "model_steps": 0.0, "steps": 0}
    for n, batch in enumerate(batches):
        start = time.perf_counter()
        source = source_batch(tokenizer, batch, eos, model.config.pad_id, model.config.max_positions)
        strings = time.perf_counter() - start
        inputs = (source, tf.constant(settings.length_penalty, tf.float32),
                  tf.constant(settings.max_length_offset, tf.int32))
        if n == 0:
            search(*inputs)  # traced before timing
        start = time.perf_counter()
        result = search(*inputs)
        steps = int(result.steps)
        beam = time.perf_counter() - start
        start = time.perf_counter()
        texts = tokenizer.restore(tokenizer.detokenize(result.ids[:, 0]), batch)
        texts.numpy()
        strings += time.perf_counter() - start
        tiled = tf.repeat(source, settings.beam_size, axis=0)
        lengths = tf.fill([tf.shape(tiled)[0]], steps)
        if n == 0:
            model_steps(tiled, lengths)
        start = time.perf_counter()
        model_steps(tiled, lengths).ids.numpy()
        totals["model_steps"] += time.perf_counter() - start
        totals["strings"] += strings
        totals["beam_search"] += beam
        totals["steps"] += steps
    bookkeeping = max(totals["beam_search"] - totals["model_steps"], 0.0)
    whole = totals["beam_search"] + totals["strings"]
    per_step = 1000 / max(totals["steps"], 1)
    return {
        "sentences": len(sentences), "batches": len(batches), "decoding_steps": totals["steps"],
        "decoding": settings.to_dict(),
        "seconds": {"strings": round(totals["strings"], 2), "model": round(totals["model_steps"], 2),
                    "beam_bookkeeping": round(bookkeeping, 2), "whole": round(whole, 2)},
        "milliseconds_per_step": {"model": round(totals["model_steps"] * per_step, 2),
                                  "beam_bookkeeping": round(bookkeeping * per_step, 2)},
        "shares": {"strings": round(totals["strings"] / whole, 3), "model": round(totals["model_steps"] / whole, 3),
                   "beam_bookkeeping": round(bookkeeping / whole, 3)},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--tokenizer", type=Path, required=True)
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--split", default="test_unseen")
    parser.add_argument("--max-paragraphs", type=int, default=None)
    parser.add_argument("--threads", type=int, default=0, help="TensorFlow's intra-op threads (0: its default)")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    import keras
    import tensorflow as tf

    if args.threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    from keras_transformer.decoding.sentences import split_bullets, split_sentences
    from keras_transformer.models.transformer import Transformer  # noqa: F401  (registers classes)
    from keras_transformer.tokenizer import SubwordTokenizer
    from pipelines.corpus import Corpus

    paragraphs = [s for s, _ in Corpus.load(args.corpus).pairs(args.split)][: args.max_paragraphs]
    parts = split_sentences(tf.constant(paragraphs))
    sentences = [b.decode("utf-8") for b in split_bullets(parts.flat_values)[1].numpy()]
    model = keras.saving.load_model(args.model, compile=False)
    report = {"benchmark": "savedmodel_profile", "model": str(args.model), "split": args.split,
              "threads": args.threads or "default",
              **profile(model, SubwordTokenizer(args.tokenizer), sentences)}
    emit(report, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Parsing quality and speed per beam size: labelled F1 and sentences per second of one model.

Section 6.3 decodes with a beam of 21; whether a CPU parser should ship that is a measurement:
for each beam size the split is parsed with the constrained beam search (one slot per word,
balanced brackets, :mod:`keras_transformer.decoding.constraints`) exactly as the evaluation stage does,
timed after a warm-up batch (tracing excluded), and scored by the project's EVALB-equal scorer.
Run it pinned to one core for the per-core figure (``taskset -c 0``); choose the beam on the
validation split (the dev files), report the test split with the chosen one.

    taskset -c 0 .venv/bin/python -m benchmarks.probes.bench_parser_beams --run runs/parsing-sample/latest \\
        --split validation --beams 1,5,21
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path

from flows.tools.report import emit

logger = logging.getLogger("bench_parser_beams")


def measure(translator, pairs, beam_size: int, alpha: float, offset: int, batch_size: int) -> dict:
    """F1, tagging accuracy, valid-before-repair count and sentences/s of one beam size."""
    from pipelines.tasks.parsing.evalb import score_trees
    from pipelines.tasks.parsing.evaluation import parse_sentences
    from pipelines.tasks.parsing.linearize import delinearize

    sentences = [source for source, _ in pairs]
    decode = {"beam_size": beam_size, "length_penalty": alpha, "max_length_offset": offset, "batch_size": batch_size}
    parse_sentences(translator, sentences[:batch_size], **decode)  # traces the search once
    started = time.perf_counter()
    _, trees, repaired = parse_sentences(translator, sentences, **decode)
    seconds = time.perf_counter() - started
    gold = [delinearize(target, source.split()) for source, target in pairs]
    scores = score_trees(gold, trees, punctuation="gold")["all"]
    return {"beam_size": beam_size, "f1": scores["fmeasure"], "tagging_accuracy": scores["tagging_accuracy"],
            "exact_match": scores["complete_match"], "valid_before_repair": len(trees) - repaired,
            "sentences": len(trees), "seconds": round(seconds, 1),
            "sentences_per_second": round(len(trees) / seconds, 2)}


def profile(translator, pairs, beam_size: int, alpha: float, offset: int) -> dict:
    """:func:`benchmarks.speed.parser_beam_profile.profile_batch` on the first sentences of the split, as one batch."""
    import numpy as np

    from benchmarks.speed.parser_beam_profile import profile_batch
    from pipelines.tasks.parsing.evaluation import tree_constraint_for

    sentences = [source for source, _ in pairs]
    encoded = translator.encode(sentences)
    source = np.full((len(encoded), max(map(len, encoded))), translator.model.config.pad_id, np.int32)
    for row, ids in enumerate(encoded):
        source[row, : len(ids)] = ids
    slots = np.array([len(sentence.split()) for sentence in sentences], np.int32)
    constraint = tree_constraint_for(translator.target_tokenizer, translator.model.config.eos_id)
    return profile_batch(translator.model, source, slots, constraint, beam_size, alpha, offset)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=Path, required=True,
                        help="a parsing run directory (averaged/model.keras) or its run_dir/latest")
    parser.add_argument("--corpus", type=Path, help="default: <run_dir>/data/treebank-sample")
    parser.add_argument("--tokenizers", type=Path, help="default: <run_dir>/tokenizer")
    parser.add_argument("--split", default="validation")
    parser.add_argument("--beams", default="1,5,21")
    parser.add_argument("--alpha", type=float, default=0.3)
    parser.add_argument("--max-length-offset", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-sentences", type=int)
    parser.add_argument("--profile", action="store_true",
                        help="also split one batch's time per step into model, constraint and beam")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")

    from keras_transformer.checkpoints.saved_model import load_translator
    from pipelines.corpus import Corpus

    run = args.run.resolve()
    run_dir = run.parents[1] if run.parent.name == "runs" else run.parent
    corpus = Corpus.load(args.corpus or run_dir / "data" / "treebank-sample")
    tokenizers = args.tokenizers or run_dir / "tokenizer"
    translator = load_translator(run / "averaged" / "model.keras", tokenizers / "spm_en.model",
                                 tokenizers / "spm_tree.model")
    pairs = list(corpus.pairs(args.split))[: args.max_sentences]
    results = [measure(translator, pairs, int(beam), args.alpha, args.max_length_offset, args.batch_size)
               for beam in args.beams.split(",")]
    if args.profile:
        for result in results:
            result["profile"] = profile(translator, pairs[: args.batch_size], int(result["beam_size"]),
                                        args.alpha, args.max_length_offset)
    for result in results:
        logger.info("%s", result)
    report = {"benchmark": "parser_beams", "run": str(run), "split": args.split, "alpha": args.alpha,
              "max_length_offset": args.max_length_offset, "batch_size": args.batch_size,
              "cpu_affinity": sorted(os.sched_getaffinity(0)), "results": results}
    emit(report, args.output, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

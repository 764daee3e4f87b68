"""The span parser's training step on this machine: float32 vs mixed_bfloat16.

The parsing counterpart of ``bench_training_precision`` (which measures the translation presets):
trains ``span-parser-cpu`` on NLTK's Penn Treebank sample through the real training stage
(``pipelines.training.stage.train_on_corpus``: the parsing configs' tokenizers and batches, the
tree CRF objective) for ``--warmup`` + ``--steps`` steps per precision, each variant on the same
seeded batches, and reports the median step time and words per second over the measured steps
(tracing happens in the warm-up). Bucketed batches vary in shape, so the median is the figure.

    python -m benchmarks.speed.bench_span_parser_precision --treebank treebank.zip [--steps 30] \
        [--output benchmarks/results/span-parser-precision-DATE.json]

Prints one JSON object on stdout (and writes it to ``--output``).
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path

from flows.tools.report import emit

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

logger = logging.getLogger("bench_span_parser_precision")

PRECISIONS = ("none", "mixed_bfloat16")


def measure(corpus, tokenizers, precision: str, args) -> dict:
    """One training run of ``warmup + steps`` steps in ``precision``; the measured steps' figures."""
    from pipelines.input_pipeline import InputConfig
    from pipelines.training import TrainConfig
    from pipelines.training.stage import train_on_corpus

    input_config = InputConfig(tokens_per_batch=args.tokens_per_batch, max_length=256, shuffle_buffer=2000)
    with tempfile.TemporaryDirectory() as run_dir:
        config = TrainConfig(preset="span-parser-cpu", train_steps=args.warmup + args.steps,
                             accumulation_batches=1,  # one batch per step: measure the step itself
                             checkpoint_dir=run_dir, checkpoint_every_steps=None, checkpoint_every_minutes=None,
                             progress_bar=False, log_every=10**9, strategy="one_device", mixed_precision=precision)
        history = train_on_corpus(corpus, tokenizers, input_config, config, validation_split=None).history
    measured = history[args.warmup:]
    seconds = [r["step_seconds"] for r in measured]
    return {
        "median_step_seconds": round(statistics.median(seconds), 4),
        "mean_step_seconds": round(statistics.fmean(seconds), 4),
        "words_per_second": round(sum(r["tokens"] for r in measured) / sum(seconds), 1),
        "words_per_step": round(statistics.fmean(r["tokens"] for r in measured), 1),
        "sentences_per_step": round(statistics.fmean(r["sentences"] for r in measured), 1),
        "first_step_seconds": round(history[0]["step_seconds"], 2),
        "final_loss": round(history[-1]["loss"], 4),
        "finite_losses": all(r["loss"] == r["loss"] and abs(r["loss"]) != float("inf") for r in history),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--treebank", required=True, help="NLTK treebank.zip / folder, or the LDC WSJ folder")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--tokens-per-batch", type=int, default=1400,
                        help="as configs/parsing/*.yaml (~500 words of linearised trees)")
    parser.add_argument("--max-train-trees", type=int, default=None)
    parser.add_argument("--output", type=Path)
    parser.add_argument("--note", default="", help="the machine's state, kept in the report")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    import tensorflow as tf

    from flows.tools.wiring.parsing import prepare

    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as work:
        corpus, tokenizers = prepare(args.treebank, Path(work), args.max_train_trees)
        results = {}
        for precision in PRECISIONS:
            name = "float32" if precision == "none" else precision
            results[name] = measure(corpus, tokenizers, precision, args)
            logger.warning("%s: %s", name, results[name])
    base = results["float32"]["median_step_seconds"]
    for value in results.values():
        value["speedup_vs_float32"] = round(base / value["median_step_seconds"], 3)
    report = {
        "benchmark": "span parser training step (float32 vs mixed_bfloat16)",
        "preset": "span-parser-cpu",
        "treebank": str(args.treebank),
        "batch": {"tokens_per_batch": args.tokens_per_batch, "bucketed": True},
        "warmup_steps": args.warmup,
        "measured_steps": args.steps,
        "machine": {"cpus": os.cpu_count(), "processor": platform.processor() or platform.machine(),
                    "tensorflow": tf.__version__, "load_average_before": [round(x, 2) for x in load_before],
                    "load_average_after": [round(x, 2) for x in os.getloadavg()], "note": args.note},
        "results": results,
    }
    emit(report, args.output, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

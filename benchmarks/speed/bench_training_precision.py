"""Training throughput on this machine: float32 vs mixed_bfloat16 vs XLA (jit_compile).

Trains the ``demo`` preset (or ``--preset cpu-small``) on the bundled En-De DDTP corpus through
the real training stage and reports target tokens per second over ``--steps`` steps after
``--warmup`` steps (tracing and XLA compilation happen in the warm-up). All variants read the
same fixed-length batches (every batch ``[tokens_per_batch // max_length, max_length]``) so
that XLA compiles once; bucketed batches would make it recompile for every new shape.

    python -m benchmarks.speed.bench_training_precision [--preset demo] [--steps 20] [--warmup 3]

Prints one JSON object on stdout.
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

logger = logging.getLogger("bench_training_precision")

VARIANTS = {
    "float32": {"mixed_precision": "none", "jit_compile": False},
    "mixed_bfloat16": {"mixed_precision": "mixed_bfloat16", "jit_compile": False},
    "float32_jit_compile": {"mixed_precision": "none", "jit_compile": True},
    "mixed_bfloat16_jit_compile": {"mixed_precision": "mixed_bfloat16", "jit_compile": True},
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="demo")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--vocab-size", type=int, default=4000)
    parser.add_argument("--tokens-per-batch", type=int, default=2048)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--work-dir", default=None,
                        help="keeps the prepared corpus and tokenizer between runs")
    parser.add_argument("--variants", nargs="*", default=list(VARIANTS))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    import tensorflow as tf

    from pipelines.corpus import Corpus
    from pipelines.input_pipeline import InputConfig, make_fixed_length_dataset
    from pipelines.tasks.translation.sources import SourceConfig, prepare_corpus
    from pipelines.tokenization import TokenizerConfig, load_tokenizers, train_tokenizer
    from pipelines.training import TrainConfig, train

    work = Path(args.work_dir or Path(tempfile.gettempdir()) / "bench_training_precision")
    corpus = Corpus.load(prepare_corpus(SourceConfig(source="ddtp", language_pair="en-de",
                                                 output_dir=str(work / "corpus"))))
    model_path = train_tokenizer(corpus, TokenizerConfig(vocab_size=args.vocab_size,
                                                         input_sentence_size=20000),
                                 work / "tokenizer")
    tokenizer, _ = load_tokenizers(model_path)
    input_config = InputConfig(tokens_per_batch=args.tokens_per_batch,
                               max_length=args.max_length, shuffle_buffer=2000)

    results = {}
    for name in args.variants:
        with tempfile.TemporaryDirectory() as run_dir:
            config = TrainConfig(
                preset=args.preset, train_steps=args.warmup + args.steps,
                tokens_per_step=1,  # one batch per step: measure the step itself
                checkpoint_dir=run_dir, checkpoint_every_steps=None,
                checkpoint_every_minutes=None, progress_bar=False, log_every=10**9,
                strategy="one_device", **VARIANTS[name])
            data = make_fixed_length_dataset(corpus, "train", tokenizer, input_config,
                                             training=True)
            history = train(config, data, tokenizer.vocab_size).history
        measured = history[args.warmup:]
        tokens = sum(r["tokens"] for r in measured)
        seconds = sum(r["step_seconds"] for r in measured)
        results[name] = {
            "tokens_per_second": round(tokens / seconds, 1),
            "median_step_seconds": round(statistics.median(r["step_seconds"] for r in measured),
                                         4),
            "first_step_seconds": round(history[0]["step_seconds"], 2),
            "final_loss": round(history[-1]["loss"], 4),
        }
        logger.warning("%s: %s", name, results[name])
    base = results.get("float32", {}).get("tokens_per_second")
    if base:
        for value in results.values():
            value["speedup_vs_float32"] = round(value["tokens_per_second"] / base, 3)
    report = {
        "benchmark": "training throughput (target tokens/s)",
        "preset": args.preset,
        "batch": {"tokens_per_batch": args.tokens_per_batch, "max_length": args.max_length,
                  "fixed_length": True},
        "vocab_size": tokenizer.vocab_size,
        "warmup_steps": args.warmup,
        "measured_steps": args.steps,
        "machine": {"cpus": os.cpu_count(), "processor": platform.processor() or
                    platform.machine(), "tensorflow": tf.__version__},
        "results": results,
    }
    emit(report, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

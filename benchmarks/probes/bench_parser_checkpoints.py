"""Which checkpoints to ship: dev F1 of the last checkpoint and of averages of the last N.

A sequence-to-sequence parser is parsed with the constrained search; a span parser by CKY at each
constituent bias the calibration stage tries (its F1 is the best bias').

Section 6.1 averages the last 5 (base) or 20 (big) checkpoints, written every 10 minutes of a
12-hour run. An hour of a CPU parser keeps a checkpoint every 5 minutes, so the window is a
measurement, and the measure is the task's own (labelled F1 on the dev files, the validation
split), not validation loss: each window is averaged from the run's kept checkpoints, parsed
with the constrained search as the evaluation stage does, and scored by the EVALB-equal scorer.

    .venv/bin/python -m benchmarks.probes.bench_parser_checkpoints --run runs/parsing-sample/latest \\
        --windows 1,3,5,8,12 --beam 1
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from pathlib import Path

from flows.tools.report import emit

logger = logging.getLogger("bench_parser_checkpoints")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=Path, required=True,
                        help="a parsing run directory (holding train/) or its run_dir/latest")
    parser.add_argument("--windows", default="1,3,5,8,12", help="how many newest checkpoints to average")
    parser.add_argument("--split", default="validation")
    parser.add_argument("--beam", type=int, default=1)
    parser.add_argument("--alpha", type=float, default=0.3)
    parser.add_argument("--max-length-offset", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-sentences", type=int)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")

    import keras

    from benchmarks.probes.bench_parser_beams import measure
    from benchmarks.probes.checkpoint_windows import averaged_windows
    from keras_transformer.checkpoints.saved_model import load_translator  # registers the model classes too
    from keras_transformer.tokenizer import SubwordTokenizer
    from pipelines.corpus import Corpus
    from pipelines.tasks.parsing.calibration import bias_f1

    run = args.run.resolve()
    run_dir = run.parents[1] if run.parent.name == "runs" else run.parent
    corpus = Corpus.load(run_dir / "data" / "treebank-sample")
    tokenizers = run_dir / "tokenizer"
    pairs = list(corpus.pairs(args.split))[: args.max_sentences]
    source = SubwordTokenizer(str(tokenizers / "spm_en.model"))
    results = []
    with tempfile.TemporaryDirectory() as scratch:
        windows = averaged_windows(run / "train", (int(w) for w in args.windows.split(",")), Path(scratch))
        for window, checkpoints, averaged in windows:
            model = keras.saving.load_model(averaged.keras_model, compile=False)
            if hasattr(model, "with_bias"):  # a span parser: its constituent bias, chosen per window
                parser = model.decoder(source)
                parser.bias = 0.0
                by_bias = bias_f1(parser, pairs)
                bias = max(by_bias, key=lambda b: (by_bias[b], -b))
                result = {"f1": by_bias[bias], "bias": bias, "f1_by_bias": by_bias, "sentences": len(pairs)}
            else:
                translator = load_translator(averaged.keras_model, tokenizers / "spm_en.model",
                                             tokenizers / "spm_tree.model")
                result = measure(translator, pairs, args.beam, args.alpha, args.max_length_offset, args.batch_size)
            result = {"window": window, "checkpoints": checkpoints, **result}
            logger.info("%s", result)
            results.append(result)
    best = max(results, key=lambda r: r["f1"])
    report = {"benchmark": "parser_checkpoints", "run": str(run), "split": args.split, "sentences": len(pairs),
              "beam_size": args.beam, "alpha": args.alpha, "results": results, "best_window": best["window"]}
    emit(report, args.output, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

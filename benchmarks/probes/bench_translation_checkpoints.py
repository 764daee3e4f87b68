"""Which checkpoints a translation run ships: validation BLEU of its last checkpoint and of averages of the last N.

Section 6.1 averages the last 5 (base) or 20 (big) checkpoints, written every 10 minutes of a
12-hour run: the final 7% of it. A time-budgeted run writes its checkpoints to average evenly over
the budget's last ``train.average_window`` (10%); whether averaging them helps, and how many, is
measured here on the task's own measure: each window is averaged from the run's kept checkpoints
(:func:`keras_transformer.checkpoints.averaging.average_checkpoints`, as the averaging stage does)
and decoded by the evaluation stage as the run's own evaluation decoded (its ``scores.json``'s
settings: beam, alpha, length floor, guard), on validation. A wider window
than the run kept needs another run (``train.average_window``).

``--confirm-on test`` also scores every window on that split and its companions (``test_unseen``),
each paired sentence by sentence with the run's own evaluation (the window it shipped), so that a
window chosen on validation is seen on both test splits; nothing is chosen on a test split.

    .venv/bin/python -m benchmarks.probes.bench_translation_checkpoints --run runs/cpu-small/latest \\
        --windows 1,3,5 --confirm-on test --output benchmarks/results/<report>.json
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
from pathlib import Path

from benchmarks.probes.checkpoint_windows import averaged_windows
from flows.tools.choose_alpha import run_files, summary
from flows.tools.compare_runs import RunsDoNotPair, pair_folders
from flows.tools.report import emit
from keras_transformer.decoding.settings import DecodingSettings

logger = logging.getLogger("bench_translation_checkpoints")
#: The evaluation settings that change what is decoded: taken from the run's own evaluation.
def shipped_overrides(shipped: dict) -> dict:
    """The decoding overrides of a run's evaluation config (``evaluation.decoding``); a run evaluated
    before the overrides were one section named them one by one, the length penalty ``alpha``."""
    if "decoding" in shipped:
        return {key: value for key, value in shipped["decoding"].items() if value is not None}
    renamed = {"alpha": "length_penalty"}
    return {renamed.get(key, key): value for key, value in shipped.items()
            if renamed.get(key, key) in DecodingSettings.names() and value is not None}


def paired_with_shipped(run: Path, split: str, result, trials: int = 10000) -> dict:
    """Each split of ``result`` (``split`` and its companions) paired with the run's own evaluation of it."""
    try:
        # --max-sentences scores the first N: the run's own first N are their pair.
        return {name: pair_folders(run / "evaluation" / ("" if name == split else name), scored.output_dir, trials,
                                   first_of_base=True)["paired"]
                for name, scored in {split: result, **result.others}.items()}
    except RunsDoNotPair as err:
        raise SystemExit(f"--run {run}: {err}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=Path, required=True,
                        help="a translation run directory (holding train/) or its run_dir/latest")
    parser.add_argument("--windows", default="1,3,5", help="how many newest checkpoints to average")
    parser.add_argument("--split", default="validation", help="the split to choose on (default %(default)s)")
    parser.add_argument("--confirm-on", help="also score every window on this test split, paired with the run's own")
    parser.add_argument("--max-sentences", type=int, help="only the first N sentences (quick looks)")
    parser.add_argument("--trials", type=int, default=10000, help="of the paired test (with --confirm-on)")
    parser.add_argument("--output", type=Path, help="also write the JSON report here")
    args = parser.parse_args(argv)
    if args.split.startswith("test"):
        parser.error("the window is chosen on validation data; scoring a test split here would tune on it")
    run = args.run.resolve()
    if not (run / "train" / "checkpoint").is_file():
        parser.error(f"--run {args.run}: no train/checkpoint there (not a training run's folder)")
    found = run_files(run)
    try:
        shipped = json.loads((run / "evaluation" / "scores.json").read_text(encoding="utf-8"))["evaluation"]["config"]
        shipped_window = len(json.loads((run / "averaged" / "model_config.json").read_text(encoding="utf-8"))
                             ["averaged_from"])
    except (OSError, ValueError, KeyError, TypeError) as err:
        parser.error(f"--run {args.run}: no evaluation/scores.json and averaged/model_config.json of a finished run "
                     f"({type(err).__name__}: {err})")
    decoding = shipped_overrides(shipped)
    if not (found["tokenizer"] and found["corpus_dir"]):
        parser.error(f"--run {args.run}: its run_dir needs one tokenizer/*.model and one data/*/manifest.json")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")

    from keras_transformer.checkpoints.saved_model import load_translator
    from pipelines.corpus import Corpus
    from pipelines.tasks.translation.evaluation import EvalConfig, evaluate
    from pipelines.training.metrics_file import read_metrics

    corpus = Corpus.load(found["corpus_dir"])
    last_step = read_metrics(run / "train")[-1]["step"]
    results = []
    with tempfile.TemporaryDirectory() as scratch:
        windows = averaged_windows(run / "train", (int(w) for w in args.windows.split(",")), Path(scratch))
        for window, checkpoints, averaged in windows:
            translator = load_translator(averaged.keras_model, found["tokenizer"])
            first = int(checkpoints[0].rsplit("-", 1)[1])
            result = {"window": window, "shipped": window == shipped_window, "checkpoints": checkpoints,
                      "fraction_of_run": round((last_step - first) / last_step, 3)}
            config = EvalConfig(split=args.split, max_sentences=args.max_sentences, attention_examples=0,
                                decoding=decoding, batch_size=shipped.get("batch_size", 32))
            result[args.split] = summary(evaluate(translator, corpus, config=config,
                                                  output_dir=Path(scratch) / f"{args.split}-{window}"))
            if args.confirm_on:
                config = EvalConfig(split=args.confirm_on, attention_examples=0, decoding=decoding,
                                    batch_size=shipped.get("batch_size", 32),
                                    max_sentences=args.max_sentences or shipped.get("max_sentences"))
                scored = evaluate(translator, corpus, config=config,
                                  output_dir=Path(scratch) / f"{args.confirm_on}-{window}")
                result.update({args.confirm_on: summary(scored),
                               **{split: summary(other) for split, other in scored.others.items()},
                               "paired_over_shipped": paired_with_shipped(run, args.confirm_on, scored, args.trials)})
            logger.info("%s", result)
            results.append(result)
    best = max(results, key=lambda r: (round(r[args.split]["bleu"], 6), -r["window"]))
    emit({"benchmark": "translation_checkpoints", "run": str(run), "split": args.split,
          "evaluation_settings": decoding, "decoding": str(translator.decoding), "shipped_window": shipped_window,
          "results": results, "best_window": best["window"]},
         args.output, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

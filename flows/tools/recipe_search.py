"""Recipe search: training recipes compared at short, equal wall-clock budgets.

    recipe-search benchmarks/search/demo.yaml [--only a,b] [--minutes 4]

The search file is an ablation file (``flows/ablation.py``): a pipeline config, a budget in minutes
and a list of variants, each a nested dict of overrides of that config (learning-rate scale,
warm-up, tokens per step, model size, vocabulary, dropout, label smoothing, averaging window, beam
and alpha, ...). The search runs on the ablation flow: every variant runs through the real flow of
the file's ``task`` (``translation``, the default, or ``parsing``) with ``train.train_minutes`` set
to the budget, so it trains, averages its last checkpoints and decodes with beam search exactly as
the product does (scored on the validation split unless the file says otherwise: the test split
stays for the chosen recipe), each an MLflow child run (run name = variant name) under the search's
parent run (experiment ``ablation-<name>``) in ``<out>/mlflow.db``.

The budget is wall-clock minutes, but this machine drifts by +-20% and a search runs for hours
beside other work, so by default the search first measures every variant's seconds per optimizer
step (``calibrate``: a short training run of each, in one process, in two passes of opposite order,
on a machine doing nothing else) and then trains each variant for the steps its budget buys at that
speed (:func:`pipelines.training.budget.replaying_steps`): the runs are those an idle machine would make, reproducibly,
however busy the machine is while they run. ``--wall-clock`` counts real time instead. The step
times are kept in ``<out>/calibration.json`` and reused until ``--recalibrate``.

Writes ``<out>/results.jsonl`` (one record per run, appended) and ``<out>/results.md`` (the
table of every record so far) and prints the new records as JSON.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
from pathlib import Path

from flows.tools import REPO
from pipelines.quiet_tensorflow import import_quietly

logger = logging.getLogger("recipe_search")
# The calibration trains outside any flow run: its stage loggers have no Prefect run to write to.
os.environ.setdefault("PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW", "ignore")



def measure_step_seconds(search: dict, variant: dict, out: Path, steps: int, skip: int) -> float:
    """Median seconds per optimizer step of ``variant``'s training (after ``skip`` warm-up steps)."""
    import dataclasses
    import tempfile

    from flows.ablation import pipeline_for, variant_overrides
    from flows.pipeline_config import load_pipeline_config
    from pipelines.corpus import Corpus
    from pipelines.tokenization import load_tokenizers, train_tokenizer
    from pipelines.training.stage import train_on_corpus

    config_class, _ = pipeline_for(search.get("task", "translation"))
    config = load_pipeline_config(config_class, REPO / search["config"], variant_overrides(search, variant, out, None))
    corpus = Corpus.load(config.task.prepare_data(config.data))
    models = train_tokenizer(corpus, config.tokenizer, config.tokenizer_dir)
    with tempfile.TemporaryDirectory(dir=out) as scratch:
        train_config = dataclasses.replace(
            config.train, train_steps=skip + steps, train_minutes=0, checkpoint_dir=scratch,
            checkpoint_every_steps=None, checkpoint_every_minutes=None, validate_every_steps=None,
            progress_bar=False, log_every=None)
        result = train_on_corpus(corpus, load_tokenizers(models), config.input, train_config, validation_split=None)
    return statistics.median(r["step_seconds"] for r in result.history[skip:])


def calibrate(search: dict, variants: list[dict], out: Path, steps: int = 30, skip: int = 8) -> dict[str, float]:
    """Seconds per step of every variant: each measured twice, in passes of opposite order, averaged.

    Run on an idle machine: these times stand for it. Also writes ``<out>/calibration.json``.
    """
    measured: dict[str, list[float]] = {v["name"]: [] for v in variants}
    for variant in variants + variants[::-1]:
        measured[variant["name"]].append(measure_step_seconds(search, variant, out, steps, skip))
        logger.info("calibration %s: %.3f s/step", variant["name"], measured[variant["name"]][-1])
    seconds = {name: round(statistics.mean(values), 4) for name, values in measured.items()}
    path = out / "calibration.json"
    known = json.loads(path.read_text()) if path.is_file() else {}
    path.write_text(json.dumps({**known, **{name: {"seconds_per_step": value, "passes": measured[name]}
                                            for name, value in seconds.items()}}, indent=1))
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="recipe-search", description=__doc__.split("\n\n")[0])
    parser.add_argument("search", type=Path, help="search YAML file (config, minutes, variants)")
    parser.add_argument("--minutes", type=float, help="override the file's budget per variant")
    parser.add_argument("--only", help="comma-separated variant names to run")
    parser.add_argument("--repeats", type=int, default=1, help="run the list again, reversed")
    parser.add_argument("--out", type=Path, help="default: runs/search-<file name>")
    parser.add_argument("--wall-clock", action="store_true",
                        help="budget in real seconds, no calibration (the machine must stay idle)")
    parser.add_argument("--recalibrate", action="store_true", help="measure step times again")
    parser.add_argument("--calibration-steps", type=int, default=30)
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="override a setting of every variant, e.g. --set data.path=treebank.zip")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    import_quietly()  # without TensorFlow's start-up lines, as every command of the package
    from flows.ablation import ablation_flow, load_ablation, pick
    from flows.pipeline_config import parse_overrides
    from pipelines.config import ConfigError, merge

    try:
        search = load_ablation(args.search)
        variants = pick(search, args.only.split(",") if args.only else None)
    except ConfigError as err:
        raise SystemExit(str(err)) from err
    # Scored on the validation split unless the file says otherwise: the test split stays for the
    # chosen recipe. The exports would only fill the disk.
    shared = merge({"export": False, "evaluation": {"split": "validation", "max_sentences": 300,
                                                    **search.get("evaluation", {})}},
                   parse_overrides(args.set))
    search["overrides"] = merge(search.get("overrides", {}), shared)
    out = args.out or REPO / "runs" / f"search-{args.search.stem}"
    out.mkdir(parents=True, exist_ok=True)
    minutes = args.minutes or search.get("minutes", 4)
    order = []
    for repeat in range(args.repeats):
        order += variants if repeat % 2 == 0 else variants[::-1]
    step_seconds: dict[str, float] | None = None
    if not args.wall_clock:
        path = out / "calibration.json"
        known = json.loads(path.read_text()) if path.is_file() and not args.recalibrate else {}
        missing = [v for v in variants if v["name"] not in known]
        if missing:
            calibrate(search, missing, out, steps=args.calibration_steps)
            known = json.loads(path.read_text())
        step_seconds = {v["name"]: known[v["name"]]["seconds_per_step"] for v in variants}
    result = ablation_flow(str(args.search), str(out), minutes, [v["name"] for v in order], shared, step_seconds)
    print(json.dumps(result["records"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

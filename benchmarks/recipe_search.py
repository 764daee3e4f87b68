"""Recipe search: training recipes compared at short, equal wall-clock budgets.

    python benchmarks/recipe_search.py benchmarks/search/demo.yaml [--only a,b] [--minutes 4]

The search file names a pipeline config, a budget in minutes and a list of variants, each a
nested dict of overrides of that config (learning-rate scale, warm-up, tokens per step, model
size, vocabulary, dropout, label smoothing, averaging window, beam and alpha, ...). Every variant
runs through the real flow of the file's ``task`` (``translation``, the default, or ``parsing``)
with ``train.train_minutes`` set to the budget, so it trains, averages its last checkpoints and
decodes with beam search exactly as the product does (scored on the validation split unless the
file says otherwise: the test split stays for the chosen recipe), and every run is an MLflow run
(experiment ``recipe-search-<name>``, run name = variant name) in ``<out>/mlflow.db``.

The budget is wall-clock minutes, but this machine drifts by +-20% and a search runs for hours
beside other work, so by default the search first measures every variant's seconds per optimizer
step (``calibrate``: a short training run of each, in one process, in two passes of opposite order,
on a machine doing nothing else) and then trains each variant for the steps its budget buys at that
speed (``train.seconds_per_step``): the runs are those an idle machine would make, reproducibly,
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
from typing import Any

import yaml

logger = logging.getLogger("recipe_search")
# The calibration trains outside any flow run: its stage loggers have no Prefect run to write to.
os.environ.setdefault("PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW", "ignore")

REPO = Path(__file__).resolve().parents[1]
#: The scores a record keeps, of those the task reports.
SCORES = ("bleu", "chrf", "f1", "complete_match", "tagging_accuracy")


def load_search(path: Path) -> dict[str, Any]:
    search = yaml.safe_load(path.read_text(encoding="utf-8"))
    for key in ("config", "variants"):
        if key not in search:
            raise SystemExit(f"{path}: missing '{key}'")
    names = [v.get("name") for v in search["variants"]]
    if None in names or len(set(names)) != len(names):
        raise SystemExit(f"{path}: every variant needs a unique 'name'")
    return search


def _flow(task: str):
    if task == "translation":
        from flows.translation import translation_pipeline

        return translation_pipeline
    if task == "parsing":
        from flows.parsing import parsing_pipeline

        return parsing_pipeline
    raise SystemExit(f"unknown task {task!r}: translation or parsing")


def _config_class(task: str):
    if task == "parsing":
        from flows.parsing import ParsingPipelineConfig

        return ParsingPipelineConfig
    from flows.translation import TranslationPipelineConfig

    return TranslationPipelineConfig


def _variant_overrides(search: dict, variant: dict, out: Path) -> dict[str, Any]:
    from pipelines.config import merge

    return merge(merge({"run_dir": str(out / "work")}, search.get("overrides", {})), variant.get("overrides", {}))


def measure_step_seconds(search: dict, variant: dict, out: Path, steps: int, skip: int) -> float:
    """Median seconds per optimizer step of ``variant``'s training (after ``skip`` warm-up steps)."""
    import dataclasses
    import tempfile

    from flows.pipeline_config import load_pipeline_config
    from pipelines.corpus import Corpus
    from pipelines.tokenization import load_tokenizers, train_tokenizer
    from pipelines.training.stage import train_on_corpus

    config = load_pipeline_config(_config_class(search.get("task", "translation")), REPO / search["config"],
                                  _variant_overrides(search, variant, out))
    corpus = Corpus.load(config.task.prepare_data(config.data))
    models = train_tokenizer(corpus, config.tokenizer, config.tokenizer_dir)
    with tempfile.TemporaryDirectory(dir=out) as scratch:
        train_config = dataclasses.replace(
            config.train, train_steps=skip + steps, train_minutes=0, seconds_per_step=None, checkpoint_dir=scratch,
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


def run_variant(search: dict, variant: dict, minutes: float, out: Path, search_name: str,
                seconds_per_step: float | None = None) -> dict[str, Any]:
    from pipelines.config import merge

    evaluation = {"split": "validation", "max_sentences": 300, **search.get("evaluation", {})}
    fixed = {
        "run_dir": str(out / "work"),
        # The budget decides when training ends; train_steps is only a cap.
        "train": {"train_minutes": minutes, "train_steps": 1_000_000, "progress_bar": False,
                  "seconds_per_step": seconds_per_step},
        "evaluation": evaluation,
        "export": False,
        "tracking": {"experiment": f"recipe-search-{search_name}", "run_name": variant["name"],
                     "tracking_uri": f"sqlite:///{(out / 'mlflow.db').resolve()}"},
    }
    overrides = merge(merge(fixed, search.get("overrides", {})), variant.get("overrides", {}))
    result = _flow(search.get("task", "translation"))(str(REPO / search["config"]), overrides)
    metrics = [json.loads(line) for line in
               (Path(result["run_path"]) / "train" / "metrics.jsonl").read_text().splitlines()]
    final = metrics[-1]
    scores = result["scores"]["metrics"]
    return {
        "search": search_name,
        "name": variant["name"],
        "overrides": variant.get("overrides", {}),
        "budget_minutes": minutes,
        "seconds_per_step": seconds_per_step,
        "train_minutes": round(result["train_minutes"], 2),
        "steps": result["final_step"],
        "tokens_per_second": round(statistics.median(m["tokens_per_second"] for m in metrics), 1),
        "target_tokens": int(sum(m["tokens"] for m in metrics)),
        "val_loss": round(final.get("val_loss", float("nan")), 4),
        "val_perplexity": round(final.get("val_perplexity", float("nan")), 2),
        **{key: round(scores[key], 2) for key in SCORES if key in scores},
        "mlflow_run_id": result["run_id"],
    }


def write_table(records: list[dict[str, Any]], path: Path) -> None:
    columns = ["search", "name", "budget_minutes", "seconds_per_step", "train_minutes", "steps", "tokens_per_second",
               "val_loss", "val_perplexity",
               *[key for key in SCORES if any(key in r for r in records)], "overrides"]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in records:
        cells = [json.dumps(r[c], separators=(",", ":")) if c == "overrides" else str(r.get(c, ""))
                 for c in columns]
        lines.append("| " + " | ".join(cells) + " |")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
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
    search = load_search(args.search)
    if args.set:
        from flows.pipeline_config import parse_overrides
        from pipelines.config import merge

        search["overrides"] = merge(search.get("overrides", {}), parse_overrides(args.set))
    name = args.search.stem
    out = args.out or REPO / "runs" / f"search-{name}"
    out.mkdir(parents=True, exist_ok=True)
    minutes = args.minutes or search.get("minutes", 4)
    variants = search["variants"]
    if args.only:
        wanted = args.only.split(",")
        variants = [v for v in variants if v["name"] in wanted]
        if len(variants) != len(wanted):
            raise SystemExit(f"--only: unknown variant(s) {set(wanted) - {v['name'] for v in variants}}")
    order = []
    for repeat in range(args.repeats):
        order += variants if repeat % 2 == 0 else variants[::-1]
    step_seconds: dict[str, float | None] = {v["name"]: None for v in variants}
    if not args.wall_clock:
        path = out / "calibration.json"
        known = json.loads(path.read_text()) if path.is_file() and not args.recalibrate else {}
        missing = [v for v in variants if v["name"] not in known]
        if missing:
            calibrate(search, missing, out, steps=args.calibration_steps)
            known = json.loads(path.read_text())
        step_seconds = {v["name"]: known[v["name"]]["seconds_per_step"] for v in variants}
    results_file = out / "results.jsonl"
    new = []
    for variant in order:
        logger.info("variant %s: %s", variant["name"], variant.get("overrides", {}))
        record = run_variant(search, variant, minutes, out, name, step_seconds[variant["name"]])
        new.append(record)
        with results_file.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        records = [json.loads(line) for line in results_file.read_text().splitlines()]
        write_table(records, out / "results.md")
        logger.info("result: %s", record)
    print(json.dumps(new, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

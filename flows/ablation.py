"""Ablations: variants of one pipeline trained and scored side by side, as in Table 3.

Table 3 of the paper changes one thing at a time (heads, d_k, size, dropout, label smoothing,
positional encoding) and reports every row's perplexity, BLEU and parameter count. This flow does
that for any list of presets or overrides of a pipeline config: each variant runs the task's
pipeline flow as a subflow (a Prefect flow run and an MLflow child run of its own, nested under
the ablation's parent run), and the parent run gets the side-by-side table (variant, parameters,
steps, minutes, validation loss and perplexity, the task's scores) as an MLflow artifact and as
a Prefect table artifact.

    python -m flows.ablation benchmarks/search/cpu-small-r2.yaml [--only a,b] [--minutes 10]

An ablation file (the recipe search's format: ``recipe-search``, :mod:`flows.tools.recipe_search`, runs on this flow)::

    config: configs/translation/cpu-small.yaml   # the pipeline config every variant starts from
    task: translation                            # or parsing
    minutes: 10                                  # optional: train.train_minutes of every variant
    overrides: {train: {validate_every_steps: 250}}   # optional: applied to every variant
    evaluation: {split: validation}              # optional: the evaluation section's overrides
    variants:
      - {name: base, overrides: {}}
      - {name: A-h1, overrides: {train: {preset: A-h1}}}

Every variant's settings are checked before the first one trains. The variants share one
``run_dir`` (``<out>/work``: corpus, vocabulary and token cache are built once), record into
``<out>/mlflow.db`` unless ``MLFLOW_TRACKING_URI`` names a server, and never register or promote a
model: an ablation compares recipes, the retraining deployment promotes. One record per variant is
appended to ``<out>/results.jsonl`` as soon as it finishes, with ``<out>/results.md`` its table.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from prefect import flow, get_run_logger

from flows.pipeline_config import load_pipeline_config, parse_overrides
from flows.tracking import Tracker, TrackingConfig, artifact_key, resolve_tracking_uri
from pipelines.config import ConfigError, merge

if TYPE_CHECKING:
    from flows.results import RunResult

logger = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[1]
#: The scores a record keeps, of those the tasks report.
SCORES = ("bleu", "chrf", "f1", "complete_match", "tagging_accuracy")
COLUMNS = ("name", "parameters", "budget_minutes", "seconds_per_step", "train_minutes", "steps",
           "tokens_per_second", "val_loss", "val_perplexity", *SCORES, "overrides")


def load_ablation(path: str | Path) -> dict[str, Any]:
    """The ablation file at ``path``, its shape checked (errors name the file and the key)."""
    path = Path(path)
    try:
        ablation = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        raise ConfigError(f"{path}: cannot read it as YAML ({err})") from err
    if not isinstance(ablation, dict):
        raise ConfigError(f"{path}: expected a mapping with 'config' and 'variants'")
    for key in ("config", "variants"):
        if key not in ablation:
            raise ConfigError(f"{path}: missing '{key}'")
    if ablation.get("task", "translation") not in ("translation", "parsing"):
        raise ConfigError(f"{path}: task={ablation['task']!r}: use translation or parsing")
    names = [v.get("name") if isinstance(v, dict) else None for v in ablation["variants"]]
    if not names or None in names or len(set(names)) != len(names):
        raise ConfigError(f"{path}: 'variants' needs a list of entries, each with a unique 'name'")
    return ablation


def pick(ablation: dict[str, Any], only: list[str] | None) -> list[dict[str, Any]]:
    if not only:
        return list(ablation["variants"])
    known = {v["name"]: v for v in ablation["variants"]}
    unknown = [name for name in only if name not in known]
    if unknown:
        raise ConfigError(f"only={unknown}: no such variant (known: {sorted(known)})")
    return [known[name] for name in only]


def pipeline_for(task: str):
    """The pipeline config class and flow of ``task``."""
    from flows.task_flows import TASK_FLOWS

    return TASK_FLOWS[task].config_class, TASK_FLOWS[task].flow()


def variant_overrides(ablation: dict[str, Any], variant: dict[str, Any], out: Path, minutes: float | None,
                      tracking: dict[str, Any] | None = None) -> dict[str, Any]:
    """The overrides one variant's pipeline runs with: shared ones, then the variant's own."""
    # A variant with tokenizer settings of its own gets its own run_dir: in the shared one, each change
    # of variant retrained the tokenizer over the last one's, so a variant's files no longer matched it.
    own = "tokenizer" in variant.get("overrides", {})
    run_dir = out / (f"work-{variant['name']}" if own else "work")
    # Never registered; every variant's files kept (retention would drop the oldest variants').
    fixed: dict[str, Any] = {"run_dir": str(run_dir), "retention": {"keep_runs": None},
                             "tracking": {**(tracking or {}), "run_name": variant["name"], "register": False}}
    if minutes:
        # The budget decides when training ends; train_steps is only a cap.
        fixed["train"] = {"train_minutes": minutes, "train_steps": 1_000_000, "progress_bar": False}
    if "evaluation" in ablation:
        fixed["evaluation"] = ablation["evaluation"]
    return merge(merge(fixed, ablation.get("overrides", {})), variant.get("overrides", {}))


def record(variant: dict[str, Any], result: RunResult, minutes: float | None,
           seconds_per_step: float | None) -> dict[str, Any]:
    """One row of the table, from a pipeline run's result and its training metrics file."""
    metrics = [json.loads(line) for line in
               (Path(result.run_path) / "train" / "metrics.jsonl").read_text().splitlines()]
    final = metrics[-1] if metrics else {}
    scores = result.evaluation.metrics
    return {
        "name": variant["name"],
        "overrides": variant.get("overrides", {}),
        "parameters": result.training.parameters,
        "budget_minutes": minutes,
        "seconds_per_step": seconds_per_step,
        "train_minutes": round(result.training.train_minutes, 2),
        "steps": result.training.final_step,
        "tokens_per_second": round(statistics.median(m["tokens_per_second"] for m in metrics), 1) if metrics else None,
        "target_tokens": int(sum(m["tokens"] for m in metrics)),
        "val_loss": round(final.get("val_loss", float("nan")), 4),
        "val_perplexity": round(final.get("val_perplexity", float("nan")), 2),
        **{key: round(scores[key], 2) for key in SCORES if key in scores},
        "primary": result.evaluation.primary,
        "mlflow_run_id": result.run_id,
    }


def table_markdown(records: list[dict[str, Any]]) -> str:
    columns = [c for c in COLUMNS if any(r.get(c) is not None for r in records)]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in records:
        cells = [json.dumps(r[c], separators=(",", ":")) if c == "overrides" else str(r.get(c, ""))
                 for c in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


@flow(name="transformer-ablation", log_prints=False)
def ablation_flow(ablation_path: str, out: str | None = None, minutes: float | None = None,
                  only: list[str] | None = None, overrides: dict | None = None,
                  seconds_per_step: dict[str, float] | None = None) -> dict[str, Any]:
    """Runs every variant of the ablation file (or those in ``only``) and tables them.

    ``minutes`` overrides the file's budget; ``overrides`` applies to every variant (e.g. the
    treebank's path); ``seconds_per_step`` gives variants budgets in calibrated steps (see
    ``recipe-search``).
    """
    run_logger = get_run_logger()
    path = Path(ablation_path)
    ablation = load_ablation(path)
    if overrides:
        ablation["overrides"] = merge(ablation.get("overrides", {}), overrides)
    minutes = minutes or ablation.get("minutes")
    out_dir = Path(out) if out else REPO / "runs" / f"ablation-{path.stem}"
    out_dir.mkdir(parents=True, exist_ok=True)
    config_class, pipeline = pipeline_for(ablation.get("task", "translation"))
    config_path = str(REPO / ablation["config"])  # an absolute path stays as it is
    variants = pick(ablation, only)
    # Every variant's settings are checked before any of them trains.
    configs = [load_pipeline_config(config_class, config_path, variant_overrides(ablation, v, out_dir, minutes))
               for v in variants]
    uri = configs[0].tracking.tracking_uri or resolve_tracking_uri(TrackingConfig(), out_dir.resolve())
    tracking = {"experiment": f"ablation-{path.stem}", "tracking_uri": uri}
    parent = Tracker.start(TrackingConfig(**{**tracking, "run_name": path.stem}), out_dir,
                           tags={"ablation": str(path), "variants": ",".join(v["name"] for v in variants)})
    parent.log_params({"ablation_file": str(path), "config": ablation["config"], "budget_minutes": minutes})
    results_file = out_dir / "results.jsonl"
    records = []
    try:
        for variant in variants:
            run_logger.info("variant %s: %s", variant["name"], variant.get("overrides", {}))
            spent = (seconds_per_step or {}).get(variant["name"])
            child = {**tracking, "parent_run_id": parent.run_id}
            # Calibrated: the budget counts the variant's steps at its idle step time (a replay).
            from pipelines.training.budget import replaying_steps

            with replaying_steps(spent):
                result = pipeline(config_path, variant_overrides(ablation, variant, out_dir, minutes, child))
            records.append(record(variant, result, minutes, spent))
            with results_file.open("a", encoding="utf-8") as f:
                f.write(json.dumps(records[-1]) + "\n")
            every = [json.loads(line) for line in results_file.read_text().splitlines()]
            (out_dir / "results.md").write_text(table_markdown(every), encoding="utf-8")
            run_logger.info("result: %s", records[-1])
    except BaseException:
        _publish(parent, path.stem, records)
        parent.finish("FAILED")
        raise
    _publish(parent, path.stem, records)
    parent.finish()
    return {"run_id": parent.run_id, "tracking_uri": parent.tracking_uri, "records": records,
            "table": str(out_dir / "results.md")}


def _publish(parent: Tracker, name: str, records: list[dict[str, Any]]) -> None:
    """The table on the parent MLflow run (markdown and JSON) and on the Prefect flow run."""
    from prefect.artifacts import create_table_artifact

    if not records:
        return
    markdown = table_markdown(records)
    parent.client.log_text(parent.run_id, markdown, "ablation/table.md")
    parent.client.log_dict(parent.run_id, records, "ablation/records.json")
    for r in records:
        primary = r.get("primary")
        if primary and r.get(primary) is not None:
            # A section per score in MLflow's charts (flows/metric_names.py), a chart per variant.
            parent.client.log_metric(parent.run_id, f"{primary}/{r['name']}", r[primary])
    rows = [{c: (json.dumps(r[c]) if c == "overrides" else r.get(c)) for c in COLUMNS if c in r} for r in records]
    try:
        create_table_artifact(table=rows, key=artifact_key(f"ablation-{name}"),
                              description=f"Ablation {name}: MLflow run {parent.run_id}")
    except Exception as err:  # noqa: BLE001  (the MLflow record stands; a missing Prefect copy is not worth failing it)
        logger.warning("could not publish the ablation table to Prefect: %s", err)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flows.ablation", description=__doc__.split("\n\n")[0])
    parser.add_argument("ablation", help="ablation YAML file (config, variants, ...)")
    parser.add_argument("--out", help="default: runs/ablation-<file name>")
    parser.add_argument("--minutes", type=float, help="override the file's training budget per variant")
    parser.add_argument("--only", help="comma-separated variant names to run")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="override a setting of every variant, e.g. --set data.path=treebank.zip")
    args = parser.parse_args(argv)
    from flows.cli import one_line, user_errors

    try:
        result = ablation_flow(args.ablation, args.out, args.minutes, args.only.split(",") if args.only else None,
                               parse_overrides(args.set) or None)
    except user_errors() as err:  # the flows' contract (flows.cli): one line, exit 2
        print(f"{parser.prog}: error: {one_line(err)}", file=sys.stderr)
        return 2
    print(Path(result["table"]).read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

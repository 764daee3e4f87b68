"""The pipeline every task runs: data -> vocabularies -> train -> average -> evaluate (-> export).

A task (:class:`pipelines.tasks.base.Task`: translation, parsing) brings its data stage and its
evaluation; the stages between are the engine's and shared. Each stage is a Prefect task around a
plain function of ``pipelines``; the stages themselves skip work that is already done (a verified
corpus, an unchanged tokenizer) and training resumes from its newest checkpoint, so rerunning the
same command after a crash continues where it stopped, and a task retry does the same. Everything
is logged to one MLflow run: the whole configuration as parameters, per-step training metrics,
validation metrics, the task's scores and the files behind every number as artifacts.

Each MLflow run trains in a directory of its own, ``<run_dir>/runs/<mlflow run id>/``: a rerun
after a crash resumes the unfinished MLflow run and with it that run's checkpoints, while a rerun
after a finished run (the scheduled retraining) starts a new MLflow run that trains from scratch
and leaves the earlier run's files where they are. ``<run_dir>/latest`` points at the newest
finished run. ``flows/translation.py`` and ``flows/parsing.py`` are the two tasks' flows.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

import flows  # noqa: F401  (telemetry off before prefect/mlflow are imported)
from flows.tracking import Tracker, TrackingConfig
from keras_transformer.files import atomic_write_bytes
from pipelines.averaging import AveragingConfig
from pipelines.config import ConfigError, load_config, merge, to_dict
from pipelines.input_pipeline import InputConfig
from pipelines.tasks.base import Task
from pipelines.tokenization import TokenizerConfig
from pipelines.training import TrainConfig

logger = logging.getLogger(__name__)

#: Placeholder for the MLflow run id in ``train.checkpoint_dir``.
RUN_ID = "{run_id}"


@dataclass
class PipelineConfig:
    """One file configures the whole run; each section is the config of one stage.

    A task's config subclasses this, typing ``data`` and ``evaluation`` with its own stage
    configs and naming itself in ``task``. Paths left empty in a section are placed under
    ``run_dir``. What every run shares: ``data/``, ``cache/`` (token ids), ``tokenizer/``, the
    MLflow store. What each MLflow run owns, under ``runs/<run id>/`` (:meth:`run_paths`):
    ``train/`` (checkpoints), ``averaged/``, ``evaluation/``, ``export/``. ``{run_id}`` in
    ``train.checkpoint_dir`` stands for the MLflow run id; a ``train.checkpoint_dir`` without it
    is shared by every run, so a rerun after a finished run continues training there.
    """

    task: ClassVar[Task]

    run_dir: str = "runs/demo"
    data: Any = None
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    input: InputConfig = field(default_factory=InputConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    averaging: AveragingConfig = field(default_factory=AveragingConfig)
    evaluation: Any = None
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    export: bool = True

    def __post_init__(self) -> None:
        run = Path(self.run_dir)
        if self.data is None:
            self.data = self.task.data_config()
        if self.evaluation is None:
            self.evaluation = self.task.eval_config()
        if not self.data.output_dir:
            self.data.output_dir = str(run / self.task.default_data_dir(self.data))
        if not self.input.cache_dir:
            self.input.cache_dir = str(run / "cache")
        # Not chosen: each MLflow run gets its own (an explicit directory is kept, whatever it is).
        if not self.train.checkpoint_dir:
            self.train.checkpoint_dir = str(run / "runs" / RUN_ID / "train")
        shared = self.task.shared_vocabulary
        if shared is not None and self.tokenizer.shared != shared:
            raise ConfigError(f"tokenizer.shared={self.tokenizer.shared}: the {self.task.name} task needs "
                              f"{'one shared vocabulary' if shared else 'separate source and target vocabularies'}"
                              f" (tokenizer.shared: {str(shared).lower()})")
        self._check_enough_checkpoints()

    def _check_enough_checkpoints(self) -> None:
        # Averaging needs last_n checkpoints; find out now rather than after hours of training.
        resolved = self.train.resolved()
        if resolved["train_minutes"]:
            return  # under a time budget the trainer saves them in the run's final stretch
        last_n = self.averaging.last_n or resolved["checkpoints_to_average"]
        every, steps = self.train.checkpoint_every_steps, resolved["train_steps"]
        if every:
            saved = steps // every + (1 if steps % every else 0)
            if saved < last_n:
                raise ConfigError(
                    f"train.train_steps={steps} with train.checkpoint_every_steps={every} saves "
                    f"{saved} checkpoint(s), but averaging needs the last {last_n} "
                    f"(averaging.last_n or preset '{self.train.preset}'): lower "
                    "checkpoint_every_steps or averaging.last_n"
                )

    @property
    def tokenizer_dir(self) -> Path:
        return Path(self.run_dir) / "tokenizer"

    @property
    def latest_link(self) -> Path:
        return Path(self.run_dir) / "latest"

    def run_paths(self, run_id: str) -> RunPaths:
        """The directories MLflow run ``run_id`` writes to."""
        work = Path(self.run_dir) / "runs" / run_id
        train = Path(self.train.checkpoint_dir.replace(RUN_ID, run_id))
        return RunPaths(work, train, work / "averaged", work / "evaluation", work / "export")


@dataclass(frozen=True)
class RunPaths:
    """Where one MLflow run's stages write (see :class:`PipelineConfig`)."""

    work: Path
    train: Path
    averaged: Path
    evaluation: Path
    export: Path


def read_state(path: Path) -> dict[str, Any]:
    """The MLflow run a previous flow run of this ``run_dir`` left (``{}`` if none)."""
    if not path.exists():
        return {}
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(state, dict) or not isinstance(state.get("run_id"), str):
            raise ValueError("no 'run_id'")
    except ValueError as err:
        raise ConfigError(f"{path} is damaged ({err}); delete it to start a new MLflow run") from err
    return state


def point_latest_at(link: Path, target: Path) -> None:
    """Makes ``link`` a relative symlink to ``target``, replacing the old one atomically."""
    temporary = link.with_name(link.name + ".tmp")
    temporary.unlink(missing_ok=True)
    temporary.symlink_to(Path(target).relative_to(link.parent))
    temporary.replace(link)


# ------------------------------------------------------------------------------------- tasks


@task(name="prepare-data", retries=2, retry_delay_seconds=10, cache_policy=NO_CACHE)
def prepare_data_task(pipeline_task: Task, config: Any) -> str:
    path = pipeline_task.prepare_data(config)
    get_run_logger().info("corpus ready at %s", path)
    return str(path)


@task(name="tokenizer", retries=1, cache_policy=NO_CACHE)
def tokenizer_task(corpus_dir: str, config: TokenizerConfig, output_dir: str) -> list[str]:
    """The vocabulary files: one shared model, or the source's and the target's."""
    from pipelines.corpus import Corpus
    from pipelines.tokenization import train_tokenizer

    paths = train_tokenizer(Corpus.load(corpus_dir), config, output_dir)
    paths = [str(p) for p in (paths if isinstance(paths, tuple) else (paths,))]
    get_run_logger().info("tokenizer(s) at %s", paths)
    return paths


def _tokenizers(tokenizer_paths: list[str]):
    from pipelines.tokenization import load_tokenizers

    return load_tokenizers(tokenizer_paths[0] if len(tokenizer_paths) == 1 else tuple(tokenizer_paths))


@task(name="train", retries=1, retry_delay_seconds=5, cache_policy=NO_CACHE)
def train_task(
    corpus_dir: str,
    tokenizer_paths: list[str],
    input_config: InputConfig,
    config: TrainConfig,
    tracker: Tracker,
    log_every_steps: int,
) -> dict[str, Any]:
    """Trains, resuming from the newest checkpoint in ``config.checkpoint_dir`` if any."""
    from pipelines.corpus import Corpus
    from pipelines.input_pipeline import make_dataset
    from pipelines.training import train

    run_logger = get_run_logger()
    corpus = Corpus.load(corpus_dir)
    source, target = _tokenizers(tokenizer_paths)
    pair = (source, target)
    train_data = make_dataset(corpus, "train", pair, input_config, training=True)
    validation = make_dataset(corpus, "validation", pair, input_config, training=False)
    if source is target:
        vocab_size = source.vocab_size
        vocabulary = {"fingerprint": source.fingerprint, "size": source.vocab_size}
    else:
        vocab_size = (source.vocab_size, target.vocab_size)
        vocabulary = {"fingerprint": f"{source.fingerprint}+{target.fingerprint}", "size": list(vocab_size)}

    def on_step(step: int, metrics: dict[str, Any]) -> None:
        validated = any(key.startswith("val_") for key in metrics)
        if step % log_every_steps == 0 or validated:
            tracker.log_metrics(metrics, step=step)
        if validated:
            run_logger.info("step %d: %s", step, {k: v for k, v in metrics.items() if k.startswith("val_")})

    result = train(config, train_data, vocab_size, validation_data=validation, vocabulary=vocabulary,
                   on_step=on_step)
    # A kill between a checkpoint and the MLflow call after it leaves steps up to the resumed
    # checkpoint in the trainer's metrics file but not in MLflow: log them now.
    logged = tracker.logged_steps("loss")
    for record in result.history:
        step = record["step"]
        if step <= result.start_step and step not in logged and (
                step % log_every_steps == 0 or any(k.startswith("val_") for k in record)):
            tracker.log_metrics({k: v for k, v in record.items() if k != "step"}, step=step)
    run_logger.info(
        "training reached step %d (started at %d) in %.0f s; validation %s",
        result.final_step, result.start_step, result.elapsed_seconds, result.validation,
    )
    return {
        "final_step": result.final_step,
        "start_step": result.start_step,
        "checkpoint_dir": str(result.checkpoint_dir),
        "checkpoints": list(result.checkpoints),
        "validation": result.validation or {},
        "train_seconds": result.train_seconds,
    }


@task(name="average-checkpoints", retries=1, cache_policy=NO_CACHE)
def average_task(checkpoint_dir: str, config: AveragingConfig, output_dir: str) -> str:
    from pipelines.averaging import run_averaging

    config = dataclasses.replace(config, checkpoint_dir=checkpoint_dir, output_dir=output_dir)
    result = run_averaging(config)
    get_run_logger().info("averaged %d checkpoints into %s", len(result.sources), result.keras_model)
    return str(result.keras_model)


def _decoding(preset: str):
    from keras_transformer.presets import get_preset

    return get_preset(preset).decoding


@task(name="evaluate", retries=1, cache_policy=NO_CACHE)
def evaluate_task(pipeline_task: Task, model_path: str, tokenizer_paths: list[str], corpus_dir: str,
                  config: Any, preset: str, output_dir: str) -> dict[str, Any]:
    from keras_transformer.translator import Translator

    translator = Translator.from_files(model_path, *tokenizer_paths, decoding=_decoding(preset))
    result = pipeline_task.evaluate(translator, Path(corpus_dir), config, Path(output_dir))
    run_logger = get_run_logger()
    run_logger.info("evaluation: %s", result.metrics)
    for example in result.examples:
        run_logger.info("source: %s\n  reference: %s\n  output:    %s", *example.values())
    return {"metrics": result.metrics, "primary": result.primary, "scores": result.record,
            "examples": result.examples}


@task(name="export", retries=1, cache_policy=NO_CACHE)
def export_task(model_path: str, tokenizer_paths: list[str], preset: str, output_dir: str) -> str:
    """A SavedModel decoding raw strings with the preset's beam, alpha and length offset."""
    import keras

    from keras_transformer.export import export_translator

    decoding = _decoding(preset)
    source, target = _tokenizers(tokenizer_paths)
    model = keras.saving.load_model(model_path, compile=False)
    path = export_translator(model, source, output_dir, beam_size=decoding.beam_size,
                             alpha=decoding.length_penalty, max_length_offset=decoding.max_length_offset,
                             target_tokenizer=None if target is source else target)
    get_run_logger().info("exported to %s", path)
    return str(path)


# ---------------------------------------------------------------------------------- pipeline


def run_pipeline(config: PipelineConfig) -> dict[str, Any]:
    """Runs every stage of ``config.task`` under one MLflow run; call it inside a Prefect flow."""
    pipeline_task = config.task
    run_dir = Path(config.run_dir)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(f"run_dir={config.run_dir!r}: cannot create it ({err})") from err
    if not os.access(run_dir, os.W_OK):
        raise ConfigError(f"run_dir={config.run_dir!r}: not writable")
    state_file = run_dir / "mlflow_run.json"
    previous = read_state(state_file)
    tracker = Tracker.start(
        config.tracking, run_dir, resume_run_id=previous.get("run_id"),
        tags={"task": pipeline_task.name, "preset": config.train.preset,
              "problem": pipeline_task.identity(config.data)},
    )
    # Atomic: a kill during the write must not leave a file that breaks every later run.
    atomic_write_bytes(state_file, json.dumps({"run_id": tracker.run_id,
                                                "tracking_uri": tracker.tracking_uri}).encode())
    tracker.log_params(to_dict(config))
    paths = config.run_paths(tracker.run_id)
    train_config = dataclasses.replace(config.train, checkpoint_dir=str(paths.train))
    get_run_logger().info("MLflow run %s writes to %s", tracker.run_id, paths.work)
    try:
        corpus_dir = prepare_data_task(pipeline_task, config.data)
        tracker.log_artifacts(Path(corpus_dir) / "manifest.json", "data")
        tokenizer_paths = tokenizer_task(corpus_dir, config.tokenizer, str(config.tokenizer_dir))
        for path in tokenizer_paths:
            tracker.log_artifacts(path, "tokenizer")
        trained = train_task(corpus_dir, tokenizer_paths, config.input, train_config, tracker,
                             config.tracking.log_every_steps)
        # The final validation is the last point of the val_* curves, at the final step.
        tracker.log_metrics({**{f"val_{k}": v for k, v in trained["validation"].items()},
                             "train_minutes": trained["train_seconds"] / 60},
                            step=trained["final_step"])
        model_path = average_task(trained["checkpoint_dir"], config.averaging, str(paths.averaged))
        scores = evaluate_task(pipeline_task, model_path, tokenizer_paths, corpus_dir, config.evaluation,
                               config.train.preset, str(paths.evaluation))
        tracker.log_metrics(scores["metrics"], step=trained["final_step"])
        tracker.set_tags(_signatures(scores["scores"]))
        tracker.log_artifacts(paths.evaluation, "evaluation")
        tracker.log_artifacts(model_path, "model")
        result = {"run_id": tracker.run_id, "task": pipeline_task.name, "run_path": str(paths.work),
                  "corpus_dir": corpus_dir, "tokenizer": tokenizer_paths, "model": model_path,
                  "scores": scores, "start_step": trained["start_step"],
                  "final_step": trained["final_step"], "train_minutes": trained["train_seconds"] / 60}
        if config.export:
            result["export"] = export_task(model_path, tokenizer_paths, config.train.preset,
                                           str(paths.export))
    except BaseException:
        tracker.finish("FAILED")
        raise
    tracker.finish()
    point_latest_at(config.latest_link, paths.work)
    return result


def _signatures(scores: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """sacrebleu signature strings (and other text) of the scores as MLflow tags."""
    tags: dict[str, str] = {}
    for key, value in scores.items():
        if isinstance(value, dict):
            tags.update(_signatures(value, f"{prefix}{key}."))
        elif isinstance(value, str) and ("signature" in key or key == "label"):
            tags[f"{prefix}{key}"] = value
    return tags


def load_pipeline_config(cls: type[PipelineConfig], path: str | Path,
                         overrides: dict[str, Any] | None = None) -> PipelineConfig:
    """The pipeline config of a YAML file; ``overrides`` is a nested dict applied on top."""
    return load_config(cls, path, overrides=overrides)


def parse_overrides(settings: list[str]) -> dict[str, Any]:
    """``["train.train_minutes=5", ...]`` as the nested dict ``load_config`` merges."""
    import yaml

    overrides: dict[str, Any] = {}
    for setting in settings:
        key, sep, value = setting.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {setting!r}: expected SECTION.KEY=VALUE")
        nested: Any = yaml.safe_load(value) if value else None
        for part in reversed(key.strip().split(".")):
            nested = {part: nested}
        overrides = merge(overrides, nested)
    return overrides


def main(flow_fn: Callable[..., dict[str, Any]], default_config: str, doc: str,
         argv: list[str] | None = None) -> int:
    """The command line of a task's flow: run it, print what was written and three examples."""
    prog = f"python -m {flow_fn.__module__}"
    parser = argparse.ArgumentParser(prog=prog, description=doc.split("\n\n")[0])
    parser.add_argument("--config", default=default_config, help="pipeline YAML file")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="override one setting (YAML value), e.g. --set data.path=treebank.zip; repeatable")
    parser.add_argument("--train-steps", type=int,
                        help="override train.train_steps (checkpointing every fifth of them)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        overrides = parse_overrides(args.set)
        if args.train_steps:
            every = max(1, args.train_steps // 5)
            overrides = merge(overrides, {"train": {"train_steps": args.train_steps,
                                                    "checkpoint_every_steps": every}})
        result = flow_fn(args.config, overrides or None)
    except ConfigError as err:
        logger.error("%s", err)
        return 2
    # The job's result, for the terminal: what was written where, the scores, three examples.
    print(json.dumps(result, indent=2, default=str))
    split = result["scores"]["scores"]["evaluation"]["split"]
    print(f"\nExamples ({split} split):")
    for example in result["scores"]["examples"]:
        print(f"  source:    {example['source']}\n  reference: {example['reference']}\n"
              f"  output:    {example['translation']}\n")
    return 0

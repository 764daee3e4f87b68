"""The translation pipeline as a Prefect flow: data, vocabulary, training, averaging, evaluation.

Each stage is a task around a plain function of ``pipelines``; the stages themselves skip work
that is already done (a verified corpus, an unchanged tokenizer) and training resumes from its
newest checkpoint, so rerunning the same command after a crash continues where it stopped, and a
task retry does the same. Everything is logged to one MLflow run: the whole configuration as
parameters, per-step training metrics, validation metrics, BLEU/chrF with their sacrebleu
signatures, and the files behind every number as artifacts.

Each MLflow run trains in a directory of its own, ``<run_dir>/runs/<mlflow run id>/``: a rerun
after a crash resumes the unfinished MLflow run and with it that run's checkpoints, while a rerun
after a finished run (the scheduled retraining) starts a new MLflow run that trains from scratch
and leaves the earlier run's files where they are. ``<run_dir>/latest`` points at the newest
finished run.

    python -m flows.translation --config configs/demo.yaml
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

import flows  # noqa: F401  (telemetry off before prefect/mlflow are imported)
from flows.tracking import Tracker, TrackingConfig
from keras_transformer.files import atomic_write_bytes
from pipelines.averaging import AveragingConfig
from pipelines.config import ConfigError, load_config, to_dict
from pipelines.download import DownloadConfig
from pipelines.evaluation import EvalConfig
from pipelines.input_pipeline import InputConfig
from pipelines.tokenization import TokenizerConfig
from pipelines.training import TrainConfig

logger = logging.getLogger(__name__)

#: Placeholder for the MLflow run id in ``train.checkpoint_dir``.
RUN_ID = "{run_id}"


@dataclass
class TranslationPipelineConfig:
    """One file configures the whole run; each section is the config of one stage.

    Paths left empty in a section are placed under ``run_dir``. What every run shares: ``data/``,
    ``cache/`` (token ids), ``tokenizer/``, the MLflow store. What each MLflow run owns, under
    ``runs/<run id>/`` (:meth:`run_paths`): ``train/`` (checkpoints), ``averaged/``,
    ``evaluation/``, ``export/``. ``{run_id}`` in ``train.checkpoint_dir`` stands for the MLflow
    run id; a ``train.checkpoint_dir`` without it is shared by every run, so a rerun after a
    finished run continues training there instead of starting afresh.
    """

    run_dir: str = "runs/demo"
    download: DownloadConfig = field(default_factory=DownloadConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    input: InputConfig = field(default_factory=InputConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    averaging: AveragingConfig = field(default_factory=AveragingConfig)
    evaluation: EvalConfig = field(default_factory=EvalConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    export: bool = True

    def __post_init__(self) -> None:
        run = Path(self.run_dir)
        if not self.download.output_dir:
            self.download.output_dir = str(run / "data" / f"{self.download.source}-{self.download.language_pair}")
        if not self.input.cache_dir:
            self.input.cache_dir = str(run / "cache")
        # Not chosen: each MLflow run gets its own (an explicit directory is kept, whatever it is).
        if not self.train.checkpoint_dir:
            self.train.checkpoint_dir = str(run / "runs" / RUN_ID / "train")
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
    """Where one MLflow run's stages write (see :class:`TranslationPipelineConfig`)."""

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


def load_pipeline_config(path: str | Path, overrides: dict[str, Any] | None = None) -> TranslationPipelineConfig:
    """The pipeline config of a YAML file; ``overrides`` is a nested dict applied on top."""
    return load_config(TranslationPipelineConfig, path, overrides=overrides)


# ------------------------------------------------------------------------------------- tasks


@task(name="download", retries=2, retry_delay_seconds=10, cache_policy=NO_CACHE)
def download_task(config: DownloadConfig) -> str:
    from pipelines.download import download

    path = download(config)
    get_run_logger().info("corpus ready at %s", path)
    return str(path)


@task(name="tokenizer", retries=1, cache_policy=NO_CACHE)
def tokenizer_task(corpus_dir: str, config: TokenizerConfig, output_dir: str) -> str:
    from pipelines.corpus import Corpus
    from pipelines.tokenization import train_tokenizer

    if not config.shared:
        raise ConfigError("the translation flow uses one shared vocabulary (tokenizer.shared: true)")
    path = train_tokenizer(Corpus.load(corpus_dir), config, output_dir)
    get_run_logger().info("tokenizer at %s", path)
    return str(path)


@task(name="train", retries=1, retry_delay_seconds=5, cache_policy=NO_CACHE)
def train_task(
    corpus_dir: str,
    tokenizer_path: str,
    input_config: InputConfig,
    config: TrainConfig,
    tracker: Tracker,
    log_every_steps: int,
) -> dict[str, Any]:
    """Trains, resuming from the newest checkpoint in ``config.checkpoint_dir`` if any."""
    from keras_transformer.tokenizer import SubwordTokenizer
    from pipelines.corpus import Corpus
    from pipelines.input_pipeline import make_dataset
    from pipelines.training import train

    run_logger = get_run_logger()
    corpus = Corpus.load(corpus_dir)
    tokenizer = SubwordTokenizer(tokenizer_path)
    train_data = make_dataset(corpus, "train", tokenizer, input_config, training=True)
    validation = make_dataset(corpus, "validation", tokenizer, input_config, training=False)

    def on_step(step: int, metrics: dict[str, Any]) -> None:
        validated = any(key.startswith("val_") for key in metrics)
        if step % log_every_steps == 0 or validated:
            tracker.log_metrics(metrics, step=step)
        if validated:
            run_logger.info("step %d: %s", step, {k: v for k, v in metrics.items() if k.startswith("val_")})

    result = train(
        config,
        train_data,
        tokenizer.vocab_size,
        validation_data=validation,
        vocabulary={"fingerprint": tokenizer.fingerprint, "size": tokenizer.vocab_size},
        on_step=on_step,
    )
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


@task(name="evaluate", retries=1, cache_policy=NO_CACHE)
def evaluate_task(model_path: str, tokenizer_path: str, corpus_dir: str, config: EvalConfig,
                  preset: str, output_dir: str) -> dict[str, Any]:
    from keras_transformer.presets import get_preset
    from keras_transformer.translator import Translator
    from pipelines.corpus import Corpus
    from pipelines.evaluation import evaluate

    translator = Translator.from_files(model_path, tokenizer_path, decoding=get_preset(preset).decoding)
    result = evaluate(translator, Corpus.load(corpus_dir), config=config, output_dir=output_dir)
    run_logger = get_run_logger()
    run_logger.info("evaluation on %d sentences: %s", result.num_sentences, result.metrics())
    examples = result.examples(3)
    for example in examples:
        run_logger.info("source: %s\n  reference:   %s\n  translation: %s", *example.values())
    return {"metrics": result.metrics(), "scores": result.scores, "examples": examples}


@task(name="export", retries=1, cache_policy=NO_CACHE)
def export_task(model_path: str, tokenizer_path: str, preset: str, output_dir: str) -> str:
    import keras

    from keras_transformer.export import export_translator
    from keras_transformer.presets import get_preset
    from keras_transformer.tokenizer import SubwordTokenizer

    decoding = get_preset(preset).decoding
    model = keras.saving.load_model(model_path, compile=False)
    path = export_translator(model, SubwordTokenizer(tokenizer_path), output_dir,
                             beam_size=decoding.beam_size, alpha=decoding.length_penalty)
    get_run_logger().info("exported translator to %s", path)
    return str(path)


# -------------------------------------------------------------------------------------- flow


@flow(name="transformer-translation", log_prints=False)
def translation_pipeline(config_path: str = "configs/demo.yaml", overrides: dict | None = None) -> dict[str, Any]:
    """Download -> tokenizer -> train -> average -> evaluate (-> export), tracked in MLflow.

    ``overrides`` is a nested dict applied over the YAML file, e.g.
    ``{"train": {"train_steps": 20}}``; a deployment passes it as a parameter.
    """
    config = load_pipeline_config(config_path, overrides)
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
        tags={"preset": config.train.preset, "language_pair": config.download.language_pair,
              "source": config.download.source},
    )
    # Atomic: a kill during the write must not leave a file that breaks every later run.
    atomic_write_bytes(state_file, json.dumps({"run_id": tracker.run_id,
                                                "tracking_uri": tracker.tracking_uri}).encode())
    tracker.log_params(to_dict(config))
    paths = config.run_paths(tracker.run_id)
    train_config = dataclasses.replace(config.train, checkpoint_dir=str(paths.train))
    get_run_logger().info("MLflow run %s writes to %s", tracker.run_id, paths.work)
    try:
        corpus_dir = download_task(config.download)
        tracker.log_artifacts(Path(corpus_dir) / "manifest.json", "data")
        tokenizer_path = tokenizer_task(corpus_dir, config.tokenizer, str(config.tokenizer_dir))
        tracker.log_artifacts(tokenizer_path, "tokenizer")
        trained = train_task(corpus_dir, tokenizer_path, config.input, train_config, tracker,
                             config.tracking.log_every_steps)
        tracker.log_metrics({**{f"final_{k}": v for k, v in trained["validation"].items()},
                             "train_minutes": trained["train_seconds"] / 60},
                            step=trained["final_step"])
        model_path = average_task(trained["checkpoint_dir"], config.averaging, str(paths.averaged))
        scores = evaluate_task(model_path, tokenizer_path, corpus_dir, config.evaluation,
                               config.train.preset, str(paths.evaluation))
        tracker.log_metrics(scores["metrics"], step=trained["final_step"])
        tracker.set_tags(_signatures(scores["scores"]))
        tracker.log_artifacts(paths.evaluation, "evaluation")
        tracker.log_artifacts(model_path, "model")
        result = {"run_id": tracker.run_id, "run_path": str(paths.work), "corpus_dir": corpus_dir,
                  "tokenizer": tokenizer_path, "model": model_path, "scores": scores,
                  "start_step": trained["start_step"], "final_step": trained["final_step"],
                  "train_minutes": trained["train_seconds"] / 60}
        if config.export:
            result["export"] = export_task(model_path, tokenizer_path, config.train.preset,
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flows.translation", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="configs/demo.yaml", help="pipeline YAML file")
    parser.add_argument("--train-steps", type=int,
                        help="override train.train_steps (checkpointing every fifth of them)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    overrides = None
    if args.train_steps:
        every = max(1, args.train_steps // 5)
        overrides = {"train": {"train_steps": args.train_steps, "checkpoint_every_steps": every}}
    try:
        result = translation_pipeline(args.config, overrides)
    except ConfigError as err:
        logger.error("%s", err)
        return 2
    # The job's result, for the terminal: what was written where, the scores, three examples.
    print(json.dumps(result, indent=2, default=str))
    split = result["scores"]["scores"]["evaluation"]["split"]
    print(f"\nExample translations ({split} split):")
    for example in result["scores"]["examples"]:
        print(f"  source:      {example['source']}\n  reference:   {example['reference']}\n"
              f"  translation: {example['translation']}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

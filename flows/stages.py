"""The stages of the pipeline as Prefect tasks, each around a plain function of ``pipelines``.

Each stage skips work that is already done (a verified corpus, an unchanged tokenizer) and
training resumes from its newest checkpoint, so a retry or a rerun continues where the last
attempt stopped. Retries are for errors that can pass (network, I/O); a configuration or data
error fails at once. Every stage has a time limit sized to it. Each returns its stage's typed
result (:mod:`pipelines.results`, the task's ``TaskEvaluation``, :class:`flows.results.Promotion`),
which the next stage takes as it is.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

if TYPE_CHECKING:  # the stages import what they run when they run it (TensorFlow behind most)
    from flows.results import Promotion
    from flows.tracking import Tracker
    from pipelines.averaging import AveragingConfig
    from pipelines.input_pipeline import InputConfig
    from pipelines.results import AveragedModel, Export, PreparedCorpus, TrainingSummary
    from pipelines.tasks.base import Task, TaskEvaluation
    from pipelines.tokenization import TokenizerConfig
    from pipelines.training import TrainConfig
    from pipelines.vocabulary import Vocabulary

HOUR = 3600
#: OSErrors that a retry cannot cure: the thing is missing, forbidden, or the machine is offline.
PERMANENT_OS_ERRORS = (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError)


def transient_only(task, task_run, state) -> bool:
    """Prefect ``retry_condition_fn``: retry network and I/O failures, never settings or data errors."""
    from pipelines.corpus import OfflineError

    error = state.data if isinstance(state.data, BaseException) else None
    if error is None:
        try:
            state.result()
        except BaseException as raised:  # noqa: BLE001  (classifying it is the point)
            error = raised
    retry = isinstance(error, OSError) and not isinstance(error, (*PERMANENT_OS_ERRORS, OfflineError))
    if not retry:
        get_run_logger().info("not retrying %s: %r is not an error that can pass", task.name, error)
    return retry


RETRY = {"retry_condition_fn": transient_only, "cache_policy": NO_CACHE}


def train_timeout(config: TrainConfig) -> float | None:
    """Seconds the train stage may take: a budgeted run gets its budget with room; a step-bounded one none.

    A budget counted in steps (a replay, :func:`pipelines.training.budget.replaying_steps`) bounds the
    steps, not the time they take on a busy machine, so it gets no limit either.
    """
    from pipelines.training.budget import replayed_seconds_per_step

    minutes = config.resolved().train_minutes
    return minutes * 60 * 1.5 + HOUR / 2 if minutes and not replayed_seconds_per_step() else None


def _mtimes(paths) -> dict[str, int]:
    return {str(p): Path(p).stat().st_mtime_ns for p in paths if Path(p).exists()}


def _cached_if_unchanged(value: Any, before: dict[str, int], after: dict[str, int]):
    """``value``, as a Prefect "Cached" state when the stage found its output up to date."""
    from prefect.states import Completed

    if before and before == after:
        return Completed(data=value, name="Cached", message="up to date: nothing to do")
    return value


@task(name="prepare-data", retries=2, retry_delay_seconds=10, timeout_seconds=6 * HOUR, **RETRY)
def prepare_data_task(pipeline_task: Task, config: Any) -> PreparedCorpus:
    from pipelines.results import PreparedCorpus

    before = _mtimes([Path(config.output_dir) / "manifest.json"])
    corpus = PreparedCorpus(str(pipeline_task.prepare_data(config)))
    get_run_logger().info("corpus ready at %s", corpus.directory)
    return _cached_if_unchanged(corpus, before, _mtimes([corpus.manifest]))


@task(name="tokenizer", retries=1, timeout_seconds=2 * HOUR, **RETRY)
def tokenizer_task(corpus: PreparedCorpus, config: TokenizerConfig, output_dir: str) -> Vocabulary[str]:
    """The vocabulary files: one shared model, or the source's and the target's."""
    from pipelines.corpus import Corpus
    from pipelines.tokenization import train_tokenizer

    before = _mtimes(Path(output_dir).glob("*.model")) if Path(output_dir).is_dir() else {}
    models = train_tokenizer(Corpus.load(corpus.directory), config, output_dir).map(str)
    get_run_logger().info("tokenizer(s) at %s", list(models.distinct()))
    paths = models.distinct()
    return _cached_if_unchanged(models, {k: v for k, v in before.items() if k in paths}, _mtimes(paths))


@task(name="train", retries=1, retry_delay_seconds=5, **RETRY)
def train_task(
    corpus: PreparedCorpus,
    vocabulary: Vocabulary[str],
    input_config: InputConfig,
    config: TrainConfig,
    tracker: Tracker,
    log_every_steps: int,
    finish_on: PreparedCorpus | None = None,
    finish_share: float = 0.0,
) -> TrainingSummary:
    """Trains, resuming from the newest checkpoint in ``config.checkpoint_dir`` if any; with ``finish_on``, its
    last ``finish_share`` on that corpus (:func:`pipelines.training.stage.train_on_corpus`)."""
    from flows import metric_names
    from pipelines.corpus import Corpus
    from pipelines.results import TrainingSummary
    from pipelines.tokenization import load_tokenizers
    from pipelines.training.stage import train_on_corpus

    # Steps a killed attempt logged after its last checkpoint are trained again on resume; MLflow
    # keeps every point it is given, so the first record of a step stays the only one.
    logged = tracker.logged_steps(metric_names.TRAIN_LOSS)
    tagged: set[str] = set()

    def log(step: int, record: dict[str, Any]) -> None:
        metrics, counts = metric_names.training_step(record)
        tracker.log_metrics(metrics, step=step)
        if not counts.keys() <= tagged:  # the counts are the same at every step: tagged once
            tracker.set_tags(counts)
            tagged.update(counts)

    def on_step(step: int, metrics: dict[str, Any]) -> None:
        validated = any(key.startswith("val_") for key in metrics)
        # The run's log already has each validation, as the training stage words it.
        if (step % log_every_steps == 0 or validated) and step not in logged:
            log(step, metrics)

    result = train_on_corpus(Corpus.load(corpus.directory), load_tokenizers(vocabulary), input_config, config,
                             on_step=on_step, finish_on=finish_on and Corpus.load(finish_on.directory),
                             finish_share=finish_share)
    # A kill between a checkpoint and the MLflow call after it leaves steps up to the resumed
    # checkpoint in the trainer's metrics file but not in MLflow: log them now.
    logged = tracker.logged_steps(metric_names.TRAIN_LOSS)  # again: on_step logged more
    for record in result.history:
        step = record["step"]
        if step <= result.start_step and step not in logged and (
                step % log_every_steps == 0 or any(k.startswith("val_") for k in record)):
            log(step, record)
    get_run_logger().info(
        "training reached step %d (started at %d) in %.0f s; validation %s", result.final_step, result.start_step,
        result.elapsed_seconds, _figures(result.validation or {}) or "none",
    )
    return TrainingSummary.of(result)


def _figures(metrics: dict[str, Any]) -> str:
    """``name value`` pairs, four significant digits: what a reader of the run's log compares."""
    def figure(value: Any) -> str:
        if isinstance(value, dict):
            return f"({_figures(value)})"
        return f"{value:.4g}" if isinstance(value, float) else str(value)

    return ", ".join(f"{name} {figure(value)}" for name, value in metrics.items())


@task(name="average-checkpoints", retries=1, timeout_seconds=HOUR, **RETRY)
def average_task(training: TrainingSummary, config: AveragingConfig, output_dir: str) -> AveragedModel:
    from pipelines.averaging import run_averaging
    from pipelines.results import AveragedModel

    config = dataclasses.replace(config, checkpoint_dir=training.checkpoint_dir, output_dir=output_dir)
    result = run_averaging(config)
    get_run_logger().info("averaged %d checkpoints into %s", len(result.sources), result.keras_model)
    return AveragedModel(str(result.keras_model), [str(source) for source in result.sources])


@task(name="calibrate", retries=1, timeout_seconds=HOUR, **RETRY)
def calibrate_task(pipeline_task: Task, model: AveragedModel, vocabulary: Vocabulary[str], corpus: PreparedCorpus,
                   output_path: str) -> AveragedModel:
    """The model evaluated and shipped, with what the task chooses on the validation split (a span
    parser's constituent bias); the averaged model itself when there is nothing to choose."""
    from pipelines.results import AveragedModel
    from pipelines.tokenization import load_tokenizers

    path, record = pipeline_task.calibrate(Path(model.path), load_tokenizers(vocabulary), Path(corpus.directory),
                                           Path(output_path))
    if record is None:
        return model
    get_run_logger().info("calibrated on the validation split: %s", _figures(record))
    return AveragedModel(str(path), model.checkpoints, calibration=record)


def _decoding(preset: str):
    from keras_transformer.models.presets import get_preset

    return get_preset(preset).decoding


@task(name="evaluate", retries=1, timeout_seconds=6 * HOUR, **RETRY)
def evaluate_task(pipeline_task: Task, model: AveragedModel, vocabulary: Vocabulary[str], corpus: PreparedCorpus,
                  config: Any, preset: str, output_dir: str) -> TaskEvaluation:
    from keras_transformer.checkpoints.saved_model import load_translator

    translator = load_translator(model.path, *vocabulary.distinct(), decoding=_decoding(preset))
    result = pipeline_task.evaluate(translator, Path(corpus.directory), config, Path(output_dir))
    run_logger = get_run_logger()
    run_logger.info("evaluation: %s", _figures(result.metrics))
    if result.headline:
        run_logger.info("%s", result.headline)
    for example in result.examples:
        run_logger.info("source: %s\n  reference: %s\n  output:    %s", *example.values())
    return result


@task(name="export", retries=1, timeout_seconds=2 * HOUR, **RETRY)
def export_task(pipeline_task: Task, model: AveragedModel, vocabulary: Vocabulary[str], preset: str,
                eval_config: Any, export_config: Any, corpus: PreparedCorpus, output_dir: str) -> Export:
    """The model decoding raw strings as the evaluation did (the preset's decoding with the evaluation
    config's overrides, and the task's decoding constraint), in ``export_config.format``: a SavedModel, or
    a CTranslate2 directory whose engine options are then chosen on the validation split."""
    import keras

    import keras_transformer.models.span_parser  # noqa: F401  (registers classes)
    from keras_transformer.decoding.export import export_record
    from pipelines.results import Export
    from pipelines.tokenization import load_tokenizers

    tokenizers = load_tokenizers(vocabulary)
    keras_model = keras.saving.load_model(model.path, compile=False)
    decoding = _decoding(preset).merged(eval_config.decoding.to_dict())
    constraint = pipeline_task.decoding_constraint(tokenizers.target, keras_model.config.eos_id, eval_config)
    path = keras_model.export_decoder(output_dir, tokenizers.source, None if tokenizers.shared else tokenizers.target,
                                      decoding, constraint, format=export_config.format,
                                      quantization=export_config.quantization)
    if export_config.engine:
        from pipelines.engine_choice import choose_engine_options, validation_config

        settings = validation_config(eval_config)
        choose_engine_options(path, lambda translator, out: pipeline_task.evaluate(
            translator, Path(corpus.directory), settings, out), Path(output_dir).with_name("engine-choice"))
    settings = export_record(path)  # what the export decodes with, read back
    get_run_logger().info("exported to %s: %s", path, _figures(settings))
    return Export(str(path), settings)


@task(name="evaluate-export", retries=1, timeout_seconds=6 * HOUR, **RETRY)
def evaluate_export_task(pipeline_task: Task, export: Export, corpus: PreparedCorpus, config: Any,
                         output_dir: str) -> TaskEvaluation:
    """The export's own translations scored as the evaluation stage scores the model's: for an export
    on another engine (``export.format``), what is served is what this scored."""
    from keras_transformer.decoding.export import load_exported

    result = pipeline_task.evaluate(load_exported(export.directory), Path(corpus.directory), config,
                                    Path(output_dir))
    get_run_logger().info("export evaluation: %s", _figures(result.metrics))
    return result


@task(name="register-model", retries=1, retry_delay_seconds=5, timeout_seconds=6 * HOUR, **RETRY)
def register_task(pipeline_task: Task, tracker: Tracker, model_name: str, export: Export,
                  evaluation: TaskEvaluation, corpus: PreparedCorpus, eval_config: Any, work: str,
                  metric_prefix: str = "") -> Promotion:
    """Logs the export as the run's MLflow model (a logged model named ``model_name`` with the
    evaluation's scores, logged under ``metric_prefix``), registers it and promotes it if it is not worse."""
    from prefect.artifacts import create_markdown_artifact

    from flows import registry

    work_dir = Path(work)
    examples = [example["source"] for example in evaluation.examples] or ["A sentence ."]
    tags = {"task": pipeline_task.name, "primary_metric": evaluation.primary}
    run_name = tracker.client.get_run(tracker.run_id).info.run_name
    scores = registry.scores_summary(evaluation)
    logged = registry.log_pyfunc(tracker, pipeline_task.name, export.directory, examples, evaluation, tags,
                                 model_name, metric_prefix,
                                 description=f"The {pipeline_task.name} model of run {run_name}: {scores}.")
    key = registry.evaluation_key(evaluation)
    score = {registry.score_tag(evaluation.primary, key): str(evaluation.score)}
    version = registry.register(
        tracker, model_name, logged.model_id, {**tags, **score}, description=f"From run {run_name}: {scores}.",
        model_description=registry.model_description(model_name, pipeline_task.name, evaluation.primary,
                                                     evaluation.split))

    def evaluate_champion(champion) -> float:
        import mlflow.artifacts

        from keras_transformer.decoding.export import load_exported

        get_run_logger().info("champion v%s has no score on this evaluation: evaluating it", champion.version)
        directory = mlflow.artifacts.download_artifacts(
            artifact_uri=registry.exported_uri(tracker.client, champion), dst_path=str(work_dir / "champion"),
            tracking_uri=tracker.tracking_uri)
        # Its decoding settings are compiled into its export; the rest of the evaluation is this run's.
        settings = dataclasses.replace(eval_config, decoding=type(eval_config.decoding)())
        return pipeline_task.evaluate(load_exported(directory), Path(corpus.directory), settings,
                                      work_dir / "champion-evaluation").score

    promotion = registry.promote(tracker.client, model_name, version.version, evaluation.primary, evaluation.score,
                                 key, evaluate_champion)
    tracker.client.update_model_version(model_name, version.version,
                                        registry.version_description(promotion, run_name, scores))
    tracker.set_tags({"registered_model": model_name, "model_version": str(version.version),
                      "promotion.promoted": str(promotion.promoted).lower(),
                      "promotion.reason": promotion.reason})
    create_markdown_artifact(markdown=registry.decision_markdown(promotion),
                             key=f"promotion-{model_name}".lower().replace("_", "-").replace(".", "-"),
                             description=f"champion decision for {model_name}")
    get_run_logger().info("%s v%s %s: %s", model_name, version.version,
                          "promoted to champion" if promotion.promoted else "not promoted", promotion.reason)
    return promotion

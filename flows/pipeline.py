"""The pipeline every task runs: data -> vocabularies -> train -> average -> evaluate (-> export).

A task (:class:`pipelines.tasks.base.Task`: translation, parsing) brings its data stage and its
evaluation; the stages between are the engine's and shared. Each stage is a Prefect task around a
plain function of ``pipelines``; the stages themselves skip work that is already done (a verified
corpus, an unchanged tokenizer) and training resumes from its newest checkpoint, so rerunning the
same command after a crash continues where it stopped, and a task retry does the same. Everything
is logged to one MLflow run: the whole configuration as parameters, per-step training metrics,
validation metrics, the task's scores and the files behind every number as artifacts. Each stage
hands the next its typed result (:mod:`pipelines.results`), which the run also records as it was
returned (``stages/<stage>.json``, :meth:`flows.tracking.Tracker.log_stage`); the flow returns them
together as a :class:`flows.results.RunResult`.

Each MLflow run trains in a directory of its own, ``<run_dir>/runs/<mlflow run id>/``: a rerun
after a crash resumes the unfinished MLflow run and with it that run's checkpoints, while a rerun
after a finished run (the scheduled retraining) starts a new MLflow run that trains from scratch
and leaves the earlier run's files where they are. ``<run_dir>/latest`` points at the newest
finished run. :mod:`flows.task_flows` makes each task's flow of this pipeline.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

from prefect import get_run_logger

from flows import metric_names
from flows.pipeline_config import (  # noqa: F401  (RUN_ID and the loader are this module's API too)
    RUN_ID,
    PipelineConfig,
    RunPaths,
    load_pipeline_config,
    parse_overrides,
    point_latest_at,
)
from flows.preflight import check_run_dir
from flows.results import Promotion, RunResult
from flows.retention import CHECKPOINTS_REMOVED
from flows.run_state import (
    REPLACES,
    STATE_FILE,
    choose_run,
    exclusive,
    mark_crashed,
    read_state,
    settings_fingerprint,
    write_state,
)
from flows.stages import (
    average_task,
    calibrate_task,
    evaluate_export_task,
    evaluate_task,
    export_task,
    prepare_data_task,
    register_task,
    tokenizer_task,
    train_task,
    train_timeout,
)
from flows.synthesis import student_corpus, student_tokenizer_dir
from flows.tracking import Tracker, artifact_key, end_replaced, resolve_tracking_uri, run_status
from flows.ui import run_name
from pipelines.config import to_dict
from pipelines.quiet_tensorflow import import_quietly
from pipelines.results import TrainingSummary
from pipelines.tasks.base import TaskEvaluation

logger = logging.getLogger(__name__)

# ---------------------------------------------------------------------------------- pipeline


def run_pipeline(config: PipelineConfig) -> RunResult:
    """Runs every stage of ``config.task`` under one MLflow run; call it inside a Prefect flow."""
    run_dir = Path(config.run_dir)
    check_run_dir(run_dir)
    import_quietly()  # before any stage imports TensorFlow: its start-up lines are noise
    with exclusive(run_dir):
        return _run_stages(config, run_dir)


def _run_stages(config: PipelineConfig, run_dir: Path) -> RunResult:
    pipeline_task = config.task
    run_logger = get_run_logger()  # decisions a user must see go to the flow run's log
    tracker = _start_tracking(config, run_dir, run_logger)
    tracker.set_tags(_prefect_links())
    paths = config.run_paths(tracker.run_id)
    train_config = dataclasses.replace(config.train, checkpoint_dir=str(paths.train))
    changed = tracker.log_params(settings_used(config, paths))
    if changed:
        run_logger.warning("MLflow run %s resumes with changed settings (logged -> now): %s; recorded as tag "
                           "'changed_on_resume'", tracker.run_id, changed)
    run_logger.info("MLflow run %s writes to %s", tracker.run_id, paths.work)
    monitor = start_system_metrics(tracker)
    try:
        corpus = _value(prepare_data_task(pipeline_task, config.data))
        tracker.log_stage("data", corpus)
        tracker.log_artifacts(corpus.manifest, "data")
        tracker.log_corpus(corpus.directory, pipeline_task.identity(config.data))
        # With a teacher, the vocabulary and all but the end of training read the real and synthetic pairs.
        student = student_corpus(config, corpus, tracker)
        training_corpus = student.corpus if student else corpus
        tokenizer_dir = student_tokenizer_dir(config, training_corpus) if student else config.tokenizer_dir
        vocabulary = _value(tokenizer_task(training_corpus, config.tokenizer, str(tokenizer_dir)))
        tracker.log_stage("vocabulary", vocabulary)
        for path in vocabulary.distinct():
            tracker.log_artifacts(path, "tokenizer")
        train = train_task.with_options(timeout_seconds=train_timeout(train_config))
        finish = {"finish_on": corpus, "finish_share": config.synthetic.real_only_share} if student else {}
        training = train(training_corpus, vocabulary, config.input, train_config, tracker,
                         config.tracking.log_every_steps, **finish)
        # The final validation is the last point of the val/ curves, at the final step.
        final, counts = metric_names.training_summary(training.validation, training.train_minutes)
        tracker.log_stage("training", training, final, step=training.final_step)
        tracker.set_tags({**training.tags(), **counts})
        tracker.log_params({metric_names.PARAMETERS: training.parameters})
        model = average_task(training, config.averaging, str(paths.averaged))
        tracker.log_stage("averaging", model)
        if pipeline_task.calibrates:
            model = calibrate_task(pipeline_task, model, vocabulary, corpus, str(paths.calibrated))
        if model.calibration is not None:
            tracker.log_stage("calibration", model)
            tracker.log_params({metric_names.CALIBRATED_BIAS: model.calibration["bias"]})
        evaluation = evaluate_task(pipeline_task, model, vocabulary, corpus, config.evaluation, config.train.preset,
                                   str(paths.evaluation))
        tracker.log_stage("evaluation", evaluation, metric_names.evaluation(evaluation.metrics, evaluation.split),
                          step=training.final_step)
        tracker.set_tags(evaluation.text_tags())
        tracker.log_artifacts(paths.evaluation, "evaluation")
        tracker.log_tables(paths.evaluation, evaluation.tables)
        tracker.log_artifacts(model.path, "keras_model")
        export = promotion = None
        if config.export.enabled:
            export = export_task(pipeline_task, model, vocabulary, config.train.preset, config.evaluation,
                                 config.export, corpus, str(paths.export))
            tracker.log_stage("export", export)
            served = evaluation
            if config.export.engine:
                # Another engine decodes what is served: its translations are scored, and promoted on.
                served = evaluate_export_task(pipeline_task, export, corpus, config.evaluation,
                                              str(paths.export_evaluation))
                tracker.log_stage("export-evaluation", served,
                                  metric_names.evaluation(served.metrics, served.split, prefix="export_"),
                                  step=training.final_step)
                tracker.log_artifacts(paths.export_evaluation, "export-evaluation")
            if config.tracking.register:
                promotion = register_task(pipeline_task, tracker, config.registered_model, export, served,
                                          corpus, config.evaluation, str(paths.work),
                                          "export_" if config.export.engine else "")
                tracker.log_stage("promotion", promotion)
    except BaseException as err:
        tracker.finish("FAILED")
        _link_in_prefect(tracker, config.tracking.experiment, "FAILED", error=f"{type(err).__name__}: {err}")
        raise
    finally:
        if monitor is not None:
            finish_system_metrics(monitor)
    tracker.describe(run_description(evaluation, training, promotion, student and student.taught_by))
    tracker.finish()
    point_latest_at(config.latest_link, paths.work)
    _retain(config, run_dir, tracker, run_logger)
    _link_in_prefect(tracker, config.tracking.experiment, "FINISHED",
                     {**metric_names.evaluation(evaluation.metrics, evaluation.split), **final},
                     metric_names.evaluation_name(evaluation.primary, evaluation.split))
    page = tracker.page_url()
    local = not tracker.tracking_uri.startswith(("http://", "https://"))
    run_logger.info("MLflow run %s: %s%s", tracker.run_id, page,
                    f" (start the UI on its store first: make ui STORE={tracker.tracking_uri})" if local else "")
    return RunResult(tracker.run_id, pipeline_task.name, str(paths.work), corpus, vocabulary, training, model,
                     evaluation, export, promotion, page)


def settings_used(config: PipelineConfig, paths: RunPaths) -> dict[str, Any]:
    """``config`` as the run's params: the settings as its stages use them, the directories this MLflow
    run's checkpoints and averaged model go to in place of the run-id placeholder and of the averaging
    stage's own defaults, which the pipeline replaces (:func:`flows.stages.average_task`)."""
    settings = to_dict(config)
    settings["train"]["checkpoint_dir"] = str(paths.train)
    settings["averaging"].update(checkpoint_dir=str(paths.train), output_dir=str(paths.averaged))
    return settings


def _start_tracking(config: PipelineConfig, run_dir: Path, run_logger) -> Tracker:
    """The MLflow run this flow run works for (:func:`flows.run_state.choose_run`), started or
    continued; the run it replaces ended, the flow run left running by a killed process marked
    Crashed, and each decision said in the flow run's log."""
    from prefect.runtime import flow_run

    state_file = run_dir / STATE_FILE
    previous = read_state(state_file)
    fingerprint = settings_fingerprint(config)
    uri = resolve_tracking_uri(config.tracking, run_dir.resolve())
    previous_uri = previous.get("tracking_uri") or uri
    status = run_status(previous_uri, previous["run_id"]) if previous else None
    choice = choose_run(previous, fingerprint, config.resume, config.run_id, status)
    run_logger.info("%s", choice.reason)
    crashed = mark_crashed(previous.get("flow_run_id"), flow_run.get_id(),
                           resumed=choice.resume is not None and choice.resume == previous.get("run_id"))
    if crashed:
        run_logger.warning("flow run %s was left running by a process that is gone: marked %r",
                           previous["flow_run_id"], crashed)
    pipeline_task = config.task
    # Named as Prefect names the flow run (task, preset, time: flows.ui.run_name): one name in both UIs.
    tracking = dataclasses.replace(config.tracking, run_name=config.tracking.run_name or flow_run.get_name()
                                   or run_name(pipeline_task.name, config.train.preset))
    tracker = Tracker.start(
        tracking, run_dir, resume_run_id=choice.resume, named=config.run_id is not None,
        tags={"task": pipeline_task.name, "preset": config.train.preset,
              "problem": pipeline_task.identity(config.data), "settings_fingerprint": fingerprint,
              **_provenance(),
              **({"mlflow.parentRunId": config.tracking.parent_run_id} if config.tracking.parent_run_id else {})},
    )
    if choice.resume and tracker.client.get_run(tracker.run_id).data.tags.get(CHECKPOINTS_REMOVED):
        run_logger.warning("MLflow run %s had its checkpoints removed by retention (retention.keep_runs=%s): "
                           "its training starts over from step 0", tracker.run_id, config.retention.keep_runs)
    if choice.replaces and choice.replaces != tracker.run_id:
        end_replaced(previous_uri, choice.replaces, tracker.run_id, choice.reason)
        tracker.set_tags({REPLACES: choice.replaces})
        run_logger.info("MLflow run %s ended (killed), replaced by %s", choice.replaces, tracker.run_id)
    write_state(state_file, {"run_id": tracker.run_id, "tracking_uri": tracker.tracking_uri,
                             "fingerprint": fingerprint, "flow_run_id": flow_run.get_id()})
    return tracker


def _retain(config: PipelineConfig, run_dir: Path, tracker: Tracker, run_logger) -> None:
    """Earlier runs' checkpoints (and replaced runs' files) go, as ``config.retention`` says
    (:mod:`flows.retention`); a failure is said, and does not fail the run that just finished."""
    from flows.retention import apply_retention

    champion_of = config.registered_model if config.export.enabled and config.tracking.register else None
    try:
        done = apply_retention(run_dir, tracker.tracking_uri, tracker.run_id, config.retention.keep_runs, champion_of)
    except Exception as err:  # noqa: BLE001  (the run finished; its record stands)
        run_logger.warning("retention not applied: %s", err)
        return
    if done["deleted"]:
        run_logger.info("retention (keep_runs=%s): deleted %s, %.1f MB freed; %s holds %.1f MB",
                        config.retention.keep_runs, done["deleted"], done["freed_bytes"] / 1e6,
                        run_dir / "runs", done["runs_bytes"] / 1e6)


def run_description(evaluation: TaskEvaluation, training: TrainingSummary, promotion: Promotion | None,
                    teacher: str | None = None) -> str:
    """What the run produced, in the one line the runs table shows: the primary score on the unseen
    test split (where the corpus has one) and on the evaluation's split, the updates trained (and the
    teacher whose translations they read), and the registry's verdict."""
    from flows.registry import scores_summary

    taught = f" (taught by {teacher})" if teacher else ""
    text = f"{scores_summary(evaluation)} after {training.final_step} updates{taught}; "
    if promotion is None:
        return text + "not registered"
    verdict = "champion" if promotion.promoted else \
        f"not champion (v{promotion.champion_version} has {promotion.champion_score:.2f})"
    return text + f"{promotion.model} v{promotion.challenger_version}, {verdict}"


def _link_in_prefect(tracker: Tracker, experiment: str, status: str, metrics: dict[str, Any] | None = None,
                     primary: str | None = None, error: str | None = None) -> None:
    """A markdown artifact on this Prefect flow run naming its MLflow run and scores (issue 11:
    the MLflow run has the flow run as tags; this is the link the other way). Keyed by the MLflow
    experiment (one per config's purpose: the demo, cpu-small, En-Fr), so Prefect's Artifacts page
    keeps one history of them per purpose, not one mixed from several stores."""
    from prefect.artifacts import create_markdown_artifact

    try:
        create_markdown_artifact(markdown=tracker.summary_markdown(status, metrics, primary, error),
                                 key=artifact_key(f"mlflow-run-{experiment}"),
                                 description=f"MLflow run {tracker.run_id} ({status.lower()})")
    except Exception as err:  # noqa: BLE001  (the run's outcome stands; a missing link is not worth failing it)
        logger.warning("could not record MLflow run %s on the Prefect flow run: %s", tracker.run_id, err)


def _value(returned: Any) -> Any:
    """A stage's value: a stage that found its output up to date returns it as a Cached state."""
    from prefect.states import State

    return returned.result() if isinstance(returned, State) else returned


def start_system_metrics(tracker: Tracker):
    """CPU, memory and disk use logged to the run every 30 s (MLflow's system metrics monitor)."""
    try:
        from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

        monitor = SystemMetricsMonitor(tracker.run_id, sampling_interval=30, resume_logging=True,
                                       tracking_uri=tracker.tracking_uri)
    except Exception as err:  # noqa: BLE001  (e.g. psutil missing: the run goes on without them)
        logger.warning("no system metrics: %s", err)
        return None
    monitor.start()
    return monitor


def finish_system_metrics(monitor) -> None:
    """Stops the monitor and logs the samples of its last, unfinished interval, which MLflow's monitor drops
    when it stops: a run shorter than the interval has its system metrics too."""
    monitor.finish()
    last = monitor.aggregate_metrics()
    if last:
        monitor.publish_metrics(last)
        monitor.mlflow_logger.flush()


def _provenance() -> dict[str, str]:
    """Who ran which code: git commit (and whether the tree was dirty) and user."""
    import getpass
    import subprocess

    tags = {"mlflow.user": getpass.getuser()}
    root = Path(__file__).resolve().parents[1]
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True,
                               timeout=10, check=True).stdout.strip()
        tags.update({"mlflow.source.git.commit": commit, "git_dirty": str(bool(dirty)).lower()})
    except (OSError, subprocess.SubprocessError):
        pass  # an installed copy without git: nothing to record
    return tags


def _prefect_links() -> dict[str, str]:
    """The Prefect flow run (and deployment) behind this MLflow run, as tags."""
    from prefect.runtime import deployment, flow_run

    tags = {"prefect.flow_run_id": flow_run.get_id() or "", "prefect.flow_run_name": flow_run.get_name() or ""}
    url = flow_run.get_flow_run_ui_url() if hasattr(flow_run, "get_flow_run_ui_url") else None
    # Without a UI address (a temporary server, gone with the process) Prefect makes it "None/flow-runs/...".
    if url and url.startswith(("http://", "https://")):
        tags["prefect.flow_run_url"] = url
    if deployment.get_id():
        tags["prefect.deployment_id"] = deployment.get_id()
    return {k: v for k, v in tags.items() if v}


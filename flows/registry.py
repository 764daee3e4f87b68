"""The trained model as an MLflow model, its registry entry, and champion/challenger promotion.

Each finished pipeline run logs its export as a ``pyfunc`` model (:mod:`flows.serving`: a column
of sentences in, translations or trees out; signature and input example included, requirements
pinned so nothing is resolved at logging time). It is logged as MLflow 3 means models to be: a
``LoggedModel`` of the run's experiment (named as the registered model it competes in, the run's
output at the step it was evaluated at), carrying the run's evaluation scores, each linked to the
dataset it was scored on (the run's ``test`` and ``test_unseen`` inputs), so the run's and the
experiment's Models views, ``mlflow.search_logged_models`` and the registry show one model with its
scores. Each is registered
from that logged model (source ``models:/<model id>``) as a new version of one registered model per
task and problem (``translation-ddtp-en-de``, ``parsing-sample``). The version becomes the
``champion`` alias only if its primary score (BLEU, labelled F1) on the same evaluation is not worse
than the current champion's; the first version always does. "The same evaluation" is checked, not
assumed: every version carries its score under a key naming the split's fingerprint and the
evaluation settings, and a champion without a score under the challenger's key is evaluated
again on the challenger's split before the two are compared.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mlflow.exceptions import MlflowException

from flows import metric_names
from flows.results import Promotion

if TYPE_CHECKING:
    from flows.tracking import Tracker
    from pipelines.tasks.base import TaskEvaluation

logger = logging.getLogger(__name__)

CHAMPION = "champion"
#: The primary metrics as a reader writes them.
LABELS = {"bleu": "BLEU", "chrf": "chrF", "f1": "labelled F1"}
#: Distributions the pyfunc needs at load time, pinned to the versions that logged it.
REQUIREMENTS = ("tensorflow", "tensorflow-text", "keras", "mlflow", "pandas", "numpy", "cloudpickle")


def pinned_requirements(engine: bool = False) -> list[str]:
    """:data:`REQUIREMENTS` at the versions installed; with ``engine``, CTranslate2's too (its export's)."""
    pins = []
    for name in (*REQUIREMENTS, *(("ctranslate2",) if engine else ())):
        try:
            pins.append(f"{name}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            pass
    return pins


def evaluation_key(evaluation: TaskEvaluation) -> str:
    """A short name for "this split of this corpus, scored with these settings": the split, then a
    digest of the rest (``test.60790bcf6025``)."""
    identity = evaluation.identity
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:12]
    return f"{identity['split']}.{digest}"


def score_tag(metric: str, key: str) -> str:
    """The model version tag holding its ``metric`` on evaluation ``key``: ``score.bleu.test.60790bcf6025``
    reads "BLEU on the test split, evaluation 60790bcf6025"."""
    return f"score.{metric}.{key}"


def _pyfunc_arguments(task: str, export_dir: str | Path, examples: list[str]) -> dict[str, Any]:
    """What makes the project's MLflow model, for ``mlflow.pyfunc.save_model`` and ``log_model`` alike:
    the models-from-code file, the task in its ``model_config``, the export as its one artifact, the
    signature, an input example, pinned requirements and the export's decoding in its metadata."""
    import pandas as pd
    from mlflow.models import ModelSignature
    from mlflow.types import ColSpec, Schema

    from flows.serving import INPUT_COLUMN, OUTPUT_COLUMNS
    from keras_transformer.decoding.ctranslate2_export import is_ctranslate2_export
    from keras_transformer.decoding.export import export_record

    # Optional: a request without the column reaches the model, which names it in a one-line 400
    # (flows.serving); MLflow's own refusal echoes the request over several lines.
    signature = ModelSignature(inputs=Schema([ColSpec("string", INPUT_COLUMN, required=False)]),
                               outputs=Schema([ColSpec("string", OUTPUT_COLUMNS[task])]))
    return dict(
        python_model=str(Path(__file__).with_name("pyfunc_model.py")), model_config={"task": task},
        artifacts={"export": str(export_dir)}, signature=signature,
        input_example=pd.DataFrame({INPUT_COLUMN: examples[:2]}),
        pip_requirements=pinned_requirements(is_ctranslate2_export(export_dir)),
        # How it decodes, where a registry's reader sees it: the export's own record.
        metadata={"decoding": export_record(export_dir)},
    )


def save_pyfunc(task: str, export_dir: str | Path, examples: list[str], path: Path) -> Path:
    """Writes the MLflow model (MLmodel, export, signature, example, the export's decoding in its
    metadata) to ``path``: the model :func:`log_pyfunc` logs, as a folder."""
    import mlflow.pyfunc

    shutil.rmtree(path, ignore_errors=True)
    mlflow.pyfunc.save_model(path=str(path), **_pyfunc_arguments(task, export_dir, examples))
    return path


def log_pyfunc(tracker: Tracker, task: str, export_dir: str | Path, examples: list[str],
               evaluation: TaskEvaluation, tags: dict[str, str], name: str, prefix: str = "", description: str = ""):
    """Logs the MLflow model as ``LoggedModel`` ``name`` of the tracker's run; returns its ``ModelInfo``.

    The model is the run's output at the step its evaluation was logged at, and carries the run's
    evaluation scores at that step (the same points, not copies at another time), each linked to
    the run's dataset input it was scored on. MLflow's ``log_model`` inside an active run would
    instead link every metric of the run at that step, without its dataset: the training curves'
    last points, and the system metrics whose sample number happens to equal the step. ``prefix``
    names the scores of an export scored on its own (``export_``, :mod:`flows.metric_names`);
    ``description`` is what the model's page says first.
    """
    import mlflow
    import mlflow.pyfunc
    from mlflow.entities import LoggedModelOutput, Metric

    from flows.tracking import DESCRIPTION

    client, run_id = tracker.client, tracker.run_id
    run = client.get_run(run_id)
    datasets = {next((t.value for t in i.tags if t.key == "mlflow.data.context"), None): i.dataset
                for i in run.inputs.dataset_inputs}
    points = {}
    for key in metric_names.evaluation(evaluation.metrics, evaluation.split, prefix):
        history = client.get_metric_history(run_id, key)
        if history:
            points[key] = max(history, key=lambda m: (m.step, m.timestamp))
    primary = prefix + metric_names.evaluation_name(evaluation.primary, evaluation.split)
    step = points[primary].step if primary in points else 0
    with tracker.fluent():
        model = mlflow.initialize_logged_model(
            name=name, source_run_id=run_id, experiment_id=run.info.experiment_id, model_type=task,
            params=run.data.params, tags={**tags, **({DESCRIPTION: description} if description else {})})
        info = mlflow.pyfunc.log_model(name=name, model_id=model.model_id,
                                       **_pyfunc_arguments(task, export_dir, examples))
    client.log_outputs(run_id, [LoggedModelOutput(model.model_id, step)])
    linked = []
    for key, point in points.items():
        dataset = datasets.get(metric_names.section(key).removeprefix(prefix))
        linked.append(Metric(key, point.value, point.timestamp, point.step, model_id=model.model_id,
                             dataset_name=dataset.name if dataset else None,
                             dataset_digest=dataset.digest if dataset else None, run_id=run_id))
    for i in range(0, len(linked), 100):
        client.log_batch(run_id, metrics=linked[i : i + 100])
    logger.info("logged model %s of run %s with %d scores", model.model_id, run_id, len(linked))
    return info


def exported_uri(client, version) -> str:
    """Where the export of registered model ``version`` lives (the pyfunc's ``export`` artifact),
    whether the version was registered from a logged model or, earlier, from a run's artifacts."""
    return f"{client.get_model_version_download_uri(version.name, version.version)}/artifacts/export"


def register(tracker: Tracker, name: str, model_id: str, tags: dict[str, str], description: str = "",
             model_description: str = ""):
    """A new version of registered model ``name`` from logged model ``model_id`` (source
    ``models:/<model id>``, the run its source run), which in turn names its versions.

    ``description`` is the version's, ``model_description`` the registered model's where it has none
    yet (one a team wrote in the UI stays)."""
    from mlflow.utils.mlflow_tags import MLFLOW_MODEL_VERSIONS

    client = tracker.client
    try:
        client.create_registered_model(name, tags={"task": tags.get("task", "")}, description=model_description)
    except MlflowException as err:
        if err.error_code != "RESOURCE_ALREADY_EXISTS":
            raise
        if model_description and not client.get_registered_model(name).description:
            client.update_registered_model(name, description=model_description)
    model = client.get_logged_model(model_id)
    # A SQL registry resolves a ``models:/`` source through MLflow's default tracking URI.
    with tracker.fluent():
        version = client.create_model_version(name, f"models:/{model_id}", run_id=model.source_run_id,
                                              tags=tags, model_id=model_id, description=description)
    # What ``mlflow.register_model`` records too: the logged model's page lists its versions.
    versions = json.loads(model.tags.get(MLFLOW_MODEL_VERSIONS, "[]"))
    client.set_logged_model_tags(model_id, {MLFLOW_MODEL_VERSIONS: json.dumps(
        [*versions, {"name": name, "version": version.version}])})
    logger.info("registered %s version %s from logged model %s of run %s", name, version.version, model_id,
                model.source_run_id)
    return version


def champion_of(client, name: str):
    try:
        return client.get_model_version_by_alias(name, CHAMPION)
    except MlflowException:
        return None


def promote(client, name: str, version: str, primary: str, score: float, key: str,
            evaluate_champion: Callable[[Any], float]) -> Promotion:
    """Moves ``champion`` to ``version`` unless the champion scores better on evaluation ``key``.

    ``evaluate_champion(model_version)`` scores the champion on the challenger's evaluation when
    the champion has no score under ``key``. Returns the decision, also written as tags on the
    model version.
    """
    champion = champion_of(client, name)
    champion_version = champion_score = None
    if champion is None:
        promoted, reason = True, "no champion yet"
    else:
        recorded = champion.tags.get(score_tag(primary, key))
        champion_score = float(recorded) if recorded is not None else evaluate_champion(champion)
        if recorded is None:  # remembered, so the next challenger on this evaluation need not redo it
            client.set_model_version_tag(name, champion.version, score_tag(primary, key), str(champion_score))
        champion_version = champion.version
        promoted = score >= champion_score
        reason = (f"{primary} {score:.2f} {'>=' if promoted else '<'} champion v{champion.version}'s "
                  f"{champion_score:.2f} on the same evaluation")
    decision = Promotion(model=name, challenger_version=version, metric=primary, challenger_score=score,
                         evaluation_key=key, promoted=promoted, reason=reason,
                         champion_version=champion_version, champion_score=champion_score)
    if promoted:
        client.set_registered_model_alias(name, CHAMPION, version)
    for tag, value in promotion_tags(decision).items():
        client.set_model_version_tag(name, version, tag, value)
    logger.info("%s v%s: %s (%s)", name, version, "promoted to champion" if promoted else "not promoted", reason)
    return decision


def promotion_tags(decision: Promotion) -> dict[str, str]:
    """The decision as a model version's tags, each short enough to read whole in the registry's page
    (the whole record is the run's ``stages/promotion.json``)."""
    champion = "none" if decision.champion_version is None else \
        f"v{decision.champion_version}, {decision.metric} {decision.champion_score:.2f}"
    return {"promotion.promoted": str(decision.promoted).lower(), "promotion.reason": decision.reason,
            "promotion.champion_before": champion,
            "promotion.score": f"{decision.metric} {decision.challenger_score:.2f} on {decision.evaluation_key}"}


def scores_summary(evaluation: TaskEvaluation) -> str:
    """The primary score on the unseen test split (where the corpus has one) and on the evaluation's
    split: ``test_unseen BLEU 10.20, test BLEU 12.30``."""
    label = LABELS.get(evaluation.primary, evaluation.primary)
    scores = [f"{evaluation.split} {label} {evaluation.score:.2f}"]
    unseen = evaluation.metrics.get(f"test_unseen_{evaluation.primary}")
    if unseen is not None:
        scores.insert(0, f"test_unseen {label} {unseen:.2f}")
    return ", ".join(scores)


def version_description(decision: Promotion, run_name: str, scores: str) -> str:
    """What a registry reader sees first of a version: the run it came from, its scores and verdict."""
    verdict = "the champion" if decision.promoted else "not the champion"
    return f"From run {run_name}: {scores}. {verdict.capitalize()}: {decision.reason}."


def model_description(name: str, task: str, primary: str, split: str) -> str:
    """What a registry reader sees first of registered model ``name``: what its versions are and how
    the champion is chosen."""
    from flows.serving import INPUT_COLUMN, OUTPUT_COLUMNS

    return (f"The {task} models of one purpose ({name}): each version is the export of one run of "
            f"keras-transformer's {task} pipeline, an MLflow pyfunc (column `{INPUT_COLUMN}` in, "
            f"`{OUTPUT_COLUMNS.get(task, 'output')}` out). Alias `{CHAMPION}` is the version with the best "
            f"{LABELS.get(primary, primary)} on the {split} split, compared on the same evaluation; "
            f"`make serve MODEL=models:/{name}@{CHAMPION}` serves it.")


def decision_markdown(decision: Promotion) -> str:
    """The decision as a short markdown report (a Prefect artifact)."""
    lines = [f"# {decision.model}: version {decision.challenger_version} "
             f"{'promoted to champion' if decision.promoted else 'not promoted'}", "",
             f"Reason: {decision.reason}.", "", f"| model | version | {decision.metric} |",
             "|---|---|---|", f"| challenger | {decision.challenger_version} | {decision.challenger_score:.2f} |"]
    if decision.champion_version is not None:
        lines.append(f"| champion | {decision.champion_version} | {decision.champion_score:.2f} |")
    return "\n".join(lines) + "\n"

"""The trained model as an MLflow model, its registry entry, and champion/challenger promotion.

Each finished pipeline run logs its export as a ``pyfunc`` model (:mod:`flows.serving`: a column
of sentences in, translations or trees out; signature and input example included, requirements
pinned so nothing is resolved at logging time) under the run's ``model`` artifact path, and
registers it as a new version of one registered model per task and problem
(``translation-ddtp-en-de``, ``parsing-sample``). The version becomes the ``champion`` alias
only if its primary score (BLEU, labelled F1) on the same evaluation is not worse than the
current champion's; the first version always does. "The same evaluation" is checked, not
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

from flows.results import Promotion

if TYPE_CHECKING:
    from pipelines.tasks.base import TaskEvaluation

logger = logging.getLogger(__name__)

CHAMPION = "champion"
#: Distributions the pyfunc needs at load time, pinned to the versions that logged it.
REQUIREMENTS = ("tensorflow", "tensorflow-text", "keras", "mlflow", "pandas", "numpy", "cloudpickle")


def pinned_requirements() -> list[str]:
    pins = []
    for name in REQUIREMENTS:
        try:
            pins.append(f"{name}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            pass
    return pins


def evaluation_key(evaluation: TaskEvaluation) -> str:
    """A short name for "this split of this corpus, scored with these settings"."""
    return hashlib.sha256(json.dumps(evaluation.identity, sort_keys=True, default=str).encode()).hexdigest()[:12]


def save_pyfunc(task: str, export_dir: str | Path, examples: list[str], path: Path) -> Path:
    """Writes the MLflow model (MLmodel, export, signature, example, the export's decoding in its
    metadata) to ``path``."""
    import mlflow.pyfunc
    import pandas as pd
    from mlflow.models import ModelSignature
    from mlflow.types import ColSpec, Schema

    from flows.serving import INPUT_COLUMN, OUTPUT_COLUMNS
    from keras_transformer.decoding.export import export_record

    shutil.rmtree(path, ignore_errors=True)
    signature = ModelSignature(inputs=Schema([ColSpec("string", INPUT_COLUMN)]),
                               outputs=Schema([ColSpec("string", OUTPUT_COLUMNS[task])]))
    mlflow.pyfunc.save_model(
        path=str(path), python_model=str(Path(__file__).with_name("pyfunc_model.py")),
        model_config={"task": task}, artifacts={"export": str(export_dir)}, signature=signature,
        input_example=pd.DataFrame({INPUT_COLUMN: examples[:2]}), pip_requirements=pinned_requirements(),
        # How it decodes, where a registry's reader sees it: the export's own record.
        metadata={"decoding": export_record(export_dir)},
    )
    return path


def register(client, name: str, run_id: str, artifact_path: str, tags: dict[str, str]):
    """A new version of registered model ``name`` from the run's ``artifact_path``."""
    try:
        client.create_registered_model(name, tags={"task": tags.get("task", "")})
    except MlflowException as err:
        if err.error_code != "RESOURCE_ALREADY_EXISTS":
            raise
    source = f"{client.get_run(run_id).info.artifact_uri}/{artifact_path}"
    version = client.create_model_version(name, source, run_id=run_id, tags=tags)
    logger.info("registered %s version %s from run %s", name, version.version, run_id)
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
        recorded = champion.tags.get(f"score.{key}")
        champion_score = float(recorded) if recorded is not None else evaluate_champion(champion)
        if recorded is None:  # remembered, so the next challenger on this evaluation need not redo it
            client.set_model_version_tag(name, champion.version, f"score.{key}", str(champion_score))
        champion_version = champion.version
        promoted = score >= champion_score
        reason = (f"{primary} {score:.2f} {'>=' if promoted else '<'} champion v{champion.version}'s "
                  f"{champion_score:.2f} on the same evaluation")
    decision = Promotion(model=name, challenger_version=version, metric=primary, challenger_score=score,
                         evaluation_key=key, promoted=promoted, reason=reason,
                         champion_version=champion_version, champion_score=champion_score)
    if promoted:
        client.set_registered_model_alias(name, CHAMPION, version)
    client.set_model_version_tag(name, version, "promotion", json.dumps(decision.to_dict()))
    client.set_model_version_tag(name, version, "promoted", str(promoted).lower())
    logger.info("%s v%s: %s (%s)", name, version, "promoted to champion" if promoted else "not promoted", reason)
    return decision


def decision_markdown(decision: Promotion) -> str:
    """The decision as a short markdown report (a Prefect artifact)."""
    lines = [f"# {decision.model}: version {decision.challenger_version} "
             f"{'promoted to champion' if decision.promoted else 'not promoted'}", "",
             f"Reason: {decision.reason}.", "", f"| model | version | {decision.metric} |",
             "|---|---|---|", f"| challenger | {decision.challenger_version} | {decision.challenger_score:.2f} |"]
    if decision.champion_version is not None:
        lines.append(f"| champion | {decision.champion_version} | {decision.champion_score:.2f} |")
    return "\n".join(lines) + "\n"

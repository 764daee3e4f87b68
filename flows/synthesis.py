"""The ``synthesize`` stage as a Prefect task, tracked in MLflow (:mod:`pipelines.tasks.translation.synthesis`
does the work), and the student's corpus a run with a teacher trains on (:func:`student_corpus`).

Cached by its inputs: the key is the stage's settings, what the teacher resolves to now (a
``models:/NAME@champion`` alias names another export once another version is champion) and the pool's
files, so a rerun with the same ones is a "Cached" state and a new champion is a new synthesis. Under the
cache, the stage resumes part way by itself: the shards already written are not translated again.

Logged to the run: the pairs as a dataset input with context ``synthetic`` whose tags name the teacher's
model URI (its lineage) and the teacher's weights' hash, the kept and dropped counts (per reason) and the
seconds as metrics, ``synthesis.json`` as an artifact.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from pipelines.results import PreparedCorpus

if TYPE_CHECKING:
    from flows.tracking import Tracker
    from pipelines.tasks.translation.synthesis import SynthesisConfig, SynthesisResult
    from pipelines.tasks.translation.synthetic_mix import MixConfig

HOUR = 3600
#: The dataset context of synthetic pairs beside the corpus' splits (``train``, ``test``, ...).
CONTEXT = "synthetic"


def teacher_resolver(config: SynthesisConfig) -> Callable[[str], Path]:
    """How the stage finds its teacher here: a registered model by alias (``models:/NAME@ALIAS``, its export
    downloaded under ``output_dir/teacher``) or, as the stage alone does, an export directory."""
    from pipelines.tasks.translation.synthesis import resolve_teacher

    def resolve(teacher: str) -> Path:
        if not teacher.startswith("models:/"):
            return resolve_teacher(teacher)
        return resolve_teacher(str(registered_export(teacher, Path(config.output_dir), config.tracking_uri)))

    return resolve


def registered_export(uri: str, work_dir: Path, tracking_uri: str | None) -> Path:
    """The export of the version ``models:/NAME@ALIAS`` names now, downloaded into ``work_dir/teacher``."""
    import mlflow.artifacts
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    from pipelines.config import ConfigError
    from pipelines.tasks.translation.student import registered_name_and_alias
    from pipelines.textfiles import DataError

    named = registered_name_and_alias(uri)
    if named is None:
        raise ConfigError(f"teacher {uri}: a registered model is named by alias, models:/NAME@ALIAS")
    name, alias = named
    client = MlflowClient(tracking_uri, registry_uri=tracking_uri)
    try:
        version = client.get_model_version_by_alias(name, alias)
    except MlflowException:
        raise DataError(f"teacher {uri}: no registered model {name!r} with alias {alias!r} in "
                        f"{tracking_uri or 'the default MLflow registry'}") from None
    target = work_dir / "teacher" / f"{name}-v{version.version}"
    if not (target / "export").is_dir():
        source = f"{client.get_model_version_download_uri(name, version.version)}/artifacts/export"
        target.mkdir(parents=True, exist_ok=True)
        mlflow.artifacts.download_artifacts(artifact_uri=source, dst_path=str(target), tracking_uri=tracking_uri)
    return target / "export"


def synthesis_cache_key(context, parameters: dict[str, Any]) -> str:
    """The settings, the teacher as it resolves now, and the pool's files (names, sizes, times)."""
    from pipelines.tasks.translation.synthesis import check_synthesis, teacher_identity

    config = parameters["config"]
    export, files = check_synthesis(config, teacher_resolver(config))
    stamp = [(str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files]
    key = {"config": dataclasses.asdict(config), "teacher": teacher_identity(export), "pool": stamp}
    return "synthesize-" + hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:24]


@task(name="synthesize", retries=1, retry_delay_seconds=10, timeout_seconds=24 * HOUR,
      cache_key_fn=synthesis_cache_key, persist_result=True)
def synthesize_task(config: SynthesisConfig) -> SynthesisResult:
    """Translates the pool with the teacher into filtered synthetic pairs (resumes at the first unwritten shard)."""
    from pipelines.tasks.translation.synthesis import run_synthesis

    result = run_synthesis(config, teacher_resolver(config))
    get_run_logger().info("synthetic pairs at %s: %d kept of %d (dropped %s) in %.0f s", result.output_dir,
                          result.kept, result.pool_lines, result.dropped, result.seconds)
    return result


@task(name="log-synthesis", retries=1, cache_policy=NO_CACHE)
def log_synthesis_task(tracker: Tracker, result: SynthesisResult) -> None:
    log_synthesis(tracker, result)


def log_synthesis(tracker: Tracker, result: SynthesisResult) -> None:
    """The synthetic pairs as the run's dataset input (context ``synthetic``, the teacher as lineage), their
    counts as metrics and ``synthesis.json`` as an artifact."""
    from mlflow.data.dataset_source_registry import resolve_dataset_source
    from mlflow.data.meta_dataset import MetaDataset
    from mlflow.entities import DatasetInput, InputTag

    from pipelines.tasks.translation.synthesis import MANIFEST

    manifest = json.loads((Path(result.output_dir) / MANIFEST).read_text("utf-8"))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "The specified dataset source can be interpreted in multiple ways")
        source = resolve_dataset_source(str(Path(result.output_dir).resolve()))
    dataset = MetaDataset(source, name=f"synthetic-{manifest['pool']['source']}", digest=result.digest,
                          schema=None)
    tags = [InputTag("mlflow.data.context", CONTEXT), InputTag("teacher", result.teacher),
            InputTag("teacher_weights", manifest["identity"]["teacher"])]
    tracker.client.log_inputs(tracker.run_id, datasets=[DatasetInput(dataset._to_mlflow_entity(), tags=tags)])
    tracker.client.set_tag(tracker.run_id, "synthesis.teacher", result.teacher)
    # One section of the run's charts, as the other stages' (flows/metric_names.py).
    tracker.log_metrics({"synthesis/pairs": result.kept, "synthesis/pool_lines": result.pool_lines,
                         "synthesis/seconds": result.seconds,
                         **{f"synthesis/dropped_{reason}": n for reason, n in result.dropped.items()}})
    tracker.log_artifacts(Path(result.output_dir) / MANIFEST, "synthesis")


@task(name="mix", retries=1, cache_policy=NO_CACHE)
def mix_task(config: MixConfig) -> PreparedCorpus:
    """The student's corpus: the real pairs and the synthetic ones (kept when already written from the same)."""
    from pipelines.tasks.translation.synthetic_mix import mix

    corpus = mix(config)
    get_run_logger().info("the student's corpus at %s: %d training pairs", corpus.directory, corpus.counts["train"])
    return PreparedCorpus(str(corpus.directory))


@dataclasses.dataclass(frozen=True)
class Student:
    """What a run with a teacher trains on before its real pairs alone, and who taught it (the run's description)."""

    corpus: PreparedCorpus
    #: The teacher and how many synthetic pairs it gave, e.g. ``models:/NAME@champion, 89,141 pairs``.
    taught_by: str


def student_corpus(config: Any, corpus: PreparedCorpus, tracker: Tracker) -> Student | None:
    """The corpus a run with a teacher (``config.synthetic``) trains on before its real pairs alone: the real
    pairs and the teacher's translations of the pool, the synthesis logged to the run. None without a teacher,
    or with ``teacher: champion`` while the run's registered model has no champion yet (said in the log)."""
    from pipelines.tasks.translation.student import OWN_CHAMPION

    settings = getattr(config, "synthetic", None)
    if settings is None or not settings.teacher:
        return None
    teacher = settings.teacher
    if teacher == OWN_CHAMPION:
        teacher = f"models:/{config.registered_model}@{OWN_CHAMPION}"
        if not _has_alias(tracker.tracking_uri, config.registered_model, OWN_CHAMPION):
            get_run_logger().info("synthetic.teacher=champion: %s has no champion yet, so this run has no teacher "
                                  "and trains on the real pairs alone", config.registered_model)
            return None
    run_dir = Path(config.run_dir)
    result = synthesize_task(settings.synthesis_config(teacher, corpus.directory, run_dir / "synthetic",
                                                       tracker.tracking_uri))
    log_synthesis(tracker, result)
    student = mix_task(settings.mix_config(corpus.directory, result.output_dir, run_dir / "data" / "student"))
    tracker.log_stage("student-corpus", student)
    return Student(student, f"{result.teacher}, {result.kept:,} pairs")


def student_tokenizer_dir(config: Any, student: PreparedCorpus) -> Path:
    """Where a student's vocabulary goes: one per student corpus, beside the run_dir's own (a vocabulary is never
    replaced, and each teacher's pairs make another corpus)."""
    from pipelines.corpus import Corpus

    return Path(config.tokenizer_dir) / f"student-{Corpus.load(student.directory, verify=False).fingerprint('train')}"


def _has_alias(tracking_uri: str, name: str, alias: str) -> bool:
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    try:
        MlflowClient(tracking_uri, registry_uri=tracking_uri).get_model_version_by_alias(name, alias)
    except MlflowException:
        return False
    return True

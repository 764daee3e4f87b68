"""Which of a ``run_dir``'s MLflow runs keep their files, so that a scheduled retraining's disk is
bounded.

Each MLflow run writes ``<run_dir>/runs/<run id>/``: ``train/`` (the checkpoints: weights and
Adam's two moments, several times over, most of a run's size), ``averaged/`` (the averaged
model), ``export/`` (the SavedModel) and ``mlflow_model/`` (the pyfunc, a copy of it), and
``evaluation/`` (the outputs and scores, kilobytes). Without a rule every retraining added all of
it for good, and a run killed and replaced by a new one left its partial files behind.

After a pipeline run finishes, with ``retention.keep_runs: N``:

* the newest N finished runs (this one among them) keep everything;
* an older finished run keeps its ``evaluation/``; its checkpoints go, and so do its models
  unless it is the champion of the run's registered model, whose ``averaged/`` and ``export/``
  (and ``mlflow_model/``) stay whatever its age;
* a run that was replaced (ended KILLED, or failed and tagged ``replaced_by``) is deleted whole;
* a run that may still be resumed (running or failed, not replaced) and any directory MLflow does
  not know are left as they are.

The MLflow store keeps its own copy of each run's averaged model, export and evaluation as
artifacts (``mlartifacts/`` for the local default): the registry's versions need them.
``keep_runs: null`` keeps every run's files.

Measured (2026-11-25): a ``demo`` run writes 96 MB (70 MB of them 3 checkpoints, 12 MB averaged,
7.4 MB export, 7.5 MB pyfunc) plus 13.5 MB of MLflow artifacts; a ``cpu-small`` run 930 MB (771 MB
of them its 5 checkpoints to average, 77 MB averaged, 41 MB export, 41 MB pyfunc) plus 80 MB.
After retention an older run keeps ~20 kB, an older champion its models (27 MB, 159 MB).
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipelines.config import SettingError

logger = logging.getLogger(__name__)

#: Tag of a run whose checkpoints retention removed: continuing it (``--run-id``) starts training over.
CHECKPOINTS_REMOVED = "retention.checkpoints_removed"

#: What an older finished run loses, and what the champion's keeps of it.
CHECKPOINTS = ("train",)
MODELS = ("averaged", "export", "mlflow_model", "champion", "champion-evaluation")


@dataclass
class RetentionConfig:
    """Which earlier runs of a run_dir keep their checkpoints and models (:mod:`flows.retention`)."""

    #: How many of the newest finished runs keep their checkpoints and models; older ones keep their ``evaluation/``
    #: (the champion also its model and export); null: all.
    keep_runs: int | None = 2

    def __post_init__(self) -> None:
        if self.keep_runs is not None and (not isinstance(self.keep_runs, int) or self.keep_runs < 1):
            raise SettingError(self, "keep_runs", "a positive number of runs, or null")


@dataclass(frozen=True)
class RunRecord:
    """What retention needs to know of one run directory."""

    path: Path
    status: str | None  # None: MLflow does not know it
    start_time: int = 0
    replaced: bool = False
    champion: bool = False


def plan(records: list[RunRecord], current: str, keep_runs: int | None) -> dict[Path, tuple[str, ...]]:
    """``{run directory: the entries to delete}`` (``("*",)``: the whole directory)."""
    doomed: dict[Path, tuple[str, ...]] = {}
    finished = sorted((r for r in records if r.status == "FINISHED" or r.path.name == current),
                      key=lambda r: (r.path.name == current, r.start_time), reverse=True)
    kept = {r.path for r in finished[:keep_runs]} if keep_runs is not None else {r.path for r in finished}
    for record in records:
        if record.path.name == current or record.path in kept:
            continue
        if record.status == "KILLED" or (record.status == "FAILED" and record.replaced):
            doomed[record.path] = ("*",)
        elif record.status == "FINISHED":
            doomed[record.path] = CHECKPOINTS if record.champion else CHECKPOINTS + MODELS
    return doomed


def size_of(path: Path) -> int:
    """Bytes under ``path`` (a file or a tree; symlinks not followed)."""
    if path.is_symlink() or path.is_file():
        return path.lstat().st_size
    return sum(p.lstat().st_size for p in path.rglob("*") if p.is_file() or p.is_symlink())


def apply(doomed: dict[Path, tuple[str, ...]]) -> int:
    """Deletes what :func:`plan` chose; returns the bytes freed."""
    freed = 0
    for directory, entries in doomed.items():
        targets = [directory] if entries == ("*",) else [directory / e for e in entries if (directory / e).exists()]
        for target in targets:
            freed += size_of(target)
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            else:
                target.unlink()
    return freed


def records_of(run_dir: Path, client: Any, champions: set[str]) -> list[RunRecord]:
    """One record per ``<run_dir>/runs/<run id>/``, read from the MLflow store of ``client``."""
    from mlflow.exceptions import MlflowException

    from flows.run_state import REPLACED_BY

    records = []
    for path in sorted(p for p in (run_dir / "runs").glob("*") if p.is_dir() and not p.is_symlink()):
        try:
            run = client.get_run(path.name)
        except MlflowException:
            records.append(RunRecord(path, None))
            continue
        records.append(RunRecord(path, run.info.status, run.info.start_time or 0, REPLACED_BY in run.data.tags,
                                 path.name in champions))
    return records


def apply_retention(run_dir: Path, tracking_uri: str, current: str, keep_runs: int | None,
                    registered_model: str | None) -> dict[str, Any]:
    """Applies the rule to ``run_dir`` (``current``: the run that just finished); returns what it did."""
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri, registry_uri=tracking_uri)
    champions = set()
    if registered_model:
        try:
            champions.add(client.get_model_version_by_alias(registered_model, "champion").run_id)
        except MlflowException:
            pass  # no champion (yet, or registration off): nothing to spare for it
    doomed = plan(records_of(run_dir, client, champions), current, keep_runs)
    freed = apply(doomed)
    for path, entries in doomed.items():
        if entries != ("*",):
            client.set_tag(path.name, CHECKPOINTS_REMOVED, "true")
    return {"deleted": {p.name: list(entries) for p, entries in doomed.items()}, "freed_bytes": freed,
            "runs_bytes": size_of(run_dir / "runs") if (run_dir / "runs").exists() else 0}

"""MLflow tracking for the flows: one run per pipeline run, logged through explicit run ids.

The default store is a local SQLite database and artifact folder inside the run directory, so a
fresh machine tracks experiments with nothing started by hand; set ``tracking.tracking_uri`` (or
the environment's ``MLFLOW_TRACKING_URI``) to use a team's MLflow server instead. With a server,
artifacts go where the server says (``mlflow server --serve-artifacts`` proxies them), and a
server that does not answer fails the flow at its start, naming the URI, before any work.
MLflow itself is imported when a run starts, not with this module: the settings (``TrackingConfig``)
are read by the command line before anything else, and importing MLflow takes most of a second.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import threading
import urllib.error
import urllib.parse
import urllib.request
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

# MLflow caps a parameter value's length; longer values are cut rather than failing the run.
_MAX_PARAM_LENGTH = 6000
# MLflow's module-level functions read one process-wide tracking URI: one tracker at a time sets it.
_FLUENT = threading.Lock()
#: The run's artifact folder of the tables a user reads (:meth:`Tracker.log_tables`).
TABLES = "tables"
#: The experiment tag naming what its runs are for, as MLflow 3's UI reads it.
EXPERIMENT_KIND = "mlflow.experimentKind"
#: Its value for experiments of models trained and evaluated here: the kind the UI's selector shows,
#: and, in UIs that open an experiment by its kind, the model-training view rather than the GenAI one.
MODEL_TRAINING = "custom_model_development"
#: The run tag MLflow shows as the run's description.
DESCRIPTION = "mlflow.note.content"
#: The query that opens MLflow's UI in its model-training view: MLflow 3.17's follows a GenAI /
#: model-training switch of the browser's (GenAI by default), not the experiment's kind.
TRAINING_VIEW = "workflowType=machine_learning"
#: Where ``make ui`` serves MLflow's UI on a local store (``mlflow ui``'s own default address).
LOCAL_UI = "http://127.0.0.1:5000"
#: The run's artifact folder of its stages' results, one ``<stage>.json`` each (:meth:`Tracker.log_stage`).
STAGES = "stages"


@dataclass
class TrackingConfig:
    """Where runs are recorded and how the model is registered.

    One registered model per purpose (the demo, the weekly retraining, En-Fr, parsing: each config
    names its own), so that a demo or an ad-hoc run never becomes the champion another purpose serves.
    """

    #: The MLflow tracking URI; null: ``MLFLOW_TRACKING_URI``, else ``sqlite:///<run_dir>/mlflow.db``.
    tracking_uri: str | None = None
    #: The MLflow experiment; null: ``transformer-<task>``.
    experiment: str | None = None
    #: The MLflow run's name; null: the Prefect flow run's, ``<task>-<preset>-<time>``.
    run_name: str | None = None
    #: Log the per-step training metrics every this many steps.
    log_every_steps: int = 10
    #: Log the export as an MLflow model, register it as a version of ``registered_model`` and make it ``champion`` if
    #: it is not worse (:mod:`flows.registry`).
    register: bool = True
    #: The registered model this config's runs compete in; null: the experiment's name.
    registered_model: str | None = None
    #: Nest the run under this MLflow run (an ablation's variants, :mod:`flows.ablation`).
    parent_run_id: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.log_every_steps, bool) or not isinstance(self.log_every_steps, int) \
                or self.log_every_steps < 1:
            from pipelines.config import SettingError

            raise SettingError(self, "log_every_steps", "must be a positive integer")


def resolve_tracking_uri(config: TrackingConfig, run_dir: Path) -> str:
    from flows.relocation import store_uri

    return config.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or store_uri(run_dir)


def require_server(uri: str, timeout: float = 10.0) -> None:
    """Fails at once, naming ``uri``, if an HTTP tracking server does not answer its health check."""
    if not uri.startswith(("http://", "https://")):
        return
    try:
        with urllib.request.urlopen(f"{uri.rstrip('/')}/health", timeout=timeout):
            pass
    except urllib.error.HTTPError:
        pass  # it answered; authorisation and the like are the client's business
    except (urllib.error.URLError, OSError) as err:
        from pipelines.config import ConfigError

        raise ConfigError(f"MLflow tracking server {uri} (tracking.tracking_uri or MLFLOW_TRACKING_URI) "
                          f"does not answer: {getattr(err, 'reason', err)}") from err


def run_status(uri: str, run_id: str) -> str | None:
    """The status of MLflow run ``run_id`` at ``uri`` (``RUNNING``, ``FINISHED``, ...), None if it is
    not there."""
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    try:
        return MlflowClient(uri).get_run(run_id).info.status
    except MlflowException:
        return None


def end_replaced(uri: str, run_id: str, replaced_by: str, reason: str) -> None:
    """Ends unfinished MLflow run ``run_id`` as KILLED (a failed one keeps FAILED), tagged with the
    run that replaced it and why: a run nobody will continue must not show as running for ever."""
    from mlflow.tracking import MlflowClient

    from flows.run_state import REPLACED_BECAUSE, REPLACED_BY

    client = MlflowClient(uri)
    client.set_tag(run_id, REPLACED_BY, replaced_by)
    client.set_tag(run_id, REPLACED_BECAUSE, reason)
    if client.get_run(run_id).info.status in ("RUNNING", "SCHEDULED"):
        client.set_terminated(run_id, status="KILLED")


def run_ui_url(tracking_uri: str, experiment_id: str, run_id: str) -> str | None:
    """The run's page in the MLflow UI of a tracking server (the address MLflow itself prints when
    a run ends, ``mlflow/tracking/_tracking_service/client.py``, in the model-training view); None
    for a local store, which has no UI until someone starts ``mlflow ui`` on it."""
    if not tracking_uri.startswith(("http://", "https://")):
        return None
    return ui_page(public_uri(tracking_uri), experiment_id, run_id)


def ui_page(ui: str, experiment_id: str, run_id: str) -> str:
    """The page of run ``run_id`` in the MLflow UI at ``ui``, in the model-training view."""
    return f"{ui.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}?{TRAINING_VIEW}"


def public_uri(uri: str) -> str:
    """``uri`` without the user and password a team may have put in it, for records others read."""
    parts = urllib.parse.urlsplit(uri)
    if not parts.username and not parts.password:
        return uri
    return urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def artifact_key(text: str) -> str:
    """``text`` as a Prefect artifact key (lowercase letters, digits and dashes only)."""
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", text.lower())).strip("-")


def flatten(params: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested config dicts as MLflow params: ``{"train.preset": "demo", ...}``."""
    flat: dict[str, str] = {}
    for key, value in params.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = str(value)[:_MAX_PARAM_LENGTH]
    return flat


class Tracker:
    """A thin handle on one MLflow run, safe to use from Prefect task threads."""

    def __init__(self, tracking_uri: str, run_id: str):
        from mlflow.tracking import MlflowClient

        self.tracking_uri = tracking_uri
        self.run_id = run_id
        self.client = MlflowClient(tracking_uri, registry_uri=tracking_uri)

    @classmethod
    def start(cls, config: TrackingConfig, run_dir: Path, resume_run_id: str | None = None,
              tags: dict[str, str] | None = None, named: bool = False) -> Tracker:
        """A new MLflow run, or ``resume_run_id`` continued if it is unfinished (``named``: in any
        state; a named run that does not exist is an error)."""
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient
        from mlflow.tracking.context.registry import resolve_tags

        from flows.relocation import ARTIFACTS, STORE_FILE, relocate_store, store_uri
        from flows.store_template import new_store

        if not config.experiment:
            from pipelines.config import ConfigError

            raise ConfigError("tracking.experiment: name the MLflow experiment the run belongs to")
        run_dir = Path(run_dir).resolve()
        run_dir.mkdir(parents=True, exist_ok=True)
        uri = resolve_tracking_uri(config, run_dir)
        require_server(uri)
        local = uri == store_uri(run_dir)
        if local:
            new_store(run_dir / STORE_FILE)
        # A copied or moved run_dir: its store's places are made the run_dir's own again, and MLflow's
        # artifact repositories, cached by run id for the process's life, forgotten with the old places.
        if local and relocate_store(run_dir):
            from mlflow.tracking._tracking_service import utils as tracking_utils

            tracking_utils._artifact_repos_cache.clear()
        client = MlflowClient(uri, registry_uri=uri)
        experiment = client.get_experiment_by_name(config.experiment)
        if experiment is None:
            # A server decides where artifacts go; the local default keeps them in the run_dir.
            experiment_id = client.create_experiment(
                config.experiment, artifact_location=(run_dir / ARTIFACTS).as_uri() if local else None,
                tags={EXPERIMENT_KIND: MODEL_TRAINING},
            )
        else:
            experiment_id = experiment.experiment_id
            if EXPERIMENT_KIND not in experiment.tags:  # one made before the tag; a kind someone chose stays
                client.set_experiment_tag(experiment_id, EXPERIMENT_KIND, MODEL_TRAINING)
        if resume_run_id:
            try:
                run = client.get_run(resume_run_id)
                if run.info.status != "FINISHED" or named:
                    client.update_run(resume_run_id, status="RUNNING")
                    logger.info("resuming MLflow run %s", resume_run_id)
                    return cls(uri, resume_run_id)
            except MlflowException as err:
                if named:
                    from pipelines.config import ConfigError

                    raise ConfigError(f"run_id={resume_run_id!r}: no such MLflow run at {uri}") from err
                logger.warning("MLflow run %s not found; starting a new one", resume_run_id)
        # With what MLflow's own start_run records (the source the run page shows: the script), ours first.
        run = client.create_run(experiment_id, run_name=config.run_name, tags=resolve_tags(tags or {}))
        logger.info("MLflow run %s in experiment '%s' at %s", run.info.run_id, config.experiment, uri)
        return cls(uri, run.info.run_id)

    def log_params(self, params: dict[str, Any]) -> dict[str, tuple[str, str]]:
        """Logs ``params`` (nested, flattened); returns the settings a resumed run logged otherwise.

        MLflow refuses to change a logged value, so a resumed run keeps its parameters and the
        changed ones (logged -> now) go to tag ``changed_on_resume``: the caller says so loudly,
        as the run's record no longer describes all of it.
        """
        from mlflow.entities import Param

        existing = self.client.get_run(self.run_id).data.params
        flat = flatten(params)
        changed = {k: (existing[k], v) for k, v in flat.items() if k in existing and existing[k] != v}
        if changed:
            self.client.set_tag(self.run_id, "changed_on_resume", json.dumps(changed)[:5000])
        fresh = [Param(k, v) for k, v in flat.items() if k not in existing]
        for i in range(0, len(fresh), 100):
            self.client.log_batch(self.run_id, params=fresh[i : i + 100])
        return changed

    def logged_steps(self, key: str) -> set[int]:
        """The steps at which metric ``key`` has been logged in this run."""
        return {m.step for m in self.client.get_metric_history(self.run_id, key)}

    def log_metrics(self, metrics: dict[str, Any], step: int | None = None) -> None:
        import time

        from mlflow.entities import Metric

        timestamp = int(time.time() * 1000)
        entries = [
            Metric(key, float(value), timestamp, step or 0)
            for key, value in metrics.items()
            if isinstance(value, (int, float)) and math.isfinite(float(value))
        ]
        if entries:
            self.client.log_batch(self.run_id, metrics=entries)

    def log_artifacts(self, path: str | Path, artifact_path: str | None = None) -> None:
        path = Path(path)
        if path.is_dir():
            self.client.log_artifacts(self.run_id, str(path), artifact_path)
        elif path.exists():
            self.client.log_artifact(self.run_id, str(path), artifact_path)

    def log_corpus(self, corpus_dir: str | Path, name: str) -> None:
        """Each split of the prepared corpus (``test_unseen`` too, where there is one) as a dataset
        input of the run (context = split)."""
        from mlflow.data.dataset_source_registry import resolve_dataset_source
        from mlflow.data.meta_dataset import MetaDataset
        from mlflow.entities import DatasetInput, InputTag

        from pipelines.corpus import Corpus

        corpus = Corpus.load(corpus_dir, verify=False)
        with warnings.catch_warnings():
            # MLflow registers its local-file source under two schemes ("" and "file"), two classes
            # of one name, and warns that a path "can be interpreted in multiple ways": it cannot.
            warnings.filterwarnings("ignore", "The specified dataset source can be interpreted in multiple ways")
            source = resolve_dataset_source(str(Path(corpus_dir).resolve()))
        inputs = [DatasetInput(MetaDataset(source, name=f"{name}-{split}", digest=corpus.fingerprint(split))
                               ._to_mlflow_entity(), tags=[InputTag("mlflow.data.context", split)])
                  for split in corpus.splits]
        self.client.log_inputs(self.run_id, datasets=inputs)

    def log_stage(self, name: str, result: Any, metrics: dict[str, Any] | None = None,
                  step: int | None = None) -> None:
        """Records stage ``name``'s result as the stage returned it (its ``to_dict()``, artifact
        ``stages/<name>.json``), and ``metrics`` at ``step``: what a later reader of the run, or a
        process that never held the value, reads back with :meth:`logged_stage`."""
        self.client.log_dict(self.run_id, result.to_dict(), f"{STAGES}/{name}.json")
        if metrics:
            self.log_metrics(metrics, step=step)

    def logged_stage(self, name: str) -> dict[str, Any]:
        """The record :meth:`log_stage` logged for stage ``name`` (its type's ``from_dict`` reads it)."""
        import tempfile

        with tempfile.TemporaryDirectory() as directory:
            path = self.client.download_artifacts(self.run_id, f"{STAGES}/{name}.json", directory)
            return json.loads(Path(path).read_text(encoding="utf-8"))

    def log_tables(self, directory: Path, tables: dict[str, str]) -> None:
        """Logs each ``name -> file`` of ``directory`` (``columns`` / ``data`` JSON) as the MLflow
        table ``tables/<name>.json``, which the UI shows as a table. MLflow appends to a table
        already logged, so a rerun of the flow over a finished stage logs nothing again."""
        logged = {Path(a.path).name for a in self.client.list_artifacts(self.run_id, TABLES)}
        for name, file in tables.items():
            if f"{name}.json" in logged:
                continue
            table = json.loads((Path(directory) / file).read_text(encoding="utf-8"))
            columns = {column: [row[i] for row in table["data"]] for i, column in enumerate(table["columns"])}
            self.client.log_table(self.run_id, data=columns, artifact_file=f"{TABLES}/{name}.json")

    def set_tags(self, tags: dict[str, str]) -> None:
        for key, value in tags.items():
            self.client.set_tag(self.run_id, key, value)

    def describe(self, text: str) -> None:
        """``text`` as the run's description (the runs table's and the run page's)."""
        self.client.set_tag(self.run_id, DESCRIPTION, text)

    @contextmanager
    def fluent(self):
        """Within the block, MLflow's module-level functions (``mlflow.pyfunc.log_model``, the
        logged-model calls, a SQL registry resolving ``models:/``) use this tracker's store, as its
        client does; before and after, MLflow's default URIs and their variables are as they were."""
        import mlflow
        from mlflow.tracking._model_registry import utils as registry_utils
        from mlflow.tracking._tracking_service import utils as tracking_utils

        variables = ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI")
        with _FLUENT:
            tracking_uri, registry_uri = tracking_utils._tracking_uri, registry_utils._registry_uri
            environment = {variable: os.environ.get(variable) for variable in variables}
            mlflow.set_tracking_uri(self.tracking_uri)
            mlflow.set_registry_uri(self.tracking_uri)
            try:
                yield
            finally:
                mlflow.set_tracking_uri(tracking_uri)
                mlflow.set_registry_uri(registry_uri)
                for variable, value in environment.items():
                    if value is None:
                        os.environ.pop(variable, None)
                    else:
                        os.environ[variable] = value

    def finish(self, status: str = "FINISHED") -> None:
        self.client.set_terminated(self.run_id, status=status)

    def page_url(self) -> str:
        """The run's page in the model-training view: on its tracking server's UI, or, for a local
        store, on the UI ``make ui`` starts (:data:`LOCAL_UI`)."""
        experiment_id = self.client.get_run(self.run_id).info.experiment_id
        return run_ui_url(self.tracking_uri, experiment_id, self.run_id) or ui_page(LOCAL_UI, experiment_id,
                                                                                    self.run_id)

    def summary_markdown(self, status: str, metrics: dict[str, Any] | None = None, primary: str | None = None,
                         error: str | None = None) -> str:
        """Markdown naming this run (id, experiment, tracking URI, a link to its page in the MLflow UI
        when the store is a server, else the ``mlflow ui`` command that shows it) and its scores,
        ``primary`` first: what a Prefect flow run shows of the MLflow run it worked for."""
        run = self.client.get_run(self.run_id)
        experiment = self.client.get_experiment(run.info.experiment_id)
        uri = public_uri(self.tracking_uri)
        url = run_ui_url(self.tracking_uri, experiment.experiment_id, self.run_id)
        lines = [f"## MLflow run {status.lower()}", "",
                 f"- run: [{self.run_id}]({url})" if url else f"- run: `{self.run_id}`",
                 f"- experiment: `{experiment.name}` (id {experiment.experiment_id})",
                 f"- tracking URI: `{uri}`"]
        if not url:
            lines.append(f"- browse it: `make ui STORE={uri}` (or `mlflow ui --backend-store-uri {uri}`), then "
                         f"{ui_page(LOCAL_UI, experiment.experiment_id, self.run_id)}")
        if error:
            lines.append(f"- error: {error}")
        numbers = {k: v for k, v in (metrics or {}).items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool)}
        if numbers:
            order = sorted(numbers, key=lambda key: (key != primary, key))
            lines += ["", "| score | value |", "|---|---|"]
            lines += [f"| {'**' + k + '**' if k == primary else k} | {numbers[k]:.6g} |" for k in order]
        return "\n".join(lines) + "\n"

"""A run directory copied or moved to another path works from there alone (flows/relocation.py,
flows/run_state.py): its MLflow store's runs, artifacts, logged models and registered versions are
found under the new path, a resumed flow run continues its MLflow run there, ``make serve`` serves
its champion, and the old path is neither read nor written (each test deletes it)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import urllib.request
from pathlib import Path

import pytest

from flows.relocation import local_run_dir, relocate_store, store_uri
from flows.run_state import STATE_FILE, read_state, write_state
from tests.flows.conftest import REPO, invocations_request, start_on_a_free_port, write_config

#: A pyfunc model saved from code that needs neither TensorFlow nor the project: it echoes its input.
ECHO_MODEL = '''
import mlflow.pyfunc
import pandas as pd


class Echo(mlflow.pyfunc.PythonModel):
    def predict(self, context, model_input, params=None):
        return pd.DataFrame({"echo": [s.upper() for s in model_input["source"]]})


mlflow.models.set_model(Echo())
'''


def locations(uri: str) -> list[str]:
    """Every location the store at ``uri`` records: experiments' roots, runs' artifact URIs, logged
    models' and registered versions' storage, datasets' sources."""
    import sqlite3

    path = uri[len("sqlite:///"):]
    with sqlite3.connect(path) as db:
        rows = [*db.execute("SELECT artifact_location FROM experiments WHERE name != 'Default'"),
                *db.execute("SELECT artifact_uri FROM runs"),
                *db.execute("SELECT artifact_location FROM logged_models"),
                *db.execute("SELECT storage_location FROM model_versions"),
                *db.execute("SELECT dataset_source FROM datasets")]
    return [row[0] for row in rows if row[0]]


def a_store_with_a_registered_model(run_dir: Path, tmp_path: Path) -> str:
    """A run_dir's own store as the flows make it: an experiment keeping its artifacts in the
    run_dir, a run with an artifact and a dataset, a logged model registered and made champion."""
    import mlflow
    from mlflow.data.dataset_source_registry import resolve_dataset_source
    from mlflow.data.meta_dataset import MetaDataset
    from mlflow.entities import DatasetInput
    from mlflow.tracking import MlflowClient

    from flows.tracking import Tracker

    run_dir.mkdir(parents=True)
    uri = store_uri(run_dir)
    client = MlflowClient(uri, registry_uri=uri)
    experiment = client.create_experiment("moved", artifact_location=(run_dir / "mlartifacts").as_uri())
    run = client.create_run(experiment).info.run_id
    (tmp_path / "notes.txt").write_text("what the run wrote\n")
    client.log_artifact(run, str(tmp_path / "notes.txt"))
    corpus = run_dir / "corpus"
    corpus.mkdir()
    (corpus / "train.en").write_text("A line.\n")
    tracker = Tracker(uri, run)
    client.log_inputs(run, datasets=[DatasetInput(MetaDataset(resolve_dataset_source(str(corpus)), name="corpus",
                                                              digest="0")._to_mlflow_entity())])
    code = tmp_path / "echo_model.py"
    code.write_text(ECHO_MODEL)
    with tracker.fluent():
        with mlflow.start_run(run_id=run):
            info = mlflow.pyfunc.log_model(name="model", python_model=str(code))
        version = mlflow.register_model(info.model_uri, "moved-model")
    client.set_registered_model_alias("moved-model", "champion", version.version)
    client.set_terminated(run)
    return run


def test_a_copied_store_names_its_places_under_the_copy_and_works_with_the_original_gone(tmp_path, monkeypatch):
    import mlflow.pyfunc
    import pandas as pd
    from mlflow.tracking import MlflowClient

    original = tmp_path / "runs" / "x"
    run = a_store_with_a_registered_model(original, tmp_path)
    assert all(str(original) in location for location in locations(store_uri(original)))
    copy = tmp_path / "elsewhere" / "y"
    shutil.copytree(original, copy)
    shutil.rmtree(tmp_path / "runs")

    assert relocate_store(copy) == [original.resolve()]
    uri = store_uri(copy)
    recorded = locations(uri)
    assert len(recorded) >= 5 and all(str(copy) in location and str(original) not in location
                                      for location in recorded), recorded
    assert relocate_store(copy) == []  # done once: nothing left to rewrite

    client = MlflowClient(uri, registry_uri=uri)
    assert Path(client.download_artifacts(run, "notes.txt", str(tmp_path))).read_text() == "what the run wrote\n"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_REGISTRY_URI", uri)
    model = mlflow.pyfunc.load_model("models:/moved-model@champion")
    assert model.predict(pd.DataFrame({"source": ["a"]}))["echo"].tolist() == ["A"]
    # What the registry and the tracking store write goes under the copy too.
    new_run = client.create_run(client.get_experiment_by_name("moved").experiment_id).info
    assert new_run.artifact_uri.startswith(copy.resolve().as_uri())
    assert not (tmp_path / "runs").exists()


def test_a_state_file_names_the_store_where_the_run_dir_is_now(tmp_path):
    old, new = tmp_path / "a" / "run", tmp_path / "b" / "run"
    old.mkdir(parents=True)
    write_state(old / STATE_FILE, {"run_id": "r1", "tracking_uri": store_uri(old)})
    assert json.loads((old / STATE_FILE).read_text())["run_dir"] == str(old.resolve())
    assert read_state(old / STATE_FILE)["tracking_uri"] == store_uri(old)
    shutil.copytree(old, new)
    assert read_state(new / STATE_FILE)["tracking_uri"] == store_uri(new)
    # A store that is not the run_dir's own (a server, a shared database) stays as it was.
    for uri in ("http://127.0.0.1:5000", f"sqlite:///{tmp_path / 'shared' / 'mlflow.db'}"):
        write_state(old / STATE_FILE, {"run_id": "r1", "tracking_uri": uri})
        shutil.copy(old / STATE_FILE, new / STATE_FILE)
        assert read_state(new / STATE_FILE)["tracking_uri"] == uri
    # A state written before the run_dir was recorded in it: moved if the run_dir holds its own store.
    (new / STATE_FILE).write_text(json.dumps({"run_id": "r1", "tracking_uri": store_uri(old)}))
    assert read_state(new / STATE_FILE)["tracking_uri"] == store_uri(old)
    (new / "mlflow.db").write_bytes(b"")
    assert read_state(new / STATE_FILE)["tracking_uri"] == store_uri(new)
    assert local_run_dir("sqlite:///runs/demo/mlflow.db") == (Path.cwd() / "runs" / "demo").resolve()
    assert local_run_dir("http://127.0.0.1:5000") is None


@pytest.fixture(scope="module")
def moved_runs(tmp_path_factory):
    """A whole flow run whose run_dir was copied twice, then deleted: ``(config, run_id, original,
    moved, served)``."""
    from flows.translation import translation_pipeline

    tmp_path = tmp_path_factory.mktemp("relocated")
    # Its corpus and caches under the run_dir: what is copied is a whole, self-contained run_dir.
    config = write_config(tmp_path, shared_data=False, train_steps=6, checkpoint_every_steps=2)
    original = tmp_path / "run"
    first = translation_pipeline(str(config))
    moved, served = tmp_path / "moved" / "run", tmp_path / "served" / "run"
    shutil.copytree(original, moved, symlinks=True)
    shutil.copytree(original, served, symlinks=True)
    shutil.rmtree(original)
    return config, first.run_id, original, moved, served


@pytest.mark.slow
def test_make_serve_serves_the_champion_of_a_copied_run_dir(moved_runs, tmp_path, monkeypatch):
    """``make serve`` pointed at the copy's store relocates it, then serves its champion; the
    registry's pyfunc loads from the copy too."""
    import mlflow.pyfunc
    import pandas as pd

    _, _, original, _, served = moved_runs
    venv = Path(sys.executable).parent
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if Path(p) != venv)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "MLFLOW_TRACKING_URI",
                                                             "MLFLOW_REGISTRY_URI")}
    server, port = start_on_a_free_port(
        lambda port: ["make", "-C", str(REPO), "serve", "MODEL=models:/flow-test@champion",
                      f"TRACKING_URI={store_uri(served)}", f"PORT={port}", f"VENV={venv.parent}",
                      "WORKERS=1", "THREADS=1"],
        "/ping", tmp_path / "serve.log", 600, env={**env, "PATH": path})
    try:
        request = invocations_request(f"http://127.0.0.1:{port}", "source", ["A library.", "The package."])
        with urllib.request.urlopen(request, timeout=600) as response:
            assert len(json.loads(response.read())["predictions"]) == 2
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    assert all(str(original) not in location for location in locations(store_uri(served)))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store_uri(served))
    monkeypatch.setenv("MLFLOW_REGISTRY_URI", store_uri(served))
    model = mlflow.pyfunc.load_model("models:/flow-test@champion")
    assert len(model.predict(pd.DataFrame({"source": ["A library."]}))) == 1
    assert not original.exists()


@pytest.mark.slow
def test_a_moved_run_dir_resumes_its_unfinished_mlflow_run_there(moved_runs):
    """The copy's MLflow run, left unfinished as a killed flow run leaves it, is resumed by the flow
    run given the copy as its run_dir; its state file and store name the copy."""
    from mlflow.tracking import MlflowClient

    from flows.translation import translation_pipeline

    config, run_id, original, moved, _ = moved_runs
    client = MlflowClient(store_uri(moved))
    client.update_run(run_id, status="RUNNING")
    again = translation_pipeline(str(config), {"run_dir": str(moved)})
    assert again.run_id == run_id and client.get_run(run_id).info.status == "FINISHED"
    assert json.loads((moved / STATE_FILE).read_text())["tracking_uri"] == store_uri(moved)
    assert all(str(original) not in location for location in locations(store_uri(moved)))
    assert not original.exists()

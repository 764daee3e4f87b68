"""A team's MLflow server (real ``mlflow server`` on 127.0.0.1), and the rules that decide which
MLflow run a flow run works for: settings fingerprints, ``resume: never``, named runs, one flow run
per run_dir, and Prefect flow runs left "Running" by a killed process."""

import json
import os
import subprocess
import sys
import time

import pytest
import yaml

from flows.run_state import SUPERSEDED, exclusive, mark_crashed, run_to_resume, settings_fingerprint
from pipelines.config import ConfigError
from tests.flows.conftest import free_port, wait_until_it_answers, write_config


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory):
    """``mlflow server`` with proxied artifact storage, as a team would run it."""
    root = tmp_path_factory.mktemp("mlflow-server")
    port = free_port()
    log = (root / "server.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{root / 'server.db'}",
         "--serve-artifacts", "--artifacts-destination", str(root / "artifacts"),
         "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    try:
        wait_until_it_answers(f"{uri}/health", server, root / "server.log", 120)
        yield uri, root / "artifacts"
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=30)


def test_a_tracking_server_gets_the_run_its_artifacts_and_the_model(mlflow_server, tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    from flows.translation import translation_pipeline

    uri, artifacts = mlflow_server
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    config = write_config(tmp_path, train_steps=6, checkpoint_every_steps=2)
    result = translation_pipeline(str(config))

    client = MlflowClient(uri, registry_uri=uri)
    run = client.get_run(result["run_id"])
    assert run.info.status == "FINISHED" and "bleu" in run.data.metrics
    assert run.info.artifact_uri.startswith("mlflow-artifacts:")  # the server's, not this machine's
    assert list(artifacts.rglob("MLmodel")) and list(artifacts.rglob("scores.json"))
    assert not (tmp_path / "run" / "mlartifacts").exists() and not (tmp_path / "run" / "mlflow.db").exists()
    champion = client.get_model_version_by_alias("translation-ddtp-en-de", "champion")
    assert champion.run_id == result["run_id"]


def test_an_unreachable_tracking_server_fails_before_any_work(tmp_path):
    from flows.translation import translation_pipeline

    config = write_config(tmp_path)
    started = time.monotonic()
    with pytest.raises(ConfigError, match=r"tracking server http://127.0.0.1:9 .*does not answer"):
        translation_pipeline(str(config), {"tracking": {"tracking_uri": "http://127.0.0.1:9"}})
    assert time.monotonic() - started < 30
    assert not (tmp_path / "run" / "runs").exists() and not (tmp_path / "run" / "data").exists()


def test_changed_settings_or_resume_never_start_a_new_run_instead_of_resuming(tmp_path):
    from mlflow.tracking import MlflowClient

    from flows.translation import load_translation_config, translation_pipeline

    path = write_config(tmp_path, train_steps=4, checkpoint_every_steps=1)
    config = load_translation_config(path)
    # An unfinished run of a model with other settings, as a failed run of an older config leaves.
    uri = f"sqlite:///{(tmp_path / 'run').resolve() / 'mlflow.db'}"
    (tmp_path / "run").mkdir()
    client = MlflowClient(uri)
    experiment = client.create_experiment("flow-test")
    stale = client.create_run(experiment).info.run_id
    (tmp_path / "run" / "mlflow_run.json").write_text(json.dumps(
        {"run_id": stale, "tracking_uri": uri, "fingerprint": "an-older-model"}))
    result = translation_pipeline(str(path), {"export": False})
    assert result["run_id"] != stale and result["start_step"] == 0
    assert client.get_run(stale).info.status == "RUNNING"  # left as it was, not taken over

    # Same settings, unfinished, but a new run asked for.
    state = json.loads((tmp_path / "run" / "mlflow_run.json").read_text())
    assert state["fingerprint"] == settings_fingerprint(config)
    client.update_run(state["run_id"], status="FAILED")
    again = translation_pipeline(str(path), {"export": False, "resume": "never"})
    assert again["run_id"] not in (stale, result["run_id"])

    with pytest.raises(ConfigError, match=r"run_id='no-such-run': no such MLflow run"):
        translation_pipeline(str(path), {"export": False, "run_id": "no-such-run"})


def test_the_fingerprint_follows_what_makes_the_model(tmp_path):
    from flows.translation import load_translation_config

    path = write_config(tmp_path)
    base = settings_fingerprint(load_translation_config(path))
    same = {"evaluation": {"max_sentences": 3}, "train": {"progress_bar": True, "log_every": 7},
            "tracking": {"experiment": "other"}, "averaging": {"last_n": 2}}
    assert settings_fingerprint(load_translation_config(path, same)) == base
    for changed in ({"train": {"model": {"d_model": 64}}}, {"tokenizer": {"vocab_size": 900}},
                    {"data": {"language_pair": "de-en"}}, {"input": {"tokens_per_batch": 2048}}):
        assert settings_fingerprint(load_translation_config(path, changed)) != base, changed


def test_resume_choice():
    previous = {"run_id": "r1", "fingerprint": "f"}
    assert run_to_resume(previous, "f", "auto", None) == "r1"
    assert run_to_resume(previous, "g", "auto", None) is None
    assert run_to_resume(previous, "f", "never", None) is None
    assert run_to_resume({}, "f", "auto", None) is None
    assert run_to_resume(previous, "g", "never", "named") == "named"


def test_one_flow_run_per_run_dir(tmp_path):
    with exclusive(tmp_path):
        with pytest.raises(ConfigError, match=r"is in use by another flow run \(pid \d+\)"):
            with exclusive(tmp_path):
                pass
    with exclusive(tmp_path):  # released when the first one ended
        pass


def test_a_flow_run_left_running_by_a_killed_process_is_marked_crashed():
    from prefect import flow
    from prefect.client.orchestration import get_client
    from prefect.states import Running

    @flow(name="killed-flow")
    def killed():
        pass

    with get_client(sync_client=True) as client:
        run = client.create_flow_run(killed, state=Running())
        assert mark_crashed(str(run.id), current_flow_run_id=None)
        state = client.read_flow_run(run.id).state
        # Crashed, but not under the name the retrain deployment's crash trigger listens for: the
        # run that found it resumes its work, so no second run must be started for it.
        assert state.is_crashed() and state.name == SUPERSEDED != "Crashed"
        assert not mark_crashed(str(run.id), current_flow_run_id=None)  # already ended: left alone
    assert not mark_crashed("00000000-0000-0000-0000-000000000000", None)  # unknown to this API


def test_prefect_yaml_limits_each_run_dir_to_one_run_and_retries_crashed_runs():
    from prefect.events import DeploymentEventTrigger

    from tests.flows.conftest import REPO

    spec = yaml.safe_load((REPO / "prefect.yaml").read_text())
    for deployment in spec["deployments"]:
        assert deployment.get("concurrency_limit") == 1, deployment["name"]
    retrain = next(d for d in spec["deployments"] if d.get("schedules"))
    triggers = [DeploymentEventTrigger(**t) for t in retrain["triggers"]]
    assert any("prefect.flow-run.Crashed" in t.expect for t in triggers)


def test_only_errors_that_can_pass_are_retried():
    from prefect import flow, task

    from flows.stages import RETRY
    from pipelines.corpus import OfflineError

    calls = []

    @task(retries=2, retry_delay_seconds=0, **RETRY)
    def stage(error):
        calls.append(type(error).__name__)
        raise error

    @flow
    def run(error):
        stage(error)

    for error, attempts in ((TimeoutError("slow disk"), 3), (ConnectionResetError("reset"), 3),
                            (ConfigError("train.warmup_steps"), 1), (ValueError("bad data"), 1),
                            (FileNotFoundError("corpus"), 1), (OfflineError("no internet"), 1)):
        calls.clear()
        with pytest.raises(type(error)):
            run(error)
        assert len(calls) == attempts, (error, calls)


def test_the_train_stage_gets_a_time_limit_from_its_budget(tmp_path):
    from flows.stages import train_timeout
    from flows.translation import load_translation_config

    config = load_translation_config(write_config(tmp_path, train_minutes=60))
    assert train_timeout(config.train) == 60 * 60 * 1.5 + 1800
    assert train_timeout(load_translation_config(write_config(tmp_path, train_minutes=0)).train) is None
    # A budget counted in steps bounds the steps, not how long a busy machine takes for them.
    counted = load_translation_config(write_config(tmp_path, train_minutes=60), {"train": {"seconds_per_step": 0.7}})
    assert train_timeout(counted.train) is None

"""A team's MLflow server (real ``mlflow server`` on 127.0.0.1), and the rules that decide which
MLflow run a flow run works for: settings fingerprints, ``resume: never``, named runs, one flow run
per run_dir, and Prefect flow runs left "Running" by a killed process."""

import json
import os
import subprocess
import sys

import pytest
import yaml

from flows.run_state import (
    REPLACED,
    REPLACED_BECAUSE,
    REPLACED_BY,
    REPLACES,
    RESUMED,
    STATE_FILE,
    RunChoice,
    choose_run,
    exclusive,
    mark_crashed,
    settings_fingerprint,
)
from pipelines.config import ConfigError
from tests.flows.conftest import free_port, wait_until_it_answers, write_config
from tests.flows.prefect_api import flow_run_logs


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
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:  # a loaded machine: the server's workers are slow to go
            os.killpg(server.pid, 9)
            server.wait(timeout=30)


def test_a_tracking_server_gets_the_run_its_artifacts_and_the_model(mlflow_server, tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    from flows.translation import translation_pipeline

    uri, artifacts = mlflow_server
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    config = write_config(tmp_path, train_steps=6, checkpoint_every_steps=2)
    result = translation_pipeline(str(config))

    client = MlflowClient(uri, registry_uri=uri)
    run = client.get_run(result.run_id)
    assert run.info.status == "FINISHED" and "test/bleu" in run.data.metrics
    assert run.info.artifact_uri.startswith("mlflow-artifacts:")  # the server's, not this machine's
    assert list(artifacts.rglob("MLmodel")) and list(artifacts.rglob("scores.json"))
    assert not (tmp_path / "run" / "mlartifacts").exists() and not (tmp_path / "run" / "mlflow.db").exists()
    champion = client.get_model_version_by_alias("flow-test", "champion")
    assert champion.run_id == result.run_id


def test_an_unreachable_tracking_server_fails_before_any_work(tmp_path, monkeypatch):
    """It fails at once: one health check under a timeout, and no MLflow client request (whose
    retries with backoff would take minutes) ever reaches the server."""
    import urllib.request

    import requests

    from flows.translation import translation_pipeline

    server = "http://127.0.0.1:9"
    checks, client_requests = [], []
    urlopen, session_request = urllib.request.urlopen, requests.Session.request

    def checked(url, *args, timeout=None, **kwargs):
        if str(getattr(url, "full_url", url)).startswith(server):
            checks.append((getattr(url, "full_url", url), timeout))
        return urlopen(url, *args, timeout=timeout, **kwargs)

    def requested(session, method, url, *args, **kwargs):
        if str(url).startswith(server):
            client_requests.append((method, url))
        return session_request(session, method, url, *args, **kwargs)

    monkeypatch.setattr(urllib.request, "urlopen", checked)
    monkeypatch.setattr(requests.Session, "request", requested)
    config = write_config(tmp_path)
    with pytest.raises(ConfigError, match=r"tracking server http://127.0.0.1:9 .*does not answer"):
        translation_pipeline(str(config), {"tracking": {"tracking_uri": server}})
    assert len(checks) == 1 and checks[0][0] == f"{server}/health" and 0 < checks[0][1] <= 10, checks
    assert client_requests == []
    assert not (tmp_path / "run" / "runs").exists() and not (tmp_path / "run" / "data").exists()


def left_running(run_dir, mlflow_run_id: str, tracking_uri: str, fingerprint: str) -> str:
    """A Prefect flow run still "Running" though its process is gone, named in the run_dir's
    state file with its MLflow run, as a SIGKILLed flow run without a worker leaves them."""
    from prefect import flow
    from prefect.client.orchestration import get_client
    from prefect.states import Running

    @flow(name="killed-flow")
    def killed():
        pass

    with get_client(sync_client=True) as client:
        flow_run_id = str(client.create_flow_run(killed, state=Running()).id)
    (run_dir / STATE_FILE).write_text(json.dumps({"run_id": mlflow_run_id, "tracking_uri": tracking_uri,
                                                  "fingerprint": fingerprint, "flow_run_id": flow_run_id}))
    return flow_run_id


def flow_run_state(flow_run_id: str):
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        return client.read_flow_run(flow_run_id).state


@pytest.mark.slow
def test_a_replaced_run_is_ended_and_each_decision_is_in_the_flow_run_log(tmp_path):
    """Changed settings and --new-run replace an unfinished MLflow run: it ends KILLED, tagged with
    why and with its successor; a finished run is followed without a word about settings; the flow
    run a killed process left "Running" is labelled by what really happened to its work."""
    from mlflow.tracking import MlflowClient

    from flows.task_flows import TRANSLATION
    from flows.translation import translation_pipeline

    path = write_config(tmp_path, train_steps=4, checkpoint_every_steps=1)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    uri = f"sqlite:///{run_dir.resolve() / 'mlflow.db'}"
    client = MlflowClient(uri)
    # Where the flow would put them: a SQLite store's default artifact root is ./mlruns of the cwd.
    experiment = client.create_experiment("flow-test", artifact_location=(run_dir / "mlartifacts").as_uri())

    # 1. An unfinished run of other settings (a killed run of an older config): replaced, not resumed.
    stale = client.create_run(experiment).info.run_id
    killed = left_running(run_dir, stale, uri, "an-older-model")
    first = translation_pipeline(str(path), {"export": False})
    assert first.run_id != stale and first.training.start_step == 0
    replaced = client.get_run(stale)
    assert replaced.info.status == "KILLED"
    assert replaced.data.tags[REPLACED_BY] == first.run_id
    assert "the settings changed (fingerprint an-older-model" in replaced.data.tags[REPLACED_BECAUSE]
    assert client.get_run(first.run_id).data.tags[REPLACES] == stale
    assert flow_run_state(killed).name == REPLACED  # its work was not resumed: not "Crashed, resumed"
    logs = flow_run_logs(json.loads((run_dir / STATE_FILE).read_text())["flow_run_id"])
    assert f"a new MLflow run replaces unfinished run {stale}: the settings changed" in logs
    assert f"marked '{REPLACED}'" in logs
    assert f"MLflow run {stale} ended (killed), replaced by {first.run_id}" in logs

    # 2. The last run finished; other settings: a new run, and no word of changed settings.
    second = translation_pipeline(str(path), {"export": False, "train": {"learning_rate_scale": 0.5}})
    assert second.run_id != first.run_id
    finished = client.get_run(first.run_id)
    assert finished.info.status == "FINISHED" and REPLACED_BY not in finished.data.tags
    logs = flow_run_logs(json.loads((run_dir / STATE_FILE).read_text())["flow_run_id"])
    assert f"a new MLflow run: the last one, {first.run_id}, is finished" in logs
    assert "settings changed" not in logs

    # 3. --new-run over an unfinished run with the same settings (one failed in a stage): replaced.
    client.update_run(second.run_id, status="FAILED")
    third = translation_pipeline(str(path), {"export": False, "train": {"learning_rate_scale": 0.5},
                                             "resume": "never"})
    failed = client.get_run(second.run_id)
    assert third.run_id != second.run_id and failed.info.status == "FAILED"  # already final
    assert failed.data.tags[REPLACED_BY] == third.run_id and "resume: never" in failed.data.tags[REPLACED_BECAUSE]

    # 4. Same settings, unfinished, left by a killed flow run: resumed, and labelled so.
    client.update_run(third.run_id, status="RUNNING")
    killed = left_running(run_dir, third.run_id, uri, settings_fingerprint(
        TRANSLATION.load_config(path, {"train": {"learning_rate_scale": 0.5}})))
    fourth = translation_pipeline(str(path), {"export": False, "train": {"learning_rate_scale": 0.5},
                                              "retention": {"keep_runs": 1}})
    assert fourth.run_id == third.run_id and client.get_run(third.run_id).info.status == "FINISHED"
    # Retention after these runs: the failed run that was replaced is gone (since the run that
    # replaced it finished), the older finished ones keep only their evaluation, this one all.
    runs = run_dir / "runs"
    assert not (runs / second.run_id).exists()
    assert sorted(p.name for p in (runs / first.run_id).iterdir()) == ["evaluation"]
    assert {"train", "averaged", "evaluation"} <= {p.name for p in (runs / third.run_id).iterdir()}
    assert flow_run_state(killed).name == RESUMED
    logs = flow_run_logs(json.loads((run_dir / STATE_FILE).read_text())["flow_run_id"])
    assert f"resuming MLflow run {third.run_id}: unfinished (running), same settings" in logs
    assert f"marked '{RESUMED}'" in logs

    with pytest.raises(ConfigError, match=r"run_id='no-such-run': no such MLflow run"):
        translation_pipeline(str(path), {"export": False, "run_id": "no-such-run"})


def test_the_fingerprint_follows_what_makes_the_model(tmp_path):
    from flows.task_flows import TRANSLATION

    path = write_config(tmp_path)
    base = settings_fingerprint(TRANSLATION.load_config(path))
    same = {"evaluation": {"max_sentences": 3}, "train": {"progress_bar": True, "log_every": 7},
            "tracking": {"experiment": "other"}, "averaging": {"last_n": 2}}
    assert settings_fingerprint(TRANSLATION.load_config(path, same)) == base
    for changed in ({"train": {"model": {"d_model": 64}}}, {"tokenizer": {"vocab_size": 900}},
                    {"data": {"language_pair": "de-en"}}, {"input": {"tokens_per_batch": 2048}},
                    # The student's data: a rerun with other noise or tagging must not resume on the other mix.
                    {"synthetic": {"noise": 0.1}}, {"synthetic": {"tag": True}},
                    {"synthetic": {"teacher": "champion"}}):
        assert settings_fingerprint(TRANSLATION.load_config(path, changed)) != base, changed


def test_which_mlflow_run_a_flow_run_works_for():
    previous = {"run_id": "r1", "fingerprint": "f"}
    assert choose_run(previous, "f", "auto", None, "RUNNING") == RunChoice(
        "r1", None, "resuming MLflow run r1: unfinished (running), same settings")
    assert choose_run(previous, "f", "auto", None, "FAILED").resume == "r1"  # failed in a stage: resumed
    changed = choose_run(previous, "g", "auto", None, "RUNNING")
    assert (changed.resume, changed.replaces) == (None, "r1") and "the settings changed" in changed.reason
    never = choose_run(previous, "f", "never", None, "RUNNING")
    assert (never.resume, never.replaces) == (None, "r1") and "resume: never" in never.reason
    for status in ("FINISHED", "KILLED"):  # over: followed by a new run, nothing replaced, settings unsaid
        after = choose_run(previous, "g", "auto", None, status)
        assert (after.resume, after.replaces) == (None, None) and "settings" not in after.reason
    assert choose_run(previous, "f", "auto", None, None) == RunChoice(
        None, None, "a new MLflow run: the recorded run r1 is not in this tracking store")
    assert choose_run({}, "f", "auto", None, None).resume is None
    assert choose_run(previous, "g", "never", "named", "RUNNING") == RunChoice(
        "named", "r1", "continuing MLflow run named (run_id named)")
    assert choose_run(previous, "g", "never", "r1", "RUNNING").replaces is None


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
        assert mark_crashed(str(run.id), current_flow_run_id=None) == RESUMED
        state = client.read_flow_run(run.id).state
        # Crashed, but not under the name the retrain deployment's crash trigger listens for: the
        # run that found it resumes its work, so no second run must be started for it.
        assert state.is_crashed() and state.name == RESUMED != "Crashed"
        assert not mark_crashed(str(run.id), current_flow_run_id=None)  # already ended: left alone
        other = client.create_flow_run(killed, state=Running())
        assert mark_crashed(str(other.id), None, resumed=False) == REPLACED != "Crashed"
        assert client.read_flow_run(other.id).state.is_crashed()
    assert not mark_crashed("00000000-0000-0000-0000-000000000000", None)  # unknown to this API


def test_prefect_yaml_limits_each_run_dir_to_one_run_and_retries_crashed_runs():
    from prefect.events import DeploymentEventTrigger

    from tests.flows.conftest import REPO

    spec = yaml.safe_load((REPO / "prefect.yaml").read_text())
    for deployment in spec["deployments"]:
        assert deployment.get("concurrency_limit") == 1, deployment["name"]
    retrain = next(d for d in spec["deployments"] if d.get("schedules"))
    triggers = [DeploymentEventTrigger(**t) for t in retrain["triggers"]]
    on_crash = [t for t in triggers if "prefect.flow-run.Crashed" in t.expect]
    assert on_crash
    # The rerun gets the crashed flow run's parameters (templated from the run the event names),
    # every parameter of the flow, not the deployment's defaults.
    from flows.translation import translation_pipeline

    for trigger in on_crash:
        assert set(trigger.parameters) == set(translation_pipeline.parameters.properties)
        assert all("flow_run.parameters" in value for value in trigger.parameters.values())


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
    from flows.task_flows import TRANSLATION

    config = TRANSLATION.load_config(write_config(tmp_path, train_minutes=60))
    assert train_timeout(config.train) == 60 * 60 * 1.5 + 1800
    assert train_timeout(TRANSLATION.load_config(write_config(tmp_path, train_minutes=0)).train) is None
    # A budget counted in steps bounds the steps, not how long a busy machine takes for them.
    from pipelines.training.budget import replaying_steps

    with replaying_steps(0.7):
        assert train_timeout(config.train) is None


def test_a_run_shorter_than_the_sampling_interval_has_its_system_metrics(tmp_path):
    """MLflow's monitor drops the samples of an unfinished interval when it stops; the flow logs them, so a run
    shorter than the 30 s interval (a fast machine's small run) has its CPU and memory too."""
    import time

    from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor
    from mlflow.tracking import MlflowClient

    from flows.pipeline import finish_system_metrics

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    run_id = client.create_run(client.create_experiment("short")).info.run_id
    monitor = SystemMetricsMonitor(run_id, sampling_interval=30, tracking_uri=uri)
    monitor.start()
    deadline = time.monotonic() + 30
    while not monitor.aggregate_metrics() and time.monotonic() < deadline:
        time.sleep(0.1)  # the monitor's first sample, taken as it starts
    finish_system_metrics(monitor)
    metrics = client.get_run(run_id).data.metrics
    assert "system/cpu_utilization_percentage" in metrics and "system/system_memory_usage_megabytes" in metrics, \
        metrics

"""The team path, live: a real ``prefect server``, ``prefect deploy`` of the project's
``cpu-small-weekly-retrain`` deployment (``prefect.yaml``, its parameters pointed at tiny settings),
a process worker, a real ``mlflow server``; a deployment run started with parameters of its own is
killed with SIGKILL in training, and the deployment's trigger on ``prefect.flow-run.Crashed``
starts a run with the crashed run's parameters that resumes the same MLflow run from its
checkpoint (issue 11: "a crashed deployment run can be retried by Prefect and then resumes from
its checkpoints"; issue 21: "with the crashed run's parameters, not the deployment's defaults").

Every process the test starts runs in its own session on 127.0.0.1 with its own PREFECT_HOME,
database and MLflow store, and is stopped when the test ends, passed or not.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from flows.run_state import STATE_FILE
from tests.flows.conftest import REPO, free_port, wait_until_it_answers, write_config

pytestmark = pytest.mark.slow
logger = logging.getLogger(__name__)

FREEZE = REPO / "tests" / "flows" / "freeze"  # stops a flow run after a checkpoint (sitecustomize)
DEPLOYMENT = "cpu-small-weekly-retrain"  # the project's retraining deployment and its Crashed trigger
FLOW = "transformer-translation"
POOL = "local"  # the work pool prefect.yaml names
#: Seconds each phase may take on a busy 2-core machine (TensorFlow imports in every flow run): safety
#: nets for a hung phase, each waiting on an event, not limits on how fast it should be.
STARTUP, FIRST_CHECKPOINT, CRASH_NOTICED, RETRIED_RUN = 180, 1200, 600, 1800


@pytest.fixture(scope="module", autouse=True)
def prefect_server():
    """Replaces the temporary in-process API of ``conftest.py``: this module starts a real server."""
    yield


def test_the_deployments_run_form_and_trigger_say_what_they_are():
    """What Prefect's UI shows of a deployment: each parameter of the Run form with its help text (the
    flow's docstring, as ``prefect deploy`` reads it), the crash trigger's automation named and described;
    and the name each flow run gets, the task and preset of its settings."""
    import yaml
    from prefect.events.schemas.deployment_triggers import DeploymentEventTrigger

    from flows.parsing import parsing_pipeline
    from flows.translation import translation_pipeline

    for flow in (translation_pipeline, parsing_pipeline):
        properties = flow.parameters.model_dump()["properties"]
        assert set(properties) == {"config_path", "overrides"}
        assert "YAML file" in properties["config_path"]["description"]
        assert "train_steps" in properties["overrides"]["description"]
    deployments = yaml.safe_load((REPO / "prefect.yaml").read_text())["deployments"]
    triggers = [DeploymentEventTrigger(**t) for d in deployments for t in d.get("triggers", [])]
    assert triggers and all(t.name and len(t.description) > 40 for t in triggers), triggers
    assert triggers[0].name == "Restart a crashed cpu-small-weekly-retrain run"


class Processes:
    """The processes the test starts, each in its own session, logged to ``<root>/<name>.log``."""

    def __init__(self, root: Path, env: dict[str, str]):
        self.root, self.env = root, env
        self.started: list[tuple[str, subprocess.Popen]] = []

    def log(self, name: str, chars: int = 4000) -> str:
        path = self.root / f"{name}.log"
        return f"--- {name}.log ---\n{path.read_text(errors='replace')[-chars:]}" if path.exists() else ""

    def logs(self) -> str:
        return "\n".join(self.log(name) for name, _ in self.started)

    def start(self, name: str, *args: str, cwd: Path = REPO) -> subprocess.Popen:
        with (self.root / f"{name}.log").open("wb") as output:
            process = subprocess.Popen(args, cwd=cwd, env=self.env, stdout=output, stderr=subprocess.STDOUT,
                                       start_new_session=True)
        self.started.append((name, process))
        logger.info("started %s (pid %d): %s", name, process.pid, " ".join(args))
        return process

    def run(self, name: str, *args: str, timeout: float = STARTUP) -> str:
        """A one-shot command (``prefect deploy`` and the like); fails with its output if it fails."""
        done = subprocess.run(args, cwd=REPO, env=self.env, capture_output=True, text=True, timeout=timeout)
        (self.root / f"{name}.log").write_text(done.stdout + done.stderr)
        assert done.returncode == 0, f"{' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def descendants(self, flow_runs_only: bool = False) -> list[int]:
        """Processes alive with this test's PREFECT_HOME in their environment: what it started and
        what those started, such as the worker's flow runs (each in a session of its own, so not
        in the worker's process group) and the MLflow server's job consumers."""
        marker = f"PREFECT_HOME={self.env['PREFECT_HOME']}".encode()
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and int(entry.name) != os.getpid():
                try:
                    environ = (entry / "environ").read_bytes().split(b"\0")
                except OSError:
                    continue  # gone, or not ours to read
                if marker in environ and (not flow_runs_only or any(
                        variable.startswith(b"PREFECT__FLOW_RUN_ID=") for variable in environ)):
                    found.append(int(entry.name))
        return found

    def stop_all(self) -> None:
        # Flow runs first: a worker asked to stop waits for the runs it started.
        for pid in self.descendants(flow_runs_only=True):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for name, process in reversed(self.started):
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=3)  # a graceful stop is not what these tests check
                except subprocess.TimeoutExpired:
                    logger.warning("%s did not stop on SIGTERM: killing it", name)
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(process.pid, signal.SIGKILL)
                    process.wait(timeout=30)
        for pid in self.descendants():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def runs_flow_run(pid: int, flow_run_id: str) -> bool:
    """Whether process ``pid`` is alive and is the engine of Prefect flow run ``flow_run_id``
    (the worker's supervisor sets ``PREFECT__FLOW_RUN_ID`` and execs the engine in place)."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return f"PREFECT__FLOW_RUN_ID={flow_run_id}".encode() in environ


@pytest.fixture
def processes(tmp_path) -> Iterator[Processes]:
    home = tmp_path / "prefect-home"
    home.mkdir()
    env = {
        **os.environ,
        "PREFECT_HOME": str(home),
        "PREFECT_SERVER_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{home / 'prefect.db'}",
        "PREFECT_SERVER_UI_ENABLED": "false",
        "DO_NOT_TRACK": "true",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "TF_CPP_MIN_LOG_LEVEL": "2",
        # tests/flows/freeze first: its sitecustomize stops a flow run after a checkpoint on request.
        "PYTHONPATH": f"{FREEZE}{os.pathsep}{REPO}",
        # prefect.yaml's pull step is "{{ $PWD }}": the checkout `prefect deploy` runs in.
        "PWD": str(REPO),
        # A worker polls every 10 s by default; the test waits on it twice.
        "PREFECT_WORKER_QUERY_SECONDS": "2",
    }
    env.pop("PREFECT_API_URL", None)
    env.pop("MLFLOW_TRACKING_URI", None)
    started = Processes(tmp_path, env)
    try:
        yield started
    finally:
        started.stop_all()


def bin_(name: str) -> str:
    return str(Path(sys.executable).parent / name)


def wait_for(what: str, seconds: float, probe: Callable[[], Any], diagnostics: Callable[[], str],
             every: float = 1.0) -> Any:
    """Polls ``probe`` until it returns something truthy; fails naming ``what`` with the logs."""
    deadline = time.monotonic() + seconds
    while not (value := probe()):
        assert time.monotonic() < deadline, f"{what}: not within {seconds} s\n{diagnostics()}"
        time.sleep(every)
    return value


def latest_step(train_dir: Path) -> int:
    """The step of the checkpoint a resume would start from (what the trainer looks up)."""
    import tensorflow as tf

    latest = tf.train.latest_checkpoint(str(train_dir)) if train_dir.exists() else None
    return int(latest.rsplit("-", 1)[1]) if latest else 0


def test_a_deployment_run_killed_in_training_is_retried_by_its_trigger_and_resumes(processes, tmp_path):
    """Server, pool, deploy, worker, a run with non-default parameters; SIGKILL of the flow run's
    process after its checkpoint of step 8; the run shows Crashed, the deployment's trigger starts
    another with the same parameters, which continues the same MLflow run from that checkpoint
    and finishes it.

    No heartbeat or zombie-detection setting is needed: the worker outlives its flow run, sees
    its process exit with -9 and reports the run Crashed itself (Prefect 3.8's
    ``prefect/runner/_flow_run_executor.py`` proposes Crashed on a non-zero exit status). Flow
    run heartbeats (``PREFECT_FLOWS_HEARTBEAT_FREQUENCY``) with an automation that marks runs
    whose heartbeats stop Crashed (Prefect's "detect zombie flows" guide; a self-hosted server
    has no such automation built in) are for a run whose worker dies with it: not covered here.
    """
    from mlflow.tracking import MlflowClient
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        DeploymentFilter,
        DeploymentFilterId,
        LogFilter,
        LogFilterFlowRunId,
    )
    from prefect.settings import PREFECT_API_URL, temporary_settings

    # --- the team's servers, pool, deployment and worker
    api = f"http://127.0.0.1:{free_port()}/api"
    processes.env["PREFECT_API_URL"] = api
    server = processes.start("prefect-server", bin_("prefect"), "server", "start", "--host", "127.0.0.1",
                             "--port", api.split(":")[-1].split("/")[0])
    mlflow_uri = f"http://127.0.0.1:{free_port()}"
    mlflow_root = tmp_path / "mlflow-server"
    mlflow_root.mkdir()
    mlflow_server = processes.start(
        "mlflow-server", sys.executable, "-m", "mlflow", "server",
        "--backend-store-uri", f"sqlite:///{mlflow_root / 'mlflow.db'}", "--serve-artifacts",
        "--artifacts-destination", str(mlflow_root / "artifacts"), "--host", "127.0.0.1",
        "--port", mlflow_uri.rsplit(":", 1)[1], "--workers", "1", cwd=tmp_path)
    processes.env["MLFLOW_TRACKING_URI"] = mlflow_uri  # the worker's flow runs inherit it
    wait_until_it_answers(f"{api}/health", server, tmp_path / "prefect-server.log", STARTUP)
    wait_until_it_answers(f"{mlflow_uri}/health", mlflow_server, tmp_path / "mlflow-server.log", STARTUP)

    config = write_config(tmp_path, train_steps=40, checkpoint_every_steps=8)
    # Deployment parameters as a team passes them: the config file and nested overrides on top.
    defaults = {"config_path": str(config), "overrides": {"train": {"train_steps": 40}}}
    # The run is started with parameters of its own (48 steps, 8 test sentences): the run the
    # Crashed trigger starts must carry these, not the deployment's defaults, to resume it.
    parameters = {"config_path": str(config),
                  "overrides": {"train": {"train_steps": 48}, "evaluation": {"max_sentences": 8}}}
    processes.run("work-pool", bin_("prefect"), "work-pool", "create", POOL, "--type", "process")
    processes.run("deploy", bin_("prefect"), "deploy", "--no-prompt", "--name", DEPLOYMENT,
                  "--params", json.dumps(defaults), timeout=2 * STARTUP)
    # The worker's flow runs inherit this: the first to save a checkpoint of step >= 8 stops there.
    marker = tmp_path / "frozen-after-checkpoint"
    processes.env.update(FREEZE_AFTER_CHECKPOINT=str(marker), FREEZE_AFTER_CHECKPOINT_STEP="8")
    processes.start("worker", bin_("prefect"), "worker", "start", "--pool", POOL, "--name", "test-worker")

    with temporary_settings(updates={PREFECT_API_URL: api}), get_client(sync_client=True) as client:
        deployment = client.read_deployment_by_name(f"{FLOW}/{DEPLOYMENT}")
        assert deployment.parameters == defaults and deployment.global_concurrency_limit.limit == 1
        automations = client.read_resource_related_automations(f"prefect.deployment.{deployment.id}")
        on_crash = {a.id for a in automations if a.enabled and "prefect.flow-run.Crashed" in a.trigger.expect}
        assert on_crash, automations
        assert {a.name for a in automations if a.id in on_crash} == {"Restart a crashed cpu-small-weekly-retrain run"}

        def runs() -> list:
            """Runs of the deployment, oldest first; not the cron schedule's future ones."""
            found = client.read_flow_runs(deployment_filter=DeploymentFilter(id=DeploymentFilterId(
                any_=[deployment.id])))
            return sorted((r for r in found if not r.auto_scheduled), key=lambda r: r.created)

        processes.run("deployment-run", bin_("prefect"), "deployment", "run", f"{FLOW}/{DEPLOYMENT}",
                      "--params", json.dumps(parameters))
        first = wait_for("the deployment run", STARTUP, runs, processes.logs)[0]
        assert first.parameters == parameters != deployment.parameters

        # --- SIGKILL of the flow run's process in training, stopped after its checkpoint of step 8
        # (tests/flows/freeze: an event, not a race against 40 more steps)
        run_dir = tmp_path / "run"
        frozen = wait_for("a flow run stopped after its checkpoint of step 8", FIRST_CHECKPOINT,
                          lambda: marker.exists() and marker.read_text().split(), processes.logs, every=0.5)
        pid = int(wait_for("the flow run's process id", STARTUP,
                           lambda: client.read_flow_run(first.id).infrastructure_pid, processes.logs))
        assert runs_flow_run(pid, str(first.id)), f"pid {pid} is not flow run {first.id}"
        assert int(frozen[0]) == pid, (frozen, pid)
        assert pid in processes.descendants(flow_runs_only=True)  # what the teardown would stop
        os.kill(pid, signal.SIGKILL)
        state = json.loads((run_dir / STATE_FILE).read_text())
        mlflow_run_id = state["run_id"]
        assert state["flow_run_id"] == str(first.id) and state["tracking_uri"] == mlflow_uri
        resumable = latest_step(run_dir / "runs" / mlflow_run_id / "train")
        assert resumable == 8 and frozen[1].endswith("ckpt-8"), (resumable, frozen)

        crashed = wait_for("the killed run marked Crashed", CRASH_NOTICED,
                           lambda: (r := client.read_flow_run(first.id)).state.is_final() and r, processes.logs)
        assert crashed.state.is_crashed() and "-9" in crashed.state.message, crashed.state

        # --- the trigger's run: resumes the MLflow run from the checkpoint and finishes it
        retried = wait_for("a run started by the Crashed trigger", CRASH_NOTICED,
                           lambda: [r for r in runs() if r.id != first.id], processes.logs)
        assert len(retried) == 1, retried
        assert retried[0].created_by.type == "AUTOMATION" and retried[0].created_by.id in on_crash
        second = wait_for("the retried run to finish", RETRIED_RUN,
                          lambda: (r := client.read_flow_run(retried[0].id)).state.is_final() and r, processes.logs)
        assert second.state.is_completed(), f"{second.state}\n{processes.logs()}"
        assert second.parameters == parameters  # the crashed run's, not the deployment's defaults

        logs = "\n".join(log.message for log in client.read_logs(LogFilter(
            flow_run_id=LogFilterFlowRunId(any_=[second.id]))))
        reached = re.search(r"training reached step (\d+) \(started at (\d+)\)", logs)
        assert reached, logs[-3000:]
        assert (int(reached[1]), int(reached[2])) == (48, resumable)  # from the checkpoint, not step 0
        artifacts = client.read_artifacts(artifact_filter=ArtifactFilter(
            flow_run_id=ArtifactFilterFlowRunId(any_=[second.id])))
        link = next(a.data for a in artifacts if a.key == "mlflow-run-flow-test")

    state = json.loads((run_dir / STATE_FILE).read_text())
    assert state["run_id"] == mlflow_run_id and state["flow_run_id"] == str(second.id)
    mlflow = MlflowClient(mlflow_uri, registry_uri=mlflow_uri)
    run = mlflow.get_run(mlflow_run_id)
    assert run.info.status == "FINISHED" and "test/bleu" in run.data.metrics
    assert run.data.tags["prefect.flow_run_id"] == str(second.id)
    assert run.data.tags["prefect.deployment_id"] == str(deployment.id)
    # One name in both UIs: the flow run that started the MLflow run named it (the task and preset).
    # Read again: the deployment created the run under Prefect's random name, which its engine replaced.
    with temporary_settings(updates={PREFECT_API_URL: api}), get_client(sync_client=True) as client:
        named = client.read_flow_run(first.id).name
    assert run.info.run_name == named and named.startswith("translation-demo-")
    assert run.data.tags["prefect.flow_run_url"] == f"{api.removesuffix('/api')}/flow-runs/flow-run/{second.id}"
    # Each logged step once, though the steps after the checkpoint were trained twice.
    assert sorted(m.step for m in mlflow.get_metric_history(mlflow_run_id, "train/loss")) == list(range(2, 49, 2))
    assert len(mlflow.search_runs([run.info.experiment_id])) == 1  # no second MLflow run
    # The Prefect side links back: the run's page on the tracking server.
    assert f"({mlflow_uri}/#/experiments/{run.info.experiment_id}/runs/{mlflow_run_id}?workflowType=machine_learning)" \
        in link

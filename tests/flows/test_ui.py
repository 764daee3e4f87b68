"""``make ui``'s address of a store's newest run, and the name a run has in both UIs (a real SQLite
MLflow store; nothing here runs a flow)."""

import subprocess
import sys

import pytest

from flows.tracking import Tracker, TrackingConfig
from flows.ui import newest_run_page, run_name
from tests.flows.conftest import REPO


@pytest.fixture(scope="module", autouse=True)
def prefect_server():
    """Replaces the Prefect API of ``conftest.py``: nothing here runs a flow."""
    yield


def test_make_ui_prints_the_newest_top_level_run_s_page_in_the_model_training_view(tmp_path):
    older = Tracker.start(TrackingConfig(experiment="first"), tmp_path)
    newest = Tracker.start(TrackingConfig(experiment="second"), tmp_path)
    Tracker.start(TrackingConfig(experiment="second", parent_run_id=newest.run_id), tmp_path,
                  tags={"mlflow.parentRunId": newest.run_id})  # a variant: not what a reader opens first
    experiment_id = newest.client.get_run(newest.run_id).info.experiment_id
    page = newest_run_page(newest.tracking_uri, "http://127.0.0.1:5001")
    assert page == f"http://127.0.0.1:5001/#/experiments/{experiment_id}/runs/{newest.run_id}" \
        "?workflowType=machine_learning"
    assert page == newest.page_url().replace(":5000", ":5001") and older.run_id not in page

    done = subprocess.run([sys.executable, "-m", "flows.ui", newest.tracking_uri, "--port", "5001"], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and page in done.stdout, done.stderr[-2000:]


def test_make_ui_on_a_store_not_made_yet_says_so_in_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "flows.ui", f"sqlite:///{tmp_path}/mlflow.db"], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert f"sqlite:///{tmp_path}/mlflow.db: no MLflow store there yet" in done.stderr


def test_a_run_is_named_after_its_task_preset_and_time():
    import datetime

    when = datetime.datetime(2026, 12, 6, 7, 5, 9)
    assert run_name("translation", "demo", when) == "translation-demo-1206-070509"
    assert run_name("parsing", None, when) == "parsing-1206-070509"


def test_make_ui_starts_mlflow_without_its_job_runner(tmp_path):
    """MLflow's job runner (8 processes for GenAI jobs, which no run here submits) stays off in ``make ui``:
    the command it runs, as ``make -n`` prints it."""
    done = subprocess.run(["make", "-n", "ui", f"STORE=sqlite:///{tmp_path}/mlflow.db"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    commands = [line for line in done.stdout.replace("\\\n", " ").splitlines() if " ui --backend-store-uri" in line]
    assert len(commands) == 1, done.stdout
    environment = commands[0].split("mlflow ui")[0].split()
    assert "MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false" in environment, commands[0]

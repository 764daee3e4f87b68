"""Shared by the flow tests: a real temporary Prefect API per module, and a tiny demo config."""

import socket
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "configs" / "translation" / "demo.yaml"


@pytest.fixture(scope="module", autouse=True)
def prefect_server():
    """A real, temporary Prefect API and database for this module, stopped when it ends."""
    from prefect.testing.utilities import prefect_test_harness

    # As the flows do (flows/__init__.py): a busy machine can take well over 30 s to start it.
    with prefect_test_harness(server_startup_timeout=120):
        yield


def write_config(tmp_path, **train):
    config = yaml.safe_load(DEMO.read_text())
    config["run_dir"] = str(tmp_path / "run")
    config["tokenizer"].update(vocab_size=1000, input_sentence_size=20000)  # the demo's verbatim spans kept
    config["input"] = {"tokens_per_batch": 1024, "max_length": 48}
    config["train"].update(
        {
            "model": {"num_layers": 1, "d_model": 32, "num_heads": 2, "d_ff": 64},
            "train_steps": 12,
            "checkpoint_every_steps": 4,
            "validate_every_steps": 6,
            "validation_max_batches": 2,
            "progress_bar": False,
            **train,
        }
    )
    config["evaluation"] = {"max_sentences": 12, "max_length_offset": 5, "batch_size": 12}
    config["tracking"] = {"experiment": "flow-test", "log_every_steps": 2}
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until_it_answers(url: str, process, log: Path, seconds: float) -> None:
    """Polls ``url`` until it answers; fails with the server's log if it dies or stays silent."""
    deadline = time.monotonic() + seconds
    while True:
        assert process.poll() is None, log.read_text(errors="replace")[-3000:]
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            assert time.monotonic() < deadline, f"{url} did not answer within {seconds} s"
            time.sleep(0.5)


def served_predictions(model_uri: str, tracking_uri: str, column: str, sentences: list[str], log: Path) -> list:
    """What ``mlflow models serve -m model_uri`` answers over HTTP on 127.0.0.1 for ``sentences``."""
    import json
    import os
    import signal
    import subprocess
    import sys

    port = free_port()
    # As with the virtual environment activated: the server runs the environment's uvicorn.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**os.environ, "MLFLOW_TRACKING_URI": tracking_uri, "MLFLOW_REGISTRY_URI": tracking_uri,
           "TF_CPP_MIN_LOG_LEVEL": "2", "PATH": path}
    with log.open("wb") as output:
        server = subprocess.Popen(
            [sys.executable, "-m", "mlflow", "models", "serve", "-m", model_uri, "--env-manager", "local",
             "--host", "127.0.0.1", "--port", str(port)],
            env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_until_it_answers(f"http://127.0.0.1:{port}/ping", server, log, 300)
            body = json.dumps({"dataframe_split": {"columns": [column], "data": [[s] for s in sentences]}}).encode()
            request = urllib.request.Request(f"http://127.0.0.1:{port}/invocations", data=body,
                                             headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=600) as response:
                return json.loads(response.read())["predictions"]
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=30)

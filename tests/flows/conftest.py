"""Shared by the flow tests: a real temporary Prefect API per module, a tiny demo config, ports and
servers on 127.0.0.1, and a tiny served model."""

import fcntl
import json
import os
import signal
import socket
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "configs" / "translation" / "demo.yaml"


@pytest.fixture(scope="session", autouse=True)
def prefect_server():
    """A real, temporary Prefect API and database for this pytest worker's flow tests, stopped when they
    end: started once, not per module (a start with its database's migrations took 7-15 s). Each test
    reads back its own flow runs by id. A module that starts its own servers, or none, overrides it."""
    from prefect.testing.utilities import prefect_test_harness

    # As the flows do (flows/__init__.py): a busy machine can take well over 30 s to start it.
    with prefect_test_harness(server_startup_timeout=120):
        yield


def harness_api() -> dict[str, str]:
    """The environment that sends a subprocess' flow runs to this worker's Prefect API (:func:`prefect_server`):
    they then start no temporary server of their own (seconds of CPU each)."""
    from prefect.settings import PREFECT_API_URL

    api = PREFECT_API_URL.value()
    return {"PREFECT_API_URL": api} if api else {}


#: Where this pytest worker's flow runs share the prepared bundled corpus and its token caches (set
#: by :func:`shared_corpus_and_caches`). The stages reuse both when they are of the same settings:
#: the corpus is verified by its manifest, a cache is named by a hash of what makes its ids.
_SHARED: dict[str, Path] = {}


@pytest.fixture(scope="session", autouse=True)
def shared_corpus_and_caches(tmp_path_factory):
    """Preparing the bundled corpus and tokenizing all of it again took a flow run ~10 s of its ~60."""
    _SHARED["dir"] = tmp_path_factory.mktemp("shared-corpus")
    yield
    _SHARED.clear()


def write_config(tmp_path, shared_data: bool = True, attention_examples: int = 0, **train):
    """The demo config made tiny: ``train`` overrides its train section. ``shared_data``: the corpus
    and token caches in the worker's shared directory, not under the run_dir (False where a test
    reads them there). Attention pictures only where a test looks at them (drawing them was a
    tenth of a tiny run)."""
    config = yaml.safe_load(DEMO.read_text())
    config["run_dir"] = str(tmp_path / "run")
    # The references, which any source has (the tests change the source); the whole-run fixture of
    # test_translation_flow.py trains on the demo's distilled targets.
    config["data"].pop("train_targets", None)
    if shared_data and "dir" in _SHARED:
        config["data"]["output_dir"] = str(_SHARED["dir"] / "ddtp-en-de")
    config["tokenizer"].update(vocab_size=1000, input_sentence_size=20000)  # the demo's verbatim spans kept
    config["input"] = {"tokens_per_batch": 1024, "max_length": 48}
    if shared_data and "dir" in _SHARED:
        config["input"]["cache_dir"] = str(_SHARED["dir"] / "cache")
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
    config["evaluation"] = {"max_sentences": 12, "decoding": {"max_length_offset": 5}, "batch_size": 12,
                            "attention_examples": attention_examples}
    config["tracking"] = {"experiment": "flow-test", "log_every_steps": 2}
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def run_translation_flow(tmp_path: Path, shared_data: bool = True, **changes) -> tuple[Path, object]:
    """The flow run once on :func:`write_config`'s settings with ``changes`` merged into them (section by
    section, key by key), from ``tmp_path`` so that nothing lands in the checkout: ``(config, result)``."""
    from flows.translation import translation_pipeline

    def merged(base, change):
        if not (isinstance(base, dict) and isinstance(change, dict)):
            return change
        return {**base, **{key: merged(base.get(key), value) for key, value in change.items()}}

    config = write_config(tmp_path, shared_data=shared_data)
    config.write_text(yaml.safe_dump(merged(yaml.safe_load(config.read_text()), changes)))
    previous = Path.cwd()
    os.chdir(tmp_path)
    try:
        return config, translation_pipeline(str(config))
    finally:
        os.chdir(previous)

#: Lock files of the ports :func:`free_port` handed out, held while this process lives.
PORT_LOCKS = Path(tempfile.gettempdir()) / "keras-transformer-test-ports"
_held_ports: list = []


def free_port() -> int:
    """A port free on 127.0.0.1 now that no other caller of this function on the machine (another
    pytest worker, another session) gets while this process lives: the port's lock file under
    :data:`PORT_LOCKS` stays locked until it ends. The port is still released before the caller's
    server binds it, so a program that does not ask here can take it in between;
    :func:`start_on_a_free_port` starts a server again on another port when that happens."""
    PORT_LOCKS.mkdir(exist_ok=True)
    for _ in range(100):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        lock = (PORT_LOCKS / f"{port}.lock").open("w")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # handed to another process that may not have bound it yet
            lock.close()
            continue
        _held_ports.append(lock)
        return port
    raise RuntimeError(f"no free port found whose lock under {PORT_LOCKS} is free")


def start_on_a_free_port(command, health: str, log: Path, seconds: float, attempts: int = 3, **popen):
    """``subprocess.Popen(command(port), ...)`` on a :func:`free_port`, started again on another
    port if it failed to bind its own ("address already in use"); ``(process, port)`` once
    ``http://127.0.0.1:<port><health>`` answers. Its output goes to ``log``; the caller stops it
    (it leads a process group of its own)."""
    import subprocess

    for attempt in range(1, attempts + 1):
        port = free_port()
        with log.open("wb") as output:
            process = subprocess.Popen(command(port), stdout=output, stderr=subprocess.STDOUT,
                                       start_new_session=True, **popen)
        deadline = time.monotonic() + seconds
        while process.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{health}", timeout=5):
                    return process, port
            except OSError:
                if time.monotonic() > deadline:
                    os.killpg(process.pid, signal.SIGTERM)
                    process.wait(timeout=30)
                    raise AssertionError(f"port {port}{health} did not answer within {seconds} s: "
                                         f"{log.read_text(errors='replace')[-3000:]}") from None
                time.sleep(0.5)
        text = log.read_text(errors="replace")
        if "address already in use" not in text.lower() or attempt == attempts:
            raise AssertionError(f"the server exited ({process.returncode}) before answering: {text[-3000:]}")


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


def serve_command(model_uri: str, workers: int = 1):
    """``mlflow models serve`` of ``model_uri`` on 127.0.0.1 as ``make serve`` runs it, for
    :func:`start_on_a_free_port`."""
    import sys

    return lambda port: [sys.executable, "-m", "mlflow", "models", "serve", "-m", model_uri, "--env-manager",
                         "local", "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)]


def serve_env(tracking_uri: str) -> dict:
    import sys

    # As with the virtual environment activated: the server runs the environment's uvicorn.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return {**os.environ, "MLFLOW_TRACKING_URI": tracking_uri, "MLFLOW_REGISTRY_URI": tracking_uri,
            "TF_CPP_MIN_LOG_LEVEL": "2", "PATH": path}


def invocations_request(url: str, column: str, sentences: list) -> urllib.request.Request:
    body = json.dumps({"dataframe_split": {"columns": [column], "data": [[s] for s in sentences]}}).encode()
    return urllib.request.Request(f"{url}/invocations", data=body, headers={"Content-Type": "application/json"})


def served_predictions(model_uri: str, tracking_uri: str, column: str, sentences: list[str], log: Path) -> list:
    """What ``mlflow models serve -m model_uri`` answers over HTTP on 127.0.0.1 for ``sentences``."""
    server, port = start_on_a_free_port(serve_command(model_uri), "/ping", log, 300, env=serve_env(tracking_uri))
    try:
        request = invocations_request(f"http://127.0.0.1:{port}", column, sentences)
        with urllib.request.urlopen(request, timeout=600) as response:
            return json.loads(response.read())["predictions"]
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def tiny_pyfunc(tokenizer, path: Path) -> Path:
    """The project's MLflow model (``flows.registry.save_pyfunc``) of a tiny random Transformer over
    ``tokenizer``: what is served, a request decoded in a fraction of a second (into nonsense)."""
    from flows.registry import save_pyfunc
    from tests.keras_transformer.tiny_models import tiny_transformer

    export = tiny_transformer(tokenizer.vocab_size).export_decoder(path / "export", tokenizer)
    return save_pyfunc("translation", export, ["The package.", "A library."], path / "pyfunc")


def champion_outputs(run_tmp: Path, result, column: str, sources: list[str], monkeypatch, log: Path):
    """What a finished run's champion answers for ``sources`` in the output ``column``: loaded as a
    pyfunc through ``models:/``, and served by ``mlflow models serve`` (as ``make serve``)."""
    import mlflow.pyfunc
    import pandas as pd

    uri = json.loads((run_tmp / "run" / "mlflow_run.json").read_text())["tracking_uri"]
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_REGISTRY_URI", uri)
    model_uri = f"models:/{result.promotion.model}@champion"
    loaded = mlflow.pyfunc.load_model(model_uri).predict(pd.DataFrame({"source": sources}))[column].tolist()
    served = [p[column] for p in served_predictions(model_uri, uri, "source", sources, log)]
    return loaded, served

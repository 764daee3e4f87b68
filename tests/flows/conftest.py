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
    config["tokenizer"] = {"vocab_size": 1000, "input_sentence_size": 20000}
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

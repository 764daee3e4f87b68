"""The flows' options as a user types them, without a run: ``python -m flows.translation`` and
``flows.parsing`` parse ``--config``, ``--set``, ``--train-steps``, ``--new-run`` and ``--run-id``
from the real argv, check the settings, and call their Prefect flow with the config path and the
overrides a run would get, which is where this test stops them (``test_cli.py`` runs them whole).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.flows.conftest import REPO, write_config

#: ``python -m <module> <argv...>`` with Prefect's flow call replaced by a print of its arguments, and the
#: start-up the call would need skipped.
STOP_AT_THE_FLOW = """
import json, runpy, sys

import prefect.flows


def stop(flow, *args, **kwargs):
    print(json.dumps({"flow": flow.name, "args": list(args), "kwargs": kwargs}))
    sys.exit(0)


prefect.flows.Flow.__call__ = stop
import flows.cli  # noqa: E402

flows.cli._start_up = lambda: None  # what the run would start (Prefect's API, TensorFlow): no run here
module = sys.argv[1]
sys.argv = [module, *sys.argv[2:]]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


@pytest.fixture(scope="module", autouse=True)
def prefect_server():
    """Replaces the temporary in-process API of ``conftest.py``: no flow runs here."""
    yield


def flow_call(module: str, *argv: str, cwd) -> dict:
    """What ``python -m module *argv`` passes to its flow (the flow's name, its arguments)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "PREFECT_HOME": str(cwd / "prefect-home")}
    env.pop("PREFECT_API_URL", None)
    done = subprocess.run([sys.executable, "-c", STOP_AT_THE_FLOW, module, *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-4000:]
    lines = done.stdout.strip().splitlines()
    assert lines, f"the flow was not called:\n{done.stderr[-4000:]}"
    return json.loads(lines[-1])


def test_translation_options_become_the_flows_overrides(tmp_path):
    config = write_config(tmp_path)
    called = flow_call("flows.translation", "--config", str(config), "--set", "export=false",
                       "--set", "evaluation.max_sentences=4", "--train-steps", "10", "--new-run", cwd=tmp_path)
    assert called["flow"] == "transformer-translation" and called["kwargs"] == {}
    assert called["args"] == [str(config), {
        "export": False, "evaluation": {"max_sentences": 4},
        "train": {"train_steps": 10, "checkpoint_every_steps": 2},  # a checkpoint every fifth
        "resume": "never"}]
    # --run-id names the run to continue; without options the flow gets the file alone.
    called = flow_call("flows.translation", "--config", str(config), "--run-id", "0123abc", cwd=tmp_path)
    assert called["args"] == [str(config), {"run_id": "0123abc"}]
    assert flow_call("flows.translation", "--config", str(config), cwd=tmp_path)["args"] == [str(config), None]


def test_parsing_options_become_the_flows_overrides(tmp_path):
    treebank = tmp_path / "treebank.zip"
    treebank.write_bytes(b"")  # the pre-flight check wants it there; nothing reads it here
    config = str(REPO / "configs" / "parsing" / "demo.yaml")
    called = flow_call("flows.parsing", "--config", config, "--set", f"data.path={treebank}",
                       "--set", "train.train_minutes=0", "--train-steps", "40", "--run-id", "0123abc",
                       cwd=tmp_path)
    assert called["flow"] == "transformer-parsing"
    assert called["args"] == [config, {
        "data": {"path": str(treebank)},
        "train": {"train_minutes": 0, "train_steps": 40, "checkpoint_every_steps": 8},
        "run_id": "0123abc"}]

"""What a ``run_dir`` remembers between flow runs, and who may use it.

``<run_dir>/mlflow_run.json`` names the MLflow run the last flow run worked for, the fingerprint
of the settings it trained with and the Prefect flow run that did it. A new flow run resumes
that MLflow run (and its checkpoints) only when it is unfinished *and* trained with the same
settings; changed settings, ``resume: never`` (``--new-run``) or a finished run start a new one,
and ``run_id`` names one to continue explicitly. One flow run at a time may use a ``run_dir``
(an exclusive lock on ``<run_dir>/.lock``); the one that gets the lock knows that the flow run
named in the state file is gone, and marks it Crashed in Prefect if it still shows as running.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from keras_transformer.files import atomic_write_bytes
from pipelines.config import ConfigError, to_dict

logger = logging.getLogger(__name__)

STATE_FILE = "mlflow_run.json"
LOCK_FILE = ".lock"
RESUME_CHOICES = ("auto", "never")
#: What decides the trained model. Evaluation, averaging, tracking and export may change on a
#: resume (recorded as ``changed_on_resume``), and so may these operational train settings.
FINGERPRINTED = ("data", "tokenizer", "input", "train")
OPERATIONAL = frozenset({"checkpoint_dir", "checkpoint_every_steps", "checkpoint_every_minutes", "log_every",
                         "progress_bar", "validate_every_steps", "validation_max_batches", "keep_checkpoints"})


def settings_fingerprint(config: Any) -> str:
    settings = to_dict(config)
    picked = {section: settings[section] for section in FINGERPRINTED}
    picked["train"] = {k: v for k, v in picked["train"].items() if k not in OPERATIONAL}
    picked["data"] = {k: v for k, v in picked["data"].items() if k != "output_dir"}
    picked["input"] = {k: v for k, v in picked["input"].items() if k != "cache_dir"}
    return hashlib.sha256(json.dumps(picked, sort_keys=True, default=str).encode()).hexdigest()[:16]


def read_state(path: Path) -> dict[str, Any]:
    """The state a previous flow run of this ``run_dir`` left (``{}`` if none)."""
    if not path.exists():
        return {}
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(state, dict) or not isinstance(state.get("run_id"), str):
            raise ValueError("no 'run_id'")
    except ValueError as err:
        raise ConfigError(f"{path} is damaged ({err}); delete it to start a new MLflow run") from err
    return state


def write_state(path: Path, state: dict[str, Any]) -> None:
    # Atomic: a kill during the write must not leave a file that breaks every later run.
    atomic_write_bytes(path, json.dumps(state, indent=1).encode())


def run_to_resume(previous: dict[str, Any], fingerprint: str, resume: str, run_id: str | None) -> str | None:
    """The MLflow run id to continue, or None for a new run (the reason is logged)."""
    if run_id:
        return run_id
    if not previous:
        return None
    if resume == "never":
        logger.info("resume: never: starting a new MLflow run (%s is left as it is)", previous["run_id"])
        return None
    recorded = previous.get("fingerprint")
    if recorded is not None and recorded != fingerprint:
        logger.warning("the settings changed since MLflow run %s (fingerprint %s, now %s): starting a new "
                       "run instead of resuming it", previous["run_id"], recorded, fingerprint)
        return None
    return previous["run_id"]


@contextlib.contextmanager
def exclusive(run_dir: Path) -> Iterator[None]:
    """Holds ``<run_dir>/.lock``; a second flow run on the same ``run_dir`` fails at once."""
    lock = (run_dir / LOCK_FILE).open("a+")
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "another process"
            raise ConfigError(f"run_dir={str(run_dir)!r} is in use by another flow run ({holder}); "
                              "wait for it or give this one its own run_dir") from None
        lock.truncate(0)
        lock.write(f"pid {os.getpid()}")
        lock.flush()
        yield
    finally:
        lock.close()  # closing releases the lock


#: The name of the Crashed state given to a flow run whose work the next run resumes.
SUPERSEDED = "Crashed, resumed"


def mark_crashed(flow_run_id: str | None, current_flow_run_id: str | None) -> bool:
    """Marks a Prefect flow run Crashed if it still shows as running though its process is gone.

    Called with the run_dir lock held, so the flow run the state file names has ended. Returns
    whether its state was changed; an API that does not know it (another server) changes nothing.
    """
    if not flow_run_id or flow_run_id == current_flow_run_id:
        return False
    from prefect.client.orchestration import get_client
    from prefect.states import Crashed

    try:
        with get_client(sync_client=True) as client:
            run = client.read_flow_run(flow_run_id)
            if run.state is None or not (run.state.is_running() or run.state.is_pending()):
                return False
            # A Crashed state under another name: Prefect names the event after the state
            # (prefect.flow-run.<name>), so the retrain deployment's crash trigger does not start
            # yet another run for work that the run calling this is about to resume.
            client.set_flow_run_state(
                flow_run_id, Crashed(name=SUPERSEDED, message="its process ended without reporting; the next "
                                     "run of the same run_dir resumes its work"), force=True)
    except Exception as err:  # noqa: BLE001  (a state we cannot read is not ours to fix)
        logger.info("could not check flow run %s: %s", flow_run_id, err)
        return False
    logger.warning("flow run %s was left running by a process that is gone: marked Crashed", flow_run_id)
    return True

"""What a ``run_dir`` remembers between flow runs, which MLflow run a flow run works for, and who
may use the ``run_dir``.

``<run_dir>/mlflow_run.json`` names the MLflow run the last flow run worked for, the fingerprint
of the settings it trained with, the Prefect flow run that did it and the run_dir's path then: a
run_dir copied or moved since is told by it, and its own MLflow store read where it is now
(:mod:`flows.relocation`). A new flow run resumes that MLflow run (and its checkpoints) only
when it is unfinished (running, or failed in a stage) *and* trained with the same settings;
changed settings or ``resume: never`` (``--new-run``) start a new run that *replaces* it: the
unfinished run is ended KILLED with tags naming why and the run that replaced it, so no run stays
RUNNING for ever. A finished (or killed) run is simply followed by a new one. ``run_id`` names a
run to continue explicitly. The choice and its reason are for the flow run's log (:func:`choose_run`).

One flow run at a time may use a ``run_dir`` (an exclusive lock on ``<run_dir>/.lock``); the one
that gets the lock knows that the flow run named in the state file is gone, and marks it Crashed
in Prefect if it still shows as running, under a name that says whether its work was resumed.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flows.relocation import STORE_FILE, local_run_dir, store_uri
from keras_transformer.files import atomic_write_bytes
from pipelines.config import ConfigError, to_dict
from pipelines.training.config import operational_settings

logger = logging.getLogger(__name__)

STATE_FILE = "mlflow_run.json"
LOCK_FILE = ".lock"
#: What decides the trained model, with the task's own sections (translation's ``synthetic``: the teacher and
#: how its pairs are mixed in). Evaluation, averaging, tracking and export may change on a resume (recorded as
#: ``changed_on_resume``), and so may the train settings marked operational.
FINGERPRINTED = ("data", "tokenizer", "input", "train")


def settings_fingerprint(config: Any) -> str:
    settings = to_dict(config)
    picked = {section: settings[section] for section in (*FINGERPRINTED, *config.task.sections)}
    operational = operational_settings()
    picked["train"] = {k: v for k, v in picked["train"].items() if k not in operational}
    picked["data"] = {k: v for k, v in picked["data"].items() if k != "output_dir"}
    picked["input"] = {k: v for k, v in picked["input"].items() if k != "cache_dir"}
    return hashlib.sha256(json.dumps(picked, sort_keys=True, default=str).encode()).hexdigest()[:16]


def read_state(path: Path) -> dict[str, Any]:
    """The state a previous flow run of this ``run_dir`` left (``{}`` if none), its tracking URI
    the run_dir's present store if it named the run_dir's own (:func:`moved_from`)."""
    if not path.exists():
        return {}
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(state, dict) or not isinstance(state.get("run_id"), str):
            raise ValueError("no 'run_id'")
    except ValueError as err:
        raise ConfigError(f"{path} is damaged ({err}); delete it to start a new MLflow run") from err
    old = moved_from(state, path.parent)
    if old is not None:
        logger.info("run_dir %s was %s: its own MLflow store is the one it holds now", path.parent, old)
        state = {**state, "run_dir": str(path.parent.resolve()), "tracking_uri": store_uri(path.parent)}
    return state


def moved_from(state: dict[str, Any], run_dir: Path) -> Path | None:
    """The path ``run_dir`` had when its state was written, if it was copied or moved since and
    the state names the run_dir's own store there (None otherwise: a store elsewhere, such as a
    server, stays where it is). A state written before the run_dir was recorded in it counts as
    moved when its store is ``<another dir>/mlflow.db`` and ``run_dir`` holds one."""
    here = Path(run_dir).resolve()
    recorded = local_run_dir(state.get("tracking_uri") or "")
    if recorded is None or recorded == here:
        return None
    if "run_dir" in state:
        return recorded if Path(state["run_dir"]) == recorded else None
    return recorded if (here / STORE_FILE).is_file() else None


def write_state(path: Path, state: dict[str, Any]) -> None:
    """Writes the state, with the run_dir's present path: a later read tells a copy or a move by it."""
    state = {**state, "run_dir": str(path.parent.resolve())}
    # Atomic: a kill during the write must not leave a file that breaks every later run.
    atomic_write_bytes(path, json.dumps(state, indent=1).encode())


#: MLflow run states a rerun continues: interrupted (still RUNNING) or failed in a stage.
RESUMABLE = frozenset({"RUNNING", "SCHEDULED", "FAILED"})
#: Tags on an MLflow run that a new run replaced (and on the new run, naming the one it replaced).
REPLACED_BY, REPLACED_BECAUSE, REPLACES = "replaced_by", "replaced_because", "replaces"


@dataclass(frozen=True)
class RunChoice:
    """The MLflow run a flow run works for: ``resume`` (None: a new one), the unfinished run the new
    one ``replaces`` (to be ended KILLED), and the ``reason``, said in the flow run's log."""

    resume: str | None
    replaces: str | None
    reason: str


def choose_run(previous: dict[str, Any], fingerprint: str, resume: str, run_id: str | None,
               status: str | None) -> RunChoice:
    """Which MLflow run to work for, given the state file's record and the recorded run's ``status``
    (None: the tracking store does not know it)."""
    old = previous.get("run_id")
    unfinished = status in RESUMABLE
    if run_id:
        replaced = old if unfinished and old != run_id else None
        return RunChoice(run_id, replaced, f"continuing MLflow run {run_id} (run_id named)")
    if not old:
        return RunChoice(None, None, "a new MLflow run: none recorded in this run_dir")
    if status is None:
        return RunChoice(None, None, f"a new MLflow run: the recorded run {old} is not in this tracking store")
    if not unfinished:
        return RunChoice(None, None, f"a new MLflow run: the last one, {old}, is {status.lower()}")
    if resume == "never":
        return RunChoice(None, old, f"a new MLflow run replaces unfinished run {old}: resume: never (--new-run)")
    recorded = previous.get("fingerprint")
    if recorded is not None and recorded != fingerprint:
        return RunChoice(None, old, f"a new MLflow run replaces unfinished run {old}: the settings changed "
                                    f"(fingerprint {recorded}, now {fingerprint})")
    return RunChoice(old, None, f"resuming MLflow run {old}: unfinished ({status.lower()}), same settings")


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


#: Names of the Crashed state given to a flow run left "Running" by a process that is gone: its
#: work resumed by the run that found it, or replaced by a new MLflow run. Not "Crashed": Prefect
#: names the event after the state (prefect.flow-run.<name>), so the retrain deployment's crash
#: trigger does not start yet another run for work the run that found it has taken over.
RESUMED, REPLACED = "Crashed, resumed", "Crashed, replaced"


def mark_crashed(flow_run_id: str | None, current_flow_run_id: str | None, resumed: bool = True) -> str | None:
    """Marks a Prefect flow run Crashed if it still shows as running though its process is gone.

    Called with the run_dir lock held, so the flow run the state file names has ended. ``resumed``:
    whether this flow run continues its MLflow run (the state's name says so). Returns the name of
    the state set, or None when nothing was changed (ended already, or unknown to this API).
    """
    if not flow_run_id or flow_run_id == current_flow_run_id:
        return None
    from prefect.client.orchestration import get_client
    from prefect.states import Crashed

    name = RESUMED if resumed else REPLACED
    what = "resumes its work" if resumed else "starts a new MLflow run instead of resuming its work"
    try:
        with get_client(sync_client=True) as client:
            run = client.read_flow_run(flow_run_id)
            if run.state is None or not (run.state.is_running() or run.state.is_pending()):
                return None
            client.set_flow_run_state(
                flow_run_id, Crashed(name=name, message=f"its process ended without reporting; the next run of "
                                                         f"the same run_dir {what}"), force=True)
    except Exception as err:  # noqa: BLE001  (a state we cannot read is not ours to fix)
        logger.info("could not check flow run %s: %s", flow_run_id, err)
        return None
    return name

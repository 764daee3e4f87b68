"""What a pipeline run can find wrong before Prefect, MLflow or TensorFlow start.

A typo in a setting used to cost a temporary Prefect server's start-up (~16 s) and end in 40
lines of tracebacks; a missing data folder, two tracebacks after the first stage began. Each
check here is cheap (files and one HTTP health check), raises the same error the stage would
(:class:`~pipelines.config.ConfigError`, :class:`~pipelines.textfiles.DataError`) and is run
again where the work happens, so a deployment run without this command line fails the same way.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipelines.config import ConfigError


def check_run_dir(run_dir: Path) -> None:
    """``run_dir`` exists (created if need be) and is writable."""
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(f"run_dir={str(run_dir)!r}: cannot create it ({err})") from err
    if not os.access(run_dir, os.W_OK):
        raise ConfigError(f"run_dir={str(run_dir)!r}: not writable")


def check_before_start(config: Any, check_data: Callable[[Any], None] | None = None) -> None:
    """Every check a pipeline config allows before anything starts; raises the first error found.

    ``check_data(config.data)`` is the task's own (a data folder or treebank that is not there).
    """
    from flows.run_state import STATE_FILE, exclusive, read_state
    from flows.tracking import require_server, resolve_tracking_uri

    run_dir = Path(config.run_dir)
    if check_data is not None:
        check_data(config.data)
    check_run_dir(run_dir)
    read_state(run_dir / STATE_FILE)  # a damaged state file names itself
    with exclusive(run_dir):  # another flow run on this run_dir says so now, not after start-up
        pass
    require_server(resolve_tracking_uri(config.tracking, run_dir.resolve()))


def existing_path(setting: str, value: str | None, hint: str = "") -> None:
    """A data setting naming a file or folder that is not there, as the data stage would say it."""
    from pipelines.textfiles import DataError

    if value and not Path(value).expanduser().exists():
        raise DataError(f"{setting}: {value} does not exist{'. ' + hint if hint else ''}")

"""Prefect flows that run the pipeline stages as retryable, resumable tasks, tracked in MLflow.

Defaults that must hold before Prefect, MLflow or TensorFlow are imported: no telemetry (the
machines have no internet), the project's own loggers forwarded to Prefect's run logs (and shown by
Prefect's console handler), TensorFlow's informational C++ lines off, and progress bars only on a
terminal (a worker's log gets log lines, not bars redrawn with carriage returns).
"""

import logging
import os
import sys

os.environ.setdefault("DO_NOT_TRACK", "true")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("PREFECT_LOGGING_EXTRA_LOGGERS", "flows,pipelines,keras_transformer")
# The same loggers log outside flow runs too (a command line's checks, a stage's CLI): not an error.
os.environ.setdefault("PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW", "ignore")
# Their INFO lines are the run's story (one progress line per train.log_every steps, checkpoints,
# corpus counts): shown by Prefect's console handler and kept in the flow run's log, whatever the
# root logger's level (WARNING, Prefect's default for other libraries).
for _name in ("flows", "pipelines", "keras_transformer"):
    if logging.getLogger(_name).level == logging.NOTSET:
        logging.getLogger(_name).setLevel(logging.INFO)
# MLflow logs through its own handler at INFO ("Creating initial MLflow database tables...", "Started
# monitoring system metrics."): its warnings are what a run's reader needs from it.
os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
if not getattr(sys.stderr, "isatty", lambda: False)():
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
# The temporary local API Prefect starts for a flow run without a server waits 20 s by default;
# on a busy 2-core machine (TensorFlow importing beside it) that start can take longer.
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")

"""Prefect flows that run the pipeline stages as retryable, resumable tasks, tracked in MLflow.

Defaults that must hold before Prefect or MLflow are imported: no telemetry (the machines have no
internet), and the project's own loggers forwarded to Prefect's run logs.
"""

import os

os.environ.setdefault("DO_NOT_TRACK", "true")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("PREFECT_LOGGING_EXTRA_LOGGERS", "pipelines,keras_transformer")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
# The temporary local API Prefect starts for a flow run without a server waits 20 s by default;
# on a busy 2-core machine (TensorFlow importing beside it) that start can take longer.
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")

"""The pipeline stages as plain, testable Python: data (download/prepare, cleaning, corpus),
tokenization, input, training (with its time budget and distribution), averaging, evaluation,
attention plots and the translate CLI, plus the tasks in ``pipelines.tasks``. Each stage takes
one typed config (a dataclass, loadable from YAML)."""

import os

# The machines this runs on have no internet beyond package registries: no telemetry.
os.environ.setdefault("DO_NOT_TRACK", "true")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

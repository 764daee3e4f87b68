"""The pipeline stages as plain, testable Python: download, tokenization, input, training,
averaging, evaluation. Each stage takes one typed config (a dataclass, loadable from YAML)."""

import os

# The machines this runs on have no internet beyond package registries: no telemetry.
os.environ.setdefault("DO_NOT_TRACK", "true")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

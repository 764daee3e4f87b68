"""Test instrumentation for the kill tests, loaded at start-up by the flow processes they start
(this folder first on their ``PYTHONPATH``); inert unless ``FREEZE_AFTER_CHECKPOINT`` is set.

The first process to save a checkpoint of step ``FREEZE_AFTER_CHECKPOINT_STEP`` or later writes
``FREEZE_AFTER_CHECKPOINT`` (a marker file: its pid and the checkpoint) and stops right there,
inside the training loop, until it is killed. The test waits for the marker, not for a time, so
the kill lands in training with steps left to resume whatever the machine's speed. A process
started after the marker exists (the resumed run) trains on.
"""

import logging
import os
import re
import time
from pathlib import Path

_MARKER = os.environ.get("FREEZE_AFTER_CHECKPOINT")


class _FreezeAfterCheckpoint(logging.Handler):
    def __init__(self, marker: Path, step: int):
        super().__init__(logging.INFO)
        self.marker, self.step = marker, step

    def emit(self, record: logging.LogRecord) -> None:
        saved = re.match(r"saved checkpoint (.*-(\d+))$", record.getMessage())
        if not saved or int(saved[2]) < self.step or self.marker.exists():
            return
        written = self.marker.with_name(self.marker.name + ".tmp")
        written.write_text(f"{os.getpid()} {saved[1]}\n")
        written.replace(self.marker)  # whole or not at all: the test reads it as soon as it is there
        while True:  # until the test kills this process
            time.sleep(60)


if _MARKER:
    _logger = logging.getLogger("pipelines.training.checkpointing")
    _logger.setLevel(logging.INFO)
    _logger.addHandler(_FreezeAfterCheckpoint(Path(_MARKER), int(os.environ.get("FREEZE_AFTER_CHECKPOINT_STEP", "1"))))

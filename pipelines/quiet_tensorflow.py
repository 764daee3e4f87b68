"""TensorFlow imported without its C++ start-up lines, for the entry points (flows, commands).

TensorFlow 2.21 and tensorflow-text log from their libraries' static initialisers through absl
before anything can call ``absl::InitializeLog``, straight to file descriptor 2, and
``TF_CPP_MIN_LOG_LEVEL`` does not reach those lines (tensorflow/tensorflow#100442): "oneDNN custom
operations are on", "Could not find cuda drivers" (twice: once per library), and "failed call to
cuInit" when the devices are first listed. Every run printed them; in a worker's log they read
like errors. :func:`import_quietly` imports both libraries and lists the devices with fd 2
captured, then writes back every captured line that is not one of those, so a real error raised
while importing still shows. ``TF_CPP_MIN_LOG_LEVEL=2`` (set here unless the user chose a level)
keeps TensorFlow's later informational lines (XLA, tf.data) out as well.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator

#: Lines TensorFlow's libraries print while loading, whatever the log level.
_START_UP = re.compile(
    r"^(WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    r"|[IW]\d{4} [\d:.]+\s+\d+ (port|cudart_stub|cpu_feature_guard|dso_loader)\.cc:\d+\] .*"
    r"|E\d{4} [\d:.]+\s+\d+ (cuda_platform|cuda_executor|cuda_diagnostics)\.cc:\d+\] .*"
    r"|To enable the following instructions: .*)$"
)


def is_start_up_line(line: str) -> bool:
    """Whether ``line`` is one of TensorFlow's start-up lines (nothing a user must act on)."""
    return bool(_START_UP.match(line.rstrip("\r\n")))


@contextlib.contextmanager
def _captured_stderr() -> Iterator[list[str]]:
    """File descriptor 2 into a temporary file for the block; its lines in the yielded list after it."""
    lines: list[str] = []
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield lines
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            lines.extend(capture.read().decode("utf-8", errors="replace").splitlines(keepends=True))


def import_quietly() -> None:
    """Imports TensorFlow and tensorflow-text and lists the devices, without the start-up lines.

    Does nothing but the import once TensorFlow is imported (its lines were printed then).
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if "tensorflow" in sys.modules:
        return
    with _captured_stderr() as lines:
        import tensorflow as tf
        import tensorflow_text  # noqa: F401  (its library prints the same lines when it loads)

        tf.config.list_physical_devices()  # initialises the platforms: the cuInit line
    kept = "".join(line for line in lines if not is_start_up_line(line))
    if kept:
        sys.stderr.write(kept)
        sys.stderr.flush()

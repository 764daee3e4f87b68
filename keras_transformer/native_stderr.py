"""Lines that native libraries write straight to file descriptor 2, held back where no setting
reaches them.

Some C++ libraries under TensorFlow log through a logger whose level no environment variable or
Python call sets (absl before ``absl::InitializeLog``, tensorflow-text's own copy of SentencePiece).
:func:`filtered_stderr` points fd 2 at a temporary file for a block and afterwards writes back to
``sys.stderr`` every captured line that is not noise, so a real error printed in the block still
shows, later. Imports nothing heavy: the entry points use it before TensorFlow is imported.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator

# One capture at a time per process: a second thread's capture would save and restore the first
# one's temporary file as "the" fd 2, and the process's stderr would end in a closed file.
# Re-entrant, so a capture inside another one in the same thread nests (LIFO) correctly.
_CAPTURE = threading.RLock()


@contextlib.contextmanager
def filtered_stderr(is_noise: Callable[[str], bool]) -> Iterator[None]:
    """File descriptor 2 captured for the block; afterwards every captured line for which
    ``is_noise(line)`` is false is written to ``sys.stderr`` (the block's exception propagates)."""
    with _CAPTURE:
        sys.stderr.flush()
        saved = os.dup(2)
        with tempfile.TemporaryFile() as capture:
            os.dup2(capture.fileno(), 2)
            try:
                yield
            finally:
                sys.stderr.flush()
                os.dup2(saved, 2)
                os.close(saved)
                capture.seek(0)
                lines = capture.read().decode("utf-8", errors="replace").splitlines(keepends=True)
                kept = "".join(line for line in lines if not is_noise(line))
                if kept:
                    sys.stderr.write(kept)
                    sys.stderr.flush()

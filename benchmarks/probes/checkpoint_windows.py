"""A finished run's averaging windows, one averaged model each (section 6.1's checkpoint averaging).

What the checkpoint benchmarks of both tasks (:mod:`.bench_parser_checkpoints`,
:mod:`.bench_translation_checkpoints`) decode and score, window by window.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from pathlib import Path

logger = logging.getLogger(__name__)


def averaged_windows(train_dir: Path, windows: Iterable[int], scratch: Path) -> Iterator[tuple[int, list[str], object]]:
    """``(window, checkpoint names, averaging result)`` for each window the run kept checkpoints for:
    its newest ``window`` checkpoints averaged into ``scratch/last-<window>`` as the averaging stage
    averages them. A window wider than the run kept is logged and skipped, not faked."""
    from keras_transformer.checkpoints.averaging import average_checkpoints
    from keras_transformer.checkpoints.model_checkpoint import resolve_checkpoints

    kept = resolve_checkpoints(train_dir)
    for window in windows:
        if window > len(kept):
            logger.info("window %d: the run kept only %d checkpoints", window, len(kept))
            continue
        averaged = average_checkpoints(train_dir, window, Path(scratch) / f"last-{window}")
        yield window, [Path(p).name for p in kept[-window:]], averaged

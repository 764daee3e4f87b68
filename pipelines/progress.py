"""Progress of the data stages: a bar on a terminal, and a log line at least every 30 seconds.

A data stage on WMT14's 4.5M pairs runs for minutes; tqdm's bar is off when the output is not a
terminal (a Prefect flow's log, a scheduled run), so the stages also log how far they are, often
enough that a stalled stage and a slow one can be told apart in any log.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterable, Iterator
from typing import TypeVar

from tqdm import tqdm

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: Seconds between two log lines of a running stage.
LOG_EVERY_SECONDS = 30.0


class Progress:
    """Counts a stage's items: a tqdm bar (terminals only) and a log line every ``every`` seconds."""

    def __init__(self, desc: str, total: int | None = None, unit: str = "pairs", every: float = LOG_EVERY_SECONDS):
        self.desc, self.total, self.unit, self.every = desc, total, unit, every
        self.count = 0
        self.start = self.last = time.monotonic()
        self.bar = tqdm(total=total, desc=desc, unit=f" {unit}", mininterval=2.0, leave=False, disable=None)

    def update(self, n: int = 1) -> None:
        self.count += n
        self.bar.update(n)
        now = time.monotonic()
        if now - self.last >= self.every:
            self.last = now
            rate = self.count / max(now - self.start, 1e-9)
            of = f" of {self.total:,}" if self.total else ""
            logger.info("%s: %s%s %s in %.0f s (%.0f/s)", self.desc, f"{self.count:,}", of, self.unit,
                        now - self.start, rate)

    def close(self) -> None:
        self.bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def counted(items: Iterable[T], desc: str, total: int | None = None, unit: str = "pairs") -> Iterator[T]:
    """``items`` unchanged, their progress shown as :class:`Progress` shows it."""
    with Progress(desc, total, unit) as progress:
        for item in items:
            progress.update()
            yield item


@contextlib.contextmanager
def heartbeat(desc: str, every: float = LOG_EVERY_SECONDS) -> Iterator[None]:
    """A log line every ``every`` seconds while the body runs: for work that reports nothing
    itself (SentencePiece's training, with its own log off)."""
    done = threading.Event()
    start = time.monotonic()

    def beat() -> None:
        while not done.wait(every):
            logger.info("%s: still running after %.0f s", desc, time.monotonic() - start)

    thread = threading.Thread(target=beat, name=f"heartbeat {desc}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()

"""When a training run ends and when it saves the checkpoints that will be averaged.

A run ends at ``train_steps`` or, under a wall-clock budget (``train_minutes``), when the budget
is spent, whichever comes first. The clock counts the training loop (steps and checkpoint
writes) but not validation, which measures the model rather than training it, and it continues
across restarts: the seconds spent are part of every checkpoint, so a resumed run spends only
what is left of the same budget.

Section 6.1 averages the last 5 (base) or 20 (big) checkpoints, "written at 10-minute
intervals": the last 50 minutes of a 12-hour run. Under a budget of an hour or less, checkpoints
every 10 minutes would average the model of minute 20 into the model of minute 60, so the
checkpoints to average are spread over the last ``window`` of the run instead, the last one at
its end, and periodic checkpoints stop there, so the newest k checkpoints are exactly those.

Inside :func:`replaying_steps` the budget counts steps instead of the wall clock, each worth that
many seconds (measured on an idle machine): a run then ends, saves and anneals exactly as an
uninterrupted run on that machine would, however busy this one is. That is a device of the tools
that compare recipes (``recipe-search``, the benchmarks), not a setting of a run: they wrap the runs
they make in it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

#: Seconds each optimizer step counts for while a replay is on (``None``: the wall clock).
_replayed: list[float | None] = [None]


@contextmanager
def replaying_steps(seconds_per_step: float | None) -> Iterator[None]:
    """Training budgets started within count optimizer steps at ``seconds_per_step`` each (``None``:
    the wall clock, as outside)."""
    if seconds_per_step is not None and (isinstance(seconds_per_step, bool) or not isinstance(
            seconds_per_step, (int, float)) or seconds_per_step <= 0):
        raise ValueError(f"seconds_per_step must be a positive number of seconds, got {seconds_per_step!r}")
    before, _replayed[0] = _replayed[0], seconds_per_step
    try:
        yield
    finally:
        _replayed[0] = before


def replayed_seconds_per_step() -> float | None:
    """The step time of the replay in force (:func:`replaying_steps`), ``None`` outside one."""
    return _replayed[0]


class TrainingBudget:
    """The run's progress by steps and seconds, and the checkpoints due for averaging.

    ``progress`` is the larger of ``step / train_steps`` and ``seconds / budget``; ``marks`` are
    the progress values in ``[1 - window, 1)`` at which an averaging checkpoint is due (the
    final checkpoint is the last of them). Without a budget there are no marks: the run saves
    by ``checkpoint_every_steps`` / ``checkpoint_every_minutes`` only, as the paper does.
    """

    def __init__(self, train_steps: int, minutes: float | None, checkpoints_to_average: int,
                 window: float, spent_seconds: float = 0.0, start_step: int = 0,
                 clock=time.monotonic, seconds_per_step: float | None = None):
        self.train_steps = train_steps
        self.seconds = minutes * 60.0 if minutes else None
        self.spent_before = float(spent_seconds)
        self.clock = clock
        self.started = clock()
        self.paused = 0.0
        self.seconds_per_step = seconds_per_step
        self.steps_done = 0
        k = max(int(checkpoints_to_average), 1)
        self.window_start = 1.0 - window if k > 1 else 1.0
        self.marks = ([1.0 - window * (k - 1 - i) / (k - 1) for i in range(k - 1)]
                      if self.seconds and k > 1 else [])
        # A resumed run does not re-save for marks its checkpoints already passed.
        self.marks = [m for m in self.marks if m > self.progress(start_step)]

    def spent(self) -> float:
        """Budget seconds spent so far, this process and the runs before it together."""
        if self.seconds_per_step:
            return self.spent_before + self.steps_done * self.seconds_per_step
        return self.spent_before + self.clock() - self.started - self.paused

    def step_done(self) -> None:
        """Counts one optimizer step (the budget's clock when it counts steps)."""
        self.steps_done += 1

    def pause(self):
        """A context manager whose time does not count (validation)."""
        budget = self

        class _Paused:
            def __enter__(self):
                self.start = budget.clock()

            def __exit__(self, *exc):
                budget.paused += budget.clock() - self.start

        return _Paused()

    def progress(self, step: int) -> float:
        by_steps = step / self.train_steps
        return max(by_steps, self.spent() / self.seconds) if self.seconds else by_steps

    def out_of_time(self) -> bool:
        return self.seconds is not None and self.spent() >= self.seconds

    def in_window(self, step: int) -> bool:
        """Whether the run is in its averaging window (periodic saves would crowd it)."""
        return bool(self.seconds) and self.progress(step) >= self.window_start

    def averaging_checkpoint_due(self, step: int) -> bool:
        """True once per mark passed (several marks passed at once count as one)."""
        progress = self.progress(step)
        passed = [m for m in self.marks if m <= progress]
        if not passed:
            return False
        self.marks = [m for m in self.marks if m > progress]
        return True

    def remaining_minutes(self) -> float | None:
        return None if self.seconds is None else max(self.seconds - self.spent(), 0.0) / 60.0

"""What every training step leaves behind: its metrics record, the log line and the progress bar."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from tqdm import tqdm

from pipelines.training.config import METRICS_FILE
from pipelines.training.metrics_file import read_metrics, write_metrics

logger = logging.getLogger(__name__)


class StepLog:
    """The chief's record of a run: ``metrics.jsonl`` (one line per step), logs and the bar.

    On a resume the records of steps after the checkpoint (lost with the killed process, or
    written after its last save) are dropped first, so every step appears once. Other workers
    keep nothing. Under a time budget the bar counts minutes, as the number of steps is unknown.
    """

    def __init__(self, directory: Path, start_step: int, is_chief: bool, budget, train_steps: int,
                 progress_bar: bool, log_every: int | None):
        self.directory, self.is_chief, self.budget = directory, is_chief, budget
        self.train_steps, self.log_every = train_steps, log_every
        self.history: list[dict[str, Any]] = read_metrics(directory, start_step) if is_chief else []
        self.file = None
        if is_chief:
            write_metrics(directory, self.history)
            self.file = (directory / METRICS_FILE).open("a", encoding="utf-8")
        timed = bool(budget.seconds)
        self.bar = tqdm(total=round(budget.seconds / 60, 1) if timed else train_steps,
                        initial=round(budget.spent() / 60, 1) if timed else start_step,
                        unit="min" if timed else "step", desc="train",
                        # None: only on a terminal (tqdm's isatty check); a log gets the log lines
                        disable=None if progress_bar and is_chief else True, dynamic_ncols=True)

    def record(self, record: dict[str, Any]) -> None:
        """Keeps one step's record (before its checkpoint: a kill in between leaves a record newer
        than the newest checkpoint, which the resumed run drops and recomputes)."""
        if self.is_chief:
            self.history.append(record)
            self.file.write(json.dumps(record) + "\n")
            self.file.flush()

    def show(self, record: dict[str, Any]) -> None:
        if not self.is_chief:
            return
        step = record["step"]
        self.bar.set_postfix({"loss": f"{record['loss']:.3f}", "tok/s": f"{record['tokens_per_second']:.0f}",
                              "lr": f"{record['learning_rate']:.2e}"}, refresh=False)
        if self.budget.seconds:
            self.bar.n = min(round(self.budget.spent() / 60, 1), self.bar.total)  # no float drift
            self.bar.set_description(f"train step {step}", refresh=False)
        self.bar.update(0 if self.budget.seconds else 1)
        if self.log_every and step % self.log_every == 0:
            logger.info("%s loss %.4f acc %.3f lr %.3e tokens %d (%d batches) %.0f tok/s", self.where(step),
                        record["loss"], record["token_accuracy"], record["learning_rate"],
                        record["tokens"], record["batches"], record["tokens_per_second"])

    def where(self, step: int) -> str:
        """Where the run stands against what ends it: ``step 800/100000`` by steps; under a time
        budget its minutes (``step 800, 1.2 of 5.0 min``), and the step cap only when the pace so far
        reaches it before the budget ends (a preset's cap is far beyond a short budget)."""
        if not self.budget.seconds:
            return f"step {step}/{self.train_steps}"
        spent = self.budget.spent()
        minutes = f"{spent / 60:.1f} of {self.budget.seconds / 60:.1f} min"
        reaches_cap = spent > 0 and step * self.budget.seconds / spent >= self.train_steps
        return f"step {step}/{self.train_steps}, {minutes}" if reaches_cap else f"step {step}, {minutes}"

    def add_final_validation(self, step: int, validation: dict[str, float]) -> None:
        """The validation after the loop belongs to the last step's record."""
        if self.history and self.history[-1]["step"] == step:
            self.history[-1].update({f"val_{k}": v for k, v in validation.items()})
            write_metrics(self.directory, self.history)

    def close(self) -> None:
        self.bar.close()
        if self.file is not None:
            self.file.close()

"""The training's per-step records (``metrics.jsonl``): written by the step log, read by resumes and by
the tools that compare runs, which need no TensorFlow to read them."""

from __future__ import annotations

import json
from pathlib import Path

from keras_transformer.files import atomic_write_bytes
from pipelines.training.config import METRICS_FILE


def write_metrics(directory: Path, history: list[dict]) -> None:
    """Replaces ``directory``'s metrics file with ``history``, atomically."""
    atomic_write_bytes(Path(directory) / METRICS_FILE,
                       "".join(json.dumps(record) + "\n" for record in history).encode())


def read_metrics(checkpoint_dir: str | Path, up_to_step: int | None = None) -> list[dict]:
    """The per-step records of ``metrics.jsonl`` (a torn last line, from a kill, is skipped).

    With ``up_to_step``, records of later steps (computed after the checkpoint a run resumed
    from, then lost with the process) are dropped; a step that appears twice keeps its last
    record.
    """
    path = Path(checkpoint_dir) / METRICS_FILE
    records: dict[int, dict] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    for line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        step = record.get("step")
        if isinstance(step, int) and (up_to_step is None or step <= up_to_step):
            records[step] = record
    return [records[s] for s in sorted(records)]

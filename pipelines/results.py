"""What the engine's stages hand each other: one small type per stage, read by attribute.

A pipeline run is data -> vocabulary -> train -> average -> evaluate -> export. Each stage returns
a value of its own type, and the next stage and the tracking code read that value's attributes,
so a name means the same thing from the stage that makes it to the MLflow run that records it:
:class:`PreparedCorpus`, :class:`~pipelines.vocabulary.Vocabulary` (of model files),
:class:`TrainingSummary`, :class:`AveragedModel`, the task's
:class:`~pipelines.tasks.base.TaskEvaluation` and :class:`Export`.

The values cross boundaries: a Prefect task's result, the JSON a flow's command line prints and
the copy a run logs to MLflow. So each is plain data (strings, numbers, lists and dicts of them)
that :meth:`StageResult.to_dict` writes and :meth:`StageResult.from_dict` reads back equal.
Nothing here imports TensorFlow: the flows read these types before any stage runs.
"""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path
from typing import Any, TypeVar

R = TypeVar("R", bound="StageResult")


class StageResult:
    """A stage result's JSON form: its fields by name, nested results as their own dicts."""

    def to_dict(self) -> dict[str, Any]:
        return {field.name: _plain(getattr(self, field.name)) for field in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls: type[R], record: dict[str, Any]) -> R:
        """The result ``to_dict`` wrote (nested results read as their types); keys it does not
        know are an error, not dropped."""
        hints = typing.get_type_hints(cls)
        names = {field.name for field in dataclasses.fields(cls)}
        unknown = set(record) - names
        if unknown:
            raise ValueError(f"{cls.__name__}: unknown fields {sorted(unknown)}")
        return cls(**{name: _typed(hints[name], value) for name, value in record.items()})


def _typed(hint: Any, value: Any) -> Any:
    """``value`` as the stage result ``hint`` names (also ``X | None``), else as it is."""
    if value is None:
        return None
    for candidate in (hint, *typing.get_args(hint)):
        origin = typing.get_origin(candidate) or candidate
        if isinstance(origin, type) and issubclass(origin, StageResult):
            return origin.from_dict(value)
    return value


def _plain(value: Any) -> Any:
    if isinstance(value, StageResult):
        return value.to_dict()
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


@dataclasses.dataclass(frozen=True)
class PreparedCorpus(StageResult):
    """The data stage's output: the directory of a verified :class:`~pipelines.corpus.Corpus`."""

    directory: str

    @property
    def manifest(self) -> Path:
        """What the corpus holds and the checksums it is verified by."""
        return Path(self.directory) / "manifest.json"


@dataclasses.dataclass(frozen=True)
class TrainingSummary(StageResult):
    """What the train stage hands on: :class:`~pipelines.training.TrainResult` without the model
    in memory or the per-step history (both stay in the process and the run's ``metrics.jsonl``).

    ``validation``: the final validation's metrics (``loss``, ``perplexity``, ...), empty if the
    run did not validate; ``train_seconds``: the training loop's time over every attempt;
    ``distribution``: how it trained (strategy, replicas, workers, precision), the run's
    ``training.*`` tags.
    """

    final_step: int
    start_step: int
    checkpoint_dir: str
    checkpoints: list[str]
    validation: dict[str, float]
    train_seconds: float
    parameters: int
    distribution: dict[str, Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, result: Any) -> TrainingSummary:
        """The summary of a ``TrainResult`` (typed ``Any``: that module imports TensorFlow)."""
        return cls(final_step=result.final_step, start_step=result.start_step,
                   checkpoint_dir=str(result.checkpoint_dir), checkpoints=list(result.checkpoints),
                   validation=dict(result.validation or {}), train_seconds=float(result.train_seconds),
                   parameters=int(result.model.count_params()), distribution=dict(result.distribution))

    @property
    def train_minutes(self) -> float:
        return self.train_seconds / 60

    def metrics(self) -> dict[str, float]:
        """The numbers a run records at its final step: the last point of the ``val_*`` curves,
        the training minutes and the parameter count."""
        return {**{f"val_{key}": value for key, value in self.validation.items()},
                "train_minutes": self.train_minutes, "parameters": self.parameters}

    def tags(self) -> dict[str, str]:
        """How it trained, as a run's tags: ``training.strategy``, ``training.replicas``, ..."""
        return {f"training.{key}": str(value) for key, value in self.distribution.items()}


@dataclasses.dataclass(frozen=True)
class AveragedModel(StageResult):
    """The averaging stage's output: the ``.keras`` model evaluated and exported, and the
    checkpoints averaged into it."""

    path: str
    checkpoints: list[str]
    #: What the task's calibration chose for the model's decoding (a span parser's bias), if anything.
    calibration: dict[str, Any] | None = None


@dataclasses.dataclass(frozen=True)
class Export(StageResult):
    """The export stage's output: a SavedModel that decodes raw strings with ``settings`` (its
    ``DecodingSettings``, or a chart parser's search and bias), as the evaluation decoded."""

    directory: str
    settings: dict[str, Any]

"""What a task implements to run on the shared engine: prepare data, score decoded output.

A task (translation, the constituency parsing of section 6.3, a third one) turns its raw data
into a :class:`~pipelines.corpus.Corpus` of source/target lines and scores what the model
decodes for a split of it. Everything between (vocabularies, input pipeline, training, checkpoint
averaging, beam search, export, tracking) is the engine's and the same for every task; the
flows in ``flows/pipeline.py`` run those stages for any :class:`Task`.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pipelines.results import StageResult


@dataclass
class TaskEvaluation(StageResult):
    """The evaluation stage's result: flat numbers, the full record, examples to show, a headline.

    ``primary`` names the metric in ``metrics`` that decides which of two models is better
    (higher wins: BLEU for translation, labelled F1 for parsing); ``record`` is the task's
    ``scores.json``, whose ``evaluation`` section says what was scored and how.
    """

    metrics: dict[str, float]
    primary: str
    record: dict[str, Any] = field(default_factory=dict)
    examples: list[dict[str, str]] = field(default_factory=list)
    output_dir: Path | None = None
    #: The sentence a user reads first (scores beside the task's trivial baselines).
    headline: str = ""
    #: Tables a user reads in the MLflow UI, by name: files in ``output_dir`` in the
    #: ``{"columns": [...], "data": [[...], ...]}`` form (e.g. each sentence and its score).
    tables: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.output_dir is not None:  # a path again when read back from its JSON form
            self.output_dir = Path(self.output_dir)

    @property
    def score(self) -> float:
        return float(self.metrics[self.primary])

    @property
    def split(self) -> str:
        return self.record["evaluation"]["split"]

    @property
    def identity(self) -> dict[str, Any]:
        """What makes two evaluations the same: the split, its corpus' fingerprint, how many
        sentences and the evaluation settings (two models compare only on the same one)."""
        evaluation = self.record.get("evaluation", {})
        return {key: evaluation.get(key) for key in ("split", "corpus_fingerprint", "num_sentences", "config")}

    def text_tags(self, record: dict[str, Any] | None = None, prefix: str = "") -> dict[str, str]:
        """The record's text worth a tag (sacreBLEU signatures, labels), keyed by its path."""
        tags: dict[str, str] = {}
        for key, value in (self.record if record is None else record).items():
            if isinstance(value, dict):
                tags.update(self.text_tags(value, f"{prefix}{key}."))
            elif isinstance(value, str) and ("signature" in key or key == "label"):
                tags[f"{prefix}{key}"] = value
        return tags


class Task(abc.ABC):
    """One task on the engine. Subclasses name their data and evaluation config classes."""

    #: Short name: flow names, MLflow experiment and registered-model names start with it.
    name: ClassVar[str]
    #: Dataclass of the data stage's settings (the pipeline config's ``data`` section).
    data_config: ClassVar[type]
    #: Dataclass of the evaluation stage's settings (the ``evaluation`` section).
    eval_config: ClassVar[type]
    #: Whether source and target share one vocabulary (True), must not (False), or either.
    shared_vocabulary: ClassVar[bool | None] = None
    #: Whether :meth:`calibrate` chooses anything (the pipeline runs its stage only then).
    calibrates: ClassVar[bool] = False
    #: Whether its pairs are paragraphs that ``input.sentence_pairs`` may cut into sentence pairs.
    paragraph_pairs: ClassVar[bool] = False
    #: How a model is found again: the data settings that make two runs the same problem.
    identity_fields: ClassVar[tuple[str, ...]] = ()
    #: Sections of the pipeline config only this task has, by name: their settings' dataclasses.
    sections: ClassVar[dict[str, type]] = {}

    @abc.abstractmethod
    def default_data_dir(self, data_config: Any) -> str:
        """Where the prepared corpus goes under ``run_dir`` when the config names no directory."""

    @abc.abstractmethod
    def prepare_data(self, data_config: Any) -> Path:
        """Writes (or verifies) the prepared corpus and returns its directory."""

    @abc.abstractmethod
    def evaluate(self, translator: Any, corpus_dir: Path, eval_config: Any,
                 output_dir: Path) -> TaskEvaluation:
        """Decodes a split with ``translator`` (a ``Translator`` or export), scores it, writes the files."""

    def calibrate(self, model_path: Path, tokenizers: Any, corpus_dir: Path, output_path: Path) -> tuple[Path, Any]:
        """The model to evaluate and ship, with decoding settings chosen on the validation split,
        and a record of the choice; by default ``(model_path, None)``: nothing to choose."""
        return model_path, None

    def decoding_constraint(self, target_tokenizer: Any, eos_id: int, eval_config: Any = None) -> Any:
        """The beam search's constraint for this task's outputs (``None``: unconstrained); the
        evaluation and the export decode with the same one."""
        return None

    def identity(self, data_config: Any) -> str:
        """``name`` plus the identifying data settings, e.g. ``translation-ddtp-en-de``."""
        parts = [self.name, *(str(getattr(data_config, f)) for f in self.identity_fields)]
        return "-".join(part for part in parts if part)

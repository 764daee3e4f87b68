"""What a pipeline run returns and what its registration decided, typed like its stages' results.

A flow run's result is one :class:`RunResult`: the MLflow run, and each stage's result
(:mod:`pipelines.results`) under the stage's name, so a caller reads ``result.training.final_step``
or ``result.evaluation.score`` rather than keys renamed on the way. The command line prints its
:meth:`~pipelines.results.StageResult.to_dict`; :meth:`~pipelines.results.StageResult.from_dict`
reads that back.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipelines.results import AveragedModel, Export, PreparedCorpus, StageResult, TrainingSummary
from pipelines.tasks.base import TaskEvaluation
from pipelines.vocabulary import Vocabulary


@dataclass(frozen=True)
class Promotion(StageResult):
    """The registration stage's decision (:func:`flows.registry.promote`): whether version
    ``challenger_version`` of ``model`` became the champion, and why. The champion's fields are
    None when there was no champion; ``evaluation_key`` names the evaluation both were scored on."""

    model: str
    challenger_version: str
    metric: str
    challenger_score: float
    evaluation_key: str
    promoted: bool
    reason: str
    champion_version: str | None = None
    champion_score: float | None = None


@dataclass(frozen=True)
class RunResult(StageResult):
    """One pipeline run: its MLflow run and working directory, and every stage's result.

    ``export`` is None when the run does not export, ``promotion`` when it does not register.
    """

    run_id: str
    task: str
    run_path: str
    corpus: PreparedCorpus
    vocabulary: Vocabulary[str]
    training: TrainingSummary
    model: AveragedModel
    evaluation: TaskEvaluation
    export: Export | None = None
    promotion: Promotion | None = None
    #: The run's page in MLflow's UI, model-training view (a local store's: once ``make ui`` runs).
    page: str = ""

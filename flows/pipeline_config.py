"""The settings of a whole pipeline run, the directories it writes and the state it leaves.

One YAML file configures a run; each section is the typed config of one stage, and a task's
config (:func:`flows.task_flows.pipeline_config_class`) types the ``data`` and ``evaluation``
sections with its own stage configs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from flows.retention import RetentionConfig
from flows.tracking import TrackingConfig
from pipelines.averaging import AveragingConfig
from pipelines.config import ConfigError, SettingError, load_config, merge
from pipelines.input_pipeline import InputConfig
from pipelines.tasks.base import Task
from pipelines.tokenization import TokenizerConfig
from pipelines.training import TrainConfig

#: Placeholder for the MLflow run id in ``train.checkpoint_dir``.
RUN_ID = "{run_id}"


@dataclass
class ExportConfig:
    """The export stage: what the run ships, logged as its MLflow model and served by ``make serve``."""

    #: Export the model and log it as an MLflow pyfunc model (``export: false`` says the same).
    enabled: bool = True
    #: ``savedmodel`` (TensorFlow: tokenization and beam search in one graph) or ``ctranslate2`` (the
    #: CTranslate2 CPU engine, several times faster on CPUs; needs the ``ctranslate2`` extra). A
    #: ``ctranslate2`` export's engine options are chosen on the validation split and the evaluation scores
    #: its translations too: what is served is what was scored.
    format: str = "savedmodel"
    #: A ``ctranslate2`` export's weights: ``int8`` or ``float32``.
    quantization: str = "int8"

    def __post_init__(self) -> None:
        import importlib.util

        from keras_transformer.decoding.formats import EXPORT_FORMATS, QUANTIZATIONS

        if self.format not in EXPORT_FORMATS:
            raise SettingError(self, "format", f"use one of {', '.join(EXPORT_FORMATS)}")
        if self.quantization not in QUANTIZATIONS:
            raise SettingError(self, "quantization", f"use one of {', '.join(QUANTIZATIONS)}")
        if self.format == "ctranslate2" and importlib.util.find_spec("ctranslate2") is None:
            raise SettingError(self, "format", "needs the ctranslate2 package: "
                               "pip install 'keras-transformer[ctranslate2]'")

    @property
    def engine(self) -> bool:
        """Whether the export runs on another engine than the evaluated model's (scored again)."""
        return self.enabled and self.format != "savedmodel"


@dataclass
class PipelineConfig:
    """One file configures the whole run; each section is the config of one stage.

    A task's config subclasses this, typing ``data`` and ``evaluation`` with its own stage
    configs and naming itself in ``task``. Paths left empty in a section are placed under
    ``run_dir``. What every run shares: ``data/``, ``cache/`` (token ids), ``tokenizer/``, the
    MLflow store. What each MLflow run owns, under ``runs/<run id>/`` (:meth:`run_paths`):
    ``train/`` (checkpoints), ``averaged/``, ``evaluation/``, ``export/``.
    """

    task: ClassVar[Task]

    #: The run's folder: the data, cache, tokenizer, MLflow store and every run's files go under it.
    run_dir: str = "runs/demo"
    #: The data stage: the task's data config (translation's sources, parsing's treebank).
    data: Any = None
    #: The vocabulary stage (SentencePiece).
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    #: The input pipeline: batching by length, caching of token ids.
    input: InputConfig = field(default_factory=InputConfig)
    #: The training stage: preset, recipe overrides, checkpoints, devices.
    train: TrainConfig = field(default_factory=TrainConfig)
    #: The checkpoint averaging stage (section 6.1).
    averaging: AveragingConfig = field(default_factory=AveragingConfig)
    #: The evaluation stage: the task's evaluation config (BLEU and chrF, or EVALB's F1).
    evaluation: Any = None
    #: MLflow: where runs are recorded, and the registered model a run competes in.
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    #: Which earlier runs keep their checkpoints and models (:mod:`flows.retention`).
    retention: RetentionConfig = field(default_factory=RetentionConfig)
    #: The export stage (:class:`ExportConfig`; ``true``/``false``: a SavedModel or none).
    export: ExportConfig | bool = field(default_factory=ExportConfig)
    #: ``auto`` continues this run_dir's unfinished MLflow run if it trained with the same settings; ``never`` always
    #: starts a new one (:mod:`flows.run_state`).
    resume: str = "auto"
    #: An MLflow run to continue (``--run-id``); null: chosen by ``resume``.
    run_id: str | None = None

    def __post_init__(self) -> None:
        run = Path(self.run_dir)
        if isinstance(self.export, bool):
            self.export = ExportConfig(enabled=self.export)
        if self.data is None:
            self.data = self.task.data_config()
        if self.evaluation is None:
            self.evaluation = self.task.eval_config()
        if not self.data.output_dir:
            self.data.output_dir = str(run / self.task.default_data_dir(self.data))
        if not self.tracking.experiment:
            self.tracking.experiment = f"transformer-{self.task.name}"
        if not self.input.cache_dir:
            self.input.cache_dir = str(run / "cache")
        # Not chosen: each MLflow run gets its own (an explicit directory is kept, whatever it is).
        if not self.train.checkpoint_dir:
            self.train.checkpoint_dir = str(run / "runs" / RUN_ID / "train")
        shared = self.task.shared_vocabulary
        if shared is not None and self.tokenizer.shared != shared:
            raise ConfigError(f"tokenizer.shared={self.tokenizer.shared}: the {self.task.name} task needs "
                              f"{'one shared vocabulary' if shared else 'separate source and target vocabularies'}"
                              f" (tokenizer.shared: {str(shared).lower()})")
        if self.input.sentence_pairs != "none" and not self.task.paragraph_pairs:
            raise ConfigError(f"input.sentence_pairs={self.input.sentence_pairs!r}: cuts translation paragraphs into "
                              f"sentence pairs; the {self.task.name} task's pairs are not paragraphs (use 'none')")
        if self.resume not in ("auto", "never"):
            raise ConfigError(f"resume={self.resume!r}: expected 'auto' or 'never'")
        self._check_enough_checkpoints()

    def _check_enough_checkpoints(self) -> None:
        # Averaging needs last_n checkpoints; find out now rather than after hours of training.
        resolved = self.train.resolved()
        if resolved.train_minutes:
            return  # under a time budget the trainer saves them in the run's final stretch
        last_n = self.averaging.last_n or resolved.checkpoints_to_average
        every, steps = self.train.checkpoint_every_steps, resolved.train_steps
        if every:
            saved = steps // every + (1 if steps % every else 0)
            if saved < last_n:
                raise ConfigError(
                    f"train.train_steps={steps} with train.checkpoint_every_steps={every} saves "
                    f"{saved} checkpoint(s), but averaging needs the last {last_n} "
                    f"(averaging.last_n or preset '{self.train.preset}'): lower "
                    "checkpoint_every_steps or averaging.last_n"
                )

    @property
    def registered_model(self) -> str:
        """The registered model this run's model competes in (``tracking.registered_model``, else
        the experiment's name: one per purpose, never shared by two configs)."""
        return self.tracking.registered_model or self.tracking.experiment

    @property
    def tokenizer_dir(self) -> Path:
        return Path(self.run_dir) / "tokenizer"

    @property
    def latest_link(self) -> Path:
        return Path(self.run_dir) / "latest"

    def run_paths(self, run_id: str) -> RunPaths:
        """The directories MLflow run ``run_id`` writes to."""
        work = Path(self.run_dir) / "runs" / run_id
        train = Path(self.train.checkpoint_dir.replace(RUN_ID, run_id))
        return RunPaths(work, train, work / "averaged", work / "evaluation", work / "export",
                        work / "export-evaluation")


@dataclass(frozen=True)
class RunPaths:
    """Where one MLflow run's stages write (see :class:`PipelineConfig`)."""

    work: Path
    train: Path
    averaged: Path
    evaluation: Path
    export: Path
    #: The evaluation of an export that runs on another engine (``export.format``).
    export_evaluation: Path

    @property
    def calibrated(self) -> Path:
        """The model with its decoding settings chosen on the validation split (a span parser's bias)."""
        return self.averaged / "calibrated.keras"


def point_latest_at(link: Path, target: Path) -> None:
    """Makes ``link`` a relative symlink to ``target``, replacing the old one atomically."""
    temporary = link.with_name(link.name + ".tmp")
    temporary.unlink(missing_ok=True)
    temporary.symlink_to(Path(target).relative_to(link.parent))
    temporary.replace(link)


def load_pipeline_config(cls: type[PipelineConfig], path: str | Path, overrides: dict[str, Any] | None = None,
                         overrides_source: str = "overrides") -> PipelineConfig:
    """The pipeline config of a YAML file; ``overrides`` is a nested dict applied on top (errors in
    it are said to come from ``overrides_source``, e.g. ``--set``)."""
    return load_config(cls, path, overrides=overrides, overrides_source=overrides_source)


def parse_overrides(settings: list[str]) -> dict[str, Any]:
    """``["train.train_minutes=5", ...]`` as the nested dict ``load_config`` merges."""
    import yaml

    overrides: dict[str, Any] = {}
    for setting in settings:
        key, sep, value = setting.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {setting!r}: expected SECTION.KEY=VALUE")
        nested: Any = yaml.safe_load(value) if value else None
        for part in reversed(key.strip().split(".")):
            nested = {part: nested}
        overrides = merge(overrides, nested)
    return overrides

"""The tasks' flows as data: one :class:`TaskFlow` per task, one flow and command line built from it.

Every task runs the same pipeline (:func:`flows.pipeline.run_pipeline`); what differs is the task
(:class:`~pipelines.tasks.base.Task`: its data and evaluation settings), the config used when none
is given, and the pre-flight check of its data settings. Those are the fields of a
:class:`TaskFlow`; its pipeline config class and its Prefect flow are made from them, and its
command line (:func:`flows.cli.main`) runs it. ``flows/translation.py`` and ``flows/parsing.py`` only
name their :class:`TaskFlow`, so that ``python -m flows.translation`` and the deployments'
entrypoints (``prefect.yaml``) stay as they are.

Nothing here imports Prefect, MLflow or TensorFlow: the command line reads the settings with this
module and answers ``--help`` or a settings error in about a second; the flow imports Prefect.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flows.pipeline_config import PipelineConfig, load_pipeline_config
from flows.preflight import check_parallel_files, existing_path
from flows.results import RunResult
from pipelines.tasks.base import Task
from pipelines.tasks.parsing.task import ParsingTask
from pipelines.tasks.translation.task import TranslationTask


def pipeline_config_class(task: Task) -> type[PipelineConfig]:
    """The pipeline settings of ``task``: :class:`PipelineConfig` with ``data`` and ``evaluation``
    typed by the task's data and evaluation configs (what a YAML file's sections are read as)."""
    name = f"{task.name.capitalize()}PipelineConfig"
    sections = [(section, config, dataclasses.field(default_factory=config))
                for section, config in (("data", task.data_config), ("evaluation", task.eval_config),
                                        *task.sections.items())]
    doc = (f"The {task.name} pipeline's settings: ``data`` read as {task.data_config.__name__}, "
           f"``evaluation`` as {task.eval_config.__name__}.")
    return dataclasses.make_dataclass(name, sections, bases=(PipelineConfig,),
                                      namespace={"task": task, "__doc__": doc, "__module__": __name__})


@dataclasses.dataclass(frozen=True)
class TaskFlow:
    """What one task's flow is made of.

    ``config_class``: its pipeline settings (:func:`pipeline_config_class`); ``default_config``:
    the YAML file used without ``--config``; ``summary``: what the flow does, the command line's
    description and the flow's; ``check_data``: the pre-flight check of the ``data`` section
    (:mod:`flows.preflight`), run before anything is imported or started.
    """

    config_class: type[PipelineConfig]
    default_config: str
    summary: str
    check_data: Callable[[Any], None]

    @property
    def name(self) -> str:
        return self.config_class.task.name

    @property
    def command(self) -> str:
        return f"python -m flows.{self.name}"

    def load_config(self, path: str | Path, overrides: dict[str, Any] | None = None) -> PipelineConfig:
        return load_pipeline_config(self.config_class, path, overrides)

    def flow(self):
        """The task's Prefect flow, ``transformer-<task>`` (one object per task: built once)."""
        return _flow_of(self.name)


def check_translation_data(data: Any) -> None:
    """The folders the data stage would read, there before anything starts, and a folder's parallel
    files named as it expects, UTF-8, not empty and aligned (:func:`flows.preflight.check_parallel_files`)."""
    existing_path("data.translations_dir", data.translations_dir)
    if data.source == "folder":
        from pipelines.tasks.translation.sources.folder import find_folder_files
        from pipelines.textfiles import DataError

        existing_path("data.folder", data.folder)
        try:
            check_parallel_files(find_folder_files(Path(data.folder).expanduser(), data.source_lang,
                                                   data.target_lang, data.folder_name))
        except DataError as err:
            raise DataError(f"data.folder: {err}") from err


def check_parsing_data(data: Any) -> None:
    """The treebank the data stage would read, there before anything starts."""
    from pipelines.tasks.parsing.treebank import HOW_TO_GET_SAMPLE

    existing_path("data.path", data.path, HOW_TO_GET_SAMPLE)


TranslationPipelineConfig = pipeline_config_class(TranslationTask())
ParsingPipelineConfig = pipeline_config_class(ParsingTask())

TRANSLATION = TaskFlow(
    TranslationPipelineConfig, "configs/translation/demo.yaml",
    "Data -> vocabulary -> train -> average -> evaluate (-> export), tracked in MLflow: the corpus (bundled "
    "Debian DDTP translations, WMT14 or a folder), one shared vocabulary, beam-search translations scored "
    "with sacreBLEU.",
    check_translation_data)
PARSING = TaskFlow(
    ParsingPipelineConfig, "configs/parsing/sample-cpu.yaml",
    "Treebank -> vocabularies -> train -> average -> parse and score (-> export), tracked in MLflow: the Penn "
    "Treebank (NLTK's sample or the LDC WSJ treebank) linearised, separate word and tree-symbol vocabularies, "
    "the test split parsed with beam search and scored like EVALB beside two baselines (section 6.3).",
    check_parsing_data)
#: The tasks by name (an ablation file's ``task``).
TASK_FLOWS = {spec.name: spec for spec in (TRANSLATION, PARSING)}


def _flow_run_name(spec: TaskFlow) -> Callable[[], str]:
    """The name of each flow run of ``spec``'s flow (Prefect's ``flow_run_name``): the tracking run
    name the settings give (an ablation's variant), else :func:`run_name` of their preset. The
    settings are read as YAML only: a file that does not load fails in the flow, with its message."""
    def name() -> str:
        import yaml
        from prefect.runtime import flow_run

        from flows.ui import run_name
        from pipelines.config import merge

        parameters = flow_run.parameters or {}
        try:
            settings = yaml.safe_load(Path(parameters.get("config_path") or spec.default_config).read_text("utf-8"))
            settings = merge(settings or {}, parameters.get("overrides") or {})
            given = (settings.get("tracking") or {}).get("run_name")
            preset = (settings.get("train") or {}).get("preset")
        except Exception:  # noqa: BLE001  (a name is not worth failing the run for)
            given = preset = None
        return given or run_name(spec.name, preset)

    return name


@functools.cache
def _flow_of(name: str):
    from prefect import flow

    spec = TASK_FLOWS[name]

    def pipeline(config_path: str = spec.default_config, overrides: dict | None = None) -> RunResult:
        """Runs the pipeline of the YAML file ``config_path`` with ``overrides`` applied over it.

        Args:
            config_path: The pipeline's YAML file, relative to the checkout (configs/translation/,
                configs/parsing/): one section per stage (data, tokenizer, input, train, averaging,
                evaluation, tracking, retention, export).
            overrides: Settings applied over the file, nested by section as in it, e.g.
                {"train": {"train_steps": 20}, "evaluation": {"max_sentences": 50}} or
                {"run_dir": "runs/other", "resume": "never"}; empty: the file as it is.
        """
        from flows.pipeline import run_pipeline

        return run_pipeline(spec.load_config(config_path, overrides))

    pipeline.__name__ = pipeline.__qualname__ = f"{name}_pipeline"
    return flow(pipeline, name=f"transformer-{name}", description=spec.summary, log_prints=False,
                flow_run_name=_flow_run_name(spec))

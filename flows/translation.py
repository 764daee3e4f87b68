"""The translation pipeline as a Prefect flow (the shared stages of ``flows/pipeline.py``).

Prepares the corpus (bundled Debian DDTP translations, WMT14 or a folder), trains the shared
vocabulary and the model, averages the last checkpoints and scores beam-search translations with
sacreBLEU, all tracked in one MLflow run.

    python -m flows.translation --config configs/translation/demo.yaml
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flows.pipeline_config import PipelineConfig, load_pipeline_config
from flows.preflight import existing_path
from pipelines.tasks.translation.evaluation import EvalConfig
from pipelines.tasks.translation.sources import SourceConfig
from pipelines.tasks.translation.task import TranslationTask

DEFAULT_CONFIG = "configs/translation/demo.yaml"


@dataclass
class TranslationPipelineConfig(PipelineConfig):
    """The translation pipeline's settings: ``data`` is the corpus, ``evaluation`` BLEU's."""

    task = TranslationTask()
    data: SourceConfig = field(default_factory=SourceConfig)
    evaluation: EvalConfig = field(default_factory=EvalConfig)


def load_translation_config(path: str | Path, overrides: dict[str, Any] | None = None) -> TranslationPipelineConfig:
    return load_pipeline_config(TranslationPipelineConfig, path, overrides)


def check_data(data: SourceConfig) -> None:
    """The folders the data stage would read, there (and the parallel files named as it expects)
    before anything starts (:mod:`flows.preflight`); their contents are the stage's to check."""
    existing_path("data.translations_dir", data.translations_dir)
    if data.source == "folder":
        from pipelines.tasks.translation.sources.folder import find_folder_files
        from pipelines.textfiles import DataError

        existing_path("data.folder", data.folder)
        try:
            find_folder_files(Path(data.folder).expanduser(), data.source_lang, data.target_lang, data.folder_name)
        except DataError as err:
            raise DataError(f"data.folder: {err}") from err

# The command line (flows.cli) checks the settings before Prefect is imported: --help and a settings
# error answer in about a second. It imports this module again, by name, for the flow below.
if __name__ == "__main__":
    from flows.cli import main

    sys.exit(main("python -m flows.translation", "flows.translation:translation_pipeline", TranslationPipelineConfig,
                  DEFAULT_CONFIG, __doc__, check_data))

from prefect import flow  # noqa: E402  (after the command line, which must not wait for it)


@flow(name="transformer-translation", log_prints=False)
def translation_pipeline(config_path: str = DEFAULT_CONFIG, overrides: dict | None = None) -> dict[str, Any]:
    """Data -> vocabulary -> train -> average -> evaluate (-> export), tracked in MLflow.

    ``overrides`` is a nested dict applied over the YAML file, e.g.
    ``{"train": {"train_steps": 20}}``; a deployment passes it as a parameter.
    """
    from flows.pipeline import run_pipeline

    return run_pipeline(load_translation_config(config_path, overrides))

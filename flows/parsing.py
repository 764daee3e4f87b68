"""The constituency-parsing pipeline of section 6.3 as a Prefect flow (the shared stages of
``flows/pipeline.py``).

Reads the Penn Treebank (NLTK's sample or the LDC WSJ treebank), linearises its trees, trains
separate word and tree-symbol vocabularies and the model, averages the last checkpoints, parses
the test split with beam search (21, alpha 0.3, input + 300) and scores it like EVALB beside two
baselines, all tracked in one MLflow run.

    python -m flows.parsing --config configs/parsing/sample-cpu.yaml
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flows.pipeline_config import PipelineConfig, load_pipeline_config
from flows.preflight import existing_path
from pipelines.tasks.parsing.data import TreebankConfig
from pipelines.tasks.parsing.evaluation import ParseEvalConfig
from pipelines.tasks.parsing.task import ParsingTask

DEFAULT_CONFIG = "configs/parsing/sample-cpu.yaml"


@dataclass
class ParsingPipelineConfig(PipelineConfig):
    """The parsing pipeline's settings: ``data`` is the treebank, ``evaluation`` EVALB's."""

    task = ParsingTask()
    data: TreebankConfig = field(default_factory=TreebankConfig)
    evaluation: ParseEvalConfig = field(default_factory=ParseEvalConfig)


def load_parsing_config(path: str | Path, overrides: dict[str, Any] | None = None) -> ParsingPipelineConfig:
    return load_pipeline_config(ParsingPipelineConfig, path, overrides)


def check_data(data: TreebankConfig) -> None:
    """The treebank the data stage would read, there before anything starts (:mod:`flows.preflight`)."""
    from pipelines.tasks.parsing.treebank import HOW_TO_GET_SAMPLE

    existing_path("data.path", data.path, HOW_TO_GET_SAMPLE)

# The command line (flows.cli) checks the settings before Prefect is imported: --help and a settings
# error answer in about a second. It imports this module again, by name, for the flow below.
if __name__ == "__main__":
    from flows.cli import main

    sys.exit(main("python -m flows.parsing", "flows.parsing:parsing_pipeline", ParsingPipelineConfig,
                  DEFAULT_CONFIG, __doc__, check_data))

from prefect import flow  # noqa: E402  (after the command line, which must not wait for it)


@flow(name="transformer-parsing", log_prints=False)
def parsing_pipeline(config_path: str = DEFAULT_CONFIG, overrides: dict | None = None) -> dict[str, Any]:
    """Treebank -> vocabularies -> train -> average -> parse and score (-> export), tracked in MLflow."""
    from flows.pipeline import run_pipeline

    return run_pipeline(load_parsing_config(config_path, overrides))

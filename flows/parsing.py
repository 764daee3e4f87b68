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

from prefect import flow

from flows.pipeline import PipelineConfig, load_pipeline_config, main, run_pipeline
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


@flow(name="transformer-parsing", log_prints=False)
def parsing_pipeline(config_path: str = DEFAULT_CONFIG, overrides: dict | None = None) -> dict[str, Any]:
    """Treebank -> vocabularies -> train -> average -> parse and score (-> export), tracked in MLflow."""
    return run_pipeline(load_parsing_config(config_path, overrides))


if __name__ == "__main__":
    sys.exit(main(parsing_pipeline, DEFAULT_CONFIG, __doc__))

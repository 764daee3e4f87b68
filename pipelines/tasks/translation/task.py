"""Translation as a task on the shared engine: the data stage and BLEU/chrF evaluation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipelines.tasks.base import Task, TaskEvaluation
from pipelines.tasks.translation.evaluation import EvalConfig
from pipelines.tasks.translation.sources import SourceConfig
from pipelines.tasks.translation.student import SyntheticConfig


class TranslationTask(Task):
    """Bundled DDTP, WMT14 or a folder of parallel files; scored by sacreBLEU (section 6.1)."""

    name = "translation"
    data_config = SourceConfig
    eval_config = EvalConfig
    shared_vocabulary = True
    paragraph_pairs = True
    identity_fields = ("source", "language_pair")
    sections = {"synthetic": SyntheticConfig}

    def default_data_dir(self, data_config: SourceConfig) -> str:
        return f"data/{data_config.source}-{data_config.language_pair}"

    def prepare_data(self, data_config: SourceConfig) -> Path:
        from pipelines.tasks.translation.sources import prepare_corpus

        return prepare_corpus(data_config)

    def evaluate(self, translator: Any, corpus_dir: Path, eval_config: EvalConfig,
                 output_dir: Path) -> TaskEvaluation:
        from pipelines.corpus import Corpus
        from pipelines.tasks.translation.evaluation import evaluate
        from pipelines.tasks.translation.reading import TABLE_FILE

        result = evaluate(translator, Corpus.load(corpus_dir), config=eval_config, output_dir=output_dir)
        tables = {"sentences": TABLE_FILE, **{f"{split}_sentences": f"{split}/{TABLE_FILE}" for split in result.others}}
        return TaskEvaluation(metrics=result.metrics(), primary="bleu", record=result.scores,
                              examples=result.examples(3), output_dir=Path(output_dir), tables=tables,
                              headline=result.headline(eval_config.split))

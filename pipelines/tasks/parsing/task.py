"""Constituency parsing (section 6.3) as a task on the shared engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipelines.tasks.base import Task, TaskEvaluation

from .data import TreebankConfig
from .evaluation import ParseEvalConfig, headline


class ParsingTask(Task):
    """Penn Treebank trees as (words, linearised tree) pairs; scored like EVALB (labelled F1)."""

    name = "parsing"
    data_config = TreebankConfig
    eval_config = ParseEvalConfig
    # Words and tree symbols are different languages: separate vocabularies (section 6.3).
    shared_vocabulary = False
    # A span parser's constituent bias is chosen on the validation split.
    calibrates = True
    identity_fields = ("kind",)

    def default_data_dir(self, data_config: TreebankConfig) -> str:
        return f"data/treebank-{data_config.kind}"

    def prepare_data(self, data_config: TreebankConfig) -> Path:
        from .data import prepare_treebank

        return prepare_treebank(data_config)

    def calibrate(self, model_path: Path, tokenizers: Any, corpus_dir: Path, output_path: Path) -> tuple[Path, Any]:
        """A span parser's constituent bias, chosen on the validation split (:mod:`.calibration`)."""
        from pipelines.corpus import Corpus

        from .calibration import calibrate

        return calibrate(model_path, tokenizers.source, Corpus.load(corpus_dir), output_path)

    def decoding_constraint(self, target_tokenizer: Any, eos_id: int, eval_config: Any = None) -> Any:
        """Section 6.3's outputs are trees: one POS slot per word, balanced matching brackets."""
        from .evaluation import tree_constraint_for

        return tree_constraint_for(target_tokenizer, eos_id)

    def evaluate(self, translator: Any, corpus_dir: Path, eval_config: ParseEvalConfig,
                 output_dir: Path) -> TaskEvaluation:
        from pipelines.corpus import Corpus

        from .evaluation import evaluate_parser, metrics

        record = evaluate_parser(translator, Corpus.load(corpus_dir), eval_config, output_dir)
        return TaskEvaluation(metrics=metrics(record, eval_config.cutoff_len), primary="f1",
                              record=record, examples=record["examples"], output_dir=Path(output_dir),
                              headline=headline(record))

"""The training stage on a prepared corpus: batches, vocabulary checks, then :func:`train`.

A run may finish on another corpus (``finish_on``): a student trained on real and synthetic pairs
spends the last share of its budget on the real pairs alone, the order in which the synthetic ones
paid (He et al., 2020). The switch is recorded beside the checkpoints (:data:`SWITCH_FILE`), so a
resumed run reads the corpus its newest checkpoint's stream position belongs to.

What the command line (:mod:`pipelines.training.cli`), the pipeline flow and the recipe search's
step-time calibration share: the token-bucketed batches of the corpus' train split (one input
pipeline per worker), the validation batches, the check that the model's vocabulary sizes and
special ids are the tokenizers', and the vocabulary record that ties checkpoints to them.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tensorflow as tf

from keras_transformer.models.span_parser.targets import missing_symbols
from keras_transformer.tokenizer import SubwordTokenizer
from pipelines.corpus import Corpus
from pipelines.input_pipeline import InputConfig, make_dataset
from pipelines.input_reports import DROPPED_TOKENS_WARNING, length_report
from pipelines.tokenization import vocabulary_record
from pipelines.training.checkpointing import consumed_batches
from pipelines.training.config import DEFAULT_CHECKPOINT_DIR, TrainConfig, TrainResult
from pipelines.training.runner import train
from pipelines.vocabulary import Vocabulary

logger = logging.getLogger(__name__)

#: Beside the checkpoints of a run that finishes on another corpus: that corpus, and the step it began at
#: and the batches consumed by then (where a replay of its stream starts counting).
SWITCH_FILE = "switched.json"


def train_on_corpus(
    corpus: Corpus,
    tokenizers: Vocabulary[SubwordTokenizer],
    input_config: InputConfig,
    config: TrainConfig,
    *,
    validation_split: str | None = "validation",
    strategy: tf.distribute.Strategy | None = None,
    on_step: Callable[[int, dict[str, Any]], None] | None = None,
    finish_on: Corpus | None = None,
    finish_share: float = 0.0,
) -> TrainResult:
    """Trains (or resumes) ``config``'s model on ``corpus`` tokenized by ``tokenizers``, and with
    ``finish_on`` the last ``finish_share`` of the run (of its budget, else of its steps) on that corpus,
    whose stream starts at the switch and continues from its own position on a resume after it.

    Raises ``ValueError`` before any training if the tokenizers' sizes or special ids are not the
    model's.
    """
    common = {"validation_split": validation_split, "strategy": strategy, "on_step": on_step}
    if finish_on is None or not finish_share:
        return _train_on(corpus, tokenizers, input_config, config, **common)
    if not 0 < finish_share < 1:
        raise ValueError(f"finish_share={finish_share}: a fraction of the run in (0, 1)")
    switch = Path(config.checkpoint_dir or DEFAULT_CHECKPOINT_DIR) / SWITCH_FILE
    first = None
    if not switch.is_file():
        first = _train_on(corpus, tokenizers, input_config, config, stop_at=1 - finish_share, **common)
        logger.info("step %d: the last %.0f%% of the run trains on %s", first.final_step, 100 * finish_share,
                    finish_on.directory)
        record = {"corpus": str(finish_on.directory), "from_step": first.final_step,
                  "from_batch": consumed_batches(tf.train.latest_checkpoint(str(switch.parent)))}
        temporary = switch.with_name(switch.name + ".tmp")
        temporary.write_text(json.dumps(record))
        temporary.replace(switch)
    record = json.loads(switch.read_text())
    # Only checkpoints written after the switch hold a position in the finishing corpus' stream.
    at_switch = _newest_step(switch.parent) == record["from_step"]
    finishing = dataclasses.replace(config, data_resume="restart") if at_switch else config
    result = _train_on(finish_on, tokenizers, input_config, finishing, stream_start=record.get("from_batch", 0),
                       **common)
    if first is None:
        return result
    return dataclasses.replace(result, start_step=first.start_step,
                               elapsed_seconds=first.elapsed_seconds + result.elapsed_seconds)


def _newest_step(directory: Path) -> int | None:
    newest = tf.train.latest_checkpoint(str(directory))
    return int(newest.rsplit("-", 1)[1]) if newest else None


def _train_on(corpus: Corpus, tokenizers: Vocabulary[SubwordTokenizer], input_config: InputConfig,
              config: TrainConfig, *, validation_split: str | None, strategy: tf.distribute.Strategy | None,
              on_step: Callable[[int, dict[str, Any]], None] | None, stop_at: float | None = None,
              stream_start: int = 0) -> TrainResult:
    source, target = tokenizers
    sizes = tokenizers.map(lambda tokenizer: tokenizer.vocab_size)
    # The model's special ids come from its config, the batches' from the tokenizers: one check.
    model_config = config.model_config(sizes)
    target_pieces = None
    if model_config.reads_trees:
        target_pieces = target.pieces()
        check_tree_symbols(corpus, target_pieces)
    # The settings the vocabularies and the treebank decide are read here once and kept in the
    # model's config (so a saved model carries them).
    facts = model_config.vocabulary_facts(source, target, lambda: (tree for _, tree in corpus.pairs("train")))
    if facts:
        config = dataclasses.replace(config, model={**config.model, **facts})
        model_config = config.model_config(sizes)
    model_config.check_tokenizer(source, "source")
    model_config.check_tokenizer(target, "target")

    dropped = length_report(corpus, "train", tokenizers, input_config, training=True)
    # Said, not advised against: on DDTP, training on them did not help (max_length 384, 2026-11-26).
    logger.log(logging.WARNING if dropped["target_tokens_dropped_share"] > DROPPED_TOKENS_WARNING else logging.INFO,
               "input.max_length %d leaves out %d of the %d training pairs (%.1f%%), %.1f%% of their target tokens",
               input_config.max_length, dropped["pairs_dropped"], dropped["pairs"],
               100 * dropped["pairs_dropped_share"], 100 * dropped["target_tokens_dropped_share"])

    def train_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        dataset = make_dataset(corpus, "train", tokenizers, input_config, training=True)
        if context.num_input_pipelines > 1:
            dataset = dataset.shard(context.num_input_pipelines, context.input_pipeline_id)
        return dataset

    validation = None
    if validation_split:
        validation = make_dataset(corpus, validation_split, tokenizers, input_config, training=False)
    return train(config, train_fn, sizes, validation_data=validation, vocabulary=vocabulary_record(tokenizers),
                 strategy=strategy, on_step=on_step, target_pieces=target_pieces, stop_at=stop_at,
                 stream_start=stream_start)


def check_tree_symbols(corpus: Corpus, target_pieces: list[str]) -> None:
    """Raises ``ValueError`` naming the training trees' symbols the target vocabulary lacks."""
    missing = missing_symbols((tree for _, tree in corpus.pairs("train")), target_pieces)
    if missing:
        raise ValueError(
            f"the target vocabulary lacks {len(missing)} symbol(s) of the training trees in {corpus.directory}: "
            f"{missing[:12]}; a parser cannot learn them (and would misplace the words after them). Train the "
            "target tokenizer as a `word` model with tokenizer.target.character_coverage: 1.0 (the default) "
            "and a vocab_size above the number of symbols")

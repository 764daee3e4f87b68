"""The training stage on a prepared corpus: batches, vocabulary checks, then :func:`train`.

What the command line (:mod:`pipelines.training.cli`), the pipeline flow and the recipe search's
step-time calibration share: the token-bucketed batches of the corpus' train split (one input
pipeline per worker), the validation batches, the check that the model's vocabulary sizes and
special ids are the tokenizers', and the vocabulary record that ties checkpoints to them.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from keras_transformer.models.span_parser.targets import missing_symbols
from keras_transformer.tokenizer import SubwordTokenizer
from pipelines.corpus import Corpus
from pipelines.input_pipeline import InputConfig, make_dataset
from pipelines.input_reports import DROPPED_TOKENS_WARNING, length_report
from pipelines.tokenization import vocabulary_record
from pipelines.training.config import TrainConfig, TrainResult
from pipelines.training.runner import train
from pipelines.vocabulary import Vocabulary

logger = logging.getLogger(__name__)


def train_on_corpus(
    corpus: Corpus,
    tokenizers: Vocabulary[SubwordTokenizer],
    input_config: InputConfig,
    config: TrainConfig,
    *,
    validation_split: str | None = "validation",
    strategy: tf.distribute.Strategy | None = None,
    on_step: Callable[[int, dict[str, Any]], None] | None = None,
) -> TrainResult:
    """Trains (or resumes) ``config``'s model on ``corpus`` tokenized by ``tokenizers``.

    Raises ``ValueError`` before any training if the tokenizers' sizes or special ids are not the
    model's.
    """
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
                 strategy=strategy, on_step=on_step, target_pieces=target_pieces)


def check_tree_symbols(corpus: Corpus, target_pieces: list[str]) -> None:
    """Raises ``ValueError`` naming the training trees' symbols the target vocabulary lacks."""
    missing = missing_symbols((tree for _, tree in corpus.pairs("train")), target_pieces)
    if missing:
        raise ValueError(
            f"the target vocabulary lacks {len(missing)} symbol(s) of the training trees in {corpus.directory}: "
            f"{missing[:12]}; a parser cannot learn them (and would misplace the words after them). Train the "
            "target tokenizer as a `word` model with tokenizer.target.character_coverage: 1.0 (the default) "
            "and a vocab_size above the number of symbols")

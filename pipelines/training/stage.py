"""The training stage on a prepared corpus: batches, vocabulary checks, then :func:`train`.

What the command line (:mod:`pipelines.training.cli`), the pipeline flow and the recipe search's
step-time calibration share: the token-bucketed batches of the corpus' train split (one input
pipeline per worker), the validation batches, the check that the model's vocabulary sizes and
special ids are the tokenizers', and the vocabulary record that ties checkpoints to them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from keras_transformer.layers.word_alignment import alignment_ids
from keras_transformer.tokenizer import SubwordTokenizer
from pipelines.corpus import Corpus
from pipelines.input_pipeline import InputConfig, make_dataset
from pipelines.tokenization import vocabulary_record
from pipelines.training.config import TrainConfig, TrainResult
from pipelines.training.runner import train
from pipelines.vocabulary import Vocabulary


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
    if model_config.word_alignment and not model_config.word_start_ids:
        # Which pieces begin a word and which symbols stand for one are the vocabularies' facts.
        config = dataclasses.replace(config, model={**config.model, **alignment_ids(source, target)})
        model_config = config.model_config(sizes)
    model_config.check_tokenizer(source, "source")
    model_config.check_tokenizer(target, "target")

    def train_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        dataset = make_dataset(corpus, "train", tokenizers, input_config, training=True)
        if context.num_input_pipelines > 1:
            dataset = dataset.shard(context.num_input_pipelines, context.input_pipeline_id)
        return dataset

    validation = None
    if validation_split:
        validation = make_dataset(corpus, validation_split, tokenizers, input_config, training=False)
    return train(config, train_fn, sizes, validation_data=validation, vocabulary=vocabulary_record(tokenizers),
                 strategy=strategy, on_step=on_step)

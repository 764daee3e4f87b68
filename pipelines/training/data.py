"""The training batches as a distributed dataset that continues where a checkpoint left it."""

from __future__ import annotations

import logging

import tensorflow as tf

logger = logging.getLogger(__name__)


def distributed_dataset(trainer):
    """``trainer.train_data`` repeated, sharded per input pipeline and, on a resume with
    ``data_resume: skip``, advanced past the batches the checkpoint had consumed."""
    skip = 0
    strategy = trainer.strategy
    if trainer.config.data_resume == "skip":
        replicas_per_pipeline = strategy.num_replicas_in_sync // trainer.cluster.num_workers
        skip = int(trainer.consumed_var.numpy()) * max(replicas_per_pipeline, 1)
    source = trainer.train_data

    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        if callable(source) and not isinstance(source, tf.data.Dataset):
            dataset = source(context)
        else:
            dataset = source
            if context.num_input_pipelines > 1:
                dataset = dataset.shard(context.num_input_pipelines,
                                        context.input_pipeline_id)
        if dataset.cardinality() != tf.data.INFINITE_CARDINALITY:
            # Epochs are invisible to the step-based schedule of the paper.
            dataset = dataset.repeat()
        if skip:
            dataset = dataset.skip(skip)
        return dataset

    if skip:
        logger.info("skipping %d batches per input pipeline to continue the data stream",
                    skip)
    return strategy.distribute_datasets_from_function(dataset_fn)

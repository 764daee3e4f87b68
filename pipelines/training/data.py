"""The training batches as a distributed dataset that continues where a checkpoint left it."""

from __future__ import annotations

import logging
from collections.abc import Callable

import tensorflow as tf

logger = logging.getLogger(__name__)


def distributed_dataset(
    strategy: tf.distribute.Strategy,
    source: tf.data.Dataset | Callable[[tf.distribute.InputContext], tf.data.Dataset],
    skip_batches: int = 0,
) -> tf.distribute.DistributedDataset:
    """``source`` repeated, sharded per input pipeline and advanced by ``skip_batches`` per pipeline.

    ``source`` is a dataset (sharded across workers here) or a function of the input context
    returning one pipeline's batches. A resumed run skips what its checkpoint consumed (each
    replica takes whole batches of its worker's pipeline).
    """

    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        if callable(source) and not isinstance(source, tf.data.Dataset):
            dataset = source(context)
        else:
            dataset = source
            if context.num_input_pipelines > 1:
                dataset = dataset.shard(context.num_input_pipelines, context.input_pipeline_id)
        if dataset.cardinality() != tf.data.INFINITE_CARDINALITY:
            # Epochs are invisible to the step-based schedule of the paper.
            dataset = dataset.repeat()
        if skip_batches:
            dataset = dataset.skip(skip_batches)
        return dataset

    if skip_batches:
        logger.info("skipping %d batches per input pipeline to continue the data stream", skip_batches)
    return strategy.distribute_datasets_from_function(dataset_fn)


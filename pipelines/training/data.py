"""The training batches as a stream that continues where a checkpoint left it.

On one worker the stream is a plain ``tf.data`` iterator over the worker's pipeline, owned here so
that a checkpoint can hold its position (``tf.train.Checkpoint(data_iterator=...)``): TF 2.21's
distributed iterators are not trackable (tensorflow/tensorflow#56372; their ``MultiDeviceIterator``
keeps no checkpointable state), so restoring one meant replaying the stream. The worker's
consecutive batches go to its replicas in turn, as ``distribute_datasets_from_function``'s
``MultiDeviceIterator`` hands them out, so a checkpoint written by either continues the same
stream. Several workers keep the distributed iterator: each worker's position would need a
checkpoint of its own, and they replay instead.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import tensorflow as tf

logger = logging.getLogger(__name__)

Source = tf.data.Dataset | Callable[[tf.distribute.InputContext], tf.data.Dataset]


def worker_pipeline(source: Source, context: tf.distribute.InputContext, skip_batches: int = 0) -> tf.data.Dataset:
    """One input pipeline's batches: ``source`` (sharded across pipelines if a dataset), repeated,
    advanced by ``skip_batches``."""
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


def distributed_dataset(strategy: tf.distribute.Strategy, source: Source,
                        skip_batches: int = 0) -> tf.distribute.DistributedDataset:
    """``source`` repeated, sharded per input pipeline and advanced by ``skip_batches`` per pipeline.

    ``source`` is a dataset (sharded across workers here) or a function of the input context
    returning one pipeline's batches. A resumed run skips what its checkpoint consumed (each
    replica takes whole batches of its worker's pipeline).
    """
    if skip_batches:
        logger.info("skipping %d batches per input pipeline to continue the data stream", skip_batches)
    return strategy.distribute_datasets_from_function(lambda context: worker_pipeline(source, context, skip_batches))


class ReplicaBatches(Iterator):
    """The next batch of each replica: as many consecutive batches of ``iterator`` as there are replicas."""

    def __init__(self, iterator: Iterator, replicas: int):
        self.iterator = iterator
        self.replicas = replicas

    def __next__(self) -> tuple:
        return tuple(next(self.iterator) for _ in range(self.replicas))


@dataclass
class TrainingStream:
    """What the trainer draws its steps from, and what a checkpoint keeps of it.

    ``batches`` yields what the compiled step takes (``element_spec``), which ``distribute`` (inside
    the step) hands to the replicas; ``position`` is the iterator whose state is the stream's
    position (``None``: the stream can only be replayed).
    """

    batches: Iterator
    element_spec: Any
    distribute: Callable[[Any], Any] | None
    position: tf.data.Iterator | None


def training_stream(strategy: tf.distribute.Strategy, source: Source, workers: int,
                    skip_batches: int = 0) -> TrainingStream:
    """The stream of ``source`` for ``strategy``, advanced by ``skip_batches`` per input pipeline.

    One worker owns its pipeline's iterator (whose position a checkpoint can hold); several workers
    read a distributed dataset (:func:`distributed_dataset`).
    """
    if workers > 1:
        dataset = distributed_dataset(strategy, source, skip_batches)
        return TrainingStream(iter(dataset), dataset.element_spec, None, None)
    if skip_batches:
        logger.info("skipping %d batches to continue the data stream", skip_batches)
    replicas = strategy.num_replicas_in_sync
    context = tf.distribute.InputContext(num_input_pipelines=1, input_pipeline_id=0, num_replicas_in_sync=replicas)
    dataset = worker_pipeline(source, context, skip_batches)
    iterator = iter(dataset)

    def distribute(batches: tuple) -> Any:
        return strategy.experimental_distribute_values_from_function(
            lambda value_context: batches[value_context.replica_id_in_sync_group])

    return TrainingStream(ReplicaBatches(iterator, replicas), (dataset.element_spec,) * replicas, distribute,
                          iterator)

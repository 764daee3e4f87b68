"""The distributed training stream alone: repeated, and advanced past what a checkpoint consumed."""

import tensorflow as tf

from pipelines.training.data import distributed_dataset


def first(dataset, n: int) -> list[int]:
    iterator = iter(dataset)
    return [int(next(iterator)[0]) for _ in range(n)]


def test_a_finite_dataset_is_repeated_and_skipped_into(strategy):
    batches = tf.data.Dataset.range(5).batch(1)
    assert first(distributed_dataset(strategy, batches), 7) == [0, 1, 2, 3, 4, 0, 1]
    assert first(distributed_dataset(strategy, batches, skip_batches=3), 4) == [3, 4, 0, 1]


def test_a_function_gets_the_input_context(strategy):
    contexts = []

    def pipeline(context):
        contexts.append(context)
        return tf.data.Dataset.range(10, 12).batch(1)

    assert first(distributed_dataset(strategy, pipeline, skip_batches=1), 3) == [11, 10, 11]
    assert [(c.num_input_pipelines, c.input_pipeline_id) for c in contexts] == [(1, 0)]

"""The training stream alone: repeated, advanced past what a checkpoint consumed, and its position
saved and restored (the exact continuation a resumed run needs without replaying)."""

import tensorflow as tf

from pipelines.training.data import distributed_dataset, training_stream


def first(dataset, n: int) -> list[int]:
    iterator = iter(dataset)
    return [int(next(iterator)[0]) for _ in range(n)]


def test_a_finite_dataset_is_repeated_and_skipped_into(strategy):
    batches = tf.data.Dataset.range(5).batch(1)
    assert first(distributed_dataset(strategy, batches), 7) == [0, 1, 2, 3, 4, 0, 1]
    assert first(distributed_dataset(strategy, batches, skip_batches=3), 4) == [3, 4, 0, 1]
    stream = training_stream(strategy, batches, workers=1, skip_batches=3)
    assert [int(next(stream.batches)[0][0]) for _ in range(4)] == [3, 4, 0, 1]


def test_a_function_gets_the_input_context(strategy):
    contexts = []

    def pipeline(context):
        contexts.append(context)
        return tf.data.Dataset.range(10, 12).batch(1)

    assert first(distributed_dataset(strategy, pipeline, skip_batches=1), 3) == [11, 10, 11]
    stream = training_stream(strategy, pipeline, workers=1)
    assert [int(next(stream.batches)[0][0]) for _ in range(3)] == [10, 11, 10]
    assert [(c.num_input_pipelines, c.input_pipeline_id) for c in contexts] == [(1, 0), (1, 0)]


def shuffled_buckets() -> tf.data.Dataset:
    """What makes a position more than a count: a shuffle reseeded each epoch and length buckets
    holding examples across batches, as ``pipelines.input_pipeline.make_dataset`` has."""
    examples = tf.data.Dataset.range(40).shuffle(16, seed=3, reshuffle_each_iteration=True)
    examples = examples.map(lambda x: tf.fill([x % 5 + 1], x))
    return examples.bucket_by_sequence_length(lambda x: tf.shape(x)[0], [3], [4, 2], pad_to_bucket_boundary=False)


def values(batches) -> list:
    return [batch.numpy().tolist() for batch in batches]


def test_a_position_saved_epochs_in_continues_the_stream_exactly(tmp_path, strategy):
    epoch = sum(1 for _ in shuffled_buckets())
    reference = training_stream(strategy, shuffled_buckets(), workers=1)
    expected = [values(next(reference.batches)) for _ in range(5 * epoch)]
    assert expected[:epoch] != expected[epoch:2 * epoch]  # each epoch its own order

    stream = training_stream(strategy, shuffled_buckets(), workers=1)
    at = 2 * epoch + epoch // 2  # in the third pass, mid-epoch
    for _ in range(at):
        next(stream.batches)
    path = tf.train.Checkpoint(data_iterator=stream.position).write(str(tmp_path / "position"))
    # A new pipeline object, as a new process builds: only the checkpoint carries the position.
    resumed = training_stream(strategy, shuffled_buckets(), workers=1)
    tf.train.Checkpoint(data_iterator=resumed.position).read(path).assert_consumed()
    assert [values(next(resumed.batches)) for _ in range(len(expected) - at)] == expected[at:]


def test_several_workers_keep_the_distributed_iterator(strategy):
    stream = training_stream(strategy, tf.data.Dataset.range(3).batch(1), workers=2)
    assert stream.position is None and stream.distribute is None

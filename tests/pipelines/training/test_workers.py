"""The workers' agreements alone, on one worker: a flag or value is its own, through the strategy too."""

import tensorflow as tf

from pipelines.training.workers import Workers


def test_one_worker_is_the_chief_and_agrees_with_itself(strategy):
    workers = Workers(strategy)
    assert (workers.count, workers.task_id, workers.is_chief) == (1, 0, True)
    assert workers.replicas_per_worker == 1
    assert workers.any(True) is True and workers.any(False) is False
    assert workers.mean(0.25) == 0.25


def test_the_compiled_reductions_run_over_the_replicas(strategy):
    workers = Workers(strategy)
    assert float(workers.sum_over_replicas(tf.constant(3.0))) == 3.0
    assert float(workers.mean_over_replicas(tf.constant(0.5))) == 0.5

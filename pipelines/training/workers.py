"""The workers of a run and the decisions they take together.

Section 5.2's training is synchronous: every update sums the gradients of every replica on every
machine. Decisions taken from a worker's own clock (the time budget, a checkpoint every ten
minutes, the decaying rate's progress) must then be the same on all of them, or one worker would
wait forever in a collective the others never enter; they are agreed on through the strategy.
"""

from __future__ import annotations

import tensorflow as tf

from pipelines.distribution import strategy_cluster_info


class Workers:
    """Who this worker is (chief or not) and the agreements: any worker's flag, the workers' mean."""

    def __init__(self, strategy: tf.distribute.Strategy):
        cluster = strategy_cluster_info(strategy)
        self.count = cluster.num_workers
        self.task_id = cluster.task_id
        self.is_chief = cluster.is_chief
        #: Replicas fed by one worker's input pipeline.
        self.replicas_per_worker = max(strategy.num_replicas_in_sync // self.count, 1)
        scalar = tf.TensorSpec((), tf.float32)

        def reduce(op: tf.distribute.ReduceOp):
            @tf.function(input_signature=[scalar], autograph=False)
            def over_replicas(value):
                per_replica = strategy.run(tf.identity, args=(value,))
                return strategy.reduce(op, per_replica, axis=None)

            return over_replicas

        #: Compiled reductions of a scalar over every replica of every worker.
        self.sum_over_replicas = reduce(tf.distribute.ReduceOp.SUM)
        self.mean_over_replicas = reduce(tf.distribute.ReduceOp.MEAN)

    def any(self, flag: bool) -> bool:
        """Whether any worker raised ``flag``."""
        if self.count == 1:
            return flag
        return float(self.sum_over_replicas(tf.constant(1.0 if flag else 0.0))) > 0

    def mean(self, value: float) -> float:
        """The workers' mean of ``value`` (every replica of a worker holds the worker's value)."""
        if self.count == 1:
            return value
        return float(self.mean_over_replicas(tf.constant(value, tf.float32)))

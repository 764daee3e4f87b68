"""The compiled pieces of one optimizer step under a tf.distribute strategy (sections 5.1 and 5.2).

Section 5.1 batches by tokens ("approximately 25000 source tokens and 25000 target tokens"): a
step accumulates the gradients of as many batches as reach ``tokens_per_step`` target tokens over
all replicas (or a fixed ``accumulation_batches``), and the update divides their sum by the
global token count, so it does not depend on how the tokens were spread over replicas and batches.
"""

from __future__ import annotations

from collections.abc import Callable

import keras
import numpy as np
import tensorflow as tf

from keras_transformer.training.objectives import ObjectiveSums
from pipelines.training.loss_scale import LossScale

#: What ``accumulate`` returns, summed over replicas: the step's record is built from them.
TOTALS = ("loss_sum", "tokens", "correct", "nonfinite", "sentences")


def step_complete(batches: int, tokens: float, tokens_per_step: int, accumulation_batches: int | None = None) -> bool:
    """Whether ``batches`` holding ``tokens`` target tokens make a step of ``tokens_per_step`` (or of
    ``accumulation_batches`` batches)."""
    if accumulation_batches:
        return batches >= accumulation_batches
    if tokens <= 0:
        return False
    # Stop unless one more batch of this step's average size would bring the count nearer
    # to tokens_per_step (the batches' real token counts vary with padding and bucketing).
    return tokens >= tokens_per_step - 0.5 * tokens / batches


class StepFunctions:
    """Forward and backward passes into per-replica gradient accumulators, and the update.

    ``accumulate(batch)`` runs forward and backward on every replica's batch and adds the
    gradients to the replica's accumulators, returning the global sums named by :data:`TOTALS`;
    ``apply(global_tokens)`` updates the weights with the accumulated gradients divided by the
    global token count and clears them; ``reset()`` clears them without an update.
    ``accumulate_step(batches)`` accumulates until the step holds its tokens. Each is traced once
    for every batch shape (``element_spec``: the distributed dataset's, with its ``None`` dimensions;
    or what ``distribute`` turns into the replicas' batches inside the step, as
    :class:`pipelines.training.data.TrainingStream` gives them).
    ``objective`` (``keras_transformer.training.objectives``) gives a batch's sums; its ``count``
    is the unit ``tokens_per_step`` counts (target tokens, or words for a span parser).
    """

    def __init__(self, strategy: tf.distribute.Strategy, model: keras.Model, optimizer: keras.optimizers.Optimizer,
                 element_spec, *, objective: Callable[..., ObjectiveSums], tokens_per_step: int,
                 accumulation_batches: int | None = None, loss_scale: LossScale | None = None,
                 jit_compile: bool = False, distribute: Callable | None = None):
        self.tokens_per_step = tokens_per_step
        self.accumulation_batches = accumulation_batches
        trainable = list(model.trainable_variables)
        # Gradients are scaled by 1/tokens_per_step inside the replicas (and by the exact global
        # count at the update): the sums stay O(1) whatever the batch size, which matters for
        # float16's range.
        norm = float(tokens_per_step)
        scale = loss_scale.scale if loss_scale is not None else tf.constant(1.0)
        with strategy.scope():
            # One local copy per replica (ON_READ), summed only through the optimizer's all-reduce.
            accumulators = [
                tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False,
                            synchronization=tf.VariableSynchronization.ON_READ,
                            aggregation=tf.VariableAggregation.SUM, name=f"accumulator_{i}")
                for i, v in enumerate(trainable)
            ]

        def forward_backward(source, target_in, target_out, scale):
            with tf.GradientTape() as tape:
                sums = objective(source, target_in, target_out, training=True)
                scaled = sums.total * (scale / norm)
            grads = tape.gradient(scaled, trainable)
            grads = [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g) for g, v in zip(grads, trainable)]
            finite = tf.reduce_all(tf.stack([tf.reduce_all(tf.math.is_finite(g)) for g in grads]))
            return sums.loss, sums.count, sums.correct, finite, grads

        if jit_compile:
            forward_backward = tf.function(forward_backward, jit_compile=True, reduce_retracing=True)

        def replica_accumulate(batch):
            (source, target_in), target_out = batch
            loss_sum, tokens, correct, finite, grads = forward_backward(
                source, target_in, target_out, tf.convert_to_tensor(scale))
            for accumulator, grad in zip(accumulators, grads):
                accumulator.assign_add(grad)
            sentences = tf.cast(tf.shape(target_out)[0], tf.float32)
            nonfinite = 1.0 - tf.cast(finite, tf.float32)
            return tf.stack([loss_sum, tokens, correct, nonfinite, sentences])

        @tf.function(input_signature=[element_spec], autograph=False)
        def accumulate(batch):
            if distribute is not None:
                batch = distribute(batch)
            per_replica = strategy.run(replica_accumulate, args=(batch,))
            # A cross-replica (and cross-worker) sum: every worker sees the same totals and so
            # takes the same decisions (end of step, divergence, loss scale).
            return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

        def replica_reset():
            for accumulator in accumulators:
                accumulator.assign(tf.zeros_like(accumulator))

        def replica_apply(global_tokens):
            factor = norm / (global_tokens * tf.convert_to_tensor(scale))
            # Keras' optimizer sums the replicas' gradients before the update, so the global
            # loss is sum(per-token losses) / global_tokens exactly.
            optimizer.apply([accumulator.read_value() * factor for accumulator in accumulators], trainable)
            replica_reset()

        # No tensor-dependent Python control flow below: AutoGraph has nothing to convert.
        @tf.function(input_signature=[tf.TensorSpec((), tf.float32)], autograph=False)
        def apply(global_tokens):
            strategy.run(replica_apply, args=(global_tokens,))

        @tf.function(autograph=False)
        def reset():
            strategy.run(replica_reset)

        self.accumulate, self.apply, self.reset = accumulate, apply, reset

    def step_complete(self, batches: int, tokens: float) -> bool:
        """Whether ``batches`` holding ``tokens`` target tokens make a step."""
        return step_complete(batches, tokens, self.tokens_per_step, self.accumulation_batches)

    def accumulate_step(self, batches) -> tuple[np.ndarray, int]:
        """Accumulates batches of the iterator ``batches`` until the step is complete: the global
        sums (:data:`TOTALS`) and the number of batches."""
        totals = np.zeros(len(TOTALS), dtype=np.float64)
        count = 0
        while True:
            totals += self.accumulate(next(batches)).numpy()
            count += 1
            if self.step_complete(count, totals[1]):
                return totals, count
            if count > 10_000:
                raise RuntimeError("10000 batches without reaching tokens_per_step: are the batches empty?")

"""The compiled pieces of one optimizer step under a tf.distribute strategy (section 5.2)."""

from __future__ import annotations

import tensorflow as tf

from keras_transformer.losses import correct_tokens, label_smoothed_nll


def build_step_functions(trainer, element_spec) -> None:
    """Gives ``trainer`` its compiled step pieces (one trace each for every batch shape).

    ``accumulate(batch)`` runs forward and backward on every replica's batch and adds the
    gradients to the replica's accumulators, returning the global sums of loss, target tokens,
    correct tokens, non-finite flags and sentences; ``apply(global_tokens)`` updates the weights
    with the accumulated gradients divided by the global token count (section 5.1's token
    batches, whatever the replicas and accumulation) and clears them; ``reset()`` clears them
    without an update; ``weights_finite()``, ``any_worker(flag)`` and
    ``mean_over_workers(value)`` are the checks and agreements the loop needs.
    """
    model, strategy = trainer.model, trainer.strategy
    trainable, accumulators = trainer.trainable, trainer.accumulators
    eps = float(trainer.plan.label_smoothing)
    pad_id = trainer.model_config.pad_id
    norm = trainer.norm
    loss_scale = trainer.loss_scale

    def forward_backward(source, target_in, target_out, scale):
        with tf.GradientTape() as tape:
            # Logits at the real target tokens only: padding needs no projection onto the vocabulary.
            real = tf.not_equal(target_out, pad_id)
            encoded = model.encode(source, training=True)
            logits = model.decode(target_in, encoded, model.padding_mask(source), training=True,
                                  logits_mask=real)
            labels = tf.boolean_mask(target_out, real)
            losses, mask = label_smoothed_nll(labels, logits, eps, pad_id)
            loss_sum = tf.reduce_sum(losses)
            scaled = loss_sum * (scale / norm)
        grads = tape.gradient(scaled, trainable)
        grads = [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
                 for g, v in zip(grads, trainable)]
        finite = tf.reduce_all(tf.stack([tf.reduce_all(tf.math.is_finite(g))
                                         for g in grads]))
        correct = tf.reduce_sum(correct_tokens(labels, logits, mask))
        return loss_sum, tf.reduce_sum(mask), correct, finite, grads

    if trainer.config.jit_compile:
        forward_backward = tf.function(forward_backward, jit_compile=True,
                                       reduce_retracing=True)

    def replica_accumulate(batch):
        (source, target_in), target_out = batch
        loss_sum, tokens, correct, finite, grads = forward_backward(
            source, target_in, target_out, loss_scale.read_value())
        for accumulator, grad in zip(accumulators, grads):
            accumulator.assign_add(grad)
        sentences = tf.cast(tf.shape(target_out)[0], tf.float32)
        nonfinite = 1.0 - tf.cast(finite, tf.float32)
        return tf.stack([loss_sum, tokens, correct, nonfinite, sentences])

    # input_signature with the dataset's None dimensions: one trace for every batch shape.
    @tf.function(input_signature=[element_spec])
    def accumulate(batch):
        per_replica = strategy.run(replica_accumulate, args=(batch,))
        # A cross-replica (and cross-worker) sum: every worker sees the same totals and so
        # takes the same decisions (end of step, divergence, loss scale).
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    trainer.accumulate = accumulate

    def replica_apply(global_tokens):
        factor = norm / (global_tokens * loss_scale.read_value())
        grads = [accumulator.read_value() * factor for accumulator in accumulators]
        # Keras' optimizer sums the replicas' gradients before the update, so the global
        # loss is sum(per-token losses) / global_tokens exactly.
        trainer.optimizer.apply(grads, trainable)
        replica_reset()

    def replica_reset():
        for accumulator in accumulators:
            accumulator.assign(tf.zeros_like(accumulator))

    # No tensor-dependent Python control flow below: AutoGraph has nothing to convert.
    @tf.function(input_signature=[tf.TensorSpec((), tf.float32)], autograph=False)
    def apply(global_tokens):
        strategy.run(replica_apply, args=(global_tokens,))

    @tf.function(autograph=False)
    def reset():
        strategy.run(replica_reset)

    trainer.apply, trainer.reset = apply, reset

    @tf.function(autograph=False)
    def weights_finite():
        return tf.reduce_all(tf.stack([tf.reduce_all(tf.math.is_finite(v))
                                       for v in model.weights]))

    trainer.weights_finite = weights_finite

    @tf.function(input_signature=[tf.TensorSpec((), tf.float32)], autograph=False)
    def any_worker(flag):
        per_replica = strategy.run(tf.identity, args=(flag,))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    trainer.any_worker = any_worker

    @tf.function(input_signature=[tf.TensorSpec((), tf.float32)], autograph=False)
    def mean_over_workers(value):
        per_replica = strategy.run(tf.identity, args=(value,))
        return strategy.reduce(tf.distribute.ReduceOp.MEAN, per_replica, axis=None)

    trainer.mean_over_workers = mean_over_workers

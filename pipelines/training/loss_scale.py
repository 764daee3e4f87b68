"""Dynamic loss scaling for float16 training (Micikevicius et al., 2018).

float16 gradients of a loss of O(1) underflow; the loss is multiplied by a large scale before the
backward pass and the gradients divided by it at the update. An overflow (a non-finite gradient)
skips the update and halves the scale, and the step is retried on the next batches;
``growth_steps`` finite steps in a row double it again. Without float16 the scale stays 1.
"""

from __future__ import annotations

import logging

import tensorflow as tf

logger = logging.getLogger(__name__)


class LossScale:
    """The scale and its count of finite steps, as variables a checkpoint keeps.

    ``initial`` is the starting scale (float16), or ``None`` for a constant scale of 1.
    """

    def __init__(self, strategy: tf.distribute.Strategy, initial: float | None = None, growth_steps: int = 2000):
        self.dynamic = initial is not None
        self.growth_steps = growth_steps
        counter = dict(trainable=False, aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        with strategy.scope():
            self.scale = tf.Variable(float(initial or 1.0), dtype=tf.float32, name="loss_scale", **counter)
            self.good_steps = tf.Variable(0, dtype=tf.int64, name="loss_scale_good_steps", **counter)

    def value(self) -> float:
        return float(self.scale.numpy())

    def shrink(self, step: int) -> bool:
        """After an overflow at ``step``: halves the scale; False (unchanged) if it would fall below 1."""
        scale = self.value() / 2.0
        if not self.dynamic or scale < 1.0:
            return False
        self.scale.assign(scale)
        self.good_steps.assign(0)
        logger.info("step %d: gradient overflow in float16, loss scale lowered to %g", step, scale)
        return True

    def grow(self) -> None:
        """After a finite step: doubles the scale once ``growth_steps`` of them came in a row."""
        if not self.dynamic:
            return
        good = int(self.good_steps.numpy()) + 1
        if good >= self.growth_steps:
            self.scale.assign(self.value() * 2.0)
            good = 0
        self.good_steps.assign(good)

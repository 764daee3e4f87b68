"""Adam (section 5.3) with TensorFlow's fused kernel: one pass over each variable per update.

Keras 3's ``Adam.update_step`` is written in backend-neutral ops: a dozen element-wise kernels per
variable (``m``, ``v`` and the weight each read and written separately). On a CPU that update is
memory-bound and does not divide over cores, so it is a fixed cost of every step. TensorFlow's
``ResourceApplyAdam`` computes the same update

    lr_t = lr * sqrt(1 - beta_2^t) / (1 - beta_1^t)
    m <- m + (g - m) * (1 - beta_1);  v <- v + (g^2 - v) * (1 - beta_2)
    w <- w - lr_t * m / (sqrt(v) + epsilon)

(Keras' own formula, epsilon outside the square root) in one kernel. Where it does not apply (other
backends, sparse gradients, ``amsgrad``, mixed dtypes) the update is Keras' own.
"""

from __future__ import annotations

import keras


@keras.saving.register_keras_serializable(package="keras_transformer")
class FusedAdam(keras.optimizers.Adam):
    """``keras.optimizers.Adam`` whose dense float32/float64 updates run TensorFlow's fused kernel.

    A drop-in: the same hyperparameters, slots (``m``, ``v``), iteration counter and configuration,
    so checkpoints of either load into the other. Its variables are named ``adam`` as Keras' are.
    """

    def __init__(self, *args, name: str = "adam", **kwargs):
        super().__init__(*args, name=name, **kwargs)

    def update_step(self, gradient, variable, learning_rate):
        import tensorflow as tf

        if not self._fusable(gradient, variable):
            return super().update_step(gradient, variable, learning_rate)
        dtype = variable.dtype
        index = self._get_variable_index(variable)
        m, v = self._momentums[index], self._velocities[index]
        step = tf.cast(self.iterations + 1, dtype)
        beta_1 = tf.cast(self.beta_1, dtype)
        beta_2 = tf.cast(self.beta_2, dtype)
        tf.raw_ops.ResourceApplyAdam(
            var=_handle(variable), m=_handle(m), v=_handle(v),
            beta1_power=tf.pow(beta_1, step), beta2_power=tf.pow(beta_2, step),
            lr=tf.cast(learning_rate, dtype), beta1=beta_1, beta2=beta_2,
            epsilon=tf.cast(self.epsilon, dtype), grad=tf.cast(gradient, dtype), use_locking=False,
        )

    def _fusable(self, gradient, variable) -> bool:
        import tensorflow as tf

        return (keras.backend.backend() == "tensorflow" and not self.amsgrad
                and not isinstance(gradient, tf.IndexedSlices)
                and variable.dtype in ("float32", "float64"))


def _handle(variable):
    """The resource handle of a Keras or TensorFlow variable (inside a distribution strategy's
    ``update``, the handle of this device's copy)."""
    variable = getattr(variable, "value", variable) if isinstance(variable, keras.Variable) else variable
    return variable.handle

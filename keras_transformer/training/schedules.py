"""The learning-rate schedule and optimiser of section 5.3."""

from __future__ import annotations

import keras
from keras import ops

from keras_transformer.training.fused_adam import FusedAdam


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """lrate = d_model^-0.5 * min(step_num^-0.5, step_num * warmup_steps^-1.5), equation (3).

    Linear warm-up for ``warmup_steps``, then decay with the inverse square root of the step.
    Keras passes the optimiser's 0-based iteration counter; the paper's ``step_num`` counts
    from 1, so ``schedule(iteration)`` is the paper's rate at ``step_num = iteration + 1``.
    ``scale`` multiplies the whole curve (1.0 in the paper).
    """

    def __init__(self, d_model, warmup_steps=4000, scale=1.0):
        if d_model <= 0 or warmup_steps <= 0:
            raise ValueError(
                f"d_model and warmup_steps must be positive, received d_model={d_model!r}, "
                f"warmup_steps={warmup_steps!r}"
            )
        self.d_model = d_model
        self.warmup_steps = warmup_steps
        self.scale = scale

    def __call__(self, step):
        step_num = ops.cast(step, "float32") + 1.0
        warmup = float(self.warmup_steps)
        return (
            self.scale
            * float(self.d_model) ** -0.5
            * ops.minimum(ops.rsqrt(step_num), step_num * warmup**-1.5)
        )

    def get_config(self):
        return {"d_model": self.d_model, "warmup_steps": self.warmup_steps, "scale": self.scale}


@keras.saving.register_keras_serializable(package="keras_transformer")
class LinearDecayTail(keras.optimizers.schedules.LearningRateSchedule):
    """``schedule`` times a linear fall to zero over the last ``fraction`` of a run.

    Not in the paper, whose 12-hour runs end on equation (3)'s slow decay: a run of minutes ends
    while the rate is still high, and annealing it to zero is the usual cure. How far the run
    is (0 at its start, 1 at its end) is set from outside through ``progress``, by steps or by a
    wall-clock budget, since a time-budgeted run's last step is not known in advance.
    """

    def __init__(self, schedule, fraction):
        if not 0 < fraction <= 1:
            raise ValueError(f"`fraction` must be in (0, 1], received fraction={fraction!r}")
        self.schedule = schedule
        self.fraction = fraction
        self.progress = keras.Variable(0.0, trainable=False, dtype="float32", name="run_progress",
                                       aggregation="only_first_replica")

    def __call__(self, step):
        factor = ops.clip((1.0 - ops.convert_to_tensor(self.progress)) / self.fraction, 0.0, 1.0)
        return self.schedule(step) * factor

    def get_config(self):
        return {"schedule": keras.saving.serialize_keras_object(self.schedule), "fraction": self.fraction}

    @classmethod
    def from_config(cls, config):
        return cls(keras.saving.deserialize_keras_object(config["schedule"]), config["fraction"])


def transformer_adam(d_model, warmup_steps=4000, beta_1=0.9, beta_2=0.98, epsilon=1e-9, scale=1.0,
                     decay_fraction=None):
    """Adam with beta_1 = 0.9, beta_2 = 0.98, epsilon = 1e-9 on ``TransformerSchedule`` (5.3),
    its update in one fused kernel on TensorFlow (:class:`FusedAdam`).

    With ``decay_fraction`` the rate also falls linearly to zero over that last part of the run
    (``LinearDecayTail``; its ``progress`` is the caller's to set).
    """
    schedule = TransformerSchedule(d_model, warmup_steps, scale)
    if decay_fraction:
        schedule = LinearDecayTail(schedule, decay_fraction)
    return FusedAdam(
        learning_rate=schedule,
        beta_1=beta_1,
        beta_2=beta_2,
        epsilon=epsilon,
    )

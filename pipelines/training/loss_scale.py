"""Dynamic loss scaling for float16 training (Micikevicius et al., 2018)."""

from __future__ import annotations

import logging

from pipelines.training.checkpointing import latest
from pipelines.training.config import TrainingDivergedError

logger = logging.getLogger(__name__)


def shrink_loss_scale(trainer, step: int) -> None:
    # Dynamic loss scaling (Micikevicius et al., 2018): an overflow skips the update and
    # halves the scale; the step is retried on the next batches.
    scale = float(trainer.loss_scale.numpy()) / 2.0
    if scale < 1.0:
        raise TrainingDivergedError(
            step, "gradients stay non-finite even without loss scaling", latest(trainer))
    trainer.loss_scale.assign(scale)
    trainer.good_steps.assign(0)
    logger.info("step %d: gradient overflow in float16, loss scale lowered to %g",
                step, scale)


def grow_loss_scale(trainer) -> None:
    good = int(trainer.good_steps.numpy()) + 1
    if good >= trainer.config.loss_scale_growth_steps:
        trainer.loss_scale.assign(float(trainer.loss_scale.numpy()) * 2.0)
        good = 0
    trainer.good_steps.assign(good)

"""Token-level loss, perplexity and accuracy of a model on held-out batches (no dropout)."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

import keras
import numpy as np
import tensorflow as tf

from keras_transformer.training.objectives import ObjectiveSums, TranslationObjective

logger = logging.getLogger(__name__)


def validation_loss(
    model: keras.Model,
    dataset: tf.data.Dataset,
    label_smoothing: float = 0.0,
    max_batches: int | None = None,
    objective: Callable[..., ObjectiveSums] | None = None,
    sums: Callable | None = None,
) -> dict[str, float]:
    """The training objective of ``model`` on ``dataset`` (no dropout), per unit of its count.

    Returns ``loss`` (label-smoothed, as trained), ``nll`` (cross-entropy per target token),
    ``perplexity`` = exp(nll), ``token_accuracy`` and ``tokens`` (non-padding target tokens);
    for a span parser (``objective``: a ``SpanObjective``) per word, the accuracy its tagging's, and
    no perplexity (its ``nll`` is a loss over spans and tags, not a token's cross-entropy). ``sums``: a
    :func:`batch_sums` of the objective already traced (a run's validations share one).
    """
    sums = sums or batch_sums(objective or TranslationObjective(model, label_smoothing))
    totals = np.zeros(4, dtype=np.float64)
    data = dataset if max_batches is None else dataset.take(max_batches)
    for (source, target_in), target_out in data:
        totals += sums(tf.cast(source, tf.int32), tf.cast(target_in, tf.int32), tf.cast(target_out, tf.int32)).numpy()
    tokens = totals[3]
    if tokens == 0:
        raise ValueError("validation_loss: the dataset holds no target token")
    nll = totals[1] / tokens
    result = {"loss": float(totals[0] / tokens), "nll": float(nll), "token_accuracy": float(totals[2] / tokens),
              "tokens": int(tokens)}
    if getattr(objective, "per_token_cross_entropy", True):
        result["perplexity"] = float(math.exp(min(nll, 700.0)))
    return result


def batch_sums(objective: Callable[..., ObjectiveSums]) -> Callable:
    """A graph of ``objective``'s sums on one batch: ``[loss, nll, correct, count]``."""
    ids = tf.TensorSpec([None, None], tf.int32)

    # One trace for every batch shape (bucketed batches vary in both dimensions).
    @tf.function(input_signature=[ids, ids, ids], autograph=False)
    def sums_of(source, target_in, target_out):
        sums = objective(source, target_in, target_out, training=False)
        return tf.stack([sums.loss, sums.nll, sums.correct, sums.count])

    return sums_of


class Validation:
    """The held-out loss of a run: every ``every_steps`` steps before the last, and at the end."""

    def __init__(self, model: keras.Model, dataset: tf.data.Dataset, label_smoothing: float,
                 every_steps: int | None = None, max_batches: int | None = None,
                 objective: Callable[..., ObjectiveSums] | None = None):
        self.model, self.dataset, self.objective = model, dataset, objective
        self.label_smoothing, self.every_steps, self.max_batches = label_smoothing, every_steps, max_batches
        self._sums = None  # traced at the first validation, kept for the others

    def due(self, step: int, train_steps: int) -> bool:
        """Whether step ``step`` validates on the way (the final validation follows the loop)."""
        return bool(self.every_steps) and step % self.every_steps == 0 and step < train_steps

    def __call__(self, step: int) -> dict[str, float]:
        if self._sums is None:
            self._sums = batch_sums(self.objective or TranslationObjective(self.model, self.label_smoothing))
        result = validation_loss(self.model, self.dataset, self.label_smoothing, self.max_batches, self.objective,
                                 self._sums)
        perplexity = f" perplexity {result['perplexity']:.2f}" if "perplexity" in result else ""
        logger.info("validation at step %d: loss %.4f nll %.4f%s accuracy %.3f",
                    step, result["loss"], result["nll"], perplexity, result["token_accuracy"])
        return result

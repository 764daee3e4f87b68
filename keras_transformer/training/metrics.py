"""Masked token accuracy and perplexity, counted over non-padding target tokens only."""

from __future__ import annotations

import keras
from keras import ops

from keras_transformer.training.losses import correct_tokens, label_smoothed_nll


class _MaskedTokenMetric(keras.metrics.Metric):
    def __init__(self, pad_id=0, **kwargs):
        super().__init__(**kwargs)
        self.pad_id = pad_id
        self.total = self.add_variable(shape=(), initializer="zeros", name="total")
        self.count = self.add_variable(shape=(), initializer="zeros", name="count")

    def _values(self, y_true, y_pred):
        raise NotImplementedError

    def update_state(self, y_true, y_pred, sample_weight=None):
        values, mask = self._values(y_true, y_pred)
        self.total.assign_add(ops.sum(values * mask))
        self.count.assign_add(ops.sum(mask))

    def reset_state(self):
        self.total.assign(0.0)
        self.count.assign(0.0)

    def get_config(self):
        config = super().get_config()
        config["pad_id"] = self.pad_id
        return config


@keras.saving.register_keras_serializable(package="keras_transformer")
class MaskedAccuracy(_MaskedTokenMetric):
    """Fraction of non-padding target tokens whose arg-max prediction is the reference."""

    def __init__(self, pad_id=0, name="token_accuracy", **kwargs):
        super().__init__(pad_id=pad_id, name=name, **kwargs)

    def _values(self, y_true, y_pred):
        mask = ops.cast(ops.not_equal(ops.cast(y_true, "int32"), self.pad_id), "float32")
        return correct_tokens(y_true, y_pred, mask), mask

    def result(self):
        return ops.divide_no_nan(self.total, self.count)


@keras.saving.register_keras_serializable(package="keras_transformer")
class Perplexity(_MaskedTokenMetric):
    """exp of the mean (unsmoothed) negative log-likelihood per non-padding target token."""

    def __init__(self, pad_id=0, name="perplexity", **kwargs):
        super().__init__(pad_id=pad_id, name=name, **kwargs)

    def _values(self, y_true, y_pred):
        return label_smoothed_nll(y_true, y_pred, 0.0, self.pad_id)

    def result(self):
        return ops.exp(ops.divide_no_nan(self.total, self.count))

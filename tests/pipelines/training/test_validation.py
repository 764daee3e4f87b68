"""The held-out loss alone: when it is due, and that it is the model's token-level loss."""

import math

import pytest
import tensorflow as tf

from keras_transformer import label_smoothed_nll
from pipelines.training.validation import Validation
from tests.pipelines.training.conftest import batch, tiny_model


def test_due_every_n_steps_but_not_at_the_last():
    validation = Validation(model=None, dataset=None, label_smoothing=0.1, every_steps=3)
    assert [s for s in range(1, 10) if validation.due(s, train_steps=9)] == [3, 6]
    assert not any(Validation(None, None, 0.1).due(s, 9) for s in range(1, 10))


def test_the_result_is_the_models_loss_per_target_token():
    model, _ = tiny_model()
    data = [batch(3, 5, seed) for seed in (1, 2)]
    validation = Validation(model, tf.data.Dataset.from_tensors(data[0]).concatenate(
        tf.data.Dataset.from_tensors(data[1])), label_smoothing=0.1)
    result = validation(step=4)
    sums, smoothed, counts = [], [], []
    for (source, target_in), target_out in data:
        logits = model((source, target_in))
        nll, mask = label_smoothed_nll(target_out, logits, 0.0)
        sums.append(float(tf.reduce_sum(nll)))
        smoothed.append(float(tf.reduce_sum(label_smoothed_nll(target_out, logits, 0.1)[0])))
        counts.append(float(tf.reduce_sum(mask)))
    # Summed over both batches and divided by their tokens (not a mean of batch means).
    assert result["tokens"] == sum(counts)
    assert result["nll"] == pytest.approx(sum(sums) / sum(counts), rel=1e-5)
    assert result["loss"] == pytest.approx(sum(smoothed) / sum(counts), rel=1e-5)
    assert result["perplexity"] == pytest.approx(math.exp(result["nll"]), rel=1e-6)

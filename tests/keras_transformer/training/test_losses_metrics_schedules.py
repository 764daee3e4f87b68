"""Label smoothing (5.4), masked metrics, and the warm-up learning-rate schedule (5.3)."""

import math

import keras
import numpy as np
import pytest

from keras_transformer import (
    LabelSmoothedCrossEntropy,
    MaskedAccuracy,
    Perplexity,
    TransformerSchedule,
    transformer_adam,
)


def _log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_label_smoothed_loss_matches_the_smoothed_distribution():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 4, 6)).astype("float32")
    labels = np.array([[4, 5, 1, 0], [2, 0, 0, 0]])
    eps, vocab = 0.1, 6
    logp = _log_softmax(logits)
    total, count = 0.0, 0
    for b in range(2):
        for t in range(4):
            if labels[b, t] == 0:
                continue
            q = np.full(vocab, eps / (vocab - 1))
            q[labels[b, t]] = 1 - eps
            total += -(q * logp[b, t]).sum()
            count += 1
    loss = float(LabelSmoothedCrossEntropy(eps)(labels, logits))
    assert loss == pytest.approx(total / count, rel=1e-5)


def test_loss_ignores_padding_and_normalises_per_token():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(1, 3, 5)).astype("float32")
    labels = np.array([[2, 3, 0]])
    short = float(LabelSmoothedCrossEntropy(0.0)(labels[:, :2], logits[:, :2]))
    garbage = logits.copy()
    garbage[:, 2] = 1e3 * rng.normal(size=5)
    assert float(LabelSmoothedCrossEntropy(0.0)(labels, garbage)) == pytest.approx(short, rel=1e-6)
    expected = -np.mean([_log_softmax(logits)[0, 0, 2], _log_softmax(logits)[0, 1, 3]])
    assert short == pytest.approx(expected, rel=1e-5)


def test_metrics_count_only_real_tokens():
    logits = np.zeros((1, 4, 5), "float32")
    logits[0, 0, 2] = logits[0, 1, 1] = logits[0, 2, 4] = logits[0, 3, 3] = 5.0
    labels = np.array([[2, 3, 4, 0]])
    accuracy = MaskedAccuracy()
    accuracy.update_state(labels, logits)
    assert float(accuracy.result()) == pytest.approx(2 / 3)
    perplexity = Perplexity()
    perplexity.update_state(labels, logits)
    nll = -np.mean([_log_softmax(logits)[0, t, labels[0, t]] for t in range(3)])
    assert float(perplexity.result()) == pytest.approx(math.exp(nll), rel=1e-5)


@pytest.mark.parametrize("step_num", [1, 10, 1000, 3999, 4000, 4001, 10000, 100000])
def test_schedule_equals_equation_3(step_num):
    schedule = TransformerSchedule(d_model=512, warmup_steps=4000)
    expected = 512**-0.5 * min(step_num**-0.5, step_num * 4000**-1.5)
    # Keras passes the 0-based iteration; step_num counts from 1.
    assert float(schedule(step_num - 1)) == pytest.approx(expected, rel=1e-5)


def test_schedule_peaks_at_warmup_and_round_trips():
    schedule = TransformerSchedule(d_model=512, warmup_steps=4000)
    rates = [float(schedule(s)) for s in (3000, 3999, 5000)]
    assert rates[1] > rates[0] and rates[1] > rates[2]
    assert TransformerSchedule.from_config(schedule.get_config()).get_config() == schedule.get_config()


def test_paper_adam_settings():
    optimizer = transformer_adam(512, 4000)
    assert (optimizer.beta_1, optimizer.beta_2, optimizer.epsilon) == (0.9, 0.98, 1e-9)
    assert isinstance(optimizer._learning_rate, TransformerSchedule)


def test_loss_rejects_bad_smoothing():
    with pytest.raises(ValueError, match="label_smoothing.*1.5"):
        LabelSmoothedCrossEntropy(1.5)
    loss = LabelSmoothedCrossEntropy(0.2, pad_id=1)
    assert keras.losses.deserialize(keras.losses.serialize(loss)).get_config() == loss.get_config()

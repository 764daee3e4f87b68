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


def test_a_run_s_validations_share_one_graph_that_reads_the_current_weights():
    model, _ = tiny_model()
    validation = Validation(model, tf.data.Dataset.from_tensors(batch(3, 5, 1)), label_smoothing=0.1)
    first = validation(step=2)
    for weight in model.trainable_weights:
        weight.assign(weight * 0.5)
    second = validation(step=4)
    assert validation._sums.experimental_get_tracing_count() == 1
    assert second["nll"] != pytest.approx(first["nll"], rel=1e-4)


def test_a_span_parsers_validation_reports_no_perplexity():
    """Its ``nll`` is a loss per word over spans and tags: exp of it would be no perplexity."""
    from keras_transformer.models.span_parser import SpanParser
    from keras_transformer.models.span_parser.objective import SpanObjective
    from tests.keras_transformer.models.span_parser.test_targets import CHAINS, PIECES, TAGS, target_batch
    from tests.keras_transformer.training.test_objectives import SOURCE_VOCAB, WORD_STARTS, source_batch
    from tests.pipelines.tasks.parsing.test_chart import SMALL, UNARY

    model = SpanParser(SOURCE_VOCAB, CHAINS, TAGS, WORD_STARTS, num_layers=1, d_model=16, num_heads=2, d_ff=32,
                       span_hidden=16, dropout=0.0)
    trees = [SMALL, UNARY]
    source, target_out = source_batch(trees), tf.constant(target_batch(trees))
    dataset = tf.data.Dataset.from_tensors(((source, target_out), target_out))
    result = Validation(model, dataset, 0.0, objective=SpanObjective(model, PIECES))(step=1)
    assert "perplexity" not in result and result["tokens"] == sum(len(t.words()) for t in trees)
    assert result["loss"] == result["nll"] > 0

"""Training objectives (keras_transformer/training/objectives.py): the span parser's from the flow's batches."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import Transformer
from keras_transformer.models.span_parser.model import SpanParser, span_parser_loss
from keras_transformer.models.span_parser.objective import SpanObjective
from keras_transformer.models.span_parser.targets import SpanTargets
from keras_transformer.training.objectives import TranslationObjective, objective_for
from pipelines.tasks.parsing.linearize import linearize
from tests.keras_transformer.models.span_parser.test_targets import CHAINS, PIECES, TAGS, target_batch
from tests.pipelines.tasks.parsing.test_chart import SMALL, UNARY

SOURCE_VOCAB = 30
#: Source ids 4.. each begin a word (one piece per word); 3 is EOS, 0 padding.
WORD_STARTS = list(range(4, SOURCE_VOCAB))


def source_batch(trees):
    rows = [[4 + i % 20 for i in range(len(tree.words()))] + [3] for tree in trees]
    source = np.zeros([len(rows), max(map(len, rows))], np.int32)
    for row, ids in enumerate(rows):
        source[row, : len(ids)] = ids
    return tf.constant(source)


def adam_steps(model, objective, source, target_out, steps: int) -> float:
    """``steps`` Adam(0.01) updates of ``model`` on ``objective`` over one batch, in a tf.function (eagerly, the
    tree CRF's loop ran op by op); the first step's objective per word."""
    optimizer = keras.optimizers.Adam(0.01)
    optimizer.build(model.trainable_variables)

    @tf.function(autograph=False)  # no tensor-dependent Python branch to convert
    def step():
        with tf.GradientTape() as tape:
            sums = objective(source, None, target_out, training=True)
        optimizer.apply(tape.gradient(sums.total, model.trainable_variables), model.trainable_variables)
        return sums.total / sums.count

    first = float(step())
    for _ in range(steps - 1):
        step()
    return first


@pytest.fixture(scope="module")
def parser():
    model = SpanParser(SOURCE_VOCAB, CHAINS, TAGS, WORD_STARTS, num_layers=1, d_model=16, num_heads=2, d_ff=32,
                       span_hidden=16, dropout=0.0)
    model.build()
    return model


def test_the_span_objective_is_the_span_parser_loss_per_word(parser):
    """The engine's objective on the flow's batches (linearised target ids, EOS, padding) is the
    probe's loss on the gold charts, weighted by the batch's words."""
    trees = [SMALL, UNARY]
    source, target_out = source_batch(trees), tf.constant(target_batch(trees))
    sums = SpanObjective(parser, PIECES)(source, None, target_out, training=False)
    spans, tags = SpanTargets(PIECES, CHAINS, TAGS)(target_out)
    words = sum(len(tree.words()) for tree in trees)
    expected = float(span_parser_loss(parser(source), spans, tags)) * words
    assert float(sums.count) == words
    np.testing.assert_allclose(float(sums.total), expected, rtol=1e-5)
    assert float(sums.loss) == float(sums.total) and 0 <= float(sums.correct) <= words


def test_the_span_objective_learns_the_trees(parser):
    trees = [SMALL, UNARY]
    source, target_out = source_batch(trees), tf.constant(target_batch(trees))
    objective = SpanObjective(parser, PIECES)
    first = adam_steps(parser, objective, source, target_out, 60)
    final = objective(source, None, target_out, training=False)
    assert float(final.total / final.count) < 0.2 * first
    assert float(final.correct) == float(final.count)  # every word tagged right


def test_each_model_gets_its_objective(parser):
    transformer = Transformer.from_preset("demo", vocab_size=40, num_layers=1, d_model=16, num_heads=2, d_ff=32)
    assert isinstance(objective_for(transformer, 0.1), TranslationObjective)
    assert isinstance(objective_for(parser, 0.1, PIECES), SpanObjective)
    with pytest.raises(ValueError, match="target vocabulary's pieces"):
        objective_for(parser, 0.1)
    assert linearize(SMALL).split()[0] == "(S"


def test_the_tree_crf_objective_learns_the_trees_the_chart_search_finds():
    """The objective is the gold trees' negative log-probabilities under the tree CRF plus the
    tags' cross-entropy, the probe's loss times the words; trained on it, the chart search finds
    the gold trees."""
    from keras_transformer.models.span_parser.tree_crf import tree_crf_losses
    from pipelines.tasks.parsing.chart import best_tree

    model = SpanParser(SOURCE_VOCAB, CHAINS, TAGS, WORD_STARTS, num_layers=1, d_model=16, num_heads=2, d_ff=32,
                       span_hidden=16, dropout=0.0)
    trees = [SMALL, UNARY]
    source, target_out = source_batch(trees), tf.constant(target_batch(trees))
    spans, tags = SpanTargets(PIECES, CHAINS, TAGS)(target_out)
    objective = SpanObjective(model, PIECES)
    sums = objective(source, None, target_out, training=False)
    outputs = model(source)
    words = sum(len(tree.words()) for tree in trees)
    tag_losses = tf.nn.sparse_softmax_cross_entropy_with_logits(tf.maximum(tags, 0), outputs["tags"])
    tag_sum = float(tf.reduce_sum(tf.where(tags >= 0, tag_losses, 0.0)))
    np.testing.assert_allclose(float(sums.total), float(tf.reduce_sum(tree_crf_losses(outputs["spans"], spans)))
                               + tag_sum, rtol=1e-4)
    np.testing.assert_allclose(float(sums.total), float(span_parser_loss(outputs, spans, tags)) * words,
                               rtol=1e-5)
    adam_steps(model, objective, source, target_out, 80)
    log_probs = tf.nn.log_softmax(model(source)["spans"]).numpy()
    for row, tree in enumerate(trees):
        assert best_tree(tree.words(), tree.tags(), log_probs[row], CHAINS) == tree

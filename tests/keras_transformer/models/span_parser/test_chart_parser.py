"""Raw sentences to linearised trees with a span parser (keras_transformer/decoding/chart_parser.py)."""

import numpy as np
import pytest

from keras_transformer.models.span_parser import SpanParser
from keras_transformer.models.span_parser.chart import decode_chart
from keras_transformer.models.span_parser.chart_parser import ChartParser
from pipelines.tasks.parsing.evaluation import parse_sentences

LABELS = ["", "NP", "S", "S+VP", "VP"]
TAGS = ["DT", "NN", "VB", "."]
SENTENCES = ["the package contains files .", "install it", "documentation"]


@pytest.fixture(scope="module")
def parser(tokenizer):
    pieces = [tokenizer.id_to_piece(i).numpy().decode() for i in range(tokenizer.vocab_size)]
    starts = [i for i, piece in enumerate(pieces) if piece.startswith("\u2581")]
    model = SpanParser(tokenizer.vocab_size, LABELS, TAGS, starts, num_layers=1, d_model=16,
                       num_heads=2, d_ff=32, span_hidden=16, bias=0.5,
                       pad_id=tokenizer.pad_id)
    model.build()
    return ChartParser(model, tokenizer, batch_size=2)


def test_each_sentence_gets_the_chart_decoding_of_its_scores(parser):
    trees = parser.translate(SENTENCES)
    for sentence, tree, (spans, tags) in zip(SENTENCES, trees, parser.scores(SENTENCES)):
        n = len(sentence.split())
        assert spans.shape == (n + 1, n + 1, len(LABELS)) and tags.shape == (n,)
        assert tree.split() == decode_chart(spans, [TAGS[t] for t in tags], LABELS, 0.5)
    assert parser.translate(SENTENCES, n_best=True) == [[tree] for tree in trees]


def test_the_parsing_evaluation_reads_its_output_as_trees(parser):
    best, trees, repaired = parse_sentences(parser, SENTENCES, constrained=True)
    assert repaired == 0 and [tree.words() for tree in trees] == [s.split() for s in SENTENCES]
    assert best == parser.translate(SENTENCES)


def test_batching_does_not_change_the_trees(parser, tokenizer):
    alone = ChartParser(parser.model, tokenizer, batch_size=1)
    assert alone.translate(SENTENCES) == parser.translate(SENTENCES)


def test_names_are_required_and_checked(parser, tokenizer):
    model = parser.model
    with pytest.raises(ValueError, match="needs its span `labels` and POS `tags`"):
        SpanParser.from_config({**model.get_config(), "labels": []})
    with pytest.raises(ValueError, match="must start with the empty label"):
        SpanParser.from_config({**model.get_config(), "labels": ["NP", "VP"]})
    assert np.isclose(parser.bias, 0.5)


def test_the_chart_scores_are_the_tree_crfs_constituent_probabilities(parser, tokenizer):
    """A span's "empty" log-probability is that of not being a constituent of the tree,
    ``1 - m (1 - p_0)``; the labels' are the model's own."""
    import tensorflow as tf

    from keras_transformer.models.span_parser.chart_parser import source_ids
    from keras_transformer.models.span_parser.tree_crf import span_marginals

    model, mbr = parser.model, parser
    for sentence, (spans, _) in zip(SENTENCES, mbr.scores(SENTENCES)):
        n = len(sentence.split())
        own = tf.nn.log_softmax(model(source_ids(tokenizer, [sentence], model.config))["spans"]).numpy()[0]
        # The chart scored the sentences in one padded batch, this call one alone: float32 sums in another
        # order differ by a few units in the last place (1.2e-6 seen on an AMD EPYC), a wrong label by far more.
        np.testing.assert_allclose(spans[..., 1:], own[..., 1:], rtol=1e-5)
        constituent = -np.expm1(own[..., 0])
        m = span_marginals(-own[None, ..., 0], [n]).numpy()[0]
        upper = np.triu_indices(n + 1, 1)
        np.testing.assert_allclose(1 - np.exp(spans[..., 0])[upper], (m * constituent)[upper], atol=1e-5)
        # The sentence and each word are in every tree: their odds are the model's own.
        assert 1 - np.exp(spans[0, n, 0]) == pytest.approx(constituent[0, n], abs=1e-5)
    trees = mbr.translate(SENTENCES)
    best, parsed, repaired = parse_sentences(mbr, SENTENCES, constrained=True)
    assert repaired == 0 and best == trees and [t.words() for t in parsed] == [s.split() for s in SENTENCES]

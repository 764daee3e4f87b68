"""Span charts and tags read from linearised target ids (keras_transformer/models/span_targets.py)."""

import numpy as np
import pytest
from hypothesis import given, settings

from keras_transformer.models.span_parser.chart import EMPTY
from keras_transformer.models.span_parser.targets import (
    IGNORE,
    SpanTargets,
    bracket_label,
    missing_symbols,
    span_inventory,
    tree_labels,
)
from pipelines.tasks.parsing.chart import span_labels
from pipelines.tasks.parsing.linearize import linearize
from pipelines.tasks.parsing.tree import parse_tree
from tests.pipelines.tasks.parsing.test_chart import SMALL, UNARY, trees

LABELS = ["NP", "S", "VP", "PP"]
TAGS = ["DT", "NN", "NNP", "VB", "VBD", "PRP", "."]
PIECES = ["<pad>", "<unk>", "<s>", "</s>", *TAGS, *(f"({label}" for label in LABELS),
          *(f"\u2581){label}" for label in LABELS)]
CHAINS = [EMPTY, "NP", "PP", "S", "S+VP", "VP", "NP+NP"]


def _ids(tree, eos=3):
    index = {piece.lstrip("\u2581"): i for i, piece in enumerate(PIECES)}
    return [index[token] for token in linearize(tree).split()] + [eos]


def target_batch(trees):
    rows = [_ids(tree) for tree in trees]
    ids = np.zeros([len(rows), max(map(len, rows)) + 2], np.int32)  # and some padding
    for row, values in enumerate(rows):
        ids[row, : len(values)] = values
    return ids


def _expected(tree, n, labels=CHAINS):
    words = len(tree.words())
    spans = np.full([n + 1, n + 1], IGNORE)
    spans[: words + 1, : words + 1][np.triu_indices(words + 1, 1)] = 0
    for span, label in span_labels(tree).items():
        spans[span] = labels.index(label) if label in labels else IGNORE
    tags = np.full([n], IGNORE)
    tags[:words] = [TAGS.index(tag) for tag in tree.tags()]
    return spans, tags


def test_bracket_label():
    assert bracket_label("(NP") == ("(", "NP") and bracket_label("\u2581)NP") == (")", "NP")
    assert bracket_label("NN") is None and bracket_label("(") is None and bracket_label("-LRB-") is None


def test_spans_and_tags_of_a_batch_of_trees():
    batch = [SMALL, UNARY, parse_tree("(TOP (NP (NP (NN it)) (PP (DT the) (NN end))))")]
    spans, tags = SpanTargets(PIECES, CHAINS, TAGS)(target_batch(batch))
    assert spans.shape == (3, 7, 7) and tags.shape == (3, 6)
    for row, tree in enumerate(batch):
        want_spans, want_tags = _expected(tree, 6)
        np.testing.assert_array_equal(spans[row], want_spans)
        np.testing.assert_array_equal(tags[row], want_tags)
    assert spans[1, 0, 2] == CHAINS.index("S+VP") and spans[2, 0, 1] == CHAINS.index("NP")


def test_chains_and_labels_outside_the_inventory_are_ignored():
    tree = parse_tree("(TOP (S (VP (VB go)) (NP (PRP it))))")  # S and NP fine, VP over one word too
    spans, _ = SpanTargets(PIECES, [EMPTY, "S", "NP"], TAGS)(target_batch([tree]))
    assert spans[0, 0, 1] == IGNORE and spans[0, 1, 2] == 2 and spans[0, 0, 2] == 1


@settings(max_examples=25, deadline=None)
@given(trees())
def test_any_tree_reads_back_its_own_chart(tree):
    chains = sorted(set(span_labels(tree).values()))
    pieces_labels = [EMPTY, *chains]
    targets = SpanTargets(["<pad>", "<unk>", "<s>", "</s>", *TAGS, "(NP", "(VP", "(S", ")NP", ")VP", ")S"],
                          pieces_labels, TAGS)
    index = {piece: i for i, piece in enumerate(["<pad>", "<unk>", "<s>", "</s>", *TAGS, "(NP", "(VP", "(S",
                                                  ")NP", ")VP", ")S"])}
    ids = np.array([[index[t] for t in linearize(tree).split()] + [3]], np.int32)
    spans, tags = targets(ids)
    words = len(tree.words())
    want, want_tags = _expected(tree, words, pieces_labels)
    np.testing.assert_array_equal(spans[0], np.where(want == IGNORE, IGNORE, want))
    np.testing.assert_array_equal(tags[0], want_tags)


def test_labels_must_start_empty():
    with pytest.raises(ValueError, match="empty label"):
        SpanTargets(PIECES, ["NP"], TAGS)


@settings(max_examples=25, deadline=None)
@given(trees())
def test_the_inventory_of_linearised_trees_is_their_span_labels(tree):
    """The labels the training stage reads off the corpus' linearised trees are the gold charts' labels."""
    assert tree_labels(linearize(tree).split()) == set(span_labels(tree).values())


def test_the_inventory_lists_the_empty_label_first_and_the_tags_of_the_vocabulary():
    trees = [linearize(SMALL), linearize(UNARY)]
    inventory = span_inventory(trees, PIECES, special_ids=range(4))
    labels = inventory["labels"]
    assert labels[0] == EMPTY and labels[1:] == sorted(labels[1:])
    assert set(labels[1:]) == set().union(*(span_labels(t).values() for t in (SMALL, UNARY)))
    assert inventory["tags"] == TAGS
    # The inventory drives SpanTargets: every gold span of these trees gets a label, none IGNORE.
    targets = SpanTargets(PIECES, labels, inventory["tags"])
    spans, _ = targets(target_batch([SMALL]))
    gold = span_labels(SMALL)
    assert all(int(spans[0][span]) == labels.index(label) for span, label in gold.items())


def test_the_symbols_a_vocabulary_lacks_are_named():
    trees = ["(S (NP EX )NP (VP VBZ )VP . )S", "(S (NP -LRB- NN )NP )S"]
    assert missing_symbols(trees, PIECES) == ["-LRB-", "EX", "VBZ"]

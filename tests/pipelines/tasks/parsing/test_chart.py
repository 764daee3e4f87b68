"""Trees as span charts, and back through the chart search (pipelines/tasks/parsing/chart.py)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.tasks.parsing.chart import EMPTY, best_tree, span_labels
from pipelines.tasks.parsing.tree import Leaf, Tree, parse_tree

SMALL = parse_tree("(TOP (S (NP (NNP Pierre) (NNP Vinken)) (VP (VBD joined) (NP (DT the) (NN board))) (. .)))")
UNARY = parse_tree("(TOP (S (VP (VB Go) (NP (PRP it)))) (. .))")


def test_span_labels_of_a_tree():
    assert span_labels(SMALL) == {(0, 2): "NP", (3, 5): "NP", (2, 5): "VP", (0, 6): "S"}
    # A unary chain is one label; a one-word constituent keeps the chain above its tag; the root
    # TOP with two children leaves the whole sentence unlabelled.
    assert span_labels(UNARY) == {(1, 2): "NP", (0, 2): "S+VP"}


def _log_probs(n, labels, chosen):
    """Log-probabilities where each span of ``chosen`` prefers its label, every other span none."""
    probs = np.full([n + 1, n + 1, len(labels)], 0.01)
    probs[..., 0] = 0.9
    for (i, j), label in chosen.items():
        probs[i, j, :] = 0.01
        probs[i, j, labels.index(label)] = 0.9
    return np.log(probs)


def _gold(tree):
    labels = [EMPTY, *sorted(set(span_labels(tree).values()) | {"X"})]
    return best_tree(tree.words(), tree.tags(), _log_probs(len(tree.words()), labels, span_labels(tree)), labels)


@pytest.mark.parametrize("tree", [SMALL, UNARY])
def test_gold_chart_gives_the_gold_tree_back(tree):
    assert _gold(tree) == tree


def test_best_tree_from_label_probabilities():
    labels = [EMPTY, "NP", "S", "VP"]
    tree = best_tree(SMALL.words(), SMALL.tags(), _log_probs(6, labels, span_labels(SMALL)), labels)
    assert tree == SMALL
    # Nothing preferred anywhere: a flat tree under the root, tags as given.
    flat = best_tree(["a", "b"], ["DT", "NN"], _log_probs(2, labels, {}), labels)
    assert flat == Tree("TOP", (Leaf("DT", "a"), Leaf("NN", "b")))


@st.composite
def trees(draw):
    words = iter(range(10**9))

    def node(depth):
        if depth > 3 or draw(st.booleans()):
            return Leaf(draw(st.sampled_from(["NN", "VB", "DT"])), f"w{next(words)}")
        children = tuple(node(depth + 1) for _ in range(draw(st.integers(1, 3))))
        return Tree(draw(st.sampled_from(["NP", "VP", "S"])), children)

    return Tree("TOP", tuple(node(0) for _ in range(draw(st.integers(1, 3)))))


@settings(max_examples=200, deadline=None)
@given(trees())
def test_every_tree_survives_the_chart_round_trip(tree):
    assert _gold(tree) == tree


def test_best_tree_checks_its_inputs():
    with pytest.raises(ValueError, match="2 words but 1 tags"):
        best_tree(["a", "b"], ["DT"], np.zeros([3, 3, 2]), [EMPTY, "NP"])

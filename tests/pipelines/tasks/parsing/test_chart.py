"""Trees as span charts and the chart search (pipelines/tasks/parsing/chart.py)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.tasks.parsing.chart import EMPTY, best_tree, build_tree, cky, span_labels
from pipelines.tasks.parsing.tree import Leaf, Tree, parse_tree

SMALL = parse_tree("(TOP (S (NP (NNP Pierre) (NNP Vinken)) (VP (VBD joined) (NP (DT the) (NN board))) (. .)))")
UNARY = parse_tree("(TOP (S (VP (VB Go) (NP (PRP it)))) (. .))")


def test_span_labels_of_a_tree():
    assert span_labels(SMALL) == {(0, 2): "NP", (3, 5): "NP", (2, 5): "VP", (0, 6): "S"}
    # A unary chain is one label; a one-word constituent keeps the chain above its tag; the root
    # TOP with two children leaves the whole sentence unlabelled.
    assert span_labels(UNARY) == {(1, 2): "NP", (0, 2): "S+VP"}


def _gold_scores(tree):
    n = len(tree.words())
    scores = np.zeros([n + 1, n + 1])
    for span in span_labels(tree):
        scores[span] = 1.0
    return scores


@pytest.mark.parametrize("tree", [SMALL, UNARY])
def test_gold_chart_gives_the_gold_tree_back(tree):
    total, splits = cky(_gold_scores(tree))
    assert total == len(span_labels(tree))
    assert build_tree(tree.words(), tree.tags(), splits, span_labels(tree)) == tree


def test_cky_prefers_the_best_bracketing_over_a_crossing_one():
    # Three words: (0,2) scores 1 and (1,3) scores 3; they cross, so only the better one is taken.
    scores = np.zeros([4, 4])
    scores[0, 2], scores[1, 3] = 1.0, 3.0
    total, splits = cky(scores)
    assert total == 3.0 and splits == {(0, 3): 1, (1, 3): 2}


def _log_probs(n, labels, chosen):
    """Log-probabilities where each span of ``chosen`` prefers its label, every other span none."""
    probs = np.full([n + 1, n + 1, len(labels)], 0.01)
    probs[..., 0] = 0.9
    for (i, j), label in chosen.items():
        probs[i, j, :] = 0.01
        probs[i, j, labels.index(label)] = 0.9
    return np.log(probs)


def test_best_tree_from_label_probabilities():
    labels = [EMPTY, "NP", "S", "VP"]
    tree = best_tree(SMALL.words(), SMALL.tags(), _log_probs(6, labels, span_labels(SMALL)), labels)
    assert tree == SMALL
    # Nothing preferred anywhere: a flat tree under the root, tags as given.
    flat = best_tree(["a", "b"], ["DT", "NN"], _log_probs(2, labels, {}), labels)
    assert flat == Tree("TOP", (Leaf("DT", "a"), Leaf("NN", "b")))


@st.composite
def trees(draw, words=iter(range(10**9))):
    def node(depth):
        if depth > 3 or draw(st.booleans()):
            return Leaf(draw(st.sampled_from(["NN", "VB", "DT"])), f"w{next(words)}")
        children = tuple(node(depth + 1) for _ in range(draw(st.integers(1, 3))))
        return Tree(draw(st.sampled_from(["NP", "VP", "S"])), children)

    return Tree("TOP", tuple(node(0) for _ in range(draw(st.integers(1, 3)))))


@settings(max_examples=200, deadline=None)
@given(trees())
def test_every_tree_survives_the_chart_round_trip(tree):
    _, splits = cky(_gold_scores(tree))
    assert build_tree(tree.words(), tree.tags(), splits, span_labels(tree)) == tree


def test_build_tree_checks_its_inputs():
    with pytest.raises(ValueError, match="2 words but 1 tags"):
        build_tree(["a", "b"], ["DT"], {}, {})
    with pytest.raises(ValueError, match="empty sentence"):
        build_tree([], [], {}, {})

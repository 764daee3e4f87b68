"""Sequence-to-sequence form of trees (pipelines/tasks/parsing/linearize.py)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.tasks.parsing.linearize import (
    FILLER_TAG,
    MAX_DEPTH,
    PTB_LABELS,
    PTB_TAGS,
    delinearize,
    linearize,
    repair,
    source,
)
from pipelines.tasks.parsing.tree import Leaf, Tree, parse_tree

SMALL = parse_tree("(TOP (S (NP (NNP Pierre) (NNP Vinken)) (VP (VBD joined) (NP (DT the) (NN board))) (. .)))")
SMALL_TARGET = "(S (NP NNP NNP )NP (VP VBD (NP DT NN )NP )VP . )S"


def test_linearize_example():
    assert linearize(SMALL) == SMALL_TARGET
    assert source(SMALL) == "Pierre Vinken joined the board ."
    assert delinearize(SMALL_TARGET, SMALL.words()) == SMALL
    assert delinearize(SMALL_TARGET.split(), SMALL.words()) == SMALL
    lrb = parse_tree("(TOP (NP (-LRB- -LRB-) (NN x) (-RRB- -RRB-)) (. .))")
    assert linearize(lrb) == "(NP -LRB- NN -RRB- )NP ."
    assert delinearize(linearize(lrb), lrb.words()) == lrb


def test_identity_on_the_whole_toy_treebank(toy_trees):
    # The real sample's 3,914 trees go through the same round trip in test_treebank.py.
    assert len(toy_trees) == 720
    for tree in toy_trees:
        target = linearize(tree)
        assert delinearize(target, tree.words()) == tree, tree.to_string()
        assert repair(target, tree.words()) == tree, tree.to_string()
        assert len(target.split()) == len(tree.words()) + 2 * target.count("(")


@pytest.mark.parametrize(("target", "words", "message"), [
    ("(S NN )NP", ["a"], "does not close"),
    ("(S NN", ["a"], "left open"),
    ("(S NN NN )S", ["a"], "more POS slots"),
    ("(S NN )S", ["a", "b"], "1 POS slots for 2 words"),
    ("(S (NP )NP NN )S", ["a"], "empty constituent"),
    (")S", [], "does not close"),
    ("( NN", ["a"], "without a label"),
])
def test_delinearize_is_strict(target, words, message):
    with pytest.raises(ValueError, match=message):
        delinearize(target, words)


def test_linearize_rejects_ambiguous_symbols():
    with pytest.raises(ValueError, match="unambiguously"):
        linearize(Tree("TOP", (Tree("(S", (Leaf("NN", "a"),)),)))
    with pytest.raises(ValueError, match="unambiguously"):
        linearize(Tree("TOP", (Leaf(")X", "a"),)))


WORDS = ["Pierre", "Vinken", "joined", "the", "board", "."]


@pytest.mark.parametrize(("tokens", "expected"), [
    ([], "(TOP (XX Pierre) (XX Vinken) (XX joined) (XX the) (XX board) (XX .))"),
    ("", "(TOP (XX Pierre) (XX Vinken) (XX joined) (XX the) (XX board) (XX .))"),
    # unclosed brackets closed, missing slots filled inside the last constituent
    ("(S (NP NNP NNP (VP VBD", "(TOP (S (NP (NNP Pierre) (NNP Vinken) (VP (VBD joined))) (XX the) (XX board) (XX .)))"),
    # misplaced closer ignored; a closer ends the constituents opened inside it
    (")VP (S (NP NNP NNP )NP (VP VBD (NP DT NN )VP . )S",
     "(TOP (S (NP (NNP Pierre) (NNP Vinken)) (VP (VBD joined) (NP (DT the) (NN board))) (. .)))"),
    # garbage and extra POS slots dropped; empty constituents removed
    ("<unk> (S (NP NNP NNP )NP banana (VP VBD (ADJP )ADJP (NP DT NN )NP )VP . NN NN )S </s>",
     "(TOP (S (NP (NNP Pierre) (NNP Vinken)) (VP (VBD joined) (NP (DT the) (NN board))) (. .)))"),
    (["(S", ")S", "(FOO", "NN"], "(TOP (NN Pierre) (XX Vinken) (XX joined) (XX the) (XX board) (XX .))"),
])
def test_repair_examples(tokens, expected):
    assert repair(tokens, WORDS).to_string() == expected


def test_repair_empty_sentence_and_depth_cap():
    assert repair("(S NN )S", []) == Tree("TOP")
    assert parse_tree(Tree("TOP").to_string()) == Tree("TOP")
    deep = repair(["(NP"] * 5000 + ["NN"] + [")NP"] * 5000, ["x"])
    depth, node = 0, deep
    while isinstance(node, Tree):
        depth, node = depth + 1, node.children[0]
    assert depth == MAX_DEPTH + 1 and deep.words() == ["x"]


VOCABULARY = sorted(PTB_TAGS) + [f"({label}" for label in PTB_LABELS] + [f"){label}" for label in PTB_LABELS]
TOKENS = st.one_of(st.sampled_from(VOCABULARY), st.sampled_from(["(", ")", "", "(XX", ")TOP", "<unk>"]), st.text())
WORD = st.text(min_size=1).filter(lambda word: not any(ch.isspace() or ch in "()" for ch in word))


def _check_well_formed(tree: Tree, words: list[str]) -> None:
    assert tree.label == "TOP"
    assert tree.words() == words
    assert set(tree.tags()) <= PTB_TAGS | {FILLER_TAG}
    stack = list(tree.children)
    while stack:
        node = stack.pop()
        if isinstance(node, Tree):
            assert node.children and node.label in PTB_LABELS
            stack.extend(node.children)
    assert parse_tree(tree.to_string(), normalize=False) == tree
    assert delinearize(linearize(tree), words) == tree


@settings(max_examples=200, deadline=None, database=None)
@given(tokens=st.lists(TOKENS, max_size=60), words=st.lists(WORD, max_size=25))
def test_repair_gives_well_formed_trees(tokens, words):
    _check_well_formed(repair(tokens, words), words)
    _check_well_formed(repair(" ".join(tokens), words), words)


@settings(max_examples=50, deadline=None, database=None)
@given(text=st.text(), words=st.lists(st.text(), max_size=10))
def test_repair_never_raises(text, words):
    assert repair(text, words).words() == words


def test_best_tree_takes_the_best_hypothesis_that_is_a_tree_over_the_words():
    from pipelines.tasks.parsing.linearize import best_tree

    words = ["Prices", "fell", "."]
    valid = "(S (NP NNS )NP (VP VBD )VP . )S"
    # A wide beam can rank the empty parse and a parse with too few POS slots first.
    tree, repaired = best_tree(["", "(S (NP NNS )NP . )S", valid], words)
    assert not repaired and tree == delinearize(valid, words)
    tree, repaired = best_tree(["(S (NP NNS )NP . )S", "(VP"], words)
    assert repaired and tree.words() == words
    tree, repaired = best_tree([], words)
    assert repaired and tree.words() == words

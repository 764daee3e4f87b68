"""The suite's toy treebank (toy_treebank.py): the same bytes from a seed, and as regular as promised."""

from collections import defaultdict

from tests.pipelines.tasks.parsing.toy_treebank import LEXICON, MAX_WORDS, MIN_WORDS, write_toy_treebank


def _files(folder):
    return {file.name: file.read_bytes() for file in (folder / "combined").glob("*.mrg")}


def test_a_seed_writes_the_same_bytes(tmp_path, toy_treebank):
    assert _files(write_toy_treebank(tmp_path / "again")) == _files(toy_treebank)
    assert _files(write_toy_treebank(tmp_path / "other", seed=1)) != _files(toy_treebank)


def test_short_sentences_over_a_small_vocabulary_each_word_one_tag(toy_trees):
    assert 140 <= len({word for words in LEXICON.values() for word in words}) <= 160
    assert all(MIN_WORDS <= len(tree.words()) <= MAX_WORDS for tree in toy_trees)
    assert len({tuple(tree.words()) for tree in toy_trees}) == len(toy_trees)
    tags = defaultdict(set)
    for tree in toy_trees:
        for leaf in tree.leaves():
            tags[leaf.word].add(leaf.tag)
    assert all(len(found) == 1 for found in tags.values())

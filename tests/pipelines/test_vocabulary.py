"""Shared or separate vocabulary: one type, whatever stands for the vocabulary."""

import pytest

from pipelines.vocabulary import Vocabulary, as_vocabulary


def test_a_shared_vocabulary_serves_both_sides_once():
    shared = Vocabulary("spm_shared.model")
    assert shared.shared and shared.source == shared.target == "spm_shared.model"
    source, target = shared
    assert source is target
    assert shared.distinct() == ("spm_shared.model",)
    calls = []
    sizes = shared.map(lambda path: calls.append(path) or 8000)
    assert sizes == Vocabulary(8000) and calls == ["spm_shared.model"]


def test_separate_vocabularies_keep_their_sides():
    separate = Vocabulary("spm_en.model", "spm_tree.model")
    assert not separate.shared and tuple(separate) == ("spm_en.model", "spm_tree.model")
    assert separate.distinct() == ("spm_en.model", "spm_tree.model")
    assert separate.map(len) == Vocabulary(12, 14)


def test_from_a_list_of_one_or_two_and_nothing_else():
    assert Vocabulary.of(["a"]) == Vocabulary("a") and Vocabulary.of(["a", "b"]) == Vocabulary("a", "b")
    for bad in ([], ["a", "b", "c"], "ab"):
        with pytest.raises(ValueError, match="one shared model or"):
            Vocabulary.of(bad)


def test_a_single_value_means_shared_and_a_tuple_is_refused():
    assert as_vocabulary(2000) == Vocabulary(2000)
    assert as_vocabulary(Vocabulary(1, 2)) == Vocabulary(1, 2)
    with pytest.raises(TypeError, match=r"Vocabulary\(source, target\)"):
        as_vocabulary((2000, 300))

"""The loop counter: hypotheses beside references (the rule itself: tests/keras_transformer/decoding/test_loops.py)."""

from pipelines.tasks.translation.repetition import loop_counts


def test_counts_hypotheses_beside_references():
    hypotheses = ["gut", "a b a b a b", "Code-Code-Code", "ok ok"]
    references = ["gut", "a b c", "sehr sehr sehr gut", "ok"]
    counts = loop_counts(hypotheses, references)
    assert (counts["hypotheses"], counts["references"], counts["sentences"]) == (2, 1, 4)
    assert counts["examples"] == [{"line": 2, "ngram": "a b"}, {"line": 3, "ngram": "Code"}]

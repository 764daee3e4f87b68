"""``compare-decodings`` (flows/tools/compare_decodings.py): sacreBLEU's paired test on hand-made translations."""

from __future__ import annotations

import pytest

from flows.tools import compare_decodings

paired_test = compare_decodings.paired_test

REFERENCES = ["Die Katze sitzt auf der Matte.", "Ein Hund rennt im Park.", "Es regnet heute sehr stark."] * 20
WORSE = ["Die Katze sitzt auf Matte.", "Ein Hund im Park.", "Es regnet heute stark."] * 20


def test_a_better_system_on_every_sentence_is_significant_and_an_equal_one_is_not():
    better = paired_test(REFERENCES, WORSE, REFERENCES, trials=500)
    assert better["bleu"]["system"] == 100.0 and better["bleu"]["difference"] > 0
    assert better["bleu"]["p_value"] < 0.01 and better["chrf"]["p_value"] < 0.01
    # One sentence better out of 60: no evidence.
    one = WORSE[:-1] + REFERENCES[-1:]
    slight = paired_test(REFERENCES, WORSE, one, trials=500)
    assert 0 < slight["bleu"]["difference"] and slight["bleu"]["p_value"] > 0.05
    assert paired_test(REFERENCES, WORSE, WORSE, trials=200)["bleu"]["difference"] == 0


def test_files_of_different_lengths_are_refused():
    with pytest.raises(ValueError, match="as many lines"):
        paired_test(REFERENCES, WORSE[:-1], WORSE)

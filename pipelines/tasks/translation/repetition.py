"""Loops in decoder output counted: an n-gram repeated three times in a row
(:mod:`keras_transformer.decoding.loops`), and runs at the very end. BLEU barely notices a few of them, so the
evaluation counts them separately, on the hypotheses and on the references alike: the references'
count is the floor, since real text repeats itself too ("very very very").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from keras_transformer.decoding.loops import MAX_N, TIMES, repeated_ngram

__all__ = ["MAX_N", "TIMES", "ends_in_repetition", "loop_counts", "repeated_ngram"]


def loop_counts(hypotheses: Sequence[str], references: Sequence[str], *, examples: int = 20) -> dict[str, Any]:
    """How many hypotheses and how many references loop (:func:`repeated_ngram`), with the first
    looping hypotheses' line numbers (1-based) and repeated n-grams."""
    looping = [(i, gram) for i, h in enumerate(hypotheses) if (gram := repeated_ngram(h)) is not None]
    return {
        "label": f"sentences with an n-gram (up to {MAX_N} pieces, with a letter) {TIMES} times in a row",
        "hypotheses": len(looping),
        "references": sum(1 for r in references if repeated_ngram(r) is not None),
        "sentences": len(hypotheses),
        "examples": [{"line": i + 1, "ngram": gram} for i, gram in looping[:examples]],
    }


#: A piece of up to 12 characters repeated at least 4 times at the end ("------", "der der der der").
_REPEATED_ENDING = re.compile(r"(.{1,12}?)\1{3,}$", re.DOTALL)


def ends_in_repetition(text: str) -> bool:
    """Whether ``text`` ends in a run of one repeated piece, the mark of an undertrained decoder."""
    text = text.rstrip()
    # Words repeat with their separating space, which the last one lacks: try it both ways.
    for candidate in (text, text + " "):
        match = _REPEATED_ENDING.search(candidate)
        if match and not match.group(1).strip().isdigit():  # "10000" is a number, not a stutter
            return True
    return False

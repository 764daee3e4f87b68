"""Loops in decoder output: an n-gram repeated three times in a row, and runs at the very end.

An undertrained or length-starved decoder falls into loops ("DSPSP-Code-Code-Code",
"Domains.com/Domains.com/Domains.com"): attention keeps returning to the same source position and
the model's next-token distribution keeps preferring what it has just produced (Holtzman et al.,
2020, "The Curious Case of Neural Text Degeneration"; Tu et al., 2016, "Modeling Coverage for
Neural Machine Translation", for over-translation). BLEU barely notices a few of them, so the
evaluation counts them separately, on the hypotheses and on the references alike: the references'
count is the floor, since real text repeats itself too ("very very very").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

#: Words, punctuation left out: "Code-Code-Code" -> Code Code Code; "Domains.com/" -> Domains com.
_WORDS = re.compile(r"\w+")
#: Inside one word: a piece of three or more letters three times in a row ("CodeCodeCode"); two
#: letters would find German compounds ("Anlagegegenstände") and lists of names.
_IN_WORD = re.compile(r"([^\W\d_]{3,}?)\1\1")
#: Inside one word: one letter three times, each after the same punctuation ("z.B.B.B."). Across
#: words a single letter repeats legitimately ("C, C++, C#"); inside one, none of the ~160,000
#: reference sentences of the bundled corpora's splits does it.
_LETTER_STUTTER = re.compile(r"(?<![^\W\d_])([^\W\d_])([^\w\s])\1\2\1(?![^\W\d_])")
#: How many times in a row, and the longest n-gram looked for (in words).
TIMES = 3
MAX_N = 8


def _has_letters(gram: Sequence[str]) -> bool:
    """Numbers ("0.0.0.0", "1 1 1") and single letters ("C, C++, C#") repeat legitimately; words
    do not."""
    if len(gram) == 1 and len(gram[0]) < 2:
        return False
    return any(any(c.isalpha() for c in piece) for piece in gram)


def repeated_ngram(text: str, times: int = TIMES, max_n: int = MAX_N) -> str | None:
    """The first n-gram (n <= ``max_n`` words) that ``text`` repeats ``times`` times in a row, or None.

    Words are runs of word characters, punctuation between them ignored, so "Code-Code-Code" (one
    whitespace token), "Domains.com/Domains.com/Domains.com" and "a b a b a b" all loop; an
    n-gram counts only if it contains a letter ("0.0.0.0" and "1 1 1" are numbers) and is more
    than one single character ("C, C++, C#"). A word that holds a piece of three or more letters
    three times ("CodeCodeCode") loops too, as does one that holds a single letter three times after
    the same punctuation ("z.B.B.B."). Returned as the words joined by spaces (the n-gram, once), for
    the record.
    """
    pieces = _WORDS.findall(text)
    for n in range(1, max_n + 1):
        for start in range(len(pieces) - times * n + 1):
            gram = pieces[start:start + n]
            if all(pieces[start + k * n:start + (k + 1) * n] == gram for k in range(1, times)) \
                    and _has_letters(gram):
                return " ".join(gram)
    for word in text.split():
        match = _IN_WORD.search(word) or _LETTER_STUTTER.search(word)
        if match:
            return match.group(1)
    return None


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

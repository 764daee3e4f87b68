"""Loops in translated text: an n-gram of words repeated three times in a row.

An undertrained or length-starved decoder falls into loops ("DSPSP-Code-Code-Code",
"Domains.com/Domains.com/Domains.com"): attention keeps returning to the same source position and
the model's next-token distribution keeps preferring what it has just produced (Holtzman et al.,
2020, "The Curious Case of Neural Text Degeneration"; Tu et al., 2016, "Modeling Coverage for
Neural Machine Translation", for over-translation). This reads the text a reader reads, words with
the punctuation between them left out; the evaluation counts what it finds
(``pipelines.tasks.translation.repetition``) and a CTranslate2 export, whose search has no
:class:`~keras_transformer.decoding.repetition.RepetitionGuard`, keeps it out of what it returns.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

#: Words, punctuation left out: "Code-Code-Code" -> Code Code Code; "Domains.com/" -> Domains com.
_WORDS = re.compile(r"\w+")
#: Inside one word: a piece of three or more letters three times in a row ("CodeCodeCode"); two
#: letters would find German compounds ("Anlagegegenstände") and lists of names.
_IN_WORD = re.compile(r"([^\W\d_]{3,}?)\1\1")
#: Inside one word: one letter three times, each after the same punctuation ("z.B.B.B."). Across
#: words a single letter repeats legitimately ("C, C++, C#"); inside one, none of the ~160,000
#: reference sentences of the bundled corpora's splits does it.
_LETTER_STUTTER = re.compile(r"(?<![^\W\d_])([^\W\d_])([^\w\s])\1\2\1(?![^\W\d_])")
#: What joined the cut-off copy to the one before it ("Code-Code-", "ent ent,").
_TRAILING_JOINERS = re.compile(r"[\s,;:/-]+$")
#: How many times in a row, and the longest n-gram looked for (in words).
TIMES = 3
MAX_N = 8


def _has_letters(gram: Sequence[str]) -> bool:
    """Numbers ("0.0.0.0", "1 1 1") and single letters ("C, C++, C#") repeat legitimately; words
    do not."""
    if len(gram) == 1 and len(gram[0]) < 2:
        return False
    return any(any(c.isalpha() for c in piece) for piece in gram)


def _first_loop(text: str, times: int, max_n: int) -> tuple[str, int] | None:
    """The first loop in ``text`` and the character offset where its last copy starts."""
    words = list(_WORDS.finditer(text))
    pieces = [w.group() for w in words]
    for n in range(1, max_n + 1):
        for start in range(len(pieces) - times * n + 1):
            gram = pieces[start:start + n]
            if all(pieces[start + k * n:start + (k + 1) * n] == gram for k in range(1, times)) \
                    and _has_letters(gram):
                return " ".join(gram), words[start + (times - 1) * n].start()
    for word in re.finditer(r"\S+", text):
        match = _IN_WORD.search(word.group()) or _LETTER_STUTTER.search(word.group())
        if match:
            copy = (len(match.group()) + (match.re is _LETTER_STUTTER)) // times
            return match.group(1), word.start() + match.start() + (times - 1) * copy
    return None


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
    found = _first_loop(text, times, max_n)
    return found[0] if found else None


def cut_loops(text: str, times: int = TIMES, max_n: int = MAX_N) -> str:
    """``text`` ended before the copy that makes each loop: what a reader can use of a translation
    whose decoder fell into one (as the paper's search ends at the length limit, this ends at the loop).
    """
    while (found := _first_loop(text, times, max_n)) is not None:
        text = _TRAILING_JOINERS.sub("", text[:found[1]])
    return text
